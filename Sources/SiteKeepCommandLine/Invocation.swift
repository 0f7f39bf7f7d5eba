import Foundation
public import SiteKeepCrypto
public import SiteKeepJSON
internal import SiteKeepCustody

/// Settings every command shares, from global options and the environment.
public struct GlobalSettings: Sendable, Equatable {
    /// The store's root: `--home`, else `$SITEKEEP_HOME`, else `$XDG_DATA_HOME/sitekeep`,
    /// else `~/.local/share/sitekeep`.
    public var home: String
    /// `--keyring auto|secret-service|file` (default `auto`, or `$SITEKEEP_KEYRING`).
    public var keyring: String
    /// `--json`.
    public var json: Bool
    /// Colour on: a terminal, no `NO_COLOR`, no `--no-color`.
    public var color: Bool
}

/// One parsed command line, handed to a command's `run`.
public struct Invocation: Sendable {
    public let spec: CommandSpec
    public let settings: GlobalSettings
    public let environment: [String: String]
    public let io: any ToolIO
    let values: [String: [String]]
    let flags: Set<String>
    /// Positional arguments, in order.
    public let arguments: [String]
    /// The daemon's open store, when this command runs inside the daemon (``RemoteSession``).
    var hosted: StoreContext?
    /// Who asked the daemon to run this command (`sitekeep (pid 4242)`, from the control
    /// connection's `SO_PEERCRED`): named in the presence prompt of a key use it asks for.
    var client: String?

    /// The value of a positional by its spec name (`NAME`), or nil if absent.
    public func argument(_ name: String) -> String? {
        guard let index = spec.arguments.firstIndex(where: { $0.name == name }) else { return nil }
        if spec.arguments[index].variadic { return nil }
        return index < arguments.count ? arguments[index] : nil
    }

    /// A required positional.
    public func requiredArgument(_ name: String) throws(UsageError) -> String {
        guard let v = argument(name) else { throw UsageError("missing \(name)", command: spec.commandLine) }
        return v
    }

    /// The variadic tail starting at the spec's variadic argument.
    public func remainingArguments(from name: String) -> [String] {
        guard let index = spec.arguments.firstIndex(where: { $0.name == name }), index < arguments.count else { return [] }
        return Array(arguments[index...])
    }

    /// The last value given for `--name`, or nil.
    public func option(_ name: String) -> String? { values[name]?.last }
    /// Every value given for a repeatable `--name`.
    public func options(_ name: String) -> [String] { values[name] ?? [] }
    /// Whether the flag `--name` was given.
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// An integer option within bounds, or the default.
    public func intOption(_ name: String, default defaultValue: Int, range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let text = option(name) else { return defaultValue }
        guard let v = Int(text), range.contains(v) else {
            throw UsageError("\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), got '\(text)'", command: spec.commandLine)
        }
        return v
    }

    // MARK: Output

    /// Prints data: JSON with `--json`, else the human rendering.
    public func emit(_ json: JSONValue, human: () -> String) {
        if settings.json {
            io.write(JSONSerializer.string(json, style: .pretty) + "\n")
        } else {
            let text = human()
            if !text.isEmpty { io.write(text.hasSuffix("\n") ? text : text + "\n") }
        }
    }

    /// Prints a line for people (nothing with `--json`).
    public func say(_ text: String) {
        if !settings.json { io.write(text + "\n") }
    }

    /// Prints a note to stderr (progress, warnings); never data.
    public func note(_ text: String) { io.writeError(text + "\n") }

    /// Styles text for a terminal when colour is on.
    public func style(_ text: String, _ style: TextStyle) -> String {
        settings.color ? style.apply(text) : text
    }

    /// Runs `work`, showing a spinner with `label` on a terminal when it takes long.
    public func withProgress<R: Sendable>(_ label: String, _ work: @Sendable () throws -> R) rethrows -> R {
        guard io.errorIsTerminal, !settings.json else { return try work() }
        let spinner = Spinner(label: label, io: io)
        spinner.start()
        defer { spinner.stop() }
        return try work()
    }

    // MARK: Confirmation

