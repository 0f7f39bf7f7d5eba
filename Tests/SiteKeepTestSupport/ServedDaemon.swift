#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SiteKeepJSON

/// `sitekeep serve` (the built executable) on a test store, as a process of its own with a
/// private socket folder: started, waited for until its control socket is there, unlocked and
/// locked through the test target's own command line (its ``Tool``), and stopped by its pid.
public final class ServedDaemon: @unchecked Sendable {
    // @unchecked: used by one test at a time.
    /// The daemon's process id.
    public let pid: Int32
    /// Its bridge socket (`SITEKEEP_SOCK`); the control socket is beside it.
    public let sock: String
    /// The store's home.
    public let home: String
    private let tool: Tool?
    private var stopped = false

    /// How a test target runs its command line: the arguments and the variables to add to its
    /// environment in; its status and what it wrote out. (The command line's tests run it
    /// in-process, the daemon's tests run the built `sitekeep-main`.)
    public typealias Tool = @Sendable (_ arguments: [String], _ environment: [String: String]) async -> (status: Int32, out: String, err: String)

    /// Why a daemon did not start.
    public struct StartFailure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// Why an unlock or a lock through the daemon failed.
    public struct CommandFailure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// A daemon the caller started itself (its own command line or redirections), unlocked,
    /// locked and stopped like one ``start(home:run:userHome:extra:tool:)`` started.
    public init(adopting pid: Int32, sock: String, home: String, tool: Tool? = nil) {
        self.pid = pid
        self.sock = sock
        self.home = home
        self.tool = tool
    }

    /// ``start(home:run:userHome:extra:tool:)`` on `store`: its sockets in `run-TAG` of the
    /// store's folder, `HOME` the store's folder.
    public static func start(_ store: StoreFolder, _ extra: [String] = [], tag: String, tool: @escaping Tool) throws(StartFailure) -> ServedDaemon {
        try start(home: store.home, run: store.dir.appendingPathComponent("run-\(tag)").path, userHome: store.dir.path, extra: extra, tool: tool)
    }

    /// Starts `sitekeep serve --keyring file` plus `extra` on the store in `home`, its sockets in
    /// `run` (created by the daemon), `HOME` set to `userHome`; returns once its control socket
    /// is there. `tool` is the command line ``unlock(_:)`` and ``lock()`` run.
    /// - Throws: ``StartFailure`` when the executable is not built, does not start, or opens no
    ///   control socket within 60 s (it is then killed).
    public static func start(home: String, run: String, userHome: String, extra: [String] = [],
                             tool: Tool? = nil) throws(StartFailure) -> ServedDaemon {
        guard let sitekeep = BuiltProducts.sitekeep else { throw StartFailure(description: "build the sitekeep executable first (swift build)") }
        let sock = run + "/bridge.sock"
        let env = ["SITEKEEP_HOME=\(home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(userHome)", "NO_COLOR=1"]
        guard let pid = ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"] + extra, env: env) else {
            throw StartFailure(description: "cannot run \(sitekeep)")
        }
        let control = run + "/control.sock"
        guard ChildProcess.waitForPath(control, pid: pid) else {
            kill(pid, SIGKILL)
            var st: Int32 = 0
            waitpid(pid, &st, 0)
            throw StartFailure(description: "sitekeep serve did not open \(control) within 60 s (or exited)")
        }
        return ServedDaemon(adopting: pid, sock: sock, home: home, tool: tool)
    }

    /// `sitekeep unlock --passphrase-file PASS` through this daemon's socket.
    /// - Throws: ``CommandFailure`` when the command failed, or when it was not this daemon that
    ///   took the secret (a one-shot check of the secret because no daemon answered).
    public func unlock(_ pass: String) async throws(CommandFailure) {
        let r = try await run(["unlock", "--passphrase-file", pass, "--home", home, "--json"])
        guard r.status == 0 else { throw CommandFailure(description: "unlock: \(r.err)") }
        guard (try? JSONParser.parse(r.out)["daemon"]) == .bool(true) else {
            throw CommandFailure(description: "the unlock reached no daemon: \(r.out)")
        }
    }

    /// `sitekeep lock` through this daemon's socket.
    /// - Throws: ``CommandFailure`` when the command failed.
    public func lock() async throws(CommandFailure) {
        let r = try await run(["lock", "--home", home])
        guard r.status == 0 else { throw CommandFailure(description: "lock: \(r.err)") }
    }

    private func run(_ arguments: [String]) async throws(CommandFailure) -> (status: Int32, out: String, err: String) {
        guard let tool else { throw CommandFailure(description: "this daemon was started with no command line to drive it") }
        return await tool(arguments, ["SITEKEEP_SOCK": sock])
    }

    /// SIGTERM, then SIGKILL after 10 s; only once.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGTERM)
        var st: Int32 = 0
        for _ in 0..<200 { if waitpid(pid, &st, WNOHANG) == pid { return }; usleep(50_000) }
        kill(pid, SIGKILL)
        waitpid(pid, &st, 0)
    }
}
