import Foundation
import Testing
import SiteKeepBridgeProtocol
import SiteKeepJSON
import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepDaemon
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `sitekeep serve` as a real process (the built executable; the commands around it run as the
/// built `sitekeep-main`, see CommandLineProcess.swift): unlock through the control socket, calls
/// over the bridge socket bound to a site, lock, and a clean SIGTERM.
@Suite(.serialized) struct DaemonTests {
    @Test func unlockCallLockAndStopCleanly() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let prf = try store.file("prf.bin", Array(repeating: 7, count: 32))
        #expect(await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", prf, "--rp-id", "x", "--credential-id", "AAAA"]).status == 0)
        #expect(await store.run(["team", "add", "summit", "--prf-file", prf]).status == 0)
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        #expect(await store.run(["site", "add", "Drafts", "--origin", "http://localhost:8080", "--app-bound", "--passphrase-file", store.passFile,
                                 "--host", TestHost.runner,
                                 "--protection", "when-unlocked", "--prf-file", prf]).status == 0)
        let approve = try store.file("approve.sh", Array("#!/bin/sh\nexit 0\n".utf8))
        chmod(approve, 0o700)
        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "SITEKEEP_ASKPASS=\(approve)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")

        let cliEnv = ["SITEKEEP_SOCK": sock]
        let unlocked = await runTool(["unlock", "--prf-file", prf, "--home", store.home], environment: cliEnv)
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(unlocked.out.contains("daemon holds the keys"))

        let client = try TestHost.connect(socket: sock, site: "https://web-summit.sgit.ai", timeout: .seconds(30))
        defer { client.close() }
        _ = try client.hello(origin: "https://web-summit.sgit.ai")
        let signed = try client.call("key.sign", args: ["key": "summit", "data": .string(Base64Text.hello)])
        #expect(signed["signature"]?.stringValue?.isEmpty == false)
        #expect(throws: BridgeError.self) { try client.call("key.sign", args: ["key": "summit", "data": "aGk="], origin: "https://promptugal.news") }

        // A when-unlocked site's data is served while unlocked (its partition then stays open)…
        let drafts = try TestHost.connect(socket: sock, site: "http://localhost:8080", timeout: .seconds(30))
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
    /// The daemon's unlock reads the secret by the command line's one rule, and takes any
    /// passphrase the command line takes (it was limited to 4096 bytes, the CLI to 64 KiB).
    @Test func unlockThroughTheDaemonReadsSecretsByTheSameRule() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        let long = [UInt8](repeating: 0x70, count: 5000)
        let crlf = try store.file("long-crlf", long + [0x0d, 0x0a])
        let created = await store.run(["init", "--passphrase-file", crlf, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"])
        #expect(created.status == 0, "\(created.err)")
        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")
        let cliEnv = ["SITEKEEP_SOCK": sock]
        for (args, stdin) in [(["--passphrase-file", crlf], [UInt8]()), (["--passphrase-file", "-"], long + [0x0a]),
                              (["--passphrase-file", try store.file("long", long)], [])] {
            let r = await runTool(["unlock", "--home", store.home] + args, stdin: stdin, environment: cliEnv)
            #expect(r.status == 0 && r.out.contains("daemon holds the keys"), "unlock \(args): \(r.err)")
            #expect(await runTool(["lock", "--home", store.home], environment: cliEnv).status == 0)
        }
        let wrong = await runTool(["unlock", "--home", store.home, "--passphrase-file", try store.file("w", long + [0x0d, 0x0d, 0x0a])], environment: cliEnv)
        #expect(wrong.status == 1, "a passphrase with an extra \\r opened the store")
    }
    /// The daemon and one-shot commands (separate processes) append to one log: it verifies all
    /// along, and after the daemon stops its anchor vouches for every line.
    @Test func daemonAndOneShotCommandsKeepOneAnchoredLog() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")
        func cli(_ args: [String]) -> Int32 { ChildProcess.run(sitekeep, args + ["--home", store.home], environment: env) }
        for round in 0..<3 {
            #expect(cli(["unlock", "--passphrase-file", store.passFile]) == 0)             // the daemon logs
            #expect(cli(["team", "add", "k\(round)", "--passphrase-file", store.passFile]) == 0)  // a one-shot process logs
            #expect(cli(["lock"]) == 0)                                                      // the daemon logs, locked
            let v = try JSONParser.parse(await store.run(["log", "verify", "--json"]).out)
            #expect(v["intact"] == .bool(true), "round \(round): \(v)")
        }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<100 { if waitpid(pid, &status, WNOHANG) == pid { break }; usleep(50_000) }
        let v = try JSONParser.parse(await store.run(["log", "verify", "--json"]).out)
        #expect(v["intact"] == .bool(true) && v["anchoredThrough"] == v["lines"], "\(v)")
        let ops = try AuditLog.entries(path: store.home + "/audit.log").map(\.op)
        #expect(ops.filter { $0 == "lock" }.count == 3 && ops.filter { $0 == "team.add" }.count == 3, "\(ops)")
    }
}

