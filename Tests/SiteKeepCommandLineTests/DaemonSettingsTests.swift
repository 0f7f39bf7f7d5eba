import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepDaemon
import SiteKeepBridgeProtocol
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings kept with the store (`sitekeep config`), every start reading them, a
/// running daemon applying them, `sitekeep stop`, and `site remove` of a site the daemon has open.
@Suite(.serialized) struct DaemonSettingsTests {
    /// Bad keys and values are refused naming the key and what it takes; good ones are stored
    /// 0600 and shown with their source; unset goes back to the default.
    @Test func settingsAreValidatedStoredPrivatelyAndShownWithTheirSource() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let unknown = await store.run(["config", "set", "idle", "5m"])
        #expect(unknown.status != 0 && unknown.err.contains("no setting 'idle'") && unknown.err.contains("idle-lock"), "\(unknown.err)")
        for (key, value, allowed) in [("idle-lock", "forever", "90s, 15m or 2h"), ("ssh-agent", "maybe", "on or off"),
                                      ("prompt", "askpass:relative/prog", "askpass:/ABSOLUTE/PATH"), ("sync-interval", "2d", "0 (never)"),
                                      ("ssh-agent-socket", "agent.sock", "absolute path")] {
            let r = await store.run(["config", "set", key, value, "--passphrase-file", store.passFile])
            #expect(r.status != 0 && r.err.contains("\(key) cannot be") && r.err.contains(allowed), "\(key) \(value): \(r.err)")
        }
        let file = store.home + "/daemon.json"
        #expect(!FileManager.default.fileExists(atPath: file), "a refused value wrote the settings file")

        let set = await store.run(["config", "set", "idle-lock", "5m"])
        #expect(set.status == 0 && set.out.contains("idle-lock = 5m"), "\(set.err)")
        var st = stat()
        #expect(lstat(file, &st) == 0 && st.st_mode & 0o777 == 0o600, "daemon.json is not 0600")
        let shown = try JSONParser.parse(await store.run(["config", "--json"]).out)
        let rows = shown["settings"]?.arrayValue ?? []
        #expect(rows.contains { $0["key"] == "idle-lock" && $0["value"] == "5m" && $0["source"] == "stored" }, "\(shown)")
        #expect(rows.contains { $0["key"] == "ssh-agent" && $0["value"] == "off" && $0["source"] == "default" }, "\(shown)")
        #expect(await store.run(["config", "get", "idle-lock"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "5m")
        #expect(await store.run(["config", "unset", "idle-lock", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["config", "get", "idle-lock"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "15m")
    }

    /// A settings file another process tampered with is refused, naming the file and the fix,
    /// and so is a daemon start on it: a link, a file others may write, an unknown key, a bad value.
    @Test func aTamperedSettingsFileIsRefusedNotFollowed() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let file = store.home + "/daemon.json"
        #expect(await store.run(["config", "set", "metered", "on"]).status == 0)
        chmod(file, 0o666)
        let widened = await store.run(["config"])
        #expect(widened.status != 0 && widened.err.contains("can be written by other users") && widened.err.contains("chmod 600"), "\(widened.err)")
        let serve = await store.run(["serve"])
        #expect(serve.status != 0 && serve.err.contains("daemon.json"), "serve started on a file others can write: \(serve.err)")
        chmod(file, 0o600)

        let elsewhere = try store.file("elsewhere.json", Array(#"{"prompt":"askpass:/tmp/yes.sh"}"#.utf8))
        unlink(file)
        symlink(elsewhere, file)
        let linked = await store.run(["config"])
        #expect(linked.status != 0 && linked.err.contains("symbolic link"), "\(linked.err)")
        unlink(file)

        for (text, says) in [(#"{"promptt":"auto"}"#, "unknown setting 'promptt'"), (#"{"prompt":"yes"}"#, "prompt cannot be 'yes'"),
                             (#"{"idle-lock":5}"#, "not a string"), ("[1]", "not a JSON object")] {
            let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            _ = text.withCString { write(fd, $0, strlen($0)) }
            close(fd)
            let r = await store.run(["config"])
            #expect(r.status != 0 && r.err.contains(says) && r.err.contains("daemon.json"), "\(text): \(r.err)")
        }
    }

    /// Turning the agent on, changing the prompt or no longer locking with the session needs
    /// the user's approval; narrowing does not.
    @Test func wideningTrustNeedsApprovalNarrowingDoesNot() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        for (key, value) in [("ssh-agent", "on"), ("prompt", "terminal"), ("lock-on-session-lock", "off"), ("idle-lock", "2h")] {
            let r = await store.run(["config", "set", key, value])
            #expect(r.status != 0, "\(key) \(value) was stored without approval")
            #expect(await store.run(["config", "get", key]).out.trimmingCharacters(in: .whitespacesAndNewlines) != value)
            let approved = await store.run(["config", "set", key, value, "--passphrase-file", store.passFile])
            #expect(approved.status == 0, "\(key) \(value) with the passphrase: \(approved.err)")
        }
        for (key, value) in [("ssh-agent", "off"), ("lock-on-session-lock", "on"), ("idle-lock", "10m"), ("metered", "on")] {
            let r = await store.run(["config", "set", key, value])
            #expect(r.status == 0, "narrowing \(key) to \(value) asked for approval: \(r.err)")
        }
    }

    /// The settings are read by the daemon `unlock` starts; a running daemon applies a change
    /// at once (the agent socket comes and goes, a shorter idle lock locks it), `unlock
    /// --idle-lock` against it applies for the run and says so, a second `serve` names `stop`,
    /// and `stop` ends it (and says when none runs).
    @Test func everyStartReadsTheSettingsARunningDaemonAppliesThemAndStopEndsIt() async throws {
        let sitekeep = try #require(DaemonTests.binary, "build the sitekeep executable first (swift build)")
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
        let storeID = try #require(StoreContext.storeID(home: store.home))
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
        let sitekeep = try #require(DaemonTests.binary, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let run = store.dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        let sock = run + "/bridge.sock"
        let pid = try #require(DaemonTests.spawn(sitekeep, ["serve", "--keyring", "file"],
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
        let sitekeep = try #require(DaemonTests.binary, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound"]).status == 0)
        let run = store.dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        let sock = run + "/bridge.sock"
        let pid = try #require(DaemonTests.spawn(sitekeep, ["serve", "--keyring", "file"],
                                                 env: ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)"]))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        #expect(ChildProcess.waitForPath(run + "/control.sock", seconds: 20))
        let env = ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path, "NO_COLOR": "1"]
        #expect(ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile], environment: env).status == 0)
        let client = try BridgeClient.connect(path: sock, timeout: .seconds(30))
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
