import Foundation
import SiteKeepKeyring
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A fresh temporary folder (mode 0700) removed when the value goes away.
final class TemporaryFolder: Sendable {
    let path: String

    init(_ name: String = "keyring") throws {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/sitekeep-test-\(name)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Whether the real Secret Service tests run (tools/test sets this and starts a private
/// gnome-keyring on a private session bus).
let secretServiceTestsEnabled = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SECRET_SERVICE"] == "1"

/// A backend under test, with its cleanup.
final class BackendUnderTest: Sendable {
    let backend: any KeyringBackend
    let store: String
    private let folder: TemporaryFolder?

    init(_ kind: KeyringKind) throws {
        store = "test-\(UUID().uuidString)"
        switch kind {
        case .file:
            let folder = try TemporaryFolder("behaviour")
            self.folder = folder
            backend = try FileKeyring(folder: folder.path + "/home")
        case .secretService:
            folder = nil
            backend = SecretServiceKeyring(timeout: 5)
        }
    }

    func item(_ kind: String, _ id: String) -> KeyringItemID {
        KeyringItemID(store: store, kind: kind, id: id)
    }

    /// A second store on the same backend.
    func otherStore() -> String { store + "-other" }

    deinit {
        // Leave nothing in a shared Secret Service.
        for store in [store, otherStore()] {
            for item in (try? backend.list(store: store, kind: nil)) ?? [] {
                _ = try? backend.delete(item)
            }
        }
    }
}

/// Runs a program and returns its exit status and standard output.
@discardableResult
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
         input: String? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let inputPipe = Pipe()
    process.standardInput = inputPipe
    try process.run()
    if let input { inputPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try inputPipe.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
