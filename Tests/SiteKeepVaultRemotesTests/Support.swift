import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepVault
@testable import SiteKeepVaultRemotes

struct SetupFailure: Error, CustomStringConvertible { let description: String }

/// The real vault server tools/test started (disk mode, and S3 mode on moto — a mock of S3).
enum VaultServer {
    static var skip: Bool { ProcessInfo.processInfo.environment["SITEKEEP_SKIP_INTEROP"] == "1" }

    static func url(s3: Bool = false) throws -> String {
        let name = s3 ? "SITEKEEP_TEST_VAULT_SERVER_S3" : "SITEKEEP_TEST_VAULT_SERVER"
        guard let u = ProcessInfo.processInfo.environment[name], !u.isEmpty else {
            throw SetupFailure(description: "\(name) is not set: run the tests through tools/test, which starts the real vault server (sgraph-ai-app-send in .venv-server)")
        }
        return u
    }

    static func token() throws -> String {
        guard let t = ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"], !t.isEmpty else {
            throw SetupFailure(description: "SITEKEEP_TEST_VAULT_TOKEN is not set: run the tests through tools/test")
        }
        return t
    }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func sgit() throws -> String {
        if let env = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], FileManager.default.isExecutableFile(atPath: env) { return env }
        let local = packageRoot + "/.venv/bin/sgit"
        guard FileManager.default.isExecutableFile(atPath: local) else { throw SetupFailure(description: "the sgit CLI is missing: run tools/setup") }
        return local
    }

    /// A vault id no other test uses (the server keys vaults by id; 8-24 lowercase alphanumerics).
    static func freshVaultID() -> String { "sk" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(14)) }
}

/// Credentials for tests: the token from the environment, the write key from the keys.
struct TestCredentials: RemoteCredentials {
    let token: String?
    let keys: SgitKeys
    func accessToken() throws(VaultError) -> String? { token }
    func writeKeyHex() throws(VaultError) -> String? { keys.writeKeyHex() }
}

/// A P-256 signer in memory (the product signs with custody's device key).
final class MemorySigner: CommitSigner, @unchecked Sendable {
    let key: P256.Signing.PrivateKey
    init() throws { key = try P256.Signing.PrivateKey() }
    func publicKeyDER() throws(VaultError) -> [UInt8] { key.publicKey.derRepresentation }
    func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try key.signature(for: message).rawRepresentation } catch { throw .signingFailed("\(error)") }
    }
}

/// The sgit CLI in a private HOME.
struct Sgit {
    let path: String
    let home: String

    init(home: String) throws {
        path = try VaultServer.sgit()
        self.home = home
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }

    struct Output { let status: Int32; let out: String; let bytes: [UInt8]; let err: String }

    @discardableResult
    func run(_ args: [String], in dir: String, stdin: String? = nil) throws -> Output {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home
        env["NO_COLOR"] = "1"
        p.environment = env
        let out = Pipe(), err = Pipe(), input = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = input
        try p.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try? input.fileHandleForWriting.close()
        nonisolated(unsafe) var errData = Data()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        p.waitUntilExit()
        return Output(status: p.terminationStatus, out: String(decoding: data, as: UTF8.self), bytes: Array(data),
                      err: String(decoding: errData, as: UTF8.self))
    }

    @discardableResult
    func must(_ args: [String], in dir: String, stdin: String? = nil) throws -> Output {
        let o = try run(args, in: dir, stdin: stdin)
        guard o.status == 0 else { throw SetupFailure(description: "sgit \(args.joined(separator: " ")) failed (\(o.status)): \(o.err.suffix(600)) \(o.out.suffix(600))") }
        return o
    }
}

/// A temp folder removed at deinit.
final class Scratch: @unchecked Sendable {
    let path: String
    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("sk-\(name)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func write(_ rel: String, _ text: String) throws {
        let url = URL(fileURLWithPath: path).appendingPathComponent(rel)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }
}

func keys(_ text: String) throws -> SgitKeys { try SgitKeys.derive(fromKeyText: try SecretBytes(copying: Array(text.utf8))) }
func vp(_ s: String) throws -> VaultPath { try VaultPath(validating: s) }
