import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepAgent
import SiteKeepWiring
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The fresh-machine walkthrough of issue 33, with nothing configured: no `SITEKEEP_ASKPASS`, no
/// display. A daemon serving the ssh-agent socket, `sitekeep unlock` from the user's terminal (a
/// pseudo-terminal here), `git commit -S` through the agent answered by the real
/// `pinentry-curses` on that terminal, and `git log --show-signature` reporting a good signature.
/// One file, so later steps (`sitekeep config`, `sitekeep stop`) extend the same walk.
@Suite(.serialized) struct PinentryWalkthroughTests {
    static let git = "/usr/bin/git", curses = "/usr/bin/pinentry-curses"
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    @Test(.enabled(if: have(git, curses, "/usr/bin/ssh-keygen")))
    func gitCommitSignedThroughTheAgentIsApprovedOnTheRealPinentryCurses() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "summit", "--name", "Summit team", "--passphrase-file", store.passFile]).status == 0)
        let enabled = await store.run(["team", "ssh", "enable", "summit", "--namespace", "git", "--no-login", "--passphrase-file", store.passFile])
        #expect(enabled.status == 0, "\(enabled.err)")
        let dir = store.dir.path
        try FileManager.default.createDirectory(atPath: dir + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let agentSocket = dir + "/run/agent.sock", bridgeSocket = dir + "/run/bridge.sock", log = dir + "/serve.log"
        // Nothing configured: no askpass, no display, no terminal of its own (stdin /dev/null).
        let daemonEnv = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_AGENT_SOCK=\(agentSocket)", "SITEKEEP_SOCK=\(bridgeSocket)", "HOME=\(dir)", "NO_COLOR=1", "PATH=/usr/bin:/bin"]
        let pid = try #require(SSHAgentDaemonTests.Daemon.spawn(sitekeep, ["serve", "--keyring", "file", "--ssh-agent"],
                                                                env: daemonEnv, log: log))
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            for _ in 0..<200 where waitpid(pid, &status, WNOHANG) != pid { usleep(25_000) }
        }
        #expect(ChildProcess.waitForPath(agentSocket, pid: pid), "no agent socket: \(Self.read(log))")
        let client = ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": bridgeSocket, "SSH_AUTH_SOCK": agentSocket, "HOME": dir,
                      "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "DISPLAY": "", "WAYLAND_DISPLAY": "",
                      "SITEKEEP_ASKPASS": "", "SSH_ASKPASS": "", "GPG_TTY": "", "NO_COLOR": "1"]
        func sitekeepRun(_ args: [String], env: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(sitekeep, args + ["--home", store.home, "--keyring", "file"], environment: client.merging(env) { $1 })
        }

        // 1. Unlocked from no terminal: no prompt can be shown; git's signature is refused and the
        //    daemon's log says why and what to do, once however often it is refused.
        let quiet = sitekeepRun(["unlock", "--passphrase-file", store.passFile])
        #expect(quiet.status == 0, "\(quiet.err)")
        let pub = dir + "/summit.pub"
        let shown = sitekeepRun(["team", "show", "summit", "--ssh"])
        try Data(shown.out.utf8).write(to: URL(fileURLWithPath: pub))
        let allowed = dir + "/allowed_signers"
        try Data("team@example.com namespaces=\"git\" \(shown.out.trimmingCharacters(in: .newlines))\n".utf8).write(to: URL(fileURLWithPath: allowed))
        let repo = dir + "/repo"
        func git(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(Self.git, ["-C", repo, "-c", "user.name=Team", "-c", "user.email=team@example.com", "-c", "gpg.format=ssh",
                                            "-c", "user.signingKey=\(pub)", "-c", "gpg.ssh.allowedSignersFile=\(allowed)"] + args, environment: client)
        }
        #expect(ChildProcess.capture(Self.git, ["init", "-q", repo], environment: client).status == 0)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: repo + "/a.txt"))
        #expect(git(["add", "a.txt"]).status == 0)
        #expect(git(["commit", "-q", "-S", "-m", "no prompt"]).status != 0)
        #expect(git(["commit", "-q", "-S", "-m", "no prompt again"]).status != 0)
        let refusedLog = Self.read(log)
        #expect(refusedLog.contains("no presence prompt can be shown now") && refusedLog.contains("run 'sitekeep unlock' from your terminal"), "\(refusedLog)")
        #expect(!refusedLog.contains("cannot ask for presence: cannot ask for presence"), "the reason is said once, not doubled")
        #expect(refusedLog.components(separatedBy: "refused a request").count - 1 == 1, "the same refusal is logged once: \(refusedLog)")
        // doctor says so too, with what to do.
        let doctorQuiet = sitekeepRun(["doctor"])
        #expect(doctorQuiet.out.contains("presence prompt: none (auto): cannot be shown now: the daemon knows no display and no terminal of yours; run 'sitekeep unlock'"),
                "\(doctorQuiet.out)")

        // An unlock that fails (a wrong passphrase) cannot point the prompts at a terminal: only
        // the holder of the secret can. The terminal below is watched from here on; nothing may
        // be drawn on it until the right passphrase is given from it.
        let pty = try PtyDriver()
        defer { pty.close() }
        pty.answer(["\t\r", "\r"], after: "Allow")
        let wrong = dir + "/wrong.txt"
        try Data("not the passphrase\n".utf8).write(to: URL(fileURLWithPath: wrong))
        let refusedUnlock = sitekeepRun(["unlock", "--passphrase-file", wrong], env: ["GPG_TTY": pty.name, "TERM": "xterm"])
        #expect(refusedUnlock.status != 0)
        #expect(git(["commit", "-q", "-S", "-m", "after a failed unlock"]).status != 0)
        #expect(!pty.drawn.contains("Allow"), "a failed unlock moved the prompt: \(pty.drawn.suffix(300))")

        // 2. `sitekeep unlock` from a desktop launcher (no terminal, a display) asks for the
        //    passphrase through the pinentry found first on PATH, with GETPIN. The program here
        //    is a script speaking Assuan (no X server in the test), first on the client's PATH.
        #expect(sitekeepRun(["lock"]).status == 0)
        let bin = dir + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let asked = dir + "/pinentry-asked"
        let script = """
        #!/bin/sh
        echo 'OK Pleased to meet you'
        while read -r line; do
          printf '%s\\n' "$line" >> '\(asked)'
          case "$line" in
            GETPIN) echo 'D correct horse battery'; echo OK;;
            *) echo OK;;
          esac
        done
        """
        _ = FileManager.default.createFile(atPath: bin + "/pinentry", contents: Data(script.utf8), attributes: [.posixPermissions: 0o700])
        let desktop = sitekeepRun(["unlock"], env: ["DISPLAY": ":93", "PATH": "\(bin):/usr/bin:/bin"])
        #expect(desktop.status == 0, "\(desktop.out) \(desktop.err)")
        let conversation = Self.read(asked)
        #expect(conversation.contains("GETPIN") && conversation.contains("SETTITLE SiteKeep: unlock") && !conversation.contains("CONFIRM"), "\(conversation)")

        // 3. `sitekeep unlock` from the user's terminal points the daemon's prompts at it: the
        //    real pinentry-curses asks there. Deny first (Tab to Deny, Enter), then allow (Enter).
        #expect(sitekeepRun(["lock"]).status == 0)
        let unlocked = sitekeepRun(["unlock", "--passphrase-file", store.passFile], env: ["GPG_TTY": pty.name, "TERM": "xterm"])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        let doctorTTY = sitekeepRun(["doctor"], env: ["GPG_TTY": pty.name, "PATH": "/usr/bin:/bin"])
        #expect(doctorTTY.out.contains("presence prompt: pinentry /usr/bin/pinentry-curses on \(pty.name) (auto: the system's pinentry on your terminal); it can be shown now"),
                "\(doctorTTY.out)")
        let denied = git(["commit", "-q", "-S", "-m", "denied on the pinentry"])
        #expect(denied.status != 0, "a commit was signed though the user chose Deny")
        #expect(git(["rev-parse", "--verify", "-q", "HEAD"]).status != 0)
        let commit = git(["commit", "-q", "-S", "-m", "signed through SiteKeep's agent"])
        #expect(commit.status == 0, "\(commit.err)\n\(Self.read(log))\n\(pty.drawn.suffix(600))")
        let shownLog = git(["log", "--show-signature", "-1"])
        #expect(shownLog.status == 0 && shownLog.out.contains("Good \"git\" signature for team@example.com"), "\(shownLog.out) \(shownLog.err)")
        // What the dialog showed: SiteKeep's title and facts, the buttons it labelled.
        let drawn = pty.drawn
        #expect(drawn.contains("summit") && drawn.contains("ssh.sign") && drawn.contains("Deny"), "\(drawn.suffix(800))")
    }

    /// The walk a new user takes on a fresh machine (issue 33's "must show"): the agent turned
    /// on once with `sitekeep config` (kept with the store), `sitekeep unlock` from the user's
    /// terminal starting the daemon with it, `git commit -S` through the agent answered on the
    /// real `pinentry-curses` there, `git log --show-signature` good, and `sitekeep stop`
    /// ending the daemon and its agent. Nothing else is configured: no askpass, no display, no
    /// `serve` options.
    @Test(.enabled(if: have(git, curses, "/usr/bin/ssh-keygen")))
    func configUnlockCommitAndStopOnAFreshMachine() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let dir = store.dir.path
        let runtime = dir + "/run"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let pty = try PtyDriver()
        defer { pty.close() }
        pty.answer("\r", after: "Allow")
        let client = ["SITEKEEP_HOME": store.home, "XDG_RUNTIME_DIR": runtime, "HOME": dir, "PATH": "/usr/bin:/bin",
                      "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "DISPLAY": "", "WAYLAND_DISPLAY": "",
                      "SITEKEEP_ASKPASS": "", "SSH_ASKPASS": "", "SITEKEEP_SOCK": "", "SITEKEEP_AGENT_SOCK": "", "SSH_AUTH_SOCK": "",
                      "GPG_TTY": pty.name, "TERM": "xterm", "NO_COLOR": "1"]
        func sitekeepRun(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(sitekeep, args + ["--home", store.home, "--keyring", "file"], environment: client)
        }
        defer { _ = sitekeepRun(["stop"]) }
        #expect(sitekeepRun(["team", "add", "summit", "--name", "Summit team", "--passphrase-file", store.passFile]).status == 0)
        let enabled = sitekeepRun(["team", "ssh", "enable", "summit", "--namespace", "git", "--no-login", "--passphrase-file", store.passFile])
        #expect(enabled.status == 0, "\(enabled.err)")

        // 1. The agent on, kept with the store; turning it on widens trust, so it is approved
        //    with the current passphrase.
        let on = sitekeepRun(["config", "set", "ssh-agent", "on", "--passphrase-file", store.passFile])
        #expect(on.status == 0, "\(on.out) \(on.err)")
        #expect(sitekeepRun(["config", "get", "ssh-agent"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "on")

        // 2. unlock starts the daemon, which reads the setting: the agent socket is there.
        let unlocked = sitekeepRun(["unlock", "--passphrase-file", store.passFile])
        #expect(unlocked.status == 0, "\(unlocked.out) \(unlocked.err)")
        let agentSocket = runtime + "/sitekeep/agent.sock"
        let env = sitekeepRun(["agent", "env"])
        #expect(env.status == 0 && env.out.contains("SSH_AUTH_SOCK=\(agentSocket)"), "\(env.out) \(env.err)")
        let list = ChildProcess.capture("/usr/bin/ssh-add", ["-L"], environment: client.merging(["SSH_AUTH_SOCK": agentSocket]) { $1 })
        #expect(list.status == 0 && list.out.contains("ssh-ed25519 "), "\(list.out) \(list.err)")

        // 3. git commit -S through the agent, approved on the real pinentry-curses.
        let pub = dir + "/summit.pub", allowed = dir + "/allowed_signers", repo = dir + "/repo"
        let shown = sitekeepRun(["team", "show", "summit", "--ssh"])
        try Data(shown.out.utf8).write(to: URL(fileURLWithPath: pub))
        try Data("team@example.com namespaces=\"git\" \(shown.out.trimmingCharacters(in: .newlines))\n".utf8).write(to: URL(fileURLWithPath: allowed))
        let gitEnv = client.merging(["SSH_AUTH_SOCK": agentSocket]) { $1 }
        func git(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(Self.git, ["-C", repo, "-c", "user.name=Team", "-c", "user.email=team@example.com", "-c", "gpg.format=ssh",
                                            "-c", "user.signingKey=\(pub)", "-c", "gpg.ssh.allowedSignersFile=\(allowed)"] + args, environment: gitEnv)
        }
        #expect(ChildProcess.capture(Self.git, ["init", "-q", repo], environment: gitEnv).status == 0)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: repo + "/a.txt"))
        #expect(git(["add", "a.txt"]).status == 0)
        let commit = git(["commit", "-q", "-S", "-m", "signed on a fresh machine"])
        #expect(commit.status == 0, "\(commit.err)\n\(Self.read(store.home + "/daemon.log"))\n\(pty.drawn.suffix(600))")
        let shownLog = git(["log", "--show-signature", "-1"])
        #expect(shownLog.status == 0 && shownLog.out.contains("Good \"git\" signature for team@example.com"), "\(shownLog.out) \(shownLog.err)")
        #expect(pty.drawn.contains("summit") && pty.drawn.contains("ssh.sign"), "\(pty.drawn.suffix(800))")

        // 4. stop ends the daemon: its agent socket is gone and nothing signs any more.
        let stopped = sitekeepRun(["stop"])
        #expect(stopped.status == 0 && stopped.out.contains("Stopped"), "\(stopped.out) \(stopped.err)")
        #expect(!FileManager.default.fileExists(atPath: agentSocket), "the agent socket outlived the daemon")
        try Data("more\n".utf8).write(to: URL(fileURLWithPath: repo + "/a.txt"))
        #expect(git(["commit", "-q", "-a", "-S", "-m", "after stop"]).status != 0)
        let again = sitekeepRun(["stop"])
        #expect((again.out + again.err).contains("No daemon runs"), "a second stop says none runs: \(again.out) \(again.err)")
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}
