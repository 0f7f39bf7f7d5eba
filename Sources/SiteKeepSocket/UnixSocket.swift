#if canImport(Glibc)
import Glibc
#endif
internal import CLinux
import Synchronization
internal import SiteKeepSystem

/// The socket calls every SiteKeep socket makes (the bridge, the control socket, the ssh-agent
/// socket and their clients), with the folder and ownership rules applied in one place.
///
/// The rules: a listening socket is 0600 in a folder that is this user's and 0700 (created if
/// missing, never chmod-ed when it exists); a stale socket nobody answers on is replaced, and
/// anything else at the path is refused. A client checks, before it sends a byte, that the
/// folder passes the same rule, that the socket file is this user's, and that the listener's
/// `SO_PEERCRED` uid is this user's.
public enum UnixSocket {
    /// `sun_path`'s room, less its NUL.
    public static let maxPathBytes = 107

    static func address(_ path: String) throws(SocketError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maxPathBytes, !bytes.contains(0) else {
            throw .path("the socket path \(path) is empty, contains NUL or is longer than \(maxPathBytes) bytes; choose a shorter one")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }

    static func newSocket() throws(SocketError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .call("socket", errno: .current) }
        return fd
    }

    /// The one rule for a socket folder: a folder (not a link) owned by this user that no one
    /// else may read, write or enter. Nil when it holds; else what is wrong, in words.
    public static func privateFolderProblem(_ folder: String) -> String? {
        switch PrivateFolder.problem(with: folder) {
        case nil: nil
        case .missing?: "its folder \(folder) does not exist"
        case .notADirectory?: "\(folder) is not a folder"
        case .ownedByAnotherUser(let uid)?: "its folder \(folder) belongs to uid \(uid), not to you (uid \(getuid()))"
        case .openToOthers(let mode)?: "its folder \(folder) is open to other users (mode \(String(mode, radix: 8)))"
        }
    }

