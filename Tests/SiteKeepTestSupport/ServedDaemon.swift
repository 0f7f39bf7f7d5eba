#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// `sitekeep serve` (the built executable) on a test store, as a process of its own with a
/// private socket folder: started, waited for until its control socket is there, and stopped
/// by its pid. Each test target unlocks and locks it through its own command line.
public final class ServedDaemon: @unchecked Sendable {
    // @unchecked: used by one test at a time.
    /// The daemon's process id.
    public let pid: Int32
    /// Its bridge socket (`SITEKEEP_SOCK`); the control socket is beside it.
    public let sock: String
    /// The store's home.
    public let home: String
    private var stopped = false

    /// Why a daemon did not start.
    public struct StartFailure: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// A daemon the caller started itself (its own command line or redirections), stopped by
    /// ``stop()`` like one ``start(home:run:userHome:extra:)`` started.
    public init(adopting pid: Int32, sock: String, home: String) { self.pid = pid; self.sock = sock; self.home = home }

    /// Starts `sitekeep serve --keyring file` plus `extra` on the store in `home`, its sockets in
    /// `run` (created by the daemon), `HOME` set to `userHome`; returns once its control socket
    /// is there.
    /// - Throws: ``StartFailure`` when the executable is not built, does not start, or opens no
    ///   control socket within 60 s (it is then killed).
    public static func start(home: String, run: String, userHome: String, extra: [String] = []) throws(StartFailure) -> ServedDaemon {
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
        return ServedDaemon(adopting: pid, sock: sock, home: home)
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
