import Foundation
import Glibc
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepTestSupport

/// The software authenticator as a real process (the built `sitekeep-soft-fido2`) on a socket
/// in a fresh folder, reached as libfido2 reaches it (`soft:SOCKET`), stopped by pid.
final class SoftKey {
    let folder: String
    let socket: String
    let pid: Int32
    let control: SoftFIDO2Control
    private var stopped = false

    struct StartError: Error, CustomStringConvertible { let description: String }

    init(_ arguments: [String] = []) throws {
        guard let exe = BuiltProducts.executable("sitekeep-soft-fido2") else {
            throw StartError(description: "sitekeep-soft-fido2 is not built (swift build --build-tests builds it)")
        }
        folder = "/tmp/skf-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        socket = folder + "/ctap.sock"
        guard let pid = ChildProcess.spawn(exe, ["--socket", socket] + arguments, env: []) else {
            throw StartError(description: "could not start \(exe)")
        }
        self.pid = pid
        control = SoftFIDO2Control(socketPath: socket)
        guard ChildProcess.waitForPath(socket, pid: pid, seconds: 30) else {
            stop()
            throw StartError(description: "the software authenticator did not listen on \(socket)")
        }
    }

    /// The key as SiteKeep opens it, with a short time-out.
    var key: FIDO2Key { FIDO2Key(path: FIDO2Key.softPrefix + socket, timeoutMilliseconds: 10_000) }

    func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        try? FileManager.default.removeItem(atPath: folder)
    }

    deinit { stop() }
}
