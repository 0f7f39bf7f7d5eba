#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import Synchronization
internal import SiteKeepSystem
public import SiteKeepNames

/// Which prompt asks the user to approve a key use, chosen from the `prompt` setting and the
/// daemon's surroundings (its environment, and the terminal and display the last `unlock`
/// pointed it at). A pure function of its inputs, so every case is tested
/// (``choose(setting:environment:isExecutable:isTerminal:)``).
///
/// `auto` (or no setting) takes the first that works of: `$SITEKEEP_ASKPASS` (also run with
/// `SSH_ASKPASS_PROMPT=confirm`, its argument laid out for a dialog); `$SSH_ASKPASS` when
/// a display is set (run with `SSH_ASKPASS_PROMPT=confirm`, as `ssh-add -c` does); the system's
/// pinentry (`pinentry`, `pinentry-gnome3`, `pinentry-gtk-2`, `pinentry-qt` with a display,
/// `pinentry-curses` on the user's terminal without one); a terminal prompt on the user's
/// terminal; else none, with what to install or set.
public struct PromptPlan: Sendable, Equatable, CustomStringConvertible {
    /// The kind of prompt.
    public enum Kind: Sendable, Equatable {
        /// An askpass program; `dialog`: its argument laid out for a dialog, with
        /// `SSH_ASKPASS_PROMPT=confirm` (every askpass the daemon chooses), else the one-line
        /// argument (an ``AskpassPresenceVerifier`` made directly).
        case askpass(program: String, dialog: Bool)
        /// A pinentry over the Assuan protocol, on `tty` when it draws on a terminal.
        case pinentry(program: String, tty: String?)
        /// SiteKeep's own y/N question written to `tty`.
        case terminal(tty: String)
        /// No prompt can be shown.
        case unavailable
    }

    /// What will ask.
    public let kind: Kind
    /// How it was chosen, in a few words ("auto: $SSH_ASKPASS with a display").
    public let reason: String
    /// Why it cannot be shown now; nil when it can.
    public let problem: String?
    /// What to do about ``problem``.
    public let remedy: String?

    /// Whether a prompt can be shown now.
    public var canShow: Bool { problem == nil }

    public var description: String {
        let what: String = switch kind {
        case .askpass(let p, _): "askpass \(p)"
        case .pinentry(let p, let tty): "pinentry \(p)" + (tty.map { " on \($0)" } ?? " on the display")
        case .terminal(let tty): "a terminal prompt on \(tty)"
        case .unavailable: "none"
        }
        return "\(what) (\(reason))"
    }

