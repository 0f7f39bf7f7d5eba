public import SiteKeepSystem
import CLinux
#if canImport(Glibc)
import Glibc
#endif

/// The file a process runs, as the kernel holds it: device and inode (which name the file
/// whatever its path), size, modification time and change time. Two identities are equal
/// exactly when they name the same file in the same state: a rewrite in place changes the change
/// time (`st_ctim`), which, unlike the modification time, no unprivileged call can set back.
public struct ExecutableIdentity: Sendable, Hashable, CustomStringConvertible {
    /// `st_dev` of the file.
    public let device: UInt64
    /// `st_ino` of the file.
    public let inode: UInt64
    /// Its size in bytes.
    public let size: Int64
    /// Its modification time, nanoseconds since the Unix epoch.
    public let modifiedNanoseconds: Int64
    /// Its status change time (`st_ctim`), nanoseconds since the Unix epoch: moved by every
    /// write, `chmod`, `utimensat` or link, and set by the kernel alone.
    public let changedNanoseconds: Int64

    /// The identity of an open file.
    public init?(descriptor fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(st)
    }

    /// The identity of the regular file at `path` now (following symbolic links, as `execve`
    /// does); nil when there is none.
    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        self.init(st)
    }

    private init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modifiedNanoseconds = Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec)
        changedNanoseconds = Int64(st.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_ctim.tv_nsec)
    }

    public var description: String { "device \(device) inode \(inode), \(size) bytes" }
}

/// Why the process at the other end of a socket could not be identified. Each case says what
/// to do; none carries anything of the peer's environment beyond variable names.
public enum PeerProcessError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `SO_PEERCRED` gave nothing: the socket is not a connected Unix socket.
    case noCredentials
    /// The process that connected has exited, or its pid now names another process.
    case processGone(pid: Int32)
    /// `/proc/PID/…` could not be read (the process is not dumpable, or runs as another user).
    case unreadable(pid: Int32, what: String, errno: Errno)

    public var description: String {
        switch self {
        case .noCredentials:
            "the peer of this socket has no credentials (SO_PEERCRED failed); only local Unix-socket peers can be identified"
        case .processGone(let pid):
            "the process that connected (pid \(pid)) has exited or was replaced; connect again from the process that will use the connection"
        case let .unreadable(pid, what, e):
            "cannot read /proc/\(pid)/\(what) of the connecting process: \(e) (a process that made itself non-dumpable, or runs as another user, cannot be identified)"
        }
    }
}

/// The process at the other end of a connected Unix socket, and the executable it runs, read
/// from `/proc` while a pidfd pins that process, so a pid reused by another process is never
/// taken for it.
///
/// How it is read:
/// 1. the peer's pidfd from `SO_PEERPIDFD` (Linux 6.5), which names the process that called
///    `connect` even if its pid is reused; on older kernels `pidfd_open` of the `SO_PEERCRED`
///    pid, and a process that started after `acceptedAtBootNanoseconds` is refused (it cannot
///    be the one that connected);
/// 2. `/proc/PID/exe` opened (the file the kernel maps, even if its path was since replaced or
///    deleted): its identity (device, inode, size, time) and path. Two processes running the
///    same file have the same identity, so a caller compares it with the identity of a path it
///    trusts (and, to know the contents, digests the file at that path, not the peer's);
/// 3. the names of the variables in `/proc/PID/environ` that load code the executable does not
///    name (``codeLoadingVariableNames``);
/// 4. whether the process holds its end of the connection (``Holding``): the other end's inode
///    from the kernel's socket diagnostics, looked for in `/proc/PID/fd`;
/// 5. the pidfd asked whether the process still runs: if not, what was read may be another
///    process's, and ``PeerProcessError/processGone(pid:)`` is thrown.
///
/// What it cannot see: another process holding the same connection *as well* (a copy handed to
/// a child before the connecting process `execve`d a program that keeps what it inherits), and a
/// process changed from outside after it started (`ptrace`, `/proc/PID/mem`). Callers that
/// grant on this identity say so (SECURITY.md).
public struct PeerProcess: Sendable, Equatable {
    /// The variables, in a peer's environment, that make the dynamic loader, GTK, GIO or
    /// GStreamer load code from a path the executable does not name. Their presence is reported
    /// in ``codeLoadingVariables``; the caller decides (a host binding refuses them).
    public static let codeLoadingVariableNames: Set<String> = [
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT",
        "GTK_MODULES", "GTK3_MODULES", "GTK_PATH", "GIO_EXTRA_MODULES", "GIO_MODULE_DIR",
        "GST_PLUGIN_PATH", "GST_PLUGIN_PATH_1_0", "GST_PLUGIN_SYSTEM_PATH", "GST_PLUGIN_SYSTEM_PATH_1_0",
        "WEBKIT_EXEC_PATH", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS",
    ]

