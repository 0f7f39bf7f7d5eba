#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import Synchronization
import SiteKeepSystem
internal import SiteKeepHardening
internal import SiteKeepKeyring
internal import SiteKeepJSON
internal import SiteKeepDaemon
internal import SiteKeepPartitions

/// The `sitekeep` command line: global options, a tree of subcommands, help, exit statuses.
///
/// Conventions every command follows: `--help` on every command (with an example), `--json`
/// on every command that prints data, usage errors on stderr with exit status 64, other
/// failures exit 1 with a message that names the problem and the fix, and secrets never
/// taken from argv (a terminal prompt without echo, a file, or stdin via `-`).
public enum CommandLineTool {
    /// The global options, accepted before or after the command words.
    public static let globalOptions: [OptionSpec] = [
        .option("--home", value: "DIR", "the store's root (default $SITEKEEP_HOME, else $XDG_DATA_HOME/sitekeep)"),
        .option("--keyring", value: "auto|secret-service|file", "where wrapped keys live (default auto)"),
        .flag("--json", "machine-readable output"),
        .flag("--no-color", "no colour even on a terminal (NO_COLOR does the same)"),
        .flag("--help", short: "-h", "show help for the command"),
    ]

    /// Whether this process is the `sitekeep` executable (``processMain()``), not a host or a test
    /// running commands in-process: only then may `unlock` start a daemon from this binary.
    static var isCommandLineProcess: Bool { commandLineProcess.load(ordering: .relaxed) }
    private static let commandLineProcess = Atomic<Bool>(false)

    /// Options that would put a secret in argv; refused with a pointer to the file form.
    static let forbiddenSecretOptions: [String: String] = [
        "--passphrase": "--passphrase-file PATH (or - for stdin)",
        "--password": "--passphrase-file PATH (or - for stdin)",
        "--prf": "--prf-file PATH",
        "--key": "--key-file PATH (or - for stdin)",
        "--recovery-code": "the prompt or --key-file PATH",
    ]

    /// The process entry point: hardening first, then the command.
    /// Work that must happen on the main thread before any task or thread starts. The
    /// executable's `main` calls it first, synchronously.
    ///
    /// The daemon waits for SIGTERM/SIGINT with `sigwait`: they must be blocked in every thread,
    /// so they are blocked here, on the main thread, before any other thread exists to inherit
    /// an unblocked mask (otherwise the signal kills the daemon mid-request).
    public static func prepareProcess(arguments: [String]) {
        if leadingGlobalOptions(Array(arguments.dropFirst())).rest.first == "serve" {
            TerminationSignals.block()
        }
    }

    public static func main() async {
        exit(await processMain())
    }

    /// Hardening, then the command line of this process; returns the exit status.
    public static func processMain() async -> Int32 {
        commandLineProcess.store(true, ordering: .relaxed)
        do {
            try ProcessHardening.apply()
        } catch {
            FileHandle.standardError.write(Data("sitekeep: cannot start: \(error)\n".utf8))
            return ExitStatus.failure.rawValue
        }
        return await run(arguments: Array(CommandLine.arguments.dropFirst()),
                         environment: ProcessInfo.processInfo.environment, io: StandardIO())
    }

    /// Runs one command line and returns its exit status. Testable: pass a ``CapturedIO``.
    ///
    /// When a daemon serves the command's store, a key-using command runs inside it
    /// (``RemoteRun``) and this returns the daemon's exit status.
    public static func run(arguments: [String], environment: [String: String], io: any ToolIO,
                           commands: [CommandSpec] = CommandRegistry.all) async -> Int32 {
        await run(arguments: arguments, environment: environment, io: io, commands: commands, hosted: nil, client: nil)
    }

    /// ``run(arguments:environment:io:commands:)`` inside the daemon: `hosted` is the daemon's
    /// open store, which the command uses instead of opening its own.
    static func run(arguments: [String], environment: [String: String], io: any ToolIO,
                    commands: [CommandSpec] = CommandRegistry.all, hosted: StoreContext?, client: String? = nil) async -> Int32 {
        let wantsJSON = arguments.contains("--json")
        do {
            let (spec, parsed, help) = try parse(arguments, environment: environment, io: io, commands: commands)
            if let help {
                io.write(help)
                return ExitStatus.success.rawValue
            }
            guard spec != nil, var invocation = parsed else { return ExitStatus.success.rawValue }
            if let hosted {
                // Only what a client would forward runs here: never serve, init, unlock or the
                // other commands that manage the daemon or stand alone (a raw `run` could ask).
                guard !RemoteRun.runsHere.contains(invocation.spec.path) else {
                    throw CommandFailure("'\(invocation.spec.commandLine)' does not run inside the daemon", remedy: "run it in its own process", code: "bad_request")
                }
                invocation.hosted = hosted
                invocation.client = client
            } else if let status = try RemoteRun.forward(arguments, invocation) {
                return status
            }
            try await invocation.spec.run(invocation)
            return ExitStatus.success.rawValue
        } catch let error as UsageError {
            if wantsJSON {
                io.writeError(JSONSerializer.string(["error": ["code": "usage", "message": .string(error.message)]]) + "\n")
            } else {
                io.writeError("sitekeep: \(error.message)\n")
                io.writeError("Run '\(error.command ?? "sitekeep") --help' for usage.\n")
            }
            return ExitStatus.usage.rawValue
        } catch let failure as CommandFailure {
            report(code: failure.code, problem: failure.problem, remedy: failure.remedy, json: wantsJSON, io: io)
            return ExitStatus.failure.rawValue
        } catch PartitionError.invalidOrigin(let why) {
            // An origin that is not one is a malformed argument: a usage error (64), as the others.
            report(code: "invalid_origin", problem: "invalid origin: \(why)", remedy: nil, json: wantsJSON, io: io)
            return ExitStatus.usage.rawValue
        } catch let coded as any CodedError {
            report(code: coded.code, problem: coded.description, remedy: coded.remedy, json: wantsJSON, io: io)
            return ExitStatus.failure.rawValue
        } catch {
            report(code: "failed", problem: String(describing: error), remedy: nil, json: wantsJSON, io: io)
            return ExitStatus.failure.rawValue
        }
    }