    /// The environment names the daemon's prompts depend on: the user's terminal
    /// (`SITEKEEP_TTY`, its `TERM`) and display (`DISPLAY`, `WAYLAND_DISPLAY`, `XAUTHORITY`).
    public static let surroundingNames = ["SITEKEEP_TTY", "TERM", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY"]
    /// The pinentries tried with a display, in order.
    public static let graphicalPinentries = ["pinentry", "pinentry-gnome3", "pinentry-gtk-2", "pinentry-gtk2", "pinentry-qt", "pinentry-x11"]
    /// The pinentries tried on a terminal, in order.
    public static let terminalPinentries = ["pinentry-curses", "pinentry"]

    /// The setting's forms: `auto`, `pinentry`, `pinentry:/ABS/PATH`, `terminal`, `askpass:/ABS/PATH`.
    public static let settingForms = "auto, pinentry, pinentry:/ABS/PATH, terminal, askpass:/ABS/PATH"

    /// Chooses the prompt.
    /// - Parameters:
    ///   - setting: the `prompt` setting; nil means `auto`.
    ///   - environment: the daemon's environment with its adopted surroundings (`PATH`,
    ///     `SITEKEEP_ASKPASS`, `SSH_ASKPASS`, ``surroundingNames``).
    ///   - isExecutable: whether a path names an executable regular file.
    ///   - isTerminal: whether a path names a terminal the daemon can open for writing.
    public static func choose(setting: String?, environment: [String: String], isExecutable: (String) -> Bool,
                              isTerminal: (String) -> Bool) -> PromptPlan {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let display = value("WAYLAND_DISPLAY") ?? value("DISPLAY")
        let tty = value("SITEKEEP_TTY")
        let ttyProblem: String? = tty.map { isTerminal($0) ? nil : "the terminal \(printable($0)) cannot be opened" } ?? nil
        let usableTTY = ttyProblem == nil ? tty : nil
        func locate(_ names: [String]) -> String? {
            for name in names {
                for folder in (value("PATH") ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where folder.hasPrefix("/") {
                    let candidate = "\(folder)/\(name)"
                    if isExecutable(candidate) { return candidate }
                }
            }
            return nil
        }
        let noWhere = "the daemon knows no display and no terminal of yours"
        let noWhereRemedy = "run 'sitekeep unlock' from your terminal or desktop session (the daemon then asks there), "
            + "or set SITEKEEP_ASKPASS for the daemon"
        func program(_ path: String, _ what: String, kind: (String) -> Kind, reason: String) -> PromptPlan {
            guard path.hasPrefix("/") else {
                return PromptPlan(kind: .unavailable, reason: reason, problem: "\(what) must be an absolute path, got '\(printable(path))'",
                                  remedy: "give the program's absolute path")
            }
            guard isExecutable(path) else {
                return PromptPlan(kind: kind(path), reason: reason, problem: "\(what) \(printable(path)) is not an executable file",
                                  remedy: "install it, chmod +x it, or choose another prompt (sitekeep config set prompt auto)")
            }
            return PromptPlan(kind: kind(path), reason: reason, problem: nil, remedy: nil)
        }
        func pinentry(_ reason: String) -> PromptPlan? {
            if display != nil, let p = locate(graphicalPinentries) {
                return PromptPlan(kind: .pinentry(program: p, tty: usableTTY), reason: reason + " with a display", problem: nil, remedy: nil)
            }
            if let usableTTY, let p = locate(terminalPinentries) {
                return PromptPlan(kind: .pinentry(program: p, tty: usableTTY), reason: reason + " on your terminal", problem: nil, remedy: nil)
            }
            return nil
        }
        let setting = setting.flatMap { $0.isEmpty ? nil : $0 } ?? "auto"
        switch setting {
        case "auto":
            if let askpass = value("SITEKEEP_ASKPASS") {
                // Laid out for a dialog too, with SSH_ASKPASS_PROMPT=confirm: ssh-askpass given as
                // SITEKEEP_ASKPASS cut the one long line at both ends and showed a passphrase field.
                return program(askpass, "SITEKEEP_ASKPASS", kind: { .askpass(program: $0, dialog: true) }, reason: "auto: $SITEKEEP_ASKPASS")
            }
            if display != nil, let askpass = value("SSH_ASKPASS") {
                return program(askpass, "SSH_ASKPASS", kind: { .askpass(program: $0, dialog: true) }, reason: "auto: $SSH_ASKPASS with a display")
            }
            if let found = pinentry("auto: the system's pinentry") { return found }
            if let usableTTY {
                return PromptPlan(kind: .terminal(tty: usableTTY), reason: "auto: no pinentry installed", problem: nil, remedy: nil)
            }
            if display != nil {
                return PromptPlan(kind: .unavailable, reason: "auto",
                                  problem: "no pinentry is installed and SSH_ASKPASS is not set, so nothing can ask on the display",
                                  remedy: "install a pinentry (Debian: apt install pinentry-gnome3 or pinentry-gtk2), or set SSH_ASKPASS")
            }
            return PromptPlan(kind: .unavailable, reason: "auto", problem: ttyProblem ?? noWhere,
                              remedy: noWhereRemedy + "; install pinentry-curses for a terminal dialog")
        case "pinentry":
            if let found = pinentry("pinentry") { return found }
            let installed = locate(graphicalPinentries + terminalPinentries) != nil
            return PromptPlan(kind: .unavailable, reason: "pinentry",
                              problem: !installed ? "no pinentry is installed" : (display == nil ? (ttyProblem ?? noWhere) : "no graphical pinentry is installed"),
                              remedy: !installed || display != nil ? "install one (Debian: apt install pinentry-curses pinentry-gnome3)" : noWhereRemedy)
        case "terminal":
            if let usableTTY { return PromptPlan(kind: .terminal(tty: usableTTY), reason: "terminal", problem: nil, remedy: nil) }
            return PromptPlan(kind: .unavailable, reason: "terminal", problem: ttyProblem ?? "the daemon knows no terminal of yours",
                              remedy: "run 'sitekeep unlock' from your terminal (the daemon then asks there)")
        default:
            if setting.hasPrefix("pinentry:") {
                let path = String(setting.dropFirst("pinentry:".count))
                let plan = program(path, "the pinentry", kind: { .pinentry(program: $0, tty: usableTTY) }, reason: "pinentry:PATH")
                guard plan.canShow else { return plan }
                guard display != nil || usableTTY != nil else {
                    return PromptPlan(kind: plan.kind, reason: plan.reason, problem: ttyProblem ?? noWhere, remedy: noWhereRemedy)
                }
                return plan
            }
            if setting.hasPrefix("askpass:") {
                let path = String(setting.dropFirst("askpass:".count))
                let plan = program(path, "the askpass program", kind: { .askpass(program: $0, dialog: true) }, reason: "askpass:PATH")
                guard plan.canShow else { return plan }
                guard display != nil else {
                    return PromptPlan(kind: plan.kind, reason: plan.reason, problem: "an askpass dialog needs a display and the daemon knows none",
                                      remedy: "run 'sitekeep unlock' from your desktop session, or choose another prompt")
                }
                return plan
            }
            return PromptPlan(kind: .unavailable, reason: "setting '\(printable(setting))'",
                              problem: "the prompt setting '\(printable(setting))' is not one of: \(settingForms)",
                              remedy: "sitekeep config set prompt auto")
        }
    }

    /// The plan for this machine now: live file checks over ``choose(setting:environment:isExecutable:isTerminal:)``.
    public static func current(setting: String?, environment: [String: String]) -> PromptPlan {
        choose(setting: setting, environment: environment, isExecutable: { path in
            var st = stat()
            return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
        }, isTerminal: { path in
            let fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            return isatty(fd) == 1
        })
    }

    static func printable(_ s: String) -> String { PresenceText.escaped(s, limit: 200) }
}

/// The daemon's one presence verifier: asks through the prompt the `prompt` setting and the
/// surroundings choose (``PromptPlan``) at each request, so a terminal or display adopted after
/// an `unlock` is used from the next prompt on.
public final class PromptPresenceVerifier: PresenceVerifier {
    /// The `prompt` setting (nil: auto).
    public var setting: String? { chosen.withLock { $0 } }
    private let chosen: Mutex<String?>
    private let environment: Mutex<[String: String]>
    /// Held while one prompt is shown: prompts come one at a time, as gpg-agent shows one
    /// pinentry at a time (two `pinentry-curses` drawing on one terminal garble each other, and
    /// two dialogs at once leave the user to guess which request each is for).
    private let asking = Mutex(())
    private let timeout: Duration
    private let clock: BootClock

    /// - Parameters:
    ///   - setting: the `prompt` setting; nil is `auto`.
    ///   - environment: the daemon's environment (its `SITEKEEP_TTY` or, failing that,
    ///     `GPG_TTY` names the user's terminal).
    public init(setting: String?, environment: [String: String], timeout: Duration = .seconds(60), clock: BootClock = .system) {
        chosen = Mutex(setting)
        var env = environment
        // The user's terminal: SITEKEEP_TTY, else GPG_TTY, else the daemon's own (`serve` at a terminal).
        if env["SITEKEEP_TTY"]?.isEmpty ?? true {
            if let gpg = env["GPG_TTY"], gpg.hasPrefix("/dev/") { env["SITEKEEP_TTY"] = gpg }
            else if isatty(0) == 1, let name = ttyname(0) { env["SITEKEEP_TTY"] = String(cString: name) }
        }
        self.environment = Mutex(env)
        self.timeout = timeout
        self.clock = clock
    }

    /// Points later prompts at the terminal and display in `surroundings` (the names of
    /// ``PromptPlan/surroundingNames``; an absent name is cleared). The daemon calls this only
    /// after a successful `unlock`, so only the holder of the secret can choose where prompts go.
    public func adopt(_ surroundings: [String: String]) {
        environment.withLock { env in
            for name in PromptPlan.surroundingNames {
                let v = surroundings[name].map { String($0.unicodeScalars.prefix(512).filter { !PresenceText.isHidden($0) }) }
                env[name] = (v?.isEmpty ?? true) ? nil : v
            }
            if let tty = env["SITEKEEP_TTY"], !tty.hasPrefix("/dev/") { env["SITEKEEP_TTY"] = nil }
        }
    }

    /// Asks through the prompt `setting` chooses from the next request on. The daemon calls this
    /// only for a value whose tag it checked at an unlock (a `prompt` setting other than `auto`
    /// widens trust, so it applies only with its tag).
    public func use(setting: String?) { chosen.withLock { $0 = setting } }

    /// The prompt the next request would use.
    public var plan: PromptPlan { PromptPlan.current(setting: setting, environment: environment.withLock { $0 }) }

    public func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }

    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try asking.withLock { (_: inout ()) throws(CustodyError) -> PresenceProof in
            try ask(client: client, siteLabel: siteLabel, op: op, keyID: keyID)
        }
    }

