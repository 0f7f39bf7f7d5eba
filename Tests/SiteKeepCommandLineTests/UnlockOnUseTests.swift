import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 47, items 2 and 3, with real processes: a daemon serving the ssh-agent socket, two
/// terminals of the user (pseudo-terminals the test reads and types on), `ssh-keygen -Y sign`
/// started with one of them as its controlling terminal, the real `pinentry-curses`, and a
/// process that runs `ssh-keygen` under a pseudo-terminal it controls itself.
@Suite(.serialized) struct UnlockOnUseTests {
    static let keygen = "/usr/bin/ssh-keygen", curses = "/usr/bin/pinentry-curses", python = "/usr/bin/python3"
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    /// Runs the rest of its arguments with the terminal `argv[1]` as its controlling terminal
    /// and standard streams, as a shell in that terminal would (killed after 40 s).
    static let onTerminal = """
    import os, sys, signal
    signal.alarm(40)
    os.setsid()
    fd = os.open(sys.argv[1], os.O_RDWR)
    for i in (0, 1, 2): os.dup2(fd, i)
    os.execv(sys.argv[2], sys.argv[2:])
    """
    /// Runs the rest of its arguments under a pseudo-terminal this process opened and controls,
    /// and prints everything written to it: what a process that could answer a prompt there saw.
    static let underOwnPty = """
    import os, pty, sys, signal
    signal.alarm(40)
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.argv[1], sys.argv[1:])
    out = b""
    while True:
        try: d = os.read(fd, 4096)
        except OSError: break
        if not d: break
        out += d
    _, st = os.waitpid(pid, 0)
    sys.stdout.write(out.decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(st))
    """

