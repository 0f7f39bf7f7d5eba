import Glibc
internal import CLinux
import Foundation

/// Thin wrappers over the socket calls the server and client use. Return codes become
/// ``BridgeError/socket(call:errno:)`` here, once.
package enum UnixSocket {
    /// Polls `fd` without sleeping for up to `spinNanoseconds` (yielding the CPU between looks),
    /// so a reply that comes within that time is read without a wake-up; true when it is readable.
    /// Clients opt in: a cross-core wake-up costs ~20 µs on a small VM, a spin costs CPU.
    static func spinUntilReadable(_ fd: Int32, spinNanoseconds: UInt64) -> Bool {
        guard spinNanoseconds > 0 else { return false }
        let deadline = DispatchTime.now().uptimeNanoseconds + spinNanoseconds
        while true {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 0) > 0 { return true }
            if DispatchTime.now().uptimeNanoseconds >= deadline { return false }
            sched_yield()
        }
    }

    static let maxPathBytes = 107

    static func address(_ path: String) throws(BridgeError) -> sockaddr_un {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maxPathBytes, !bytes.contains(0) else {
            throw .socketPath("\(path) is empty, contains NUL or is longer than \(maxPathBytes) bytes")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        return addr
    }

    static func newSocket() throws(BridgeError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .socket(call: "socket", errno: errno) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// Connects to the daemon at `path`, after checking, before a byte is sent, that only this
    /// user can have put a listener there: the socket's folder passes the daemon's own rule
    /// (``privateFolderProblem(_:)``), the socket file is a socket owned by this user, and the
    /// listener's `SO_PEERCRED` uid is this user's. Every client (``BridgeClient``,
    /// ``ControlClient``, the benchmark) connects through here.
    /// - Throws: ``BridgeError/untrustedSocket(path:reason:)`` naming what was wrong and the fix;
    ///   ``BridgeError/socket(call:errno:)`` when nothing listens (no such file, refused).
    package static func connect(path: String) throws(BridgeError) -> Int32 {
        let folder = (path as NSString).deletingLastPathComponent
        if let problem = privateFolderProblem(folder.isEmpty ? "." : folder) {
            throw .untrustedSocket(path: path, reason: "\(problem), so another user could have put a listener there; " + Self.remedy)
        }
        var st = stat()
        guard lstat(path, &st) == 0 else { throw .socket(call: "connect(\(path))", errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw .untrustedSocket(path: path, reason: "it is not a socket; remove it or point SITEKEEP_SOCK at the daemon's socket")
        }
        guard st.st_uid == getuid() else {
            throw .untrustedSocket(path: path, reason: "the socket file belongs to uid \(st.st_uid), not to you (uid \(getuid())); " + Self.remedy)
        }
        let fd = try connectUnchecked(path: path)
        guard let peer = peerCredentials(fd), peer.uid == getuid() else {
            let who = peerCredentials(fd).map { "uid \($0.uid) (pid \($0.pid))" } ?? "an unknown user (SO_PEERCRED failed)"
            close(fd)
            throw .untrustedSocket(path: path, reason: "the process listening there runs as \(who), not as you (uid \(getuid())); " + Self.remedy)
        }
        return fd
    }

    private static let remedy = "start 'sitekeep serve' yourself and point SITEKEEP_SOCK into a folder only you can enter (mode 0700), or unset it to use $XDG_RUNTIME_DIR/sitekeep/bridge.sock"

    /// Connects without the ownership checks: only for the daemon's own probe of a stale socket
    /// before it listens (nothing is ever sent on it).
    static func connectUnchecked(path: String) throws(BridgeError) -> Int32 {
        var addr = try address(path)
        let fd = try newSocket()
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw .socket(call: "connect(\(path))", errno: e)
        }
        return fd
    }

    /// Creates the folder (0700) and a listening socket (0600) at `path`, replacing a stale socket
    /// (one nobody answers on) and refusing to touch anything that is not a socket.
    static func listen(path: String) throws(BridgeError) -> Int32 {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            try makePrivateFolder(folder)
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw .socketPath("\(path) exists and is not a socket; remove it or choose another SITEKEEP_SOCK")
            }
            if let fd = try? connectUnchecked(path: path) {
                close(fd)
                throw .socketPath("a SiteKeep daemon already listens on \(path)")
            }
            guard unlink(path) == 0 else { throw .socket(call: "unlink(\(path))", errno: errno) }
        }
        var addr = try address(path)
        let fd = try newSocket()
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(old)
        guard rc == 0 else {
            let e = errno
            close(fd)
            throw .socket(call: "bind(\(path))", errno: e)
        }
        guard chmod(path, 0o600) == 0, Glibc.listen(fd, 128) == 0 else {
            let e = errno
            close(fd)
            throw .socket(call: "listen(\(path))", errno: e)
        }
        return fd
    }

    /// `folder` as a directory owned by this user with mode 0700: created if absent; an existing
    /// folder open to others is refused, never chmod-ed (a socket path of `/x.sock` must not
    /// make `/` private).
    static func makePrivateFolder(_ folder: String) throws(BridgeError) {
        if mkdir(folder, 0o700) != 0 && errno != EEXIST {
            throw .socket(call: "mkdir(\(folder))", errno: errno)
        }
        var st = stat()
        guard lstat(folder, &st) == 0 else { throw .socket(call: "stat(\(folder))", errno: errno) }
        if let problem = privateFolderProblem(folder) {
            throw .socketPath("\(problem); put the socket in a private folder (mode 0700), e.g. $XDG_RUNTIME_DIR/sitekeep/bridge.sock")
        }
    }

    /// The one rule for a socket folder, applied by the daemon before it listens and by every
    /// client before it connects: a folder (not a link) owned by this user that no one else may
    /// read, write or enter (no group or other permission bits). Nil when it holds; else what is wrong.
    static func privateFolderProblem(_ folder: String) -> String? {
        var st = stat()
        guard lstat(folder, &st) == 0 else { return "its folder \(folder) cannot be read (\(String(cString: strerror(errno))))" }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return "\(folder) is not a folder" }
        guard st.st_uid == getuid() else { return "its folder \(folder) belongs to uid \(st.st_uid), not to you (uid \(getuid()))" }
        guard st.st_mode & 0o077 == 0 else {
            return "its folder \(folder) is open to other users (mode \(String(st.st_mode & 0o777, radix: 8)))"
        }
        return nil
    }

    /// The listening socket systemd passed (fd 3), when `LISTEN_PID` is this process.
    static func activatedListener(environment: [String: String]) throws(BridgeError) -> Int32? {
        guard let fdsText = environment["LISTEN_FDS"] else { return nil }
        guard let pidText = environment["LISTEN_PID"], let pid = Int32(pidText), let fds = Int(fdsText) else {
            throw .socketActivation("LISTEN_FDS and LISTEN_PID must be numbers")
        }
        guard pid == getpid() else { return nil }
        guard fds == 1 else { throw .socketActivation("expected exactly one socket (LISTEN_FDS=1), got \(fds)") }
        let fd: Int32 = 3
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw .socketActivation("fd 3 is not a socket")
        }
        var accepting: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0, accepting == 1 else {
            throw .socketActivation("fd 3 is not a listening socket (use ListenStream= without Accept=)")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDNAMES")
        return fd
    }

    static func peerCredentials(_ fd: Int32) -> PeerCredentials? {
        var cred = sitekeep_peer_cred()
        guard sitekeep_peer_cred(fd, &cred) == 0 else { return nil }
        return PeerCredentials(pid: cred.pid, uid: cred.uid, gid: cred.gid)
    }

    /// Writes all of `bytes`; false when the peer is gone or the send timed out.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var off = 0
            while off < raw.count {
                let n = send(fd, raw.baseAddress! + off, raw.count - off, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                off += n
            }
            return true
        }
    }

    static func setSendTimeout(_ fd: Int32, seconds: Int) {
        var tv = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// The default socket path: `$SITEKEEP_SOCK`, else `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`.
    static func defaultPath(environment: [String: String]) throws(BridgeError) -> String {
        if let p = environment["SITEKEEP_SOCK"], !p.isEmpty { return p }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/sitekeep/bridge.sock" }
        throw .socketPath("neither SITEKEEP_SOCK nor XDG_RUNTIME_DIR is set")
    }
}