    /// Asks before the command destroys something that cannot be brought back, as `pass rm` and
    /// `gpg --delete-secret-key` do: with `--yes` it goes ahead; on a terminal the user must type
    /// `expected` (the site's name, the key's id); without a terminal it refuses, naming `--yes`.
    /// - Parameters:
    ///   - what: what goes, for people ("the site Web Summit and all its data").
    ///   - noun: what to type ("the site's name").
    func confirmDestruction(_ what: String, typing expected: String, noun: String) throws {
        if flag(Self.yes.name) { return }
        guard io.canPrompt else {
            throw CommandFailure("\(spec.commandLine) destroys \(what) and cannot be undone, and there is no terminal to confirm on",
                                 remedy: "pass --yes to confirm in a script", code: "not_confirmed")
        }
        io.writeError("This destroys \(what); it cannot be undone.\n")
        let typed = try io.promptLine("Type \(noun) (\(expected)) to confirm, or anything else to stop: ")
        guard typed.trimmingCharacters(in: .whitespaces) == expected else {
            throw CommandFailure("not confirmed (the answer was not \(expected)); nothing was removed",
                                 remedy: "run it again and type \(expected), or pass --yes", code: "not_confirmed")
        }
    }

    /// `--yes`: the flag every destructive command takes.
    static let yes = OptionSpec.flag("--yes", short: "-y", "do not ask; needed to confirm without a terminal (scripts)")

    // MARK: Secrets

    /// Reads the secret `source` names: from its option's file (`-` = stdin), else, when
    /// `prompt` is given and there is a terminal, from a prompt without echo (twice with
    /// `confirm`). Never from argv. Every secret the command line takes goes through here, by
    /// one rule (``SecretReader``), straight into guarded memory.
    func secret(_ source: SecretSource, prompt: String?, confirm: Bool = false) throws -> SecretBytes {
        if let path = option(source.option) { return try SecretReader.read(source, path: path, io: io) }
        if let prompt, !io.canPrompt, !confirm, source == .passphrase, hosted == nil, let typed = try PinentryPassphrase.ask(prompt, environment: environment) {
            return typed
        }
        guard let prompt, io.canPrompt else {
            throw CommandFailure("no \(source.noun) given and no terminal to ask on",
                                 remedy: "pass \(source.option) PATH, or \(source.option) - to read it from standard input",
                                 code: "no_secret")
        }
        return try SecretReader.prompt(source, prompt: prompt, confirm: confirm, io: io)
    }

    /// Reads a secret for `kind`: from its file option (`-` = stdin) or a terminal prompt.
    /// Never from argv. The returned bytes are in guarded memory (see ``SecretReader`` for the rule).
    public func readSecret(_ kind: SecretInputKind, prompt: String, confirm: Bool = false) throws -> SecretBytes {
        try secret(kind.source, prompt: kind == .prf ? nil : prompt, confirm: confirm)
    }

    /// Reads the 32 PRF output bytes from `--prf-file` (raw bytes or 64 hex characters).
    public func readPRF() throws -> SecretBytes {
        guard option(SecretInputKind.prf.rawValue) != nil else {
            throw UsageError("this needs --prf-file PATH (32 raw bytes or 64 hex characters, '-' for stdin)", command: spec.commandLine)
        }
        return try secret(.prf, prompt: nil)
    }
}

extension SecretInputKind {
    /// The reader's description of this option.
    var source: SecretSource {
        switch self {
        case .passphrase: .passphrase
        case .prf: .prf
        case .key: .key
        case .tpm2, .fido2: .pin
        }
    }
}

/// A passphrase asked through the desktop's pinentry (`GETPIN`), where a command has no terminal
/// but a display: `sitekeep unlock` from a desktop launcher, as gpg-agent asks.
enum PinentryPassphrase {
    /// The typed passphrase in guarded memory; nil when there is no display or no graphical
    /// pinentry (the caller then says there is no terminal to ask on).
    /// - Throws: ``CommandFailure`` `cancelled` when the user cancels, or the pinentry's failure.
    static func ask(_ prompt: String, environment: [String: String]) throws -> SecretBytes? {
        var env = environment
        env["SITEKEEP_TTY"] = nil
        env["GPG_TTY"] = nil
        let plan = PromptPlan.current(setting: "pinentry", environment: env)
        guard plan.canShow, case .pinentry(let program, nil) = plan.kind else { return nil }
        let client = PinentryClient(program: program, environment: env.map { "\($0.key)=\($0.value)" }, timeout: .seconds(120))
        let dialog = PinentryClient.Dialog(title: "SiteKeep: unlock", description: "Unlock the SiteKeep store (no terminal to ask on).",
                                           ok: "Unlock", cancel: "Cancel", prompt: prompt.trimmingCharacters(in: .whitespaces))
        let answer: SecretBytes?
        do throws(CustodyError) { answer = try client.getPin(dialog) } catch {
            throw CommandFailure("cannot ask for the passphrase: \(error)", remedy: "pass --passphrase-file PATH ('-' for stdin), or run it at a terminal",
                                 code: "no_secret")
        }
        switch consume answer {
        case .some(let typed): return typed
        case .none: throw CommandFailure("cancelled in the pinentry; nothing was unlocked", code: "cancelled")
        }
    }
}