    static func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { if condition() { return true }; usleep(50_000) }
        return condition()
    }

    static func read(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// Unlocked from terminal A: a signature asked from terminal B tells B at once where to
    /// approve (A), and is approved there; after `sitekeep unlock` on B the prompt is on B; a
    /// process running ssh-keygen under a pty it controls sees only the notice; after
    /// `sitekeep lock` the next signature asks for the passphrase on B, then for the approval,
    /// and signs. With unlock-on-use off, a locked signature is refused and B is told to run
    /// `sitekeep unlock`.
    @Test(.enabled(if: have(keygen, curses, python)))
    func thePromptStaysWhereTheUserIsAndALockedUseAsksForTheUnlock() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "summit", "--name", "Summit team", "--passphrase-file", store.passFile]).status == 0)
        let enabled = await store.run(["team", "ssh", "enable", "summit", "--namespace", "git", "--no-login", "--passphrase-file", store.passFile])
        #expect(enabled.status == 0, "\(enabled.err)")
        let dir = store.dir.path
        try FileManager.default.createDirectory(atPath: dir + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let agentSocket = dir + "/run/agent.sock", bridgeSocket = dir + "/run/bridge.sock", log = dir + "/serve.log"
        // No askpass, no display, no terminal of its own: prompts go where an unlock points them.
        let daemonEnv = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_AGENT_SOCK=\(agentSocket)", "SITEKEEP_SOCK=\(bridgeSocket)", "HOME=\(dir)",
                         "NO_COLOR=1", "PATH=/usr/bin:/bin"]
        let pid = try #require(SSHAgentDaemonTests.Daemon.spawn(sitekeep, ["serve", "--keyring", "file", "--ssh-agent"], env: daemonEnv, log: log))
        defer {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            for _ in 0..<200 where waitpid(pid, &status, WNOHANG) != pid { usleep(25_000) }
        }
        #expect(ChildProcess.waitForPath(agentSocket, pid: pid), "no agent socket: \(Self.read(log))")
        let client = ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": bridgeSocket, "SSH_AUTH_SOCK": agentSocket, "HOME": dir,
                      "DISPLAY": "", "WAYLAND_DISPLAY": "", "SITEKEEP_ASKPASS": "", "SSH_ASKPASS": "", "GPG_TTY": "", "NO_COLOR": "1",
                      "PATH": "/usr/bin:/bin", "TERM": "xterm"]
        func sitekeepRun(_ args: [String], env: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(sitekeep, args + ["--home", store.home, "--keyring", "file"], environment: client.merging(env) { $1 })
        }
        let pub = dir + "/summit.pub", message = dir + "/message.txt"
        let shown = sitekeepRun(["team", "show", "summit", "--ssh"])
        try Data(shown.out.utf8).write(to: URL(fileURLWithPath: pub))
        try Data("team@example.com namespaces=\"git\" \(shown.out.trimmingCharacters(in: .newlines))\n".utf8).write(to: URL(fileURLWithPath: dir + "/allowed"))
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: message))
        let sign = [Self.keygen, "-Y", "sign", "-n", "git", "-f", pub, message]
        /// ssh-keygen -Y sign started from terminal `tty` (its controlling terminal), in the
        /// background on a thread of its own: not a task, which waits for a thread of the test
        /// pool, and in a whole run the pool's few threads can all be blocked by waiting tests
        /// (this one included) for longer than the notice is waited for.
        func signFrom(_ tty: String) -> BackgroundStatus {
            try? FileManager.default.removeItem(atPath: message + ".sig")
            return BackgroundStatus { ChildProcess.capture(Self.python, ["-c", Self.onTerminal, tty] + sign, environment: client).status }
        }
        func verified() -> Bool {
            ChildProcess.capture(Self.keygen, ["-Y", "verify", "-f", dir + "/allowed", "-I", "team@example.com", "-n", "git", "-s", message + ".sig"],
                                 stdin: "hello\n", environment: client).status == 0
        }

        let a = try PtyDriver(), b = try PtyDriver()
        defer { a.close(); b.close() }
        let short = { (tty: String) in String(tty.dropFirst("/dev/".count)) }
        // B's user: approves twice (step 2 and its own sign in step 4), denies the process of step 3,
        // and gives the passphrase when SiteKeep asks for the unlock (step 4).
        b.answer(steps: [("Allow", "\r"), ("Allow", "\t\r"), ("is locked", "correct horse battery\r"), ("Allow", "\r")])

        // 1. Unlocked from terminal A; a signature asked from terminal B: B is told at once
        //    where to approve, the prompt is on A, and nothing asks on B.
        let fromA = sitekeepRun(["unlock", "--passphrase-file", store.passFile], env: ["GPG_TTY": a.name])
        #expect(fromA.status == 0, "\(fromA.err)")
        let first = signFrom(b.name)
        let notice = "SiteKeep: approve on \(short(a.name)), or run `sitekeep unlock` here to answer here"
        // At once: while the prompt on A waits (nobody answers there until B has the notice),
        // not after its 60 s time-out. (Generous for a loaded machine.)
        #expect(Self.waitUntil(seconds: 20) { b.drawn.contains(notice) }, "B was not told where to approve: \(b.drawn.suffix(400))")
        a.answer("\r", after: "Allow")
        #expect(first.wait() == 0, "\(Self.read(log)) \(a.drawn.suffix(400))")
        #expect(verified())
        #expect(a.drawn.contains("Allow") && a.drawn.contains("ssh.sign"), "no prompt on A: \(a.drawn.suffix(400))")
        #expect(!b.drawn.contains("Allow") && !b.drawn.contains("Key: summit"), "the question was put on the asker's terminal: \(b.drawn.suffix(400))")

        // 2. `sitekeep unlock` on B moves the prompt to B, and says so; A sees no more prompts.
        let onA = a.drawn.components(separatedBy: "Allow").count
        let fromB = sitekeepRun(["unlock", "--passphrase-file", store.passFile], env: ["GPG_TTY": b.name])
        #expect(fromB.status == 0 && fromB.err.contains("Prompts now ask here: ") && fromB.err.contains(b.name), "\(fromB.out) \(fromB.err)")
        // An unlock from a script (no terminal, no display) leaves the prompt where it is.
        let scripted = sitekeepRun(["unlock", "--passphrase-file", store.passFile])
        #expect(scripted.status == 0 && !scripted.err.contains("Prompts now ask here"), "\(scripted.err)")
        #expect(signFrom(b.name).wait() == 0, "\(Self.read(log)) \(b.drawn.suffix(400))")
        #expect(verified())
        #expect(b.drawn.contains("Key: summit") || b.drawn.contains("summit"), "\(b.drawn.suffix(400))")
        #expect(a.drawn.components(separatedBy: "Allow").count == onA, "a prompt still went to A")

        // 3. A process that runs ssh-keygen under a pty it controls: that pty gets the notice
        //    and nothing else of SiteKeep's (the user, on B, denies).
        try? FileManager.default.removeItem(atPath: message + ".sig")
        let own = ChildProcess.capture(Self.python, ["-c", Self.underOwnPty] + sign, environment: client)
        #expect(own.status != 0, "signed though the user denied: \(own.out)")
        #expect(own.out.contains("SiteKeep: approve on \(short(b.name)), or run `sitekeep unlock` here"), "\(own.out)")
        #expect(!own.out.contains("Allow") && !own.out.contains("Key: summit") && !own.out.contains("Passphrase"),
                "a prompt was shown where the asker can answer it: \(own.out)")

        // 4. After `sitekeep lock`, the next signature from B asks for the passphrase on B (the
        //    prompt's terminal), then for the approval, and signs.
        #expect(sitekeepRun(["lock"]).status == 0)
        #expect(signFrom(b.name).wait() == 0, "\(Self.read(log)) \(b.drawn.suffix(600))")
        #expect(verified())
        #expect(b.drawn.contains("SiteKeep is locked"), "\(b.drawn.suffix(600))")
        #expect(Self.read(log).contains("unlocked on use"), "\(Self.read(log))")

        // 5. unlock-on-use off keeps today's refusal: the signature fails at once, and B is told
        //    to run `sitekeep unlock` (an agent failure carries no text to ssh-keygen).
        let off = sitekeepRun(["config", "set", "unlock-on-use", "off"])
        #expect(off.status == 0, "\(off.out) \(off.err)")
        #expect(sitekeepRun(["lock"]).status == 0)
        let started = Date()
        #expect(signFrom(b.name).wait() != 0)
        #expect(Date().timeIntervalSince(started) < 20, "a refusal must not wait for a prompt")
        #expect(Self.waitUntil(seconds: 3) { b.drawn.contains("SiteKeep is locked: run `sitekeep unlock` here, then try again") }, "\(b.drawn.suffix(400))")
    }
}

/// The exit status of a process run on a thread of its own, waited for with `value`.
final class BackgroundStatus: @unchecked Sendable {
    private let finished = DispatchSemaphore(value: 0)
    private var status: Int32 = -1

    init(_ run: @escaping @Sendable () -> Int32) {
        Thread.detachNewThread { [self] in
            status = run()
            finished.signal()
        }
    }

    /// The status, once the process has ended (the semaphore orders the write before the read).
    func wait() -> Int32 {
        finished.wait()
        return status
    }
}