    /// Shows one prompt (the caller holds ``asking``).
    private func ask(client asker: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        let env = environment.withLock { $0 }
        let plan = PromptPlan.current(setting: setting, environment: env)
        if let problem = plan.problem {
            throw .presenceUnavailable(problem + (plan.remedy.map { "; \($0)" } ?? ""))
        }
        switch plan.kind {
        case .askpass(let program, let dialog):
            var extra = env
            if dialog { extra["SSH_ASKPASS_PROMPT"] = "confirm" }
            let askpass = try AskpassPresenceVerifier(program: program, timeout: timeout, clock: clock, environment: extra, dialog: dialog)
            return try askpass.requestPresence(client: asker, siteLabel: siteLabel, op: op, keyID: keyID)
        case .pinentry(let program, let tty):
            let promptID = PresenceProof.newPromptID()
            let text = PresenceText.dialog(siteLabel: siteLabel, op: op, keyID: keyID, promptID: promptID)
            var childEnv = env
            childEnv["SITEKEEP_TTY"] = nil
            let client = PinentryClient(program: program, ttyName: tty, ttyType: tty == nil ? nil : (env["TERM"] ?? "xterm"),
                                        environment: childEnv.map { "\($0.key)=\($0.value)" }, timeout: timeout)
            // The title leads the description too: a pinentry without a window manager (or on a
            // terminal) shows no window title.
            guard try client.confirm(PinentryClient.Dialog(title: text.title, description: text.title + "\n" + text.body)) else { throw .presenceDenied }
            return PresenceProof(client: asker, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: clock.nanoseconds(), promptID: promptID)
        case .terminal(let tty):
            let promptID = PresenceProof.newPromptID()
            let text = PresenceText.dialog(siteLabel: siteLabel, op: op, keyID: keyID, promptID: promptID)
            guard try TerminalPrompt.confirm(tty: tty, text: text.title + "\n" + text.body, timeout: timeout) else { throw .presenceDenied }
            return PresenceProof(client: asker, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: clock.nanoseconds(), promptID: promptID)
        case .unavailable:
            throw .presenceUnavailable("no prompt is configured")
        }
    }
}

