import Foundation
import Testing
import SiteKeepJSON
import SiteKeepSoftFIDO2
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Presence by touch through the real `sitekeep serve` (issue 36): once `sitekeep team presence
/// summit fido2` made team key summit need a touch of the security key (the software
/// authenticator, named to the daemon by `SITEKEEP_FIDO2_DEVICE`), each client kind signs
/// nothing with it until the key is touched: the command line (`team sign`, through the
/// daemon), a page's `key.sign` over the bridge (a Python host of its site) and `ssh-keygen
/// -Y sign` over the agent socket. The daemon's askpass approves everything, so it is the touch
/// alone that refuses; each signature is one touch.
@Suite(.serialized) struct TouchPresenceDaemonTests {
    static let origin = "https://web-summit.sgit.ai"

    /// A store with team key summit (on the SSH agent socket), the site Summit granted
    /// `key.sign` with Python as its host, and its daemon: unlocked, the ssh-agent socket on,
    /// an askpass that approves every prompt, and the software authenticator as its key.
    final class Bed: @unchecked Sendable {
        let store: CLIStore
        let soft: SoftKey
        let run: String
        var pid: Int32 = 0
        var bridge: String { run + "/bridge.sock" }
        var agent: String { run + "/agent.sock" }

        init() async throws {
            let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
            store = try CLIStore()
            soft = try SoftKey(["--no-touch-ms", "300"])
            _ = try await store.initialize()
            #expect(await store.run(["team", "add", "summit", "--name", "Summit team", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["team", "ssh", "enable", "summit", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["site", "add", "Summit", "--origin", TouchPresenceDaemonTests.origin, "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
            let granted = await store.run(["site", "grant", TouchPresenceDaemonTests.origin, "key.sign", "--passphrase-file", store.passFile])
            #expect(granted.status == 0, "\(granted.err)")
            let askpass = try store.file("askpass.sh", Array("#!/bin/sh\nexit 0\n".utf8))
            chmod(askpass, 0o700)
            run = store.dir.appendingPathComponent("run").path
            let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(run)/bridge.sock", "SITEKEEP_AGENT_SOCK=\(run)/agent.sock",
                       "SITEKEEP_ASKPASS=\(askpass)", "SITEKEEP_FIDO2_DEVICE=\(soft.device)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
            // Its log (standard error) to a file the tests read.
            let log = store.dir.appendingPathComponent("serve.log").path
            pid = try #require(ChildProcess.spawn("/bin/sh", ["-c", "exec \"$0\" \"$@\" 2>>'\(log)'", sitekeep,
                                                              "serve", "--keyring", "file", "--ssh-agent", "--unlock", "--passphrase-file", store.passFile],
                                                  env: env))
            #expect(ChildProcess.waitForPath(agent, pid: pid), "the daemon's agent socket did not appear")
        }

        /// A command through this daemon.
        func cli(_ args: [String]) async -> (status: Int32, out: String, err: String) {
            await runTool(args + ["--home", store.home, "--keyring", "file"], environment: ["SITEKEEP_SOCK": bridge])
        }

        /// Makes summit need a touch (one touch, approved with the passphrase).
        func requireTouch() async throws {
            let r = await cli(["team", "presence", "summit", "fido2", "--passphrase-file", store.passFile, "--json"])
            #expect(r.status == 0, "\(r.err)")
            #expect(try JSONParser.parse(r.out)["presence"] == "fido2", "\(r.out)")
        }

        /// The last audit line's site, op and result.
        func lastAudit() async throws -> (site: String, op: String, result: String, detail: String) {
            let r = await cli(["log", "show", "--limit", "1", "--json"])
            let line = try #require(try JSONParser.parse(r.out).arrayValue?.last, "\(r.out) \(r.err)")
            return (line["site"]?.stringValue ?? "", line["op"]?.stringValue ?? "", line["result"]?.stringValue ?? "", line["detail"]?.stringValue ?? "")
        }

        /// What the daemon wrote to its log.
        var log: String { (try? String(contentsOfFile: store.dir.appendingPathComponent("serve.log").path, encoding: .utf8)) ?? "" }

        func stop() {
            if pid > 0 { kill(pid, SIGTERM); var st: Int32 = 0; waitpid(pid, &st, 0) }
            soft.stop()
        }
    }

    @Test func theCommandLineSignsNothingWithoutATouch() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let message = try bed.store.file("note.txt", Array("hello".utf8))
        // Before: the prompt (askpass) approves.
        #expect(await bed.cli(["team", "sign", "summit", "--message-file", message]).status == 0)
        try await bed.requireTouch()

        try bed.soft.control.setTouch(false)
        let before = try bed.soft.control.counts()
        let refused = await bed.cli(["team", "sign", "summit", "--message-file", message])
        #expect(refused.status != 0)
        #expect(refused.err.contains("not touched"), "\(refused.err)")
        #expect(try bed.soft.control.counts().asked == before.asked + 1, "the key was asked for a touch")
        let line = try await bed.lastAudit()
        #expect(line.op == "team.sign" && line.result == "presence-refused", "\(line)")

        try bed.soft.control.setTouch(true)
        let signed = await bed.cli(["team", "sign", "summit", "--message-file", message])
        #expect(signed.status == 0, "\(signed.err)")
        #expect(signed.err.contains("Touch the security key"), "\(signed.err)")
        #expect(try bed.soft.control.counts().touched == before.touched + 1)
        #expect(try await bed.lastAudit().detail.contains("approved by a touch"))
    }

    @Test func aPagesKeySignSignsNothingWithoutATouch() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        func keySign() throws -> JSONValue {
            // A host of Summit the daemon started (Python, added as its host), asking over its
            // own bridge connection.
            let script = """
            s = connect()
            f = s.makefile('rwb')
            f.write(('{"v":1,"id":1,"op":"hello","args":{"origin":"' + sys.argv[1] + '"}}\\n').encode()); f.flush()
            f.readline()
            f.write(b'{"v":1,"id":2,"op":"key.sign","args":{"key":"summit","data":"aGVsbG8="}}\\n'); f.flush()
            sys.stdout.write(f.readline().decode())
            """
            let r = try TestHost.run(socket: bed.bridge, site: Self.origin, script: "import sys\n" + script, arguments: [Self.origin])
            return try JSONParser.parse(r.output)
        }
        #expect(try keySign()["ok"] == true, "the prompt approves before the key needs a touch")
        try await bed.requireTouch()

        try bed.soft.control.setTouch(false)
        let before = try bed.soft.control.counts()
        let refused = try keySign()
        #expect(refused["ok"] == false && refused["error"]?["code"] == "presence_required", "\(refused)")
        #expect(try bed.soft.control.counts().asked == before.asked + 1)
        let line = try await bed.lastAudit()
        #expect(line.op == "key.sign" && line.result == "presence-refused" && line.site != "cli", "\(line)")

        try bed.soft.control.setTouch(true)
        let signed = try keySign()
        #expect(signed["ok"] == true && signed["result"]?["signature"] != nil, "\(signed)")
        #expect(try bed.soft.control.counts().touched == before.touched + 1)
    }

    @Test func anSSHSignatureIsMadeOnlyAfterATouch() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let shown = await bed.cli(["team", "show", "summit", "--ssh"])
        let pub = try bed.store.file("summit.pub", Array(shown.out.utf8))
        let data = try bed.store.file("data.txt", Array("a file to sign".utf8))
        let env = ["SSH_AUTH_SOCK": bed.agent, "HOME": bed.store.dir.path, "PATH": "/usr/bin:/bin"]
        func sshSign() -> Int32 {
            try? FileManager.default.removeItem(atPath: data + ".sig")
            return ChildProcess.capture("/usr/bin/ssh-keygen", ["-Y", "sign", "-f", pub, "-n", "file", data], input: [],
                                        environment: env, inheritingEnvironment: false).status
        }
        #expect(sshSign() == 0, "the prompt approves before the key needs a touch")
        try await bed.requireTouch()

        try bed.soft.control.setTouch(false)
        let before = try bed.soft.control.counts()
        #expect(sshSign() != 0)
        #expect(!FileManager.default.fileExists(atPath: data + ".sig"))
        // The daemon's log says what the touch it waited for would have approved.
        let waiting = bed.log.split(separator: "\n").first { $0.contains("touch the security key to approve ssh.sign with key summit") }
        #expect(waiting?.contains("ssh-keygen") == true && waiting?.contains("file") == true, "\(bed.log)")
        #expect(try bed.soft.control.counts().asked == before.asked + 1)
        let line = try await bed.lastAudit()
        #expect(line.op == "ssh.sign" && line.result == "presence-refused", "\(line)")

        try bed.soft.control.setTouch(true)
        #expect(sshSign() == 0)
        #expect(FileManager.default.fileExists(atPath: data + ".sig"))
        #expect(try bed.soft.control.counts().touched == before.touched + 1)
    }

    /// Issue 47: a key use while the daemon is locked unlocks it with a touch of the security key
    /// when the prompt cannot ask for the passphrase (here an askpass program, which only
    /// approves), then asks for the approval: `ssh-keygen -Y sign` over the agent socket signs
    /// after one touch. Not touched: refused, still locked. `unlock-on-use passphrase` asks
    /// for the passphrase only (which askpass cannot), so the key is never asked.
    @Test func aLockedUseUnlocksWithATouchOfTheSecurityKey() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let shown = await bed.cli(["team", "show", "summit", "--ssh"])
        let pub = try bed.store.file("summit.pub", Array(shown.out.utf8))
        let data = try bed.store.file("data.txt", Array("a file to sign".utf8))
        let env = ["SSH_AUTH_SOCK": bed.agent, "HOME": bed.store.dir.path, "PATH": "/usr/bin:/bin"]
        func sshSign() -> Int32 {
            try? FileManager.default.removeItem(atPath: data + ".sig")
            return ChildProcess.capture("/usr/bin/ssh-keygen", ["-Y", "sign", "-f", pub, "-n", "file", data], input: [],
                                        environment: env, inheritingEnvironment: false).status
        }
        func unlocked() async throws -> Bool {
            try JSONParser.parse(await bed.cli(["status", "--json"]).out)["unlocked"] == true
        }
        #expect(await bed.cli(["slot", "add", "fido2", "--no-pin", "--passphrase-file", bed.store.passFile]).status == 0)
        #expect(await bed.cli(["lock"]).status == 0)

        try bed.soft.control.setTouch(false)
        let before = try bed.soft.control.counts()
        #expect(sshSign() != 0)
        #expect(try bed.soft.control.counts().asked > before.asked, "the key was asked for the unlock")
        #expect(try await !unlocked())

        try bed.soft.control.setTouch(true)
        #expect(sshSign() == 0, "\(bed.log)")
        #expect(FileManager.default.fileExists(atPath: data + ".sig"))
        #expect(try bed.soft.control.counts().touched == before.touched + 1)
        #expect(try await unlocked())
        #expect(bed.log.contains("unlocked on use"), "\(bed.log)")

        // The passphrase only: askpass cannot ask it, so the use is refused and the key not asked.
        let set = await bed.cli(["config", "set", "unlock-on-use", "passphrase", "--json"])
        #expect(set.status == 0, "\(set.err)")
        #expect(await bed.cli(["lock"]).status == 0)
        let asked = try bed.soft.control.counts().asked
        #expect(sshSign() != 0)
        #expect(try bed.soft.control.counts().asked == asked)
        #expect(try await !unlocked())
    }

    /// Issue 47: with a daemon, the daemon says whether `unlock --fido2`/`--tpm2` can be tried
    /// (it asks its own devices), before the client asks a PIN or prints "touch the security
    /// key": no slot of the kind, or its key gone, is refused with the fix and no touch asked;
    /// a command whose own environment names no usable key still unlocks with the daemon's.
    @Test func theDaemonSaysWhetherADeviceUnlockCanBeTried() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let noSlot = await bed.cli(["unlock", "--fido2"])
        #expect(noSlot.status != 0 && noSlot.err.contains("no fido2 slot") && noSlot.err.contains("sitekeep slot add fido2"), "\(noSlot.err)")
        #expect(!noSlot.err.contains("Touch the security key"), "\(noSlot.err)")
        #expect(try bed.soft.control.counts().asked == 0)
        let noTPM = await bed.cli(["unlock", "--tpm2"])
        #expect(noTPM.status != 0 && noTPM.err.contains("no tpm2 slot"), "\(noTPM.err)")

        #expect(await bed.cli(["slot", "add", "fido2", "--no-pin", "--passphrase-file", bed.store.passFile]).status == 0)
        #expect(await bed.cli(["lock"]).status == 0)
        // This command's environment names a key that is not there; the daemon's key is asked.
        let unlocked = await runTool(["unlock", "--fido2", "--home", bed.store.home, "--keyring", "file"],
                                     environment: ["SITEKEEP_SOCK": bed.bridge, "SITEKEEP_FIDO2_DEVICE": bed.soft.device + "-unplugged"])
        #expect(unlocked.status == 0 && unlocked.err.contains("Touch the security key"), "\(unlocked.err)")
        #expect(await bed.cli(["lock"]).status == 0)

        // The daemon's key unplugged: refused before the note, nothing asked.
        bed.soft.stop()
        let gone = await bed.cli(["unlock", "--fido2"])
        #expect(gone.status != 0 && !gone.err.contains("Touch the security key"), "\(gone.err)")
        let status = await bed.cli(["status", "--json"])
        #expect(try JSONParser.parse(status.out)["unlocked"] == false, "\(status.out)")
    }

    /// `slot add fido2` and `unlock --fido2` through the daemon: the daemon asks its security key
    /// (the client sends only whether a PIN follows); the daemon is unlocked after the touch.
    @Test func unlockFIDO2UnlocksTheDaemon() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let added = await bed.cli(["slot", "add", "fido2", "--no-pin", "--passphrase-file", bed.store.passFile, "--json"])
        #expect(added.status == 0, "\(added.err)")
        #expect(await bed.cli(["lock"]).status == 0)
        try bed.soft.control.setTouch(false)
        let untouched = await bed.cli(["unlock", "--fido2"])
        #expect(untouched.status != 0 && untouched.err.contains("not touched"), "\(untouched.err)")
        try bed.soft.control.setTouch(true)
        let unlocked = await bed.cli(["unlock", "--fido2", "--json"])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(unlocked.err.contains("Touch the security key"), "\(unlocked.err)")
        #expect(try JSONParser.parse(unlocked.out)["daemon"] == true, "\(unlocked.out)")
        let status = await bed.cli(["status", "--json"])
        #expect(try JSONParser.parse(status.out)["unlocked"] == true, "\(status.out)")
    }
}
