import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The command line's client of the control socket (the daemon's side is in SiteKeepDaemonTests).
@Suite(.serialized) struct ControlSocketClientTests {
    /// `sitekeep unlock`, `lock` and `status` check the control socket before sending a byte: a
    /// fake daemon in a folder open to others, or one run by another user, never receives the
    /// passphrase, and the error names the socket and what was wrong (issue 12, defect 3).
    @Test(.enabled(if: FakeDaemon.available)) func unlockNeverSendsTheSecretToAFakeDaemon() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let run = store.dir.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o777])
        chmod(run, 0o777)
        let env = ["SITEKEEP_SOCK": run + "/bridge.sock"]
        let fake = try FakeDaemon(path: run + "/control.sock")
        defer { fake.stop() }
        for args in [["unlock", "--passphrase-file", store.passFile], ["lock"], ["status"]] {
            let r = await runTool(args + ["--home", store.home, "--keyring", "file"], environment: env)
            #expect(r.status != 0, "\(args[0]) went on past an untrusted control socket")
            #expect(r.err.contains(fake.path) && r.err.contains("open to other users"), "\(r.err)")
        }
        #expect(fake.connections.isEmpty, "the fake daemon was reached")

        guard getuid() == 0 else { return }
        // The folder and the socket file ours, the listener another user's: SO_PEERCRED tells.
        fake.stop()
        chmod(run, 0o700)
        let other = try FakeDaemon(path: run + "/control.sock", uid: 65534)
        defer { other.stop() }
        let r = await runTool(["unlock", "--passphrase-file", store.passFile, "--home", store.home, "--keyring", "file"], environment: env)
        #expect(r.status != 0)
        #expect(r.err.contains(other.path) && r.err.contains("runs as uid 65534"), "\(r.err)")
        #expect(other.connections(atLeast: 1) == [0], "the other user's listener received bytes")
    }
}
