import Foundation
import Testing
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A test store's own daemon, as the suites that drive one through the real `sitekeep` share it:
/// a private socket folder (`run/`, named by `SITEKEEP_SOCK`, no autostart, no
/// `XDG_RUNTIME_DIR`), the real executable with no terminal, and an askpass that writes each
/// prompt to `prompts` on one line and approves, always or only while the file `allow` exists.
/// Stopped by its pid.
class PrivateDaemon: @unchecked Sendable {
    let store: CLIStore
    let sitekeep: String
    let run: String
    let env: [String: String]
    var daemon: pid_t = 0

    init(store: CLIStore) throws {
        sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        self.store = store
        run = store.dir.appendingPathComponent("run").path
        env = ["SITEKEEP_SOCK": run + "/bridge.sock", "SITEKEEP_HOME": store.home, "SITEKEEP_KEYRING": "file",
               "HOME": store.dir.path, "NO_COLOR": "1", "SITEKEEP_NO_AUTOSTART": "", "XDG_RUNTIME_DIR": ""]
    }

    /// Runs the real `sitekeep` with no terminal and standard input from `stdin`.
    func cli(_ args: [String], stdin: String = "", extra: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
        ChildProcess.capture(sitekeep, args, stdin: stdin, environment: env.merging(extra) { $1 })
    }

    /// Each prompt the daemon's askpass was shown (a dialog's lines, joined on one line).
    var prompts: [String] { ((try? String(contentsOfFile: store.dir.path + "/prompts", encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }

    /// Whether the askpass approves (with `onlyWhenAllowed`).
    func approve(_ yes: Bool) {
        let path = store.dir.path + "/allow"
        if yes { _ = FileManager.default.createFile(atPath: path, contents: Data()) } else { unlink(path) }
    }

    /// Starts `sitekeep serve ARGS` with the recording askpass and waits for its control socket.
    func startDaemon(_ args: [String] = [], onlyWhenAllowed: Bool = false) throws {
        let d = store.dir.path
        let answer = onlyWhenAllowed ? "[ -f '\(d)/allow' ] && exit 0\nexit 1\n" : "exit 0\n"
        let askpass = try store.file("askpass.sh", Array("#!/bin/sh\nprintf '%s\\n' \"$1\" | tr '\\n' ' ' >> '\(d)/prompts'\necho >> '\(d)/prompts'\n\(answer)".utf8))
        chmod(askpass, 0o700)
        let envList = env.merging(["SITEKEEP_ASKPASS": askpass]) { $1 }.map { "\($0.key)=\($0.value)" }
        daemon = try #require(ChildProcess.spawn(sitekeep, ["serve"] + args, env: envList))
        #expect(ChildProcess.waitForPath(run + "/control.sock"), "the daemon's control socket did not appear")
        try #require(FileManager.default.fileExists(atPath: run + "/control.sock"), "the daemon did not start")
    }

    /// SIGTERM, up to 5 s for a clean stop, then SIGKILL.
    func stop() {
        guard daemon > 0 else { return }
        kill(daemon, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<200 { if waitpid(daemon, &status, WNOHANG) == daemon { break }; usleep(25_000) }
        kill(daemon, SIGKILL)
        daemon = 0
    }
    deinit { stop() }
}
