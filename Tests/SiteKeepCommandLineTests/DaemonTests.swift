import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `sitekeep serve` as a real process: unlock through the control socket, calls over the bridge
/// socket bound to a site, lock, and a clean SIGTERM.
@Suite(.serialized) struct DaemonTests {
    static var binary: String? {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        let candidate = dir.appendingPathComponent(".build/debug/sitekeep").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    static func spawn(_ path: String, _ args: [String], env: [String]) -> pid_t? {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        return posix_spawn(&pid, path, nil, nil, argv, envp) == 0 ? pid : nil
    }

    @Test func unlockCallLockAndStopCleanly() async throws {
        let sitekeep = try #require(Self.binary, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let prf = try store.file("prf.bin", Array(repeating: 7, count: 32))
        #expect(await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", prf, "--rp-id", "x", "--credential-id", "AAAA"]).status == 0)
        #expect(await store.run(["team", "add", "summit", "--prf-file", prf]).status == 0)
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound"]).status == 0)
        #expect(await store.run(["site", "add", "Drafts", "--origin", "http://localhost:8080", "--app-bound",
                                 "--protection", "when-unlocked", "--prf-file", prf]).status == 0)
        let approve = try store.file("approve.sh", Array("#!/bin/sh\nexit 0\n".utf8))
        chmod(approve, 0o700)
        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "SITEKEEP_ASKPASS=\(approve)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(Self.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: run.appendingPathComponent("control.sock").path) { usleep(50_000) }

        let cliEnv = ["SITEKEEP_SOCK": sock]
        let unlocked = await runTool(["unlock", "--prf-file", prf, "--home", store.home], environment: cliEnv)
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(unlocked.out.contains("daemon holds the keys"))

        let client = try BridgeClient.connect(path: sock, timeout: .seconds(30))
        defer { client.close() }
        _ = try client.hello(origin: "https://web-summit.sgit.ai")
        let signed = try client.call("key.sign", args: ["key": "summit", "data": .string(Base64Text.hello)])
        #expect(signed["signature"]?.stringValue?.isEmpty == false)
        #expect(throws: BridgeError.self) { try client.call("key.sign", args: ["key": "summit", "data": "aGk="], origin: "https://promptugal.news") }

        // A when-unlocked site's data is served while unlocked (its partition then stays open)…
        let drafts = try BridgeClient.connect(path: sock, timeout: .seconds(30))
        defer { drafts.close() }
        _ = try drafts.hello(origin: "http://localhost:8080")
        _ = try drafts.call("storage.set", args: ["key": "draft", "value": "secret plan"])
        #expect(try drafts.call("storage.get", args: ["key": "draft"])["value"] == "secret plan")

        #expect(await runTool(["lock", "--home", store.home], environment: cliEnv).status == 0)
        #expect(throws: BridgeError.self) { try client.call("key.sign", args: ["key": "summit", "data": "aGk="]) }
        // …and not after the lock, though its partition had been open.
        #expect(throws: BridgeError.self) { try drafts.call("storage.get", args: ["key": "draft"]) }

        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 { if waitpid(pid, &status, WNOHANG) == pid { break }; usleep(50_000) }
        #expect(status & 0x7f == 0, "the daemon was killed by a signal instead of stopping")
        #expect(!FileManager.default.fileExists(atPath: sock), "the bridge socket was not removed")
    }
}

extension DaemonTests {
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

enum Base64Text { static let hello = "aGVsbG8=" }