/// Splits a byte stream into newline-terminated frames of at most `maxFrame` bytes.
///
/// A line longer than `maxFrame` is skipped up to its newline and reported once as
/// ``Frame/oversized``, so one bad frame does not end the connection.
struct FrameReader {
    enum Frame: Equatable {
        case frame([UInt8])
        case oversized
    }
    let maxFrame: Int
    private var buffer: [UInt8] = []
    private var discarding = false

    init(maxFrame: Int) { self.maxFrame = maxFrame }

    /// Adds bytes and returns the complete frames they finish.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Frame] {
        var out: [Frame] = []
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 0x0a {
            if discarding {
                discarding = false
                out.append(.oversized)
            } else {
                buffer.append(contentsOf: bytes[start..<i])
                if buffer.count > maxFrame {
                    out.append(.oversized)
                } else {
                    if buffer.last == 0x0d { buffer.removeLast() }
                    if !buffer.isEmpty { out.append(.frame(buffer)) }
                }
                buffer.removeAll(keepingCapacity: true)
            }
            start = i + 1
        }
        if !discarding && start < bytes.count {
            buffer.append(contentsOf: bytes[start..<bytes.count])
            if buffer.count > maxFrame {
                buffer.removeAll()
                discarding = true
            }
        }
        return out
    }
}