/// SiteKeep's own question on a terminal, where no pinentry is installed: the text, then
/// `Allow? [y/N]`; `y` or `yes` approves, anything else (or no answer in time) does not.
public enum TerminalPrompt {
    /// Writes `text` to `tty` and reads one answer line (at most 64 bytes).
    /// - Returns: whether the user answered yes.
    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when the terminal cannot be opened,
    ///   ``CustodyError/presenceTimedOut(seconds:)`` when no answer comes within `timeout`.
    public static func confirm(tty: String, text: String, timeout: Duration) throws(CustodyError) -> Bool {
        let fd = open(tty, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0, isatty(fd) == 1 else {
            if fd >= 0 { close(fd) }
            throw .presenceUnavailable("cannot open the terminal \(PresenceText.escaped(tty, limit: 200))")
        }
        defer { close(fd) }
        let shown = "\r\n" + text.replacingNewlines() + "\r\nAllow? [y/N] "
        _ = Array(shown.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let deadline = Clocks.monotonicNow() + timeout
        var answer: [UInt8] = []
        while answer.count < 64 {
            let left = deadline - Clocks.monotonicNow()
            guard left > .zero else {
                _ = Array("\r\n(no answer; denied)\r\n".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                throw .presenceTimedOut(seconds: Int(timeout.components.seconds))
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(clamping: left.components.seconds * 1000 + 1)
            let ready = poll(&pfd, 1, min(ms, 1000))
            guard ready > 0 else { continue }
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { throw .presenceUnavailable("the terminal closed before an answer") }
            if byte == 0x0a || byte == 0x0d { break }
            answer.append(byte)
        }
        let word = String(decoding: answer, as: UTF8.self).trimmedAnswer().lowercased()
        return word == "y" || word == "yes"
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        var out = ""
        for c in unicodeScalars { if c == "\n" { out += "\r\n" } else { out.unicodeScalars.append(c) } }
        return out
    }

    fileprivate func trimmedAnswer() -> String {
        String(String.UnicodeScalarView(unicodeScalars.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()))
    }
}
