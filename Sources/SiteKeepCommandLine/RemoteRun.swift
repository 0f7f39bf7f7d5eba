#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepBridgeProtocol
internal import SiteKeepRunClient
internal import SiteKeepSystem
internal import SiteKeepJSON
internal import SiteKeepSocket
internal import SiteKeepDaemon

/// The command line as a client of its store's daemon.
///
/// When a daemon (`sitekeep serve`) runs for the store a command opens, the command runs
/// **inside the daemon**: this process sends its command line over the control socket (`run`,
/// ``ControlWire``), relays standard output and error, answers the daemon's prompts on its own
/// terminal and feeds it standard input, and exits with the daemon's exit status. It never opens
/// the keyring and never holds a key: the daemon's unlocked custodian does the work, as
/// `ssh-agent` or `gpg-agent` do for their clients. With no daemon for the store, the command
/// runs here and unlocks for itself.
///
/// Commands that manage the daemon or need no store run here always: see ``runsHere``.
enum RemoteRun {
    /// Commands that never go through the daemon (``RunClient/commandsRunHere``, the one list
    /// the `sitekeep` front end reads too).
    static var runsHere: Set<[String]> { RunClient.commandsRunHere }

    /// Option placeholders whose values are paths on this machine (made absolute before sending,
    /// since the daemon's working folder is not the client's).
    static let pathPlaceholders: Set<String> = ["PATH", "F", "FILE", "DIR"]
    /// Positional arguments that are a URL or a local path (a path is made absolute).
    static let pathOrURLArguments: Set<String> = ["URL", "SOURCE"]

    /// Runs `invocation` in its store's daemon when one serves that store; nil when none does
    /// (the caller then runs it here). Throws when a daemon listens but cannot be trusted, or
    /// refuses the command (locked, another version).
    ///
    /// The relay is ``RunClient``'s, the same the `sitekeep` front end uses: this is the path of
    /// a process that runs `sitekeep-main` itself (a host, a test, the front end after a refusal).
    static func forward(_ arguments: [String], _ invocation: Invocation) throws -> Int32? {
        guard !runsHere.contains(invocation.spec.path), invocation.environment["SITEKEEP_NO_DAEMON"] != "1" else { return nil }
        guard let storeID = StoreContext.storeID(home: invocation.settings.home),
              let path = try? DaemonSockets.control(environment: invocation.environment) else { return nil }
        // The daemon reads the command line with our working folder; name the store explicitly
        // too (already absolute), so it is the one resolved here whatever the environment says.
        let home = ["--home", invocation.settings.home]
        var argv = arguments
        if let dashes = argv.firstIndex(of: "--") { argv.insert(contentsOf: home, at: dashes) } else { argv += home }
        let outcome: RunClient.Outcome
        do {
            outcome = try RunClient.run(argv, workingDirectory: FileManager.default.currentDirectoryPath,
                                        environment: invocation.environment, store: storeID, socket: path, terminal: invocation.io)
        } catch {
            throw CommandFailure(error.description, remedy: error.remedy, code: error.code)
        }
        switch outcome {
        case .exited(let status): return status
        case .notServed: return nil
        case let .refused(code, message): throw CommandFailure(message, code: code)
        }
    }

    /// What the daemon runs for a client's `run`: `arguments` as typed, with local paths made
    /// absolute against the client's `cwd` and the daemon's own store named last; or why it
    /// refuses (``Refusal``): the command runs in its own process, or it names another store
    /// than `store` (the id of the one the daemon serves, in `home`).
    static func commandLine(_ arguments: [String], cwd: String, clientEnvironment: [String: String],
                            serving home: String, store: String) -> Result<[String], Refusal> {
        func naming(_ argv: [String]) -> [String] {
            var out = argv
            let named = ["--home", home]
            if let dashes = out.firstIndex(of: "--") { out.insert(contentsOf: named, at: dashes) } else { out += named }
            return out
        }
        guard let (found, parsed, help) = try? CommandLineTool.parse(arguments, environment: clientEnvironment, io: CapturedIO(),
                                                               commands: CommandRegistry.all),
              help == nil, let spec = found else {
            // Help or a usage error: the command prints it; no path or store is used.
            return .success(naming(arguments))
        }
        guard !runsHere.contains(spec.path) else {
            return .failure(Refusal(code: "runs_here", message: "'\(spec.commandLine)' runs in its own process, not inside the daemon"))
        }
        let absolute = commandLine(arguments, spec: spec, cwd: cwd)
        // The store the client means, resolved as the client would: its --home (now absolute),
        // else its environment; compared by store id, so two spellings of one folder agree.
        let explicit = parsed?.option("--home").map { absolutePath($0, cwd: cwd) }
        guard let meant = try? StoreHome.resolve(explicit: explicit, environment: clientEnvironment, workingDirectory: cwd),
              meant.storeID() == store else {
            return .failure(Refusal(code: "wrong_store", message: "this daemon serves the store in \(home), not the one the command names"))
        }
        return .success(naming(absolute))
    }

    /// Why the daemon does not run a client's command line.
    struct Refusal: Error, Equatable {
        let code: String
        let message: String
    }

    /// A path as the client meant it: relative ones against its working folder; `-` (standard
    /// input or output) and the empty word as they are.
    static func absolutePath(_ p: String, cwd: String) -> String {
        p == "-" || p.isEmpty || p.hasPrefix("/") ? p : cwd + "/" + p
    }

    /// `arguments` with local paths made absolute against `cwd` (the daemon's working folder is
    /// not the client's); command words and other values unchanged.
    static func commandLine(_ arguments: [String], spec: CommandSpec, cwd: String) -> [String] {
        let known = spec.options + spec.secretOptionSpecs + CommandLineTool.globalOptions
        func absolute(_ p: String) -> String { absolutePath(p, cwd: cwd) }
        var out: [String] = []
        var positional = 0
        var onlyPositionals = false
        // The words naming the command are not positionals; global options may come before them
        // (`sitekeep --home DIR vault cat …`).
        var i = 0
        var words = 0
        while i < arguments.count {
            let a = arguments[i]
            i += 1
            if !onlyPositionals, positional == 0, words < spec.path.count, a == spec.path[words] {
                out.append(a)
                words += 1
                continue
            }
            if onlyPositionals || !a.hasPrefix("-") || a == "-" {
                let spec = positional < spec.arguments.count ? spec.arguments[positional] : spec.arguments.last
                positional += 1
                if let spec, pathOrURLArguments.contains(spec.name), !a.contains("://"), !a.hasPrefix("static+") {
                    out.append(absolute(a))
                } else {
                    out.append(a)
                }
                continue
            }
            if a == "--" { onlyPositionals = true; out.append(a); continue }
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                let name = String(a[..<eq])
                let value = String(a[a.index(after: eq)...])
                let option = known.first { $0.name == name }
                out.append(option?.value.map(pathPlaceholders.contains) == true ? name + "=" + absolute(value) : a)
                continue
            }
            out.append(a)
            if let option = known.first(where: { $0.name == a || $0.short == a }), let placeholder = option.value, i < arguments.count {
                out.append(pathPlaceholders.contains(placeholder) ? absolute(arguments[i]) : arguments[i])
                i += 1
            }
        }
        return out
    }
}