    static func report(code: String, problem: String, remedy: String?, json: Bool, io: any ToolIO) {
        if json {
            var error: [JSONMember] = [JSONMember(key: "code", value: .string(code)), JSONMember(key: "message", value: .string(problem))]
            if let remedy { error.append(JSONMember(key: "remedy", value: .string(remedy))) }
            io.writeError(JSONSerializer.string(.object([JSONMember(key: "error", value: .object(error))])) + "\n")
        } else {
            io.writeError("error: \(problem)\n")
            if let remedy { io.writeError("hint: \(remedy)\n") }
        }
    }

    /// Global options given before the command words (`sitekeep --home DIR status`, as `git -C`
    /// does), split off: `leading` holds them with their values, `rest` starts at the command.
    /// `--help` is not taken (it asks for the help of what follows, or of everything).
    static func leadingGlobalOptions(_ arguments: [String]) -> (leading: [String], rest: [String]) {
        var k = 0
        while k < arguments.count {
            let a = arguments[k]
            let name = a.hasPrefix("--") ? String(a.split(separator: "=", maxSplits: 1)[0]) : a
            guard let option = globalOptions.first(where: { $0.name == name }), option.name != "--help" else { break }
            k += 1
            if option.value != nil && !a.contains("=") {
                guard k < arguments.count else { break }
                k += 1
            }
        }
        return (Array(arguments[..<k]), Array(arguments[k...]))
    }

