#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Runs a program and waits for it, with `posix_spawn` and `waitpid` (Foundation's `Process`
/// can hang in `waitUntilExit` inside the test runner here).
public enum ChildProcess {
    /// Waits until `path` exists (a daemon's socket, bound then listened on), for at most
    /// `seconds`: false on the deadline, or as soon as the process `pid` (when given) has exited.
    /// The deadline is generous on purpose: on two loaded cores a daemon can take many seconds to
    /// start, and a caller that went on without its socket would test something else.
    public static func waitForPath(_ path: String, pid: Int32? = nil, seconds: Double = 60) -> Bool {
        var start = timespec(), now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        while true {
            if access(path, F_OK) == 0 { return true }
            if let pid, kill(pid, 0) != 0 || isZombie(pid) { return false }
            clock_gettime(CLOCK_MONOTONIC, &now)
            if Double(now.tv_sec - start.tv_sec) + Double(now.tv_nsec - start.tv_nsec) / 1e9 > seconds { return false }
            usleep(20_000)
        }
    }

    /// Whether `pid` (a child of this process) has exited and not been reaped yet.
    private static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
    }

    /// Runs `path` with `arguments` (no shell), standard streams inherited; returns the exit
    /// status, or 128 + signal when killed.
    public static func run(_ path: String, _ arguments: [String], environment: [String]? = nil) -> Int32 {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envStrings = environment ?? []
        let envp: [UnsafeMutablePointer<CChar>?] = envStrings.map { strdup($0) } + [nil]
        defer { envp.forEach { free($0) } }
        let rc = environment == nil
            ? posix_spawn(&pid, path, nil, nil, argv, environ)
            : posix_spawn(&pid, path, nil, nil, argv, envp)
        guard rc == 0 else { return 127 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Starts `path` with `arguments` (no shell) and exactly the environment `env` (`NAME=value`
    /// strings), standard streams inherited; its pid (the caller waits for it), or nil when it
    /// could not start.
    public static func spawn(_ path: String, _ arguments: [String], env: [String]) -> Int32? {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        return posix_spawn(&pid, path, nil, nil, argv, envp) == 0 ? pid : nil
    }

    /// Runs `path` with `arguments` (no shell) with `stdin` as its standard input, this
    /// process's environment plus `environment`, and returns its status and what it wrote to
    /// standard output and standard error.
    public static func capture(_ path: String, _ arguments: [String], stdin: String? = nil,
                               environment: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
        capture(path, arguments, input: Array((stdin ?? "").utf8), environment: environment)
    }

    /// As ``capture(_:_:stdin:environment:)`` with the bytes `input` as standard input; without
    /// `inheritingEnvironment`, the program gets `environment` alone, none of this process's
    /// variables.
    public static func capture(_ path: String, _ arguments: [String], input: [UInt8], environment: [String: String] = [:],
                               inheritingEnvironment: Bool = true) -> (status: Int32, out: String, err: String) {
        let dir = FileManager.default.temporaryDirectory.path + "/sk-capture-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = FileManager.default.createFile(atPath: dir + "/in", contents: Data(input))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, dir + "/in", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, dir + "/out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, dir + "/err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var env = inheritingEnvironment ? ProcessInfo.processInfo.environment : [:]
        env.merge(environment) { $1 }
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 else { return (127, "", "cannot run \(path)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let out = (try? String(contentsOfFile: dir + "/out", encoding: .utf8)) ?? ""
        let err = (try? String(contentsOfFile: dir + "/err", encoding: .utf8)) ?? ""
        let signal = status & 0x7f
        return (signal == 0 ? (status >> 8) & 0xff : 128 + signal, out, err)
    }
}
