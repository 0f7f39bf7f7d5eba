/// One option a command accepts.
public struct OptionSpec: Sendable, Equatable {
    /// `--name` (long form, with the dashes).
    public let name: String
    /// A one-letter alias such as `-f`, if any.
    public let short: String?
    /// The value's placeholder (`DIR`, `PATH`), or nil for a flag.
    public let value: String?
    /// One line of help.
    public let help: String

    /// A flag (no value).
    public static func flag(_ name: String, short: String? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: nil, help: help)
    }
    /// An option with a value.
    public static func option(_ name: String, short: String? = nil, value: String, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: value, help: help)
    }
}

/// A positional argument.
public struct ArgumentSpec: Sendable, Equatable {
    public let name: String
    public let help: String
    public let optional: Bool
    /// Takes every remaining positional argument.
    public let variadic: Bool

    public init(_ name: String, _ help: String, optional: Bool = false, variadic: Bool = false) {
        self.name = name
        self.help = help
        self.optional = optional
        self.variadic = variadic
    }
}

/// A worked example shown in `--help` (and run by the test suite).
public struct CommandExample: Sendable, Equatable {
    /// The command line, starting with `sitekeep`.
    public let command: String
    /// What it does, in one line.
    public let explanation: String

    public init(_ command: String, _ explanation: String) {
        self.command = command
        self.explanation = explanation
    }
}

/// A leaf command: its words, its help and what it runs.
public struct CommandSpec: Sendable {
    /// The words after `sitekeep`, e.g. `["vault", "cat"]`.
    public let path: [String]
    /// One line for the command list.
    public let summary: String
    /// Paragraphs for `--help`.
    public let discussion: String
    public let arguments: [ArgumentSpec]
    public let options: [OptionSpec]
    /// Which of the shared secret-input options apply (`--passphrase-file`, `--prf-file`, `--key-file`).
    public let secretInputs: [SecretInputKind]
    /// At least one example.
    public let examples: [CommandExample]
    /// Whether the command prints data and so accepts `--json`.
    public let printsData: Bool
    /// The work. Throw ``UsageError`` for bad invocations, ``CommandFailure`` (or any error
    /// with a description) for failures.
    public let run: @Sendable (Invocation) async throws -> Void

    public init(
        path: [String], summary: String, discussion: String = "",
        arguments: [ArgumentSpec] = [], options: [OptionSpec] = [], secretInputs: [SecretInputKind] = [],
        examples: [CommandExample], printsData: Bool = true,
        run: @escaping @Sendable (Invocation) async throws -> Void
    ) {
        self.path = path
        self.summary = summary
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
        self.secretInputs = secretInputs
        self.examples = examples
        self.printsData = printsData
        self.run = run
    }

    /// `sitekeep vault cat`.
    public var commandLine: String { (["sitekeep"] + path).joined(separator: " ") }

    /// The synopsis line.
    public var usage: String {
        var parts = [commandLine]
        for a in arguments {
            let name = a.variadic ? "\(a.name)..." : a.name
            parts.append(a.optional ? "[\(name)]" : name)
        }
        if !options.isEmpty || !secretInputs.isEmpty { parts.append("[options]") }
        return parts.joined(separator: " ")
    }
}

/// The shared ways a command takes a secret. Secrets are never taken from argv.
public enum SecretInputKind: String, Sendable, CaseIterable {
    /// `--passphrase-file PATH` (`-` for stdin), else a prompt on the terminal without echo.
    case passphrase = "--passphrase-file"
    /// `--prf-file PATH`: 32 raw bytes or 64 hex characters.
    case prf = "--prf-file"
    /// `--key-file PATH`: a vault key or an imported team key.
    case key = "--key-file"
    /// `--tpm2`: a TPM 2.0 slot, with its PIN from `--pin-file PATH` or typed (`--pin`).
    case tpm2 = "--tpm2"
    /// `--fido2`: the plugged FIDO2 security key opens the PRF slot of a credential it holds
    /// (a touch), with its PIN from `--pin-file PATH` or typed (`--pin`) when it has one.
    case fido2 = "--fido2"

    var help: String {
        switch self {
        case .passphrase: "read the passphrase from PATH ('-' for stdin); default: prompt on the terminal"
        case .prf: "read the 32 WebAuthn PRF output bytes (raw, or 64 hex characters) from PATH ('-' for stdin)"
        case .key: "read the key from PATH ('-' for stdin); default: prompt on the terminal"
        case .tpm2: "unlock with a TPM 2.0 slot of this machine (the TPM checks the PIN, if the slot has one)"
        case .fido2: "unlock with the plugged FIDO2 security key (touch it when it blinks; its PIN, if it has one)"
        }
    }

    /// The options this way of giving a secret adds to a command (the PIN options of `--tpm2`
    /// and `--fido2` are added once, by ``CommandSpec/secretOptionSpecs``).
    var optionSpecs: [OptionSpec] {
        switch self {
        case .tpm2, .fido2: [.flag(rawValue, help)]
        default: [.option(rawValue, value: "PATH", help)]
        }
    }

    /// The PIN options of the hardware ways (`--tpm2`, `--fido2`).
    static let pinOptions: [OptionSpec] = [
        .option("--pin-file", value: "PATH", "with --tpm2 or --fido2: read the PIN (the TPM slot's, or the security key's) from PATH ('-' for stdin)"),
        .flag("--pin", "with --tpm2 or --fido2: type the PIN when asked"),
    ]
}

extension CommandSpec {
    /// The options the command's ``secretInputs`` add, the PIN options once.
    var secretOptionSpecs: [OptionSpec] {
        let own = secretInputs.flatMap(\.optionSpecs)
        guard secretInputs.contains(.tpm2) || secretInputs.contains(.fido2),
              !options.contains(where: { $0.name == "--pin-file" }) else { return own }
        return own + SecretInputKind.pinOptions
    }
}
