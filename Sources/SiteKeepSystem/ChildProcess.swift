#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Runs other programs: directly (never through a shell), in their own process group so a
/// script's children are stopped with it, with standard input and output on `/dev/null` unless
/// asked otherwise, and waited for with `waitpid` (Foundation's `Process` waits on `SIGCHLD` and
/// was seen to hang inside test runners here).
public struct ChildProcess: Sendable {
    /// The child's process id (also its process group id).
    public let pid: Int32

    /// A child of this process started some other way, known by its pid, to wait for or stop.
    public init(pid: Int32) { self.pid = pid }

    /// How a child ended.
    public enum Termination: Sendable, Equatable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)

        /// The shell's convention: the exit status, or 128 + the signal.
        public var status: Int32 {
            switch self {
            case .exited(let s): s
            case .signalled(let s): 128 + s
            }
        }

        public var description: String {
            switch self {
            case .exited(let s): "exited with status \(s)"
            case .signalled(let s): "was killed by signal \(s)"
            }
        }
    }

    /// Where a standard stream of the child goes.
    public enum Stream: Sendable, Equatable {
        /// `/dev/null`.
        case null
        /// The parent's own stream.
        case inherit
        /// This file descriptor of the parent (duplicated into the child).
        case descriptor(Int32)
        /// The file at this path, opened in the child for writing (created 0600 if missing),
        /// appended to or, without `append`, truncated. For standard output and error only.
        case file(String, append: Bool)
        /// Wherever the child's standard output goes (for standard error only: `2>&1`).
        case standardOutput
    }

    /// Starts `program` (an absolute path) with `arguments` (argv[1...]) and `environment`
    /// (`NAME=value` strings; the parent's environment when nil).
    /// - Parameters:
    ///   - ownProcessGroup: the child leads a new process group (so ``stop(grace:)`` ends its
    ///     children too).
    ///   - detached: the child leads a new session instead (`setsid`: no controlling terminal,
    ///     it outlives this process and the terminal's signals), with no signal blocked; for a
    ///     daemon that is started and not waited for.
    ///   - unblockingSignals: the child (in its own process group) starts with no signal
    ///     blocked, whatever the calling thread blocks (a Dispatch worker blocks `SIGALRM`, which
    ///     a pinentry's own time limit needs).
    ///   - argv0: the child's `argv[0]` when it is not `program` (a program started from a
    ///     descriptor, `/proc/self/fd/N`, is named by the path it was opened at).
    ///   - workingDirectory: the child's working folder (else this process's).
    ///   - closingFrom: when given, every descriptor from this number up is closed in the child
    ///     after `descriptors` are placed, whatever this process leaked without close-on-exec
    ///     (what it inherited from whoever started it).
    ///   - descriptors: descriptors of this process to give the child, each at the number given
    ///     (`dup2`, so close-on-exec is cleared in the child alone); any other descriptor this
    ///     process opened close-on-exec stays out of the child.
    /// - Throws: ``SystemError`` when the program cannot be started.
    public static func spawn(_ program: String, arguments: [String], environment: [String]? = nil,
                             stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null,
                             ownProcessGroup: Bool = true, detached: Bool = false, unblockingSignals: Bool = false,
                             argv0: String? = nil, workingDirectory: String? = nil,
                             descriptors: [(parent: Int32, child: Int32)] = [], closingFrom: Int32? = nil) throws(SystemError) -> ChildProcess {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        if detached {
            posix_spawnattr_setflags(&attr, Int16(0x80 /* POSIX_SPAWN_SETSID */ | POSIX_SPAWN_SETSIGMASK))
            var empty = sigset_t()
            sigemptyset(&empty)
            posix_spawnattr_setsigmask(&attr, &empty)
        } else if ownProcessGroup {
            posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | (unblockingSignals ? POSIX_SPAWN_SETSIGMASK : 0)))
            posix_spawnattr_setpgroup(&attr, 0)
            if unblockingSignals {
                var empty = sigset_t()
                sigemptyset(&empty)
                posix_spawnattr_setsigmask(&attr, &empty)
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (fd, stream) in [(Int32(0), stdin), (1, stdout), (2, stderr)] {
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let source): posix_spawn_file_actions_adddup2(&actions, source, fd)
            case .file(let path, let append):
                posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0o600)
            case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, fd)
            }
        }
        for (parent, child) in descriptors {
            posix_spawn_file_actions_adddup2(&actions, parent, child)
        }
        if let closingFrom { sitekeep_spawn_add_closefrom(&actions, closingFrom) }
        if let workingDirectory { sitekeep_spawn_add_chdir(&actions, workingDirectory) }
        func cStrings(_ list: [String]) -> [UnsafeMutablePointer<CChar>?] { list.map { strdup($0) } + [nil] }
        let argv = cStrings([argv0 ?? program] + arguments)
        defer { argv.forEach { free($0) } }
        var pid: Int32 = 0
        var rc: Int32 = 0
        let envp = environment.map(cStrings)
        defer { envp?.forEach { free($0) } }
        // ETXTBSY: the program was just written and some process (another thread's fork that
        // has not reached its exec yet) still holds it open for writing; that passes within
        // milliseconds, so try again a few times before calling it a failure.
        for attempt in 0..<20 {
            rc = envp.map { posix_spawn(&pid, program, &actions, &attr, argv, $0) } ?? posix_spawn(&pid, program, &actions, &attr, argv, environ)
            guard rc == ETXTBSY, attempt < 19 else { break }
            usleep(useconds_t(5_000 * (attempt + 1)))
        }
        guard rc == 0 else { throw SystemError("run", program, errno: Errno(rawValue: rc)) }
        return ChildProcess(pid: pid)
    }

    /// Whether it has ended (without waiting); reaps it when it has.
    public func poll() -> Termination? {
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        return r == pid ? Self.decode(status) : nil
    }

    /// Waits for it to end.
    public func wait() -> Termination {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if Errno.current != .interrupted { return .exited(127) }
        }
        return Self.decode(status)
    }

    /// Waits at most `timeout`; on time-out its whole process group gets `SIGTERM`, then
    /// `SIGKILL` a second later, and the result is nil.
    public func wait(timeout: Duration) -> Termination? {
        let deadline = ContinuousClock.now + timeout
        var sleep: UInt32 = 200
        while ContinuousClock.now < deadline {
            if let t = poll() { return t }
            usleep(sleep)
            sleep = min(sleep * 2, 20_000)
        }
        stop()
        return nil
    }

    /// Ends its process group: `SIGTERM`, up to a second's grace, then `SIGKILL`; reaps it.
    public func stop(grace: Duration = .seconds(1)) {
        kill(-pid, SIGTERM)
        kill(pid, SIGTERM)
        let killAt = ContinuousClock.now + grace
        while ContinuousClock.now < killAt {
            if poll() != nil { kill(-pid, SIGKILL); return }
            usleep(5_000)
        }
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
        _ = wait()
    }

    /// Runs `program` to the end (or until `timeout`); nil on time-out.
    public static func run(_ program: String, arguments: [String], environment: [String]? = nil,
                           timeout: Duration? = nil) throws(SystemError) -> Termination? {
        let child = try spawn(program, arguments: arguments, environment: environment)
        guard let timeout else { return child.wait() }
        return child.wait(timeout: timeout)
    }

    /// Which of a child's output streams ``capture(_:arguments:environment:streams:limit:ownProcessGroup:)`` keeps.
    public enum Captured: Sendable, Equatable {
        /// Standard output (standard error goes to `/dev/null`).
        case output
        /// Standard error (standard output goes to `/dev/null`).
        case error
        /// Both, interleaved as written, through one pipe.
        case both
    }

    /// Runs `program` to the end with standard input on `/dev/null`, and returns how it ended
    /// with what it wrote to the `streams` kept: at most `limit` bytes are kept, the rest is read
    /// and dropped so the child never blocks on a full pipe.
    /// - Throws: ``SystemError`` when the pipe cannot be made or the program cannot be started.
    public static func capture(_ program: String, arguments: [String], environment: [String]? = nil,
                               streams: Captured = .output, limit: Int = 64 << 10,
                               ownProcessGroup: Bool = true) throws(SystemError) -> (Termination, [UInt8]) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .current("make a pipe for", program) }
        // Close-on-exec (pipe2 is not visible to Swift here): the child keeps only the write end
        // that is duplicated onto its 1 or 2, so its end of file comes when it exits.
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let child: ChildProcess
        do {
            let write = Stream.descriptor(fds[1])
            child = try spawn(program, arguments: arguments, environment: environment,
                              stdout: streams == .error ? .null : write, stderr: streams == .output ? .null : write,
                              ownProcessGroup: ownProcessGroup)
        } catch {
            close(fds[0]); close(fds[1])
            throw error
        }
        close(fds[1])
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if n < 0 && Errno.current == .interrupted { continue }
            if n <= 0 { break }
            if out.count < limit { out += chunk[0..<min(n, limit - out.count)] }
        }
        close(fds[0])
        return (child.wait(), out)
    }

    /// The first executable file called `name` in the folders of `path` (a `PATH` value), as
    /// `posix_spawnp` would find it; nil when there is none.
    public static func locate(_ name: String, path: String?) -> String? {
        guard !name.contains("/") else { return access(name, X_OK) == 0 ? name : nil }
        for folder in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":") where folder.hasPrefix("/") {
            let candidate = "\(folder)/\(name)"
            var st = stat()
            if stat(candidate, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    static func decode(_ status: Int32) -> Termination {
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
    }
}
