import Foundation
import Glibc
public import SiteKeepFIDO2
public import SiteKeepSoftFIDO2

/// The software authenticator as a real process (the built `sitekeep-soft-fido2`) on a socket
/// in a fresh folder, reached as libfido2 reaches it (`soft:SOCKET`), stopped by pid.
public final class SoftKey: @unchecked Sendable {
    // @unchecked: used by one test at a time.
    /// Its private folder (0700), removed when it stops.
    public let folder: String
    /// The authenticator's socket.
    public let socket: String
    /// Its process id.
    public let pid: Int32
    /// The test's side channel: touch or not, counts, hostile modes.
    public let control: SoftFIDO2Control
    private var stopped = false

    /// Why it did not start.
    public struct StartError: Error, CustomStringConvertible { public let description: String }

    /// Starts `sitekeep-soft-fido2` with `arguments` and waits until it listens.
    public init(_ arguments: [String] = []) throws {
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
        // The socket's file appears at bind(), before listen(): a connection in between is
        // refused, so wait until the authenticator answers one.
        var answered = false
        if ChildProcess.waitForPath(socket, pid: pid, seconds: 30) {
            for _ in 0..<1500 {
                if (try? control.counts()) != nil { answered = true; break }
                usleep(20_000)
            }
        }
        guard answered else {
            stop()
            throw StartError(description: "the software authenticator did not listen on \(socket)")
        }
    }

    /// The key as SiteKeep opens it, with a short time-out.
    public var key: FIDO2Key { FIDO2Key(path: FIDO2Key.softPrefix + socket, timeoutMilliseconds: 10_000) }

    /// `SITEKEEP_FIDO2_DEVICE`'s value for this authenticator.
    public var device: String { FIDO2Key.softPrefix + socket }

    /// Kills it (SIGKILL) and removes its folder; only once.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        try? FileManager.default.removeItem(atPath: folder)
    }

    deinit { stop() }
}
