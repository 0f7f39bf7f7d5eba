import Foundation
import Synchronization
import Testing
@testable import SiteKeepCustody
import SiteKeepSystem
import SiteKeepCrypto
import SiteKeepTestSupport

/// The pinentry client (Assuan) against the real `pinentry-curses` on a pseudo-terminal, against
/// hostile programs posing as a pinentry, and the choice of prompt (issue 33).
@Suite(.serialized) struct PinentryTests {
    static let curses = "/usr/bin/pinentry-curses"
    static let env = ["PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"]

    static func dialog() -> PinentryClient.Dialog {
        let text = PresenceText.dialog(siteLabel: "a signature of a git commit or tag (SSHSIG namespace \"git\"); asked by \"git\" (pid 7) on the SSH agent socket",
                                       op: "ssh.sign", keyID: "summit", promptID: "0123456789abcdef")
        return PinentryClient.Dialog(title: text.title, description: text.title + "\n" + text.body)
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: curses)))
    func theRealPinentryCursesApprovesOnOKAndDeniesOnCancel() throws {
        for (keys, expected) in [("\r", true), ("\t\r", false)] {
            let pty = try PtyDriver()
            defer { pty.close() }
            pty.answer(keys, after: "Allow")
            let client = PinentryClient(program: Self.curses, ttyName: pty.name, ttyType: "xterm", environment: Self.env, timeout: .seconds(20))
            let approved = try client.confirm(Self.dialog())
            #expect(approved == expected, "keys \(keys.debugDescription): \(pty.drawn.suffix(400))")
            // The dialog shows SiteKeep's words and the buttons it labelled, and no passphrase field.
            #expect(pty.drawn.contains("Deny") && pty.drawn.contains("summit") && pty.drawn.contains("ssh.sign"))
            #expect(!pty.drawn.contains("PIN"), "CONFIRM shows no passphrase field")
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: curses)))
    func aGetpinRoundTripLandsInGuardedMemory() throws {
        let pty = try PtyDriver()
        defer { pty.close() }
        pty.answer("correct horse%\r", after: "Passphrase")
        let client = PinentryClient(program: Self.curses, ttyName: pty.name, ttyType: "xterm", environment: Self.env, timeout: .seconds(20))
        let answer = try client.getPin(PinentryClient.Dialog(title: "SiteKeep: unlock", description: "Unlock the store", ok: "Unlock",
                                                              cancel: "Cancel", prompt: "Passphrase:"))
        let typed: String? = switch consume answer {
        case .some(let pin): pin.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        case .none: nil
        }
        #expect(typed == "correct horse%", "the %25 escape is decoded")

        let cancelled = try PtyDriver()
        defer { cancelled.close() }
        cancelled.answer("\t\t\r", after: "Passphrase")
        let none = try PinentryClient(program: Self.curses, ttyName: cancelled.name, ttyType: "xterm", environment: Self.env, timeout: .seconds(20))
            .getPin(PinentryClient.Dialog(title: "t", description: "d", ok: "Unlock", cancel: "Cancel", prompt: "Passphrase:"))
        let cancelledGaveNothing = switch consume none { case .some: false; case .none: true }
        #expect(cancelledGaveNothing, "Cancel gives no secret")
    }

    static let screenshots = ProcessInfo.processInfo.environment["SITEKEEP_BROWSER_SCREENSHOTS"]
    static let gtk = "/usr/bin/pinentry-gtk-2", xvfb = "/usr/bin/Xvfb", xwd = "/usr/bin/xwd"

    /// The graphical prompt: the real pinentry-gtk-2 under Xvfb showing SiteKeep's CONFIRM (this
    /// client's words), captured to `prompt-pinentry.png` in the folder SITEKEEP_BROWSER_SCREENSHOTS
    /// names (tools/test: .build/screenshots; tools/screenshots: docs/screenshots, the README's). Nobody answers: the time limit ends it, and
    /// its process is killed.
    @Test(.enabled(if: screenshots != nil && [gtk, xvfb, xwd].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }))
    func theGraphicalPromptIsCapturedUnderXvfb() throws {
        let folder = try #require(Self.screenshots)
        // The folder may not exist yet (a SITEKEEP_BROWSER_SCREENSHOTS of a fresh run).
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let number = Int.random(in: 300...600)
        var pid: pid_t = 0
        let args: [String] = [Self.xvfb, ":\(number)", "-screen", "0", "560x300x24", "-nolisten", "tcp"]
        let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        try #require(posix_spawn(&pid, Self.xvfb, &actions, nil, argv, environ) == 0)
        // SIGKILL: the test process may block SIGTERM, and Xvfb inherits the mask.
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        #expect(ChildProcess.waitForPath("/tmp/.X11-unix/X\(number)", pid: pid, seconds: 20))
        let display = ":\(number)"
        let client = PinentryClient(program: Self.gtk, environment: ["DISPLAY=\(display)", "PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"], timeout: .seconds(8))
        let outcome = Mutex<String?>(nil)
        let dialog = Self.dialog()
        Thread.detachNewThread {
            let r: String
            do throws(CustodyError) { r = "answered \(try client.confirm(dialog))" } catch { r = "\(error)" }
            outcome.withLock { $0 = r }
        }
        usleep(4_000_000)
        let dump = try temporaryFolder() + ".xwd"
        defer { try? FileManager.default.removeItem(atPath: dump) }
        let shot = ChildProcess.capture(Self.xwd, ["-root", "-silent", "-display", display, "-out", dump])
        #expect(shot.status == 0, "\(shot.err)")
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let png = folder + "/prompt-pinentry.png"
        let converted = ChildProcess.capture(repo + "/tools/xwd-to-png", [dump, png])
        #expect(converted.status == 0, "\(converted.err)")
        chmod(png, 0o644)
        #expect(((try? FileManager.default.attributesOfItem(atPath: png)[.size] as? Int) ?? 0) > 2000, "the screenshot is not blank")
        for _ in 0..<200 where outcome.withLock({ $0 }) == nil { usleep(50_000) }
        #expect(outcome.withLock { $0 }?.contains("no answer") == true, "nobody answered, so the time limit ended it: \(String(describing: outcome.withLock { $0 }))")
    }

    /// A program posing as a pinentry: a line past Assuan's limit, garbage, an unasked data line,
    /// silence, an endless stream of status lines. Each is refused within the bound.
    @Test func aHostilePinentryIsRefusedWithinBounds() throws {
        func run(_ body: String, timeout: Duration = .seconds(3)) -> (Result<Bool, CustodyError>, Duration) {
            let path = try! script(body)
            let client = PinentryClient(program: path, environment: Self.env, timeout: timeout)
            let start = ContinuousClock.now
            let result: Result<Bool, CustodyError>
            do throws(CustodyError) { result = .success(try client.confirm(Self.dialog())) } catch { result = .failure(error) }
            return (result, ContinuousClock.now - start)
        }
        func unavailable(_ r: Result<Bool, CustodyError>, _ words: String) -> Bool {
            if case .failure(.presenceUnavailable(let why)) = r { return why.contains(words) }
            return false
        }
        let long = run("printf '%05000d\\n' 0")
        #expect(unavailable(long.0, "longer than 1000 bytes"), "\(long.0)")
        let garbage = run("echo 'OK hi'; while read l; do echo 'HELLO THERE'; done")
        #expect(unavailable(garbage.0, "broke the Assuan protocol"), "\(garbage.0)")
        let data = run("echo 'OK hi'; while read l; do echo 'D secret'; echo OK; done")
        #expect(unavailable(data.0, "data that was not asked for"), "\(data.0)")
        let flood = run("echo 'OK hi'; while :; do echo 'S PROGRESS'; done")
        #expect(unavailable(flood.0, "more than 256 lines"), "\(flood.0)")
        let quiet = run("sleep 30", timeout: .seconds(2))
        if case .failure(.presenceTimedOut) = quiet.0 {} else { Issue.record("silence: \(quiet.0)") }
        #expect(quiet.1 < .seconds(5) + PinentryClient.grace, "a silent pinentry is killed at the time limit and its grace: \(quiet.1)")
        let ended = run("exit 0")
        #expect(unavailable(ended.0, "ended without answering"), "\(ended.0)")
        // A cancelling pinentry denies; a confirming one approves.
        #expect(try run("echo OK; while read l; do case \"$l\" in CONFIRM) echo 'ERR 83886179 Operation cancelled';; *) echo OK;; esac; done").0.get() == false)
        #expect(try run("echo OK; while read l; do echo OK; done").0.get() == true)
    }

    /// Prompts come one at a time: two requests at once through the daemon's verifier never
    /// show two prompts together (each prompt here records its start and end around a pause).
    @Test func promptsAreShownOneAtATime() throws {
        let dir = try temporaryFolder()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let askpass = dir + "/askpass"
        _ = FileManager.default.createFile(atPath: askpass, contents: Data("#!/bin/sh\necho start >> '\(log)'\nsleep 0.3\necho end >> '\(log)'\nexit 0\n".utf8),
                                           attributes: [.posixPermissions: 0o700])
        let verifier = PromptPresenceVerifier(setting: nil, environment: ["SITEKEEP_ASKPASS": askpass, "PATH": "/usr/bin:/bin"])
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 3) { i in
            do { _ = try verifier.requestPresence(client: .testSite("s\(i)"), op: "key.sign", keyID: "summit") } catch { failures.withLock { $0 += 1 } }
        }
        #expect(failures.withLock { $0 } == 0)
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(lines == ["start", "end", "start", "end", "start", "end"], "two prompts were shown at once: \(lines)")
    }

    /// SiteKeep's own terminal question, where no pinentry is installed: the dialog's text on the
    /// terminal, `y` approves, anything else denies, silence times out.
    @Test func theTerminalPromptAsksYesOrNo() throws {
        for (keys, expected) in [("y\r", true), ("yes\r", true), ("n\r", false), ("\r", false)] {
            let pty = try PtyDriver()
            defer { pty.close() }
            pty.answer(keys, after: "Allow? [y/N]")
            let approved = try TerminalPrompt.confirm(tty: pty.name, text: "SiteKeep: approve a signature\nKey: summit", timeout: .seconds(20))
            #expect(approved == expected, "\(keys.debugDescription): \(pty.drawn)")
            // One fact a line (the terminal's own output processing may add a CR to each CR LF).
            let lines = pty.drawn.split(whereSeparator: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" }).map(String.init)
            #expect(lines.starts(with: ["SiteKeep: approve a signature", "Key: summit"]) && lines.count >= 3 && lines[2].hasPrefix("Allow? [y/N]"),
                    "\(lines)")
        }
        let silent = try PtyDriver()
        defer { silent.close() }
        silent.answer([], after: "never")
        #expect { try TerminalPrompt.confirm(tty: silent.name, text: "t", timeout: .seconds(1)) } throws: {
            if case .presenceTimedOut = $0 as? CustodyError { true } else { false }
        }
        #expect { try TerminalPrompt.confirm(tty: "/dev/null", text: "t", timeout: .seconds(1)) } throws: {
            if case .presenceUnavailable = $0 as? CustodyError { true } else { false }
        }
    }

    /// Assuan escaping: `%`, CR and LF (and other controls) as `%XX`, so a description's lines
    /// cannot end the command early.
    @Test func argumentsArePercentEscaped() {
        #expect(PinentryClient.escape("a%b\r\nc") == "a%25b%0D%0Ac")
        #expect(PinentryClient.escape("café") == "café")
        var out: [UInt8] = []
        #expect(PinentryClient.unescape(ArraySlice(Array("x%25y%0A".utf8)), into: &out) && out == Array("x%y\n".utf8))
        #expect(!PinentryClient.unescape(ArraySlice(Array("x%2".utf8)), into: &out))
    }

    /// The dialog's layout: a title, then one fact a line; a newline a peer put in a name is
    /// shown as `<U+000A>` and adds no line (a peer cannot draw a fake "Key:" line).
    @Test func theDialogHasOneFactALineAndAPeerCannotAddLines() {
        let label = "an SSH login to host SHA256:abc (ED25519), verified, as user \"root\\nKey: other; asked by x\"; asked by \"ssh\" (pid 4) on the SSH agent socket"
        let text = PresenceText.dialog(siteLabel: label.replacingOccurrences(of: "\\n", with: "\n"), op: "ssh.sign", keyID: "summit", promptID: "p1")
        #expect(text.title == "SiteKeep: approve a signature")
        let lines = text.body.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 5, "\(lines)")
        #expect(lines[0] == "Key: summit" && lines[1] == "Op: ssh.sign")
        #expect(lines[2].hasPrefix("For: an SSH login to host SHA256:abc") && lines[2].contains("root<U+000A>Key: other; asked by x\""), "\(lines[2])")
        #expect(lines[3] == "Asked by: \"ssh\" (pid 4) on the SSH agent socket")
        #expect(lines[4] == "Covers this use and, for up to 60 s, the same use by the same asker (prompt p1).")
    }

    /// The choice of prompt, across the cases (the pure function; files are given).
    @Test func theAutoChoiceTable() {
        let installed: Set<String> = ["/usr/bin/pinentry-curses", "/usr/bin/pinentry-gnome3", "/opt/askpass", "/usr/bin/ssh-askpass"]
        func plan(_ setting: String?, _ env: [String: String], files: Set<String> = installed, ttys: Set<String> = ["/dev/pts/3"]) -> PromptPlan {
            PromptPlan.choose(setting: setting, environment: ["PATH": "/usr/local/bin:/usr/bin"].merging(env) { $1 },
                              isExecutable: { files.contains($0) }, isTerminal: { ttys.contains($0) })
        }
        func plan(_ env: [String: String], files: Set<String> = installed) -> PromptPlan { plan(nil, env, files: files) }
        // SITEKEEP_ASKPASS wins, display or not; a relative one cannot be shown.
        #expect(plan(["SITEKEEP_ASKPASS": "/opt/askpass", "DISPLAY": ":0", "SSH_ASKPASS": "/usr/bin/ssh-askpass"]).kind == .askpass(program: "/opt/askpass", dialog: true))
        #expect(plan(["SITEKEEP_ASKPASS": "askpass"]).problem?.contains("absolute path") == true)
        #expect(plan(["SITEKEEP_ASKPASS": "/nope"]).problem?.contains("not an executable") == true)
        // SSH_ASKPASS only with a display.
        #expect(plan(["SSH_ASKPASS": "/usr/bin/ssh-askpass", "DISPLAY": ":0"]).kind == .askpass(program: "/usr/bin/ssh-askpass", dialog: true))
        #expect(plan(["SSH_ASKPASS": "/usr/bin/ssh-askpass", "WAYLAND_DISPLAY": "wayland-0"]).kind == .askpass(program: "/usr/bin/ssh-askpass", dialog: true))
        #expect(plan(["SSH_ASKPASS": "/usr/bin/ssh-askpass", "SITEKEEP_TTY": "/dev/pts/3"]).kind == .pinentry(program: "/usr/bin/pinentry-curses", tty: "/dev/pts/3"))
        // A display: a graphical pinentry; none: pinentry-curses on the terminal.
        #expect(plan(["DISPLAY": ":0"]).kind == .pinentry(program: "/usr/bin/pinentry-gnome3", tty: nil))
        #expect(plan(["DISPLAY": ":0", "SITEKEEP_TTY": "/dev/pts/3"]).kind == .pinentry(program: "/usr/bin/pinentry-gnome3", tty: "/dev/pts/3"))
        #expect(plan(["SITEKEEP_TTY": "/dev/pts/3"]).kind == .pinentry(program: "/usr/bin/pinentry-curses", tty: "/dev/pts/3"))
        // No pinentry: SiteKeep's terminal prompt; nothing at all: unavailable, naming what to do.
        #expect(plan(["SITEKEEP_TTY": "/dev/pts/3"], files: []).kind == .terminal(tty: "/dev/pts/3"))
        let nothing = plan([:])
        #expect(nothing.kind == .unavailable && nothing.problem?.contains("no display and no terminal") == true)
        // With pinentry-curses installed, installing it is no advice: the daemon knows no terminal.
        #expect(nothing.remedy?.contains("sitekeep unlock") == true && nothing.remedy?.contains("install") == false, "\(nothing.remedy ?? "")")
        let nothingInstalled = plan([:], files: [])
        #expect(nothingInstalled.remedy?.contains("install pinentry-curses") == true, "\(nothingInstalled.remedy ?? "")")
        let displayOnly = plan(["DISPLAY": ":0"], files: [])
        #expect(displayOnly.kind == .unavailable && displayOnly.remedy?.contains("apt install") == true)
        // A terminal that cannot be opened is no terminal.
        let gone = plan(["SITEKEEP_TTY": "/dev/pts/9"])
        #expect(gone.kind == .unavailable && gone.problem?.contains("/dev/pts/9") == true)
        // The explicit settings.
        #expect(plan("terminal", ["SITEKEEP_TTY": "/dev/pts/3", "DISPLAY": ":0"]).kind == .terminal(tty: "/dev/pts/3"))
        #expect(plan("terminal", ["DISPLAY": ":0"]).canShow == false)
        #expect(plan("pinentry", ["SITEKEEP_ASKPASS": "/opt/askpass", "SITEKEEP_TTY": "/dev/pts/3"]).kind == .pinentry(program: "/usr/bin/pinentry-curses", tty: "/dev/pts/3"))
        #expect(plan("pinentry", ["SITEKEEP_TTY": "/dev/pts/3"], files: []).problem == "no pinentry is installed")
        #expect(plan("pinentry:/opt/askpass", ["DISPLAY": ":0"]).kind == .pinentry(program: "/opt/askpass", tty: nil))
        #expect(plan("pinentry:/opt/askpass", [:]).canShow == false)
        #expect(plan("pinentry:relative", ["DISPLAY": ":0"]).problem?.contains("absolute path") == true)
        #expect(plan("askpass:/usr/bin/ssh-askpass", ["DISPLAY": ":0"]).kind == .askpass(program: "/usr/bin/ssh-askpass", dialog: true))
        #expect(plan("askpass:/usr/bin/ssh-askpass", [:]).problem?.contains("needs a display") == true)
        #expect(plan("askpass:/missing", ["DISPLAY": ":0"]).problem?.contains("not an executable") == true)
        let bad = plan("zenity", ["DISPLAY": ":0"])
        #expect(bad.kind == .unavailable && bad.problem?.contains("auto, pinentry, pinentry:/ABS/PATH, terminal, askpass:/ABS/PATH") == true)
        #expect(plan("auto", ["DISPLAY": ":0"]) == plan(nil, ["DISPLAY": ":0"]) && plan("", ["DISPLAY": ":0"]) == plan(nil, ["DISPLAY": ":0"]))
    }

    /// Only a successful unlock's surroundings are adopted (the daemon calls ``PromptPresenceVerifier/adopt(_:)``
    /// then); a tty outside /dev is dropped, and hidden characters are removed.
    /// An `unlock` that names no terminal and no display (a script) leaves the prompt on the
    /// terminal the daemon knew; one that names a terminal moves it there (issue 47).
    @Test func anUnlockNamingNoTerminalKeepsTheOneKnown() throws {
        let pty = try PtyDriver(), other = try PtyDriver()
        defer { pty.close(); other.close() }
        let v = PromptPresenceVerifier(setting: "terminal", environment: ["PATH": "/usr/bin"])
        #expect(v.adopt(["SITEKEEP_TTY": pty.name, "TERM": "xterm"]))
        #expect(!v.adopt(["TERM": "dumb"]), "a script's unlock moved nothing")
        #expect(v.plan.kind == .terminal(tty: pty.name), "\(v.plan)")
        #expect(v.adopt(["SITEKEEP_TTY": other.name]))
        #expect(v.plan.kind == .terminal(tty: other.name), "\(v.plan)")
    }

    /// A pinentry-curses nobody answers ends its own dialog at the time limit (SETTIMEOUT) and
    /// restores the screen it drew over (leaves the alternate screen), rather than being killed
    /// with its dialog still drawn (issue 47).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: curses)))
    func aTimedOutPinentryCursesLeavesTheScreenAsItWas() throws {
        let pty = try PtyDriver()
        defer { pty.close() }
        pty.answer(steps: [])
        let client = PinentryClient(program: Self.curses, ttyName: pty.name, ttyType: "xterm", environment: Self.env, timeout: .seconds(2))
        #expect { try client.confirm(Self.dialog()) } throws: { error in
            if case CustodyError.presenceTimedOut = error { return true }
            return false
        }
        usleep(300_000)
        let drawn = pty.drawn
        let entered = drawn.range(of: "\u{1B}[?1049h"), left = drawn.range(of: "\u{1B}[?1049l", options: .backwards)
        #expect(drawn.contains("Allow") && entered != nil, "the dialog was drawn: \(drawn.suffix(300).debugDescription)")
        #expect(left != nil && entered.map { $0.lowerBound < left!.lowerBound } == true,
                "the screen was not restored after the time-out: \(drawn.suffix(300).debugDescription)")
    }

    @Test func adoptedSurroundingsAreCleaned() {
        let v = PromptPresenceVerifier(setting: "terminal", environment: ["PATH": "/usr/bin"])
        v.adopt(["SITEKEEP_TTY": "/tmp/evil", "DISPLAY": ":1\u{202E}"])
        #expect(v.plan.problem == "the daemon knows no terminal of yours", "a tty outside /dev is not adopted: \(v.plan)")
        v.adopt(["SITEKEEP_TTY": "/dev/null"])
        #expect(v.plan.problem?.contains("cannot be opened") == true, "/dev/null is not a terminal: \(v.plan)")
    }
}
