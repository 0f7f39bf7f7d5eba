#if canImport(Glibc)
import Glibc
#endif

/// Runs a program and waits for it, with `posix_spawn` and `waitpid` (Foundation's `Process`
/// can hang in `waitUntilExit` inside the test runner here).
public enum ChildProcess {
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
}
