import Foundation
public import SiteKeepCrypto
public import SiteKeepJSON

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

    // MARK: Secrets

    /// Reads a secret for `kind`: from its file option (`-` = stdin) or a terminal prompt.
    /// Never from argv. The returned bytes are in guarded memory.
    public func readSecret(_ kind: SecretInputKind, prompt: String, confirm: Bool = false) throws -> SecretBytes {
        var bytes = try readSecretBytes(kind, prompt: prompt, confirm: confirm)
        defer { SecureMemory.zero(&bytes) }
        guard !bytes.isEmpty else {
            throw CommandFailure("the \(kind.noun) is empty", remedy: "give a non-empty \(kind.noun)", code: "bad_secret")
        }
        return try SecretBytes(copying: bytes)
    }

    /// Reads the 32 PRF output bytes from `--prf-file` (raw bytes or 64 hex characters).
    public func readPRF() throws -> SecretBytes {
        guard let path = option(SecretInputKind.prf.rawValue) else {
            throw UsageError("this needs --prf-file PATH (32 raw bytes or 64 hex characters, '-' for stdin)", command: spec.commandLine)
        }
        return try PRFInput.read(path, io: io)
    }

    private func readSecretBytes(_ kind: SecretInputKind, prompt: String, confirm: Bool) throws -> [UInt8] {
        if let path = option(kind.rawValue) {
            var raw: [UInt8]
            if path == "-" {
                raw = try io.readStandardInput(limit: 64 * 1024)
            } else {
                raw = try SecretFile.read(path, what: kind.noun)
            }
            if kind != .prf {
                // A trailing newline from `echo` or an editor is not part of the secret.
                if raw.last == 0x0a { raw.removeLast() }
                if raw.last == 0x0d { raw.removeLast() }
            }
            return raw
        }
        guard io.canPrompt, kind != .prf else {
            throw CommandFailure("no \(kind.noun) given and no terminal to ask on",
                                 remedy: "pass \(kind.rawValue) PATH, or \(kind.rawValue) - to read it from standard input",
                                 code: "no_secret")
        }
        var first = try io.promptSecret(prompt)
        if confirm {
            var second = try io.promptSecret("Again: ")
            defer { SecureMemory.zero(&second) }
            guard ConstantTime.equals(first, second) else {
                SecureMemory.zero(&first)
                throw CommandFailure("the two entries differ", remedy: "run the command again", code: "bad_secret")
            }
        }
        return first
    }
}

extension SecretInputKind {
    var noun: String {
        switch self {
        case .passphrase: "passphrase"
        case .prf: "PRF output"
        case .key: "key"
        }
    }
}

/// Reading secrets from files: bounded, and a warning-free refusal of what cannot be a secret file.
enum SecretFile {
    static func read(_ path: String, what: String) throws -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CommandFailure("cannot read the \(what) file \(path): \(String(cString: strerror(errno)))",
                                 remedy: "check the path", code: "no_secret")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG || (info.st_mode & S_IFMT) == S_IFIFO || (info.st_mode & S_IFMT) == S_IFCHR else {
            throw CommandFailure("the \(what) file \(path) is not a regular file", remedy: "give a file or '-' for stdin", code: "no_secret")
        }
        guard info.st_size <= 64 * 1024 else {
            throw CommandFailure("the \(what) file \(path) is larger than 64 KiB", remedy: "check the path", code: "bad_secret")
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CommandFailure("cannot open the \(what) file \(path)", remedy: "check its permissions", code: "no_secret")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: 64 * 1024 + 1)) ?? Data()
        guard data.count <= 64 * 1024 else {
            throw CommandFailure("the \(what) file \(path) is larger than 64 KiB", remedy: "check the path", code: "bad_secret")
        }
        return [UInt8](data)
    }
}