    /// Splits argv into the command, its options and positionals. Returns help text instead
    /// when `--help`/`help` was asked for.
    static func parse(_ argv: [String], environment: [String: String], io: any ToolIO,
                      commands: [CommandSpec]) throws -> (CommandSpec?, Invocation?, String?) {
        let (leading, arguments) = leadingGlobalOptions(argv)
        if let last = leading.last, let option = globalOptions.first(where: { $0.name == last }), option.value != nil, arguments.isEmpty {
            throw UsageError("\(option.name) needs a value (\(option.value!))", command: "sitekeep")
        }
        // Words before the first option or non-command word select the command.
        var words: [String] = []
        var rest: [String] = []
        var i = 0
        var helpAsked = false
        if arguments.first == "help" { helpAsked = true; i = 1 }
        while i < arguments.count {
            let a = arguments[i]
            if a.hasPrefix("-") { break }
            let candidate = words + [a]
            if commands.contains(where: { $0.path.starts(with: candidate) }) {
                words = candidate
                i += 1
            } else {
                break
            }
        }
        // Leading global options go first, so a `--` among the rest cannot make them positionals.
        rest = leading + Array(arguments[i...])
        if rest.contains("--help") || rest.contains("-h") { helpAsked = true }

        let spec = commands.first { $0.path == words }
        if helpAsked {
            if let spec { return (nil, nil, Help.command(spec)) }
            // The top level is a short usage, as git's; every command under `help --all`.
            if words.isEmpty, !rest.contains("--all") { return (nil, nil, Help.short(commands: commands)) }
            return (nil, nil, Help.group(words, commands: commands))
        }
        guard let spec else {
            let tail = rest.dropFirst(leading.count)
            if words.isEmpty, tail.isEmpty {
                throw UsageError("no command given\n\n" + Help.short(commands: commands), command: "sitekeep")
            }
            if words.isEmpty, let first = tail.first {
                if first == "--version" || first == "-v" || first == "-V" { return (nil, nil, "sitekeep \(SiteKeepVersion.current)\n") }
                // One quoting style for every unknown word: the word as typed, in single quotes.
                throw UsageError(first.hasPrefix("-") ? "unknown option '\(first)' before a command" : "unknown command '\(first)'" + suggestion(first, among: commands.map { $0.path[0] }),
                                 command: "sitekeep")
            }
            let group = (["sitekeep"] + words).joined(separator: " ")
            if let next = tail.first, !next.hasPrefix("-") {
                let options = Set(commands.filter { $0.path.starts(with: words) && $0.path.count > words.count }.map { $0.path[words.count] })
                throw UsageError("unknown command '\(next)' in '\(group)'" + suggestion(next, among: Array(options)), command: group)
            }
            throw UsageError("'\(group)' needs a subcommand\n\n" + Help.group(words, commands: commands), command: group)
        }

        // Options and positionals.
        let known = spec.options + spec.secretOptionSpecs + globalOptions
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var positionals: [String] = []
        var j = 0
        var onlyPositionals = false
        while j < rest.count {
            let a = rest[j]
            if onlyPositionals || !a.hasPrefix("-") || a == "-" {
                positionals.append(a)
                j += 1
                continue
            }
            if a == "--" { onlyPositionals = true; j += 1; continue }
            var name = a
            var inline: String? = nil
            if let eq = a.firstIndex(of: "="), a.hasPrefix("--") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            if let fix = forbiddenSecretOptions[name] {
                throw UsageError("secrets are never taken from the command line (they would show in `ps` and shell history); use \(fix)", command: spec.commandLine)
            }
            guard let option = known.first(where: { $0.name == name || ($0.short != nil && $0.short == name) }) else {
                throw UsageError("unknown option '\(name)'" + suggestion(name, among: known.map(\.name)), command: spec.commandLine)
            }
            if option.value != nil {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard j + 1 < rest.count else { throw UsageError("\(option.name) needs a value (\(option.value!))", command: spec.commandLine) }
                    value = rest[j + 1]
                    j += 1
                }
                values[option.name, default: []].append(value)
            } else {
                guard inline == nil else { throw UsageError("\(option.name) takes no value", command: spec.commandLine) }
                flags.insert(option.name)
            }
            j += 1
        }
        // Standard input can be read once: refuse two file options that both name it.
        // (Every option whose value is a file: PATH, or F.)
        let fromStandardInput = known.filter { ($0.value == "PATH" || $0.value == "F") && values[$0.name]?.last == "-" }.map(\.name)
        if fromStandardInput.count > 1 {
            throw UsageError("only one input may be standard input ('-'), but \(fromStandardInput.joined(separator: " and ")) each name it; give all but one as files",
                             command: spec.commandLine)
        }
        if flags.contains("--json") && !spec.printsData {
            throw UsageError("\(spec.commandLine) prints no data, so --json does not apply", command: spec.commandLine)
        }
        let required = spec.arguments.filter { !$0.optional && !$0.variadic }.count
        let variadic = spec.arguments.contains { $0.variadic }
        if positionals.count < required {
            let missing = spec.arguments.filter { !$0.optional }[positionals.count]
            throw UsageError("missing \(missing.name) (\(missing.help))", command: spec.commandLine)
        }
        if !variadic && positionals.count > spec.arguments.count {
            throw UsageError("unexpected argument '\(positionals[spec.arguments.count])'", command: spec.commandLine)
        }

        let settings = try resolveSettings(values: values, flags: flags, environment: environment, io: io, spec: spec)
        let invocation = Invocation(spec: spec, settings: settings, environment: environment, io: io,
                                    values: values, flags: flags, arguments: positionals)
        return (spec, invocation, nil)
    }

    static func resolveSettings(values: [String: [String]], flags: Set<String>, environment: [String: String],
                                io: any ToolIO, spec: CommandSpec) throws -> GlobalSettings {
        // The one resolution rule (StoreHome.resolve); a relative --home or SITEKEEP_HOME is
        // relative to the working folder, and the store records absolute paths.
        let home: String
        do {
            home = try StoreHome.resolve(explicit: values["--home"]?.last, environment: environment,
                                         workingDirectory: FileManager.default.currentDirectoryPath).path
        } catch {
            let why = error.message
            if values["--home"] != nil { throw UsageError(why, command: spec.commandLine) }
            throw CommandFailure("cannot tell where the store lives: \(why)", remedy: "pass --home DIR or set SITEKEEP_HOME")
        }
        let keyring = values["--keyring"]?.last ?? environment["SITEKEEP_KEYRING"] ?? "auto"
        guard ["auto", "secret-service", "file"].contains(keyring) else {
            throw UsageError("--keyring must be auto, secret-service or file, not '\(keyring)'", command: spec.commandLine)
        }
        let noColor = flags.contains("--no-color") || (environment["NO_COLOR"].map { !$0.isEmpty } ?? false) || environment["TERM"] == "dumb"
        return GlobalSettings(home: home, keyring: keyring, json: flags.contains("--json"),
                              color: io.outputIsTerminal && !noColor)
    }

    /// " (did you mean 'x'?)" when a near match exists.
    static func suggestion(_ word: String, among candidates: [String]) -> String {
        let best = candidates.map { ($0, editDistance($0, word)) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= max(2, word.count / 3) else { return "" }
        return " (did you mean '\(best.0)'?)"
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// The version of this build.
public enum SiteKeepVersion {
    public static let current = "0.1.0"
}