    /// Connects to the socket at `path` after checking, before a byte is sent, that only this user
    /// can have put a listener there (see the type's rules).
    /// - Parameter remedy: what the user should do when the socket is refused.
    /// - Throws: ``SocketError/untrusted(path:reason:)`` naming what was wrong and the fix;
    ///   ``SocketError/call(_:errno:)`` when nothing listens (no such file, refused).
    public static func connect(path: String, remedy: String) throws(SocketError) -> Int32 {
        if let problem = privateFolderProblem(AtomicFile.folder(of: path)) {
            throw .untrusted(path: path, reason: "\(problem), so another user could have put a listener there; " + remedy)
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw .call("connect(\(path))", errno: .current) }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw .untrusted(path: path, reason: "it is not a socket; remove it or point the client at the daemon's socket")
        }
        guard st.st_uid == getuid() else {
            throw .untrusted(path: path, reason: "the socket file belongs to uid \(st.st_uid), not to you (uid \(getuid())); " + remedy)
        }
        let fd = try connectUnchecked(path: path)
        guard let peer = peerCredentials(fd), peer.uid == getuid() else {
            let who = peerCredentials(fd).map { "uid \($0.uid) (pid \($0.pid))" } ?? "an unknown user (SO_PEERCRED failed)"
            close(fd)
            throw .untrusted(path: path, reason: "the process listening there runs as \(who), not as you (uid \(getuid())); " + remedy)
        }
        return fd
    }

    /// Connects without the ownership checks: only for a listener's probe of a stale socket
    /// before it replaces it (nothing is ever sent on it).
    public static func connectUnchecked(path: String) throws(SocketError) -> Int32 {
        var addr = try address(path)
        let fd = try newSocket()
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = Errno.current
            close(fd)
            throw .call("connect(\(path))", errno: e)
        }
        return fd
    }

    /// Creates the folder (0700) and a listening socket (0600) at `path`, replacing a stale
    /// socket and refusing anything that is not a socket or a socket someone answers on.
    /// - Parameter what: the daemon's name in messages ("a SiteKeep daemon", "an agent").
    public static func listen(path: String, what: String = "a SiteKeep daemon") throws(SocketError) -> Int32 {
        let folder = AtomicFile.folder(of: path)
        do { try PrivateFolder.ensure(folder) } catch {
            throw .path("\(error); put the socket in a private folder (mode 0700), e.g. under $XDG_RUNTIME_DIR/sitekeep/")
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw .path("\(path) exists and is not a socket; remove it or choose another path") }
            if let fd = try? connectUnchecked(path: path) {
                close(fd)
                throw .path("\(what) already listens on \(path)")
            }
            guard unlink(path) == 0 else { throw .call("unlink(\(path))", errno: .current) }
        }
        var addr = try address(path)
        let fd = try newSocket()
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(old)
        guard rc == 0 else {
            let e = Errno.current
            close(fd)
            throw .call("bind(\(path))", errno: e)
        }
        guard chmod(path, 0o600) == 0, Glibc.listen(fd, 128) == 0 else {
            let e = Errno.current
            close(fd)
            throw .call("listen(\(path))", errno: e)
        }
        return fd
    }

    /// One listening socket systemd passed.
    public struct Activated: Sendable, Equatable {
        /// Its `FileDescriptorName=` (`LISTEN_FDNAMES`); `unknown` when none was given.
        public let name: String
        public let fd: Int32
        /// The path it is bound to (nil for an abstract or unnamed socket).
        public let path: String?
    }

    /// Activated sockets not yet taken, by the path they are bound to: ``SocketListener``'s
    /// `init(path:)` takes one whose path it was asked to listen on instead of binding anew
    /// (where systemd's socket already listens, a bind would say "already listens").
    private static let adopted = Mutex<[String: Int32]>([:])

    /// The listening sockets systemd passed (fd 3 onwards, `LISTEN_FDS` of them, named by
    /// `LISTEN_FDNAMES`), when `LISTEN_PID` is this process; nil when none were. Each must be
    /// a listening stream socket. The variables are removed so children do not see them, and
    /// every socket with a path is kept for ``takeActivated(path:)``.
    /// - Throws: ``SocketError/activation(_:)`` naming what is wrong with the unit.
    public static func activatedListeners(environment: [String: String]) throws(SocketError) -> [Activated]? {
        guard let fdsText = environment["LISTEN_FDS"] else { return nil }
        guard let pidText = environment["LISTEN_PID"], let pid = Int32(pidText), let fds = Int(fdsText) else {
            throw .activation("LISTEN_FDS and LISTEN_PID must be numbers")
        }
        guard pid == getpid() else { return nil }
        guard (1...8).contains(fds) else { throw .activation("expected one to eight sockets (LISTEN_FDS), got \(fds)") }
        var names = environment["LISTEN_FDNAMES"].map { $0.split(separator: ":", omittingEmptySubsequences: false).map(String.init) } ?? []
        if names.count != fds { names = Array(repeating: "unknown", count: fds) }
        var out: [Activated] = []
        for i in 0..<fds {
            let fd = Int32(3 + i)
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else { throw .activation("fd \(fd) (\(names[i])) is not a socket") }
            var accepting: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0, accepting == 1 else {
                throw .activation("fd \(fd) (\(names[i])) is not a listening socket (use ListenStream= without Accept=)")
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            out.append(Activated(name: names[i], fd: fd, path: boundPath(fd)))
        }
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDNAMES")
        adopted.withLock { table in
            for a in out { if let path = a.path { table[path] = a.fd } }
        }
        return out
    }

    /// The bridge's listening socket systemd passed: the one named `bridge`, else the only one;
    /// the others (`control`, `agent`) are kept for ``takeActivated(path:)``.
    public static func activatedListener(environment: [String: String]) throws(SocketError) -> Int32? {
        guard let all = try activatedListeners(environment: environment) else { return nil }
        guard let bridge = all.first(where: { $0.name == "bridge" }) ?? (all.count == 1 ? all[0] : nil) else {
            throw .activation("\(all.count) sockets were passed and none is named bridge (FileDescriptorName=bridge)")
        }
        if let path = bridge.path { _ = takeActivated(path: path) }
        return bridge.fd
    }

    /// The activated socket bound to `path` (see ``activatedListeners(environment:)``), once;
    /// nil when none was passed for it.
    public static func takeActivated(path: String) -> Int32? {
        adopted.withLock { $0.removeValue(forKey: path) }
    }

    /// Whether an activated socket bound to `path` waits to be taken.
    public static func isActivated(path: String) -> Bool {
        adopted.withLock { $0[path] != nil }
    }

    /// The filesystem path a Unix socket is bound to.
    static func boundPath(_ fd: Int32) -> String? {
        var addr = sockaddr_un()
        var len = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard rc == 0, addr.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let path: String? = withUnsafeBytes(of: &addr.sun_path) { raw in
            guard let first = raw.first, first != 0 else { return nil }
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        return path
    }

    /// The credentials of the process at the other end of `fd`.
    public static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var cred = sitekeep_peer_cred()
        guard sitekeep_peer_cred(fd, &cred) == 0 else { return nil }
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid)
    }

    /// Writes all of `bytes` (`send` with `MSG_NOSIGNAL`); false when the peer is gone or the
    /// send timed out.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        (try? FileIO.writeAll(fd, bytes, socket: true)) != nil
    }

    /// ``writeAll(_:_:)`` for an array.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { writeAll(fd, $0) }
    }

    /// Sets `SO_SNDTIMEO`, so a peer that stops reading cannot block a writer for ever.
    public static func setSendTimeout(_ fd: Int32, seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sets `SO_RCVTIMEO`.
    public static func setReceiveTimeout(_ fd: Int32, seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Polls `fd` without sleeping for up to `spinNanoseconds` (yielding the CPU between looks);
    /// true when it became readable. A cross-core wake-up costs ~20 µs on a small VM; a caller
    /// that expects its answer within that time may spin instead.
    public static func spinUntilReadable(_ fd: Int32, spinNanoseconds: UInt64) -> Bool {
        guard spinNanoseconds > 0 else { return false }
        let deadline = Clocks.monotonicNanoseconds() + spinNanoseconds
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 0) > 0 { return true }
            if Clocks.monotonicNanoseconds() >= deadline { return false }
            sched_yield()
        }
    }

    /// The calling user's SiteKeep runtime folder, `$XDG_RUNTIME_DIR/sitekeep`, when set.
    public static func runtimeFolder(environment: [String: String]) -> String? {
        guard let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty else { return nil }
        return run + "/sitekeep"
    }
}