extension DaemonTests {
    /// `vault.save` and `capture.save` through the daemon commit into a real sgit vault, signed
    /// with the device key; the real sgit reads both files and its fsck passes.
    @Test func vaultSaveAndCaptureSaveCommitThroughTheDaemon() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let sgit = try #require(BuiltProducts.sgit, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let prf = try store.file("prf.bin", Array(repeating: 9, count: 32))
        #expect(await store.run(["slot", "add", "prf", "--passphrase-file", store.passFile, "--new-prf-file", prf, "--rp-id", "x", "--credential-id", "AAAA"]).status == 0)
        #expect(await store.run(["site", "add", "P", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let vault = store.dir.appendingPathComponent("vault").path
        #expect(ChildProcess.run(sgit, ["init", vault, "--vault-key", "daemon save phrase:dsave123"]) == 0)
        let key = try store.file("vault.key", Array("daemon save phrase:dsave123".utf8))
        #expect(await store.run(["vault", "add", "p", "--path", vault, "--key-file", key, "--site", "https://promptugal.news", "--passphrase-file", store.passFile]).status == 0)

        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")
        #expect(await runTool(["unlock", "--prf-file", prf, "--home", store.home], environment: ["SITEKEEP_SOCK": sock]).status == 0)

        let client = try TestHost.connect(socket: sock, site: "https://promptugal.news", timeout: .seconds(30))
        defer { client.close() }
        _ = try client.hello(origin: "https://promptugal.news")
        let saved = try client.call("vault.save", args: ["path": "agenda/picks.json", "content": .string(Base64.encode(Array(#"{"v":1,"picks":[]}"#.utf8)))])
        let commit = try #require(saved["commit"]?.stringValue)
        #expect(commit.hasPrefix("obj-cas-imm-"))
        let note = try client.call("capture.save", args: ["title": "Lunch", "text": "ask about the meter", "url": "https://promptugal.news/a"])
        let notePath = try #require(note["path"]?.stringValue)
        #expect(try client.call("vault.status", args: [:])["head"]?.stringValue == note["commit"]?.stringValue)
        #expect(try client.call("vault.load", args: ["path": "agenda/picks.json"])["content"]?.stringValue == Base64.encode(Array(#"{"v":1,"picks":[]}"#.utf8)))
        kill(pid, SIGTERM)

        let sh = "cd '\(vault)' && HOME='\(store.dir.path)' '\(sgit)'"
        #expect(ChildProcess.run("/bin/sh", ["-c", "\(sh) cat agenda/picks.json | grep -q picks"]) == 0)
        #expect(ChildProcess.run("/bin/sh", ["-c", "\(sh) cat '\(notePath)' | grep -q meter"]) == 0)
        #expect(ChildProcess.run("/bin/sh", ["-c", "\(sh) check fsck | grep -q 'Vault OK'"]) == 0)
    }
}

/// Issue 18, item 3: `serve` refuses what cannot work before it listens.
@Suite struct ServeRefusalTests {
    @Test func anAskpassThatCannotRunIsRefusedAtStartAndSecretsWithoutUnlockAreWarnedOf() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let plain = try store.file("not-executable.sh", Array("#!/bin/sh\nexit 0\n".utf8))
        let sock = store.dir.appendingPathComponent("run/bridge.sock").path
        // (A #require first: were the check gone, the serve below would start and never return.)
        try #require(throws: DaemonError.self) { try Askpass.check(["SITEKEEP_ASKPASS": plain]) }
        for (askpass, why) in [("approve.sh", "is not an absolute path"), (plain, "is not executable"),
                               (store.dir.path, "is not a regular file"), ("/nonexistent/askpass", "does not exist")] {
            let r = await runTool(["serve", "--prf-file", plain, "--home", store.home, "--keyring", "file"],
                                  environment: ["SITEKEEP_ASKPASS": askpass, "SITEKEEP_SOCK": sock])
            #expect(r.status == 1 && r.err.contains(why) && r.err.contains("SITEKEEP_ASKPASS"), "\(askpass): \(r.err)")
            #expect(r.err.contains("--prf-file is read only with --unlock; the daemon starts locked"), "\(r.err)")
            #expect(!FileManager.default.fileExists(atPath: sock), "the daemon listened")
        }
        #expect(try Askpass.check(["SITEKEEP_ASKPASS": "/bin/true"]) == ())
        #expect(try Askpass.check([:]) == ())
    }
}
