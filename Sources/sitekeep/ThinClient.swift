#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepBridgeProtocol
import SiteKeepRunClient
import SiteKeepSecureMemory
import SiteKeepSystem

/// `sitekeep`: the front end people and scripts run.
///
/// While a daemon (`sitekeep serve`) serves the store a command names, the command runs inside
/// it: this small program sends the command line over the control socket and relays its output,
/// prompts and input (``RunClient``), and exits with the daemon's status. It links no Foundation,
/// no SQLite and no custody, so it starts in the time a shell needs to run `true`: what makes
/// "unlock once, then work" as quick as `ssh-agent`. Otherwise — no daemon for this store, a
/// command that runs in its own process (`init`, `serve`, `unlock`, `status`, ...), or
/// `SITEKEEP_NO_DAEMON=1` — it `exec`s the whole command line tool, `sitekeep-main`, installed
/// beside it, with the same arguments.
@main
struct ThinClient {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let environment = ProcessEnvironment.current()
        // Socket activation (LISTEN_FDS) is `serve`: the passed sockets go through exec untouched.
        guard environment["SITEKEEP_NO_DAEMON"] != "1", environment["LISTEN_FDS"] == nil, !RunClient.runsHere(arguments),
              let socket = try? DaemonSockets.control(environment: environment), exists(socket),
              let cwd = ProcessEnvironment.workingDirectory(),
              let home = try? StoreHome.resolve(explicit: homeArgument(arguments), environment: environment, workingDirectory: cwd),
              let store = home.storeID() else { runAlone(arguments, environment) }
        // The hardening guarded memory needs (this process links no OpenSSL, so it has no
        // OpenSSL secure heap to set up: a relayed secret lives in libsodium's guarded memory).
        do {
            try MemoryHardening.apply()
        } catch {
            runMain(arguments)   // the whole tool reports what is wrong with this process
        }
        do {
            switch try RunClient.run(arguments, workingDirectory: cwd, environment: environment,
                                     store: store, socket: socket, terminal: ProcessTerminal()) {
            case .exited(let status): exit(status)
            // A refusal (locked, another version) is reported by the whole tool, which forwards
            // again and prints it as every command prints errors (text or --json).
            case .notServed: runAlone(arguments, environment)
            case .refused: runMain(arguments)
            }
        } catch {
            runMain(arguments)
        }
    }

    /// A command with no daemon to run it: the plain one-shot `vault cat` in `sitekeep-read`
    /// (``OneShotCatRequest``), when it is installed here; anything else in the whole tool.
    /// Never returns.
    static func runAlone(_ arguments: [String], _ environment: [String: String]) -> Never {
        if environment["LISTEN_FDS"] == nil, OneShotCatRequest(arguments) != nil, SiblingExecutable.exists("sitekeep-read") {
            _ = SiblingExecutable.exec("sitekeep-read", arguments: arguments)   // returns only if it cannot run
        }
        runMain(arguments)
    }

    /// The last `--home DIR` or `--home=DIR` before `--`. A hint for finding the store's id:
    /// the daemon reads the command line again with its command table and refuses it when it
    /// names another store.
    static func homeArgument(_ arguments: [String]) -> String? {
        var home: String?
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--" { break }
            if a == "--home", i + 1 < arguments.count { home = arguments[i + 1]; i += 2; continue }
            if a.hasPrefix("--home=") { home = String(a.dropFirst("--home=".count)) }
            i += 1
        }
        return home
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Replaces this process with `sitekeep-main` beside this executable (same arguments, same
    /// environment, same pid); never returns.
    static func runMain(_ arguments: [String]) -> Never {
        SiblingExecutable.execWholeTool(arguments)
    }
}