    /// The peer's pid (from the pidfd's process).
    public let pid: Int32
    /// The peer's user id (`SO_PEERCRED`).
    public let uid: UInt32
    /// The executable's path as the kernel names it (`/proc/PID/exe`), without " (deleted)".
    public let executablePath: String
    /// Whether that path no longer names the file the process runs (deleted, or replaced by
    /// a rename: the kernel says " (deleted)", or the path's identity differs).
    public let executableReplaced: Bool
    /// The identity of the file the process runs.
    public let executable: ExecutableIdentity
    /// The names, sorted, of the ``codeLoadingVariableNames`` set in the peer's environment.
    public let codeLoadingVariables: [String]
    /// Whether the process holds its end of the connection itself (see ``Holding``).
    public let holding: Holding

    /// Whether the process that connected holds its end of the connection, read from its
    /// descriptor table (`/proc/PID/fd`) and the kernel's socket diagnostics (which name the
    /// other end's inode). A process that connected and then `execve`d a host keeps the
    /// connection only if the descriptor was inherited; when the host closes what it inherits
    /// (the SiteKeep browser does), the connection is held by someone else: another process to
    /// which the connecting one handed it (a child forked before the `execve`).
    public enum Holding: Sendable, Equatable {
        /// On a descriptor of its own (3 or above).
        case own
        /// Only as standard input, output or error: what a program is started with, not a
        /// connection it opened.
        case standardStreamsOnly
        /// Not at all: another process holds it.
        case notHeld
        /// The kernel did not say (no `unix_diag`, or the socket is not a Unix stream socket).
        case unknown
    }

    /// Identifies the process at the other end of the connected Unix socket `fd`.
    /// - Parameter acceptedAtBootNanoseconds: when the connection was accepted, on
    ///   `CLOCK_BOOTTIME` (``Clocks/bootNanoseconds()``); used only where the kernel has no
    ///   `SO_PEERPIDFD`.
    public static func identify(socket fd: Int32, acceptedAtBootNanoseconds: UInt64 = Clocks.bootNanoseconds()) throws(PeerProcessError) -> PeerProcess {
        var cred = sitekeep_peer_cred()
        guard sitekeep_peer_cred(fd, &cred) == 0, cred.pid > 0 else { throw .noCredentials }
        let pid = cred.pid
        var pidfd = sitekeep_peer_pidfd(fd)
        let pinnedByKernel = pidfd >= 0
        if !pinnedByKernel {
            pidfd = sitekeep_pidfd_open(pid)
            guard pidfd >= 0 else { throw .processGone(pid: pid) }
        }
        defer { close(pidfd) }
        if !pinnedByKernel {
            guard let started = startTimeBootNanoseconds(pid: pid) else { throw .processGone(pid: pid) }
            if started > acceptedAtBootNanoseconds { throw .processGone(pid: pid) }
        }

        let exeFD = open("/proc/\(pid)/exe", O_RDONLY | O_CLOEXEC)
        guard exeFD >= 0 else {
            let e = Errno.current
            if e == .noSuchFileOrDirectory { throw .processGone(pid: pid) }
            throw .unreadable(pid: pid, what: "exe", errno: e)
        }
        defer { close(exeFD) }
        guard let identity = ExecutableIdentity(descriptor: exeFD) else {
            throw .unreadable(pid: pid, what: "exe", errno: Errno.current)
        }
        var link = [CChar](repeating: 0, count: 4097)
        let n = readlink("/proc/\(pid)/exe", &link, link.count - 1)
        guard n > 0 else { throw .unreadable(pid: pid, what: "exe", errno: Errno.current) }
        var path = String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var replaced = false
        if path.hasSuffix(" (deleted)") {
            path.removeLast(" (deleted)".count)
            replaced = true
        }
        if ExecutableIdentity(path: path) != identity { replaced = true }
        let variables = try codeLoadingVariables(pid: pid)
        let holding = try holding(socket: fd, pid: pid)

        // Everything above was read from /proc/PID: it was this process's only if it still runs
        // (a pid is not reused while its process has not been reaped).
        guard sitekeep_pidfd_alive(pidfd) == 1 else { throw .processGone(pid: pid) }
        return PeerProcess(pid: pid, uid: cred.uid, executablePath: path, executableReplaced: replaced,
                           executable: identity, codeLoadingVariables: variables, holding: holding)
    }

