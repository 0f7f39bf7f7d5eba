#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import Synchronization
internal import SiteKeepSystem
public import SiteKeepNames
package import SiteKeepCrypto

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
            // Installing a pinentry is advice only where none is installed: with one there, the
            // cause is that the daemon knows no terminal of the user's.
            return PromptPlan(kind: .unavailable, reason: "auto", problem: ttyProblem ?? noWhere,
                              remedy: noWhereRemedy + (locate(terminalPinentries) == nil ? "; install pinentry-curses for a terminal dialog" : ""))
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
///
/// A request whose process is known (the ssh-agent's peer) and whose own terminal is not where
/// the prompt is shown gets, at once, one line on that terminal naming where to answer
/// (``notice(to:plan:unlocking:)``); the question itself is never put there, since a process
/// that controls its terminal could answer it.
public final class PromptPresenceVerifier: PresenceVerifier, UnlockPrompt {
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
    ///
    /// An unlock that names neither a terminal nor a display (a script, a service) changes
    /// nothing: the terminal and display the daemon knew stay where prompts go.
    /// - Returns: whether the prompts moved (the surroundings named a terminal or a display).
    @discardableResult
    public func adopt(_ surroundings: [String: String]) -> Bool {
        let names = ["SITEKEEP_TTY", "DISPLAY", "WAYLAND_DISPLAY"]
        guard names.contains(where: { !(surroundings[$0]?.isEmpty ?? true) }) else { return false }
        environment.withLock { env in
            for name in PromptPlan.surroundingNames {
                let v = surroundings[name].map { String($0.unicodeScalars.prefix(512).filter { !PresenceText.isHidden($0) }) }
                env[name] = (v?.isEmpty ?? true) ? nil : v
            }
            if let tty = env["SITEKEEP_TTY"], !tty.hasPrefix("/dev/") { env["SITEKEEP_TTY"] = nil }
        }
        return true
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
        try requestPresence(client: client, siteLabel: siteLabel, op: op, keyID: keyID, askerPID: nil)
    }

    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?, askerPID: Int32?) throws(CustodyError) -> PresenceProof {
        try asking.withLock { (_: inout ()) throws(CustodyError) -> PresenceProof in
            try ask(client: client, siteLabel: siteLabel, op: op, keyID: keyID, askerPID: askerPID)
        }
    }

    /// Asks for an unlock secret (`ask`: the passphrase, a TPM PIN, the security key's PIN) on
    /// the prompt an approval would use: a pinentry's `GETPIN`, or SiteKeep's own question
    /// without echo on the user's terminal. An askpass program only approves, so it cannot ask
    /// (``CustodyError/presenceUnavailable(_:)``).
    package func requestUnlockSecret(_ ask: UnlockAsk, client: KeyUseClient, label: String, askerPID: Int32?, attempt: Int) throws(CustodyError) -> SecretBytes? {
        try asking.withLock { (_: inout ()) throws(CustodyError) -> SecretBytes? in
            let env = environment.withLock { $0 }
            let plan = PromptPlan.current(setting: setting, environment: env)
            if let problem = plan.problem {
                throw .presenceUnavailable(problem + (plan.remedy.map { "; \($0)" } ?? ""))
            }
            let (noun, field) = Self.words(ask)
            let again = attempt > 1 ? "That \(noun) was wrong; try again (\(attempt) of \(Custodian.unlockOnUseTries)).\n" : ""
            let touch = ask == .securityKeyPIN ? ", then touch the key when it blinks" : ""
            let body = again + "SiteKeep is locked. A key use waits for it:\n"
                + PresenceText.labelParts(PresenceText.escaped(label, limit: PresenceText.labelLimit)).joined(separator: "\n")
                + "\nGive the \(noun) to unlock SiteKeep\(touch); the use is then asked for on its own."
            let title = "SiteKeep: unlock to use a key"
            switch plan.kind {
            case .pinentry(let program, let tty):
                notice(to: askerPID, plan: plan, unlocking: noun)
                var childEnv = env
                childEnv["SITEKEEP_TTY"] = nil
                let pinentry = PinentryClient(program: program, ttyName: tty, ttyType: tty == nil ? nil : (env["TERM"] ?? "xterm"),
                                              environment: childEnv.map { "\($0.key)=\($0.value)" }, timeout: timeout)
                return try pinentry.getPin(PinentryClient.Dialog(title: title, description: title + "\n" + body, ok: "Unlock",
                                                                 cancel: "Cancel", prompt: field + ":"))
            case .terminal(let tty):
                notice(to: askerPID, plan: plan, unlocking: noun)
                return try TerminalPrompt.readSecret(tty: tty, text: title + "\n" + body, prompt: field + ": ", timeout: timeout)
            case .askpass:
                throw .presenceUnavailable("an askpass program approves but cannot ask for the unlock \(noun); run 'sitekeep unlock'")
            case .unavailable:
                throw .presenceUnavailable("no prompt is configured")
            }
        }
    }

    /// How a prompt names `ask`: in a sentence, and as the field's label.
    static func words(_ ask: UnlockAsk) -> (noun: String, field: String) {
        switch ask {
        case .passphrase: ("passphrase", "Passphrase")
        case .tpmPIN: ("TPM PIN", "TPM PIN")
        case .securityKeyPIN: ("security key's PIN", "Security key PIN")
        }
    }

    /// Says that a touch of the security key now unlocks SiteKeep for a key use: on the
    /// terminal the prompts ask on, and on the asker's own terminal (a touch is given on the
    /// key, so no process can give it there). With a graphical prompt the key's blink is the cue.
    package func announceUnlockTouch(askerPID: Int32?) {
        let env = environment.withLock { $0 }
        let plan = PromptPlan.current(setting: setting, environment: env)
        let line = "SiteKeep is locked: touch the security key when it blinks to unlock it; the key use is then asked for on its own"
        let askerTTY = askerPID.flatMap { ControllingTerminal.of(pid: $0) }
        if let askerTTY { ControllingTerminal.notify(askerTTY, line: line) }
        if let promptTTY = Self.terminal(of: plan, environment: env), promptTTY != askerTTY {
            ControllingTerminal.notify(promptTTY, line: line)
        }
    }

    /// Where the prompt `plan` shows, for a notice: the terminal it draws on, or nil for a
    /// dialog on the display.
    static func terminal(of plan: PromptPlan, environment env: [String: String]) -> String? {
        let display = !(env["WAYLAND_DISPLAY"] ?? "").isEmpty || !(env["DISPLAY"] ?? "").isEmpty
        switch plan.kind {
        case .terminal(let tty): return tty
        case .pinentry(let program, let tty):
            // A graphical pinentry (chosen with a display) draws its own window.
            let name = program.split(separator: "/").last.map(String.init) ?? program
            return display && name != "pinentry-curses" ? nil : tty
        case .askpass, .unavailable: return nil
        }
    }

    /// The one-line notice to the terminal of the process `askerPID` (when it has one of the
    /// user's, ``ControllingTerminal``) that the prompt `plan` asks elsewhere, naming where and
    /// how to move it: "SiteKeep: approve on pts/1, or run `sitekeep unlock` here to answer
    /// here". Nothing is written when the prompt is on that very terminal; the question is never
    /// written there by this.
    /// `unlocking`: what the prompt asks to unlock (`passphrase`), nil for an approval.
    func notice(to askerPID: Int32?, plan: PromptPlan, unlocking: String?) {
        guard let askerPID, let askerTTY = ControllingTerminal.of(pid: askerPID) else { return }
        let env = environment.withLock { $0 }
        let promptTTY = Self.terminal(of: plan, environment: env)
        if let promptTTY, promptTTY == askerTTY { return }
        let place = promptTTY.map { "on " + ControllingTerminal.shortName($0) } ?? "in the dialog on your desktop"
        let what = unlocking.map { "SiteKeep is locked: give the \($0) \(place)" } ?? "SiteKeep: approve \(place)"
        ControllingTerminal.notify(askerTTY, line: what + ", or run `sitekeep unlock` here to answer here")
    }

    /// Shows one prompt (the caller holds ``asking``).
    private func ask(client asker: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?, askerPID: Int32?) throws(CustodyError) -> PresenceProof {
        let env = environment.withLock { $0 }
        let plan = PromptPlan.current(setting: setting, environment: env)
        if let problem = plan.problem {
            throw .presenceUnavailable(problem + (plan.remedy.map { "; \($0)" } ?? ""))
        }
        notice(to: askerPID, plan: plan, unlocking: nil)
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

extension TerminalPrompt {
    /// Writes `text` and `prompt` to `tty` and reads one line with echo off (at most 1024
    /// bytes), restoring the terminal's modes after; the typed bytes go straight into guarded
    /// memory and every buffer that held them is wiped.
    /// - Returns: the bytes typed, or nil for an empty line (the user declined).
    /// - Throws: as ``confirm(tty:text:timeout:)``.
    package static func readSecret(tty: String, text: String, prompt: String, timeout: Duration) throws(CustodyError) -> SecretBytes? {
        let fd = open(tty, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0, isatty(fd) == 1 else {
            if fd >= 0 { close(fd) }
            throw .presenceUnavailable("cannot open the terminal \(PresenceText.escaped(tty, limit: 200))")
        }
        defer { close(fd) }
        var saved = termios()
        let haveModes = tcgetattr(fd, &saved) == 0
        if haveModes {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        }
        defer {
            if haveModes { _ = tcsetattr(fd, TCSAFLUSH, &saved) }
            _ = Array("\r\n".utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
        let shown = "\r\n" + text.replacingNewlines() + "\r\n" + prompt
        _ = Array(shown.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let deadline = Clocks.monotonicNow() + timeout
        var typed: [UInt8] = []
        typed.reserveCapacity(1024)
        defer { SecureMemory.zero(&typed) }
        while true {
            let left = deadline - Clocks.monotonicNow()
            guard left > .zero else { throw .presenceTimedOut(seconds: Int(timeout.components.seconds)) }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(clamping: left.components.seconds * 1000 + 1)
            guard poll(&pfd, 1, min(ms, 1000)) > 0 else { continue }
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1 else { throw .presenceUnavailable("the terminal closed before an answer") }
            if byte == 0x0a || byte == 0x0d { break }
            guard typed.count < 1024 else { throw .presenceUnavailable("the passphrase typed is longer than 1024 bytes") }
            typed.append(byte)
            byte = 0
        }
        guard !typed.isEmpty else { return nil }
        do { return try SecretBytes(consumingAndZeroing: &typed) } catch {
            throw .presenceUnavailable("no guarded memory for the answer")
        }
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
