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

/// The daemon's settings as a running `sitekeep serve` (the built executable) reads and applies
/// them: every start reading them, a running daemon applying a change, `sitekeep stop`, and
/// `site remove` of a site the daemon has open. (`sitekeep config` itself: ConfigCommandTests.)
@Suite(.serialized) struct DaemonSettingsTests {
    /// The settings are read by the daemon `unlock` starts; a running daemon applies a change
    /// at once (the agent socket comes and goes, a shorter idle lock locks it), `unlock
    /// --idle-lock` against it applies for the run and says so, a second `serve` names `stop`,
    /// and `stop` ends it (and says when none runs).
    @Test func everyStartReadsTheSettingsARunningDaemonAppliesThemAndStopEndsIt() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["config", "set", "ssh-agent", "on", "--passphrase-file", store.passFile]).status == 0)
        let run = store.dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        let agent = run + "/sitekeep/agent.sock"
        let env = ["SITEKEEP_HOME": store.home, "XDG_RUNTIME_DIR": run, "HOME": store.dir.path, "NO_COLOR": "1",
                   "SITEKEEP_SOCK": "", "SITEKEEP_AGENT_SOCK": "", "SITEKEEP_NO_DAEMON": ""]
        func cli(_ args: [String]) -> (status: Int32, out: String, err: String) { ChildProcess.capture(sitekeep, args, environment: env) }
        defer { _ = cli(["stop"]) }

        let unlocked = cli(["unlock", "--passphrase-file", store.passFile])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(ChildProcess.waitForPath(agent, seconds: 10), "the autostarted daemon did not take the stored ssh-agent setting")

        let off = cli(["config", "set", "ssh-agent", "off"])
        #expect(off.status == 0 && off.out.contains("uses it now"), "\(off.out)\(off.err)")
        #expect(!FileManager.default.fileExists(atPath: agent), "the agent socket stayed after ssh-agent off")
        let env2 = cli(["agent", "env"])
        #expect(env2.err.contains("sitekeep config set ssh-agent on") && !env2.err.contains("serve --ssh-agent"), "\(env2.err)")
        let on = cli(["config", "set", "ssh-agent", "on", "--passphrase-file", store.passFile])
        #expect(on.status == 0 && on.out.contains("uses it now"), "\(on.out)\(on.err)")
        #expect(ChildProcess.waitForPath(agent, seconds: 5), "ssh-agent on did not start the agent socket")

        let again = cli(["serve"])
        #expect(again.status != 0 && again.err.contains("sitekeep stop") && !again.err.contains("SITEKEEP_SOCK"), "\(again.err)")

        let idle = cli(["unlock", "--passphrase-file", store.passFile, "--idle-lock", "2h"])
        #expect(idle.status == 0 && idle.err.contains("config set idle-lock 2h"), "unlock --idle-lock was silent: \(idle.err)")
        let shown = cli(["config"])
        #expect(shown.out.contains("2h") && shown.out.contains("--idle-lock 2h") && shown.out.contains("for this run (default: 15m)"), "a default is not called stored: \(shown.out)")
        // Without the secret, a process of the user cannot lengthen the idle lock through the
        // control socket (only shorten it), and an unlock with a wrong secret changes nothing.
        let control = run + "/sitekeep/control.sock"
        let storeID = try #require(OpenStore.storeID(home: store.home))
        func setIdle(_ value: String) throws -> JSONValue? {
            try ControlClient.send(path: control, store: storeID, op: "set",
                                   extra: [JSONMember(key: "key", value: "idle-lock"), JSONMember(key: "value", value: .string(value))])
        }
        let longer = try setIdle("1d")
        #expect(longer?["ok"] == .bool(false) && longer?["code"]?.stringValue == "needs_secret", "\(String(describing: longer))")
        #expect(try setIdle("1h")?["ok"] == .bool(true))
        let wrong = try store.file("wrong.txt", Array("not the passphrase\n".utf8))
        #expect(cli(["unlock", "--passphrase-file", wrong, "--idle-lock", "1d"]).status != 0)
        let listed = cli(["config"])
        #expect(listed.out.contains("1h") && !listed.out.contains("1d"), "a refused unlock or a bare set lengthened the idle lock: \(listed.out)")
        // A stored change the run overrides is reported as such, not silently kept.
        let stored = cli(["config", "set", "idle-lock", "1s"])
        #expect(stored.out.contains("keeps") && stored.out.contains("next start"), "\(stored.out)\(stored.err)")
        let later = cli(["config", "set", "sync-interval", "10m"])
        #expect(later.out.contains("sitekeep stop"), "\(later.out)")

        let stopped = cli(["stop"])
        #expect(stopped.status == 0 && stopped.out.contains("Stopped the daemon"), "\(stopped.out)\(stopped.err)")
        #expect(!FileManager.default.fileExists(atPath: run + "/sitekeep/control.sock"), "the control socket stayed after stop")
        #expect(cli(["stop"]).out.contains("No daemon runs for this store"))

        // The next start reads the 1s idle lock: unlocked, then locked by itself.
        #expect(cli(["unlock", "--passphrase-file", store.passFile]).status == 0)
        usleep(2_500_000)
        let status = cli(["status"])
        #expect(status.out.contains("locked") && !status.out.contains("unlocked"), "the stored idle lock was not read at start: \(status.out)")
    }

    /// `stop` from a process of another user is refused by the control socket (its peer check),
    /// and the daemon keeps running.
    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func stopFromAnotherUserIsRefused() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let run = store.dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        let sock = run + "/bridge.sock"
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"],
                                                 env: ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)"]))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        let control = run + "/control.sock"
        #expect(ChildProcess.waitForPath(control, seconds: 20))
        let storeID = try String(contentsOfFile: store.home + "/store-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        chmod(store.dir.path, 0o755)
        chmod(run, 0o755)
        chmod(control, 0o666)
        let script = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        try:
            s.sendall(('{"v":3,"op":"stop","store":"%s","length":0}\\n' % sys.argv[2]).encode())
        except BrokenPipeError:
            pass
        data = b''
        while not data.endswith(b'\\n'):
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        sys.stdout.write(data.decode())
        """
        let r = ChildProcess.capture("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, control, storeID])
        #expect(r.out.contains("\"forbidden_peer\""), "another user's stop: \(r.out)\(r.err)")
        usleep(300_000)
        var st: Int32 = 0
        #expect(waitpid(pid, &st, WNOHANG) == 0, "the daemon stopped for another user")
        chmod(run, 0o700)
        // Its own user stops it, over the same socket.
        let mine = ChildProcess.capture(sitekeep, ["stop"], environment: ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path])
        #expect(mine.status == 0 && mine.out.contains("Stopped"), "\(mine.out)\(mine.err)")
    }

    /// `site remove` of a site the daemon served (so holds open) goes through the daemon, which
    /// closes its own handle: no "in use" refusal.
    @Test func siteRemoveWhileTheDaemonHasTheSiteOpen() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let run = store.dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        let sock = run + "/bridge.sock"
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"],
                                                 env: ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)"]))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        #expect(ChildProcess.waitForPath(run + "/control.sock", seconds: 20))
        let env = ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path, "NO_COLOR": "1"]
        #expect(ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile], environment: env).status == 0)
        let client = try TestHost.connect(socket: sock, site: "https://web-summit.sgit.ai", timeout: .seconds(30))
        _ = try client.hello(origin: "https://web-summit.sgit.ai")
        _ = try client.call("storage.set", args: ["key": "k", "value": "v"])   // the daemon now holds the partition open
        client.close()
        let removed = ChildProcess.capture(sitekeep, ["site", "remove", "https://web-summit.sgit.ai", "--yes"], environment: env)
        #expect(removed.status == 0 && removed.out.contains("Removed site"), "\(removed.out)\(removed.err)")
        #expect(!removed.err.contains("in use"))
        let list = ChildProcess.capture(sitekeep, ["site", "list"], environment: env)
        #expect(!list.out.contains("web-summit"), "\(list.out)")
    }
}