    /// A description of a process, for tests and for in-process hosts that know what they run.
    public init(pid: Int32, uid: UInt32, executablePath: String, executableReplaced: Bool = false, executable: ExecutableIdentity,
                codeLoadingVariables: [String] = [], holding: Holding = .own) {
        self.pid = pid
        self.uid = uid
        self.executablePath = executablePath
        self.executableReplaced = executableReplaced
        self.executable = executable
        self.codeLoadingVariables = codeLoadingVariables
        self.holding = holding
    }

    /// The names of the code-loading variables set (non-empty) in `/proc/PID/environ`. The
    /// values are never kept.
    private static func codeLoadingVariables(pid: Int32) throws(PeerProcessError) -> [String] {
        let bytes: [UInt8]
        switch procFile(pid: pid, "environ", limit: 1 << 20) {
        case .success(let b): bytes = b
        case .failure(let e): throw e == .noSuchFileOrDirectory ? .processGone(pid: pid) : .unreadable(pid: pid, what: "environ", errno: e)
        }
        var found: Set<String> = []
        for entry in bytes.split(separator: 0) {
            guard let eq = entry.firstIndex(of: UInt8(ascii: "=")), eq != entry.startIndex, entry.index(after: eq) != entry.endIndex else { continue }
            let name = String(decoding: entry[entry.startIndex..<eq], as: UTF8.self)
            if codeLoadingVariableNames.contains(name) { found.insert(name) }
        }
        return found.sorted()
    }

    /// Where `pid` holds the other end of the connected Unix socket `fd` (see ``Holding``).
    private static func holding(socket fd: Int32, pid: Int32) throws(PeerProcessError) -> Holding {
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK, st.st_ino <= UInt64(UInt32.max) else { return .unknown }
        var peer: UInt32 = 0
        guard sitekeep_unix_peer_inode(UInt32(st.st_ino), &peer) == 0, peer != 0 else { return .unknown }
        let target = "socket:[\(peer)]"
        guard let dir = opendir("/proc/\(pid)/fd") else {
            let e = Errno.current
            throw e == .noSuchFileOrDirectory ? .processGone(pid: pid) : .unreadable(pid: pid, what: "fd", errno: e)
        }
        defer { closedir(dir) }
        let dfd = dirfd(dir)
        var standard = false
        var link = [CChar](repeating: 0, count: 64)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let number = Int32(name) else { continue }
            let n = readlinkat(dfd, name, &link, link.count - 1)
            guard n > 0, String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) == target else { continue }
            if number >= 3 { return .own }
            standard = true
        }
        return standard ? .standardStreamsOnly : .notHeld
    }

    /// When the process started, on `CLOCK_BOOTTIME` in nanoseconds (`/proc/PID/stat`'s 22nd
    /// field, in clock ticks); nil when it cannot be read.
    private static func startTimeBootNanoseconds(pid: Int32) -> UInt64? {
        guard case .success(let bytes) = procFile(pid: pid, "stat", limit: 4096),
              let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After the command name (which may hold spaces and parentheses): field 3 onwards.
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 19, let ticks = UInt64(String(decoding: fields[19], as: UTF8.self)) else { return nil }
        let hz = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return ticks * (1_000_000_000 / hz)
    }

    /// The bytes of `/proc/PID/NAME` (whose size `stat` does not tell), up to `limit`.
    private static func procFile(pid: Int32, _ name: String, limit: Int) -> Result<[UInt8], Errno> {
        let fd = open("/proc/\(pid)/\(name)", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Errno.current) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while out.count < limit {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if Errno.current == .interrupted { continue }
                return .failure(Errno.current)
            }
            if n == 0 { break }
            out += chunk[0..<n]
        }
        return .success(Array(out.prefix(limit)))
    }
}
