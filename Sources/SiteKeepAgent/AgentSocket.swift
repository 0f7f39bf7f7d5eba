// The agent's Unix socket: listen, accept, SO_PEERCRED, one thread per connection, drain on
// shutdown. Everything socket-level lives in this one file so that it can move onto the shared
// listener target (SiteKeepSocket) when that exists; the protocol is AgentSession's.
import Glibc
import Foundation
import Synchronization
internal import CLinux
public import SiteKeepSystem

/// Why the agent socket could not be set up.
public enum AgentSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path is unusable (the reason names it and what to do).
    case path(String)
    /// A socket call failed.
    case call(String, errno: Errno)

    public var description: String {
        switch self {
        case .path(let why): why
        case let .call(what, e): "\(what) failed: \(e)"
        }
    }
}

/// The ssh-agent socket server: `SSH_AUTH_SOCK` for ssh, ssh-add, ssh-keygen and git.
///
/// - The socket is created 0600 in a folder that must be ours and 0700 (created if missing); a
///   stale socket nobody answers on is replaced, anything else at the path is refused.
/// - Peers are checked with `SO_PEERCRED`: a process of another uid is disconnected at once.
/// - Each connection has its own thread and ``AgentSession``. After a reply the thread looks for
///   the next request for 50 µs before it sleeps in `poll` (a cross-core wake-up costs ~20 µs).
/// - A length over 256 KiB closes that connection (the stream cannot be resynchronised); a
///   malformed message gets `SSH_AGENT_FAILURE`; neither affects other connections.
/// - ``shutdown()`` stops accepting, answers what every connection has already sent, closes them
///   and removes the socket.
public final class AgentSocketServer: Sendable {
    /// The socket's path.
    public let path: String
    private let keys: any AgentKeySource
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let connections = DispatchGroup()
    private let onRefusal: @Sendable (AgentPeer, AgentRefusal) -> Void

    /// How long a connection looks for its next request before sleeping.
    static let spinNanoseconds: UInt64 = 50_000

    /// Listens at `path`. `onRefusal` hears why requests were refused (for the daemon's log).
    public init(path: String, keys: any AgentKeySource,
                onRefusal: @escaping @Sendable (AgentPeer, AgentRefusal) -> Void = { _, _ in }) throws(AgentSocketError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .call("pipe", errno: .current) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        do {
            listener = try Self.listen(path: path)
        } catch {
            close(fds[0]); close(fds[1])
            throw error
        }
        self.path = path
        self.keys = keys
        self.onRefusal = onRefusal
        wake = (fds[0], fds[1])
    }

    /// Starts accepting on a thread of its own.
    public func start() { Thread.detachNewThread { [self] in acceptLoop() } }

    /// Stops gracefully and returns when every connection is closed and the socket removed.
    public func shutdown() {
        if !stopping.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt8 = 1
            _ = write(wake.write, &one, 1)
        }
        stopped.wait()
        stopped.signal()
    }

    private func acceptLoop() {
        while !stopping.load(ordering: .acquiring) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue } else { break } }
            if fds[1].revents != 0 { break }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }   // EMFILE, ECONNABORTED…: go on serving
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            connections.enter()
            Thread.detachNewThread { [self] in
                serve(fd)
                close(fd)
                connections.leave()
            }
        }
        close(listener)
        unlink(path)
        connections.wait()
        stopped.signal()
    }

    private func serve(_ fd: Int32) {
        var cred = sitekeep_peer_cred()
        guard sitekeep_peer_cred(fd, &cred) == 0, cred.uid == getuid() else { return }
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let peer = AgentPeer(pid: cred.pid, uid: cred.uid, command: Self.command(of: cred.pid))
        let session = AgentSession(keys: keys, peer: peer)
        var reader = AgentFrameReader()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var draining = false
        var spinUntil: UInt64 = 0
        while true {
            var flags: Int32 = 0
            if spinUntil != 0 {
                if stopping.load(ordering: .relaxed) || DispatchTime.now().uptimeNanoseconds >= spinUntil { spinUntil = 0; continue }
                flags = Int32(MSG_DONTWAIT)
            } else if !draining {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, -1)
                if n < 0 { if errno == EINTR { continue } else { return } }
                if fds[1].revents != 0 {
                    draining = true   // answer what has arrived, then close
                    flags = Int32(MSG_DONTWAIT)
                }
            } else {
                flags = Int32(MSG_DONTWAIT)
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, flags) }
            if n < 0 {
                if errno == EINTR { continue }
                if (errno == EAGAIN || errno == EWOULDBLOCK) && !draining { sched_yield(); continue }
                return
            }
            if n == 0 { return }   // end of stream (a partial message is dropped with it)
            let events = chunk.withUnsafeBytes { reader.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            for event in events {
                guard case .message(let payload) = event else {
                    onRefusal(peer, .malformed("a message longer than 256 KiB; the connection was closed"))
                    return
                }
                let reply = session.reply(to: payload)
                if let why = session.lastRefusal { onRefusal(peer, why) }
                guard Self.writeAll(fd, reply.framed) else { return }
            }
            if !draining { spinUntil = DispatchTime.now().uptimeNanoseconds + Self.spinNanoseconds }
        }
    }

    /// Sends every byte (``FileIO/writeAll(_:_:socket:)``, `MSG_NOSIGNAL`); false when the
    /// client has gone.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        (try? FileIO.writeAll(fd, bytes, socket: true)) != nil
    }

    /// The peer's command name, from `/proc/PID/comm` (a hint for the prompt, nothing more).
    static func command(of pid: Int32) -> String? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return name.isEmpty ? nil : name
    }

    /// A listening socket at `path`: folder ours and 0700 (created if missing), socket 0600.
    static func listen(path: String) throws(AgentSocketError) -> Int32 {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= 107, !bytes.contains(0) else {
            throw .path("the agent socket path \(path) is empty or longer than 107 bytes; choose a shorter one")
        }
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            if mkdir(folder, 0o700) != 0 && Errno.current != .fileExists { throw .call("mkdir(\(folder))", errno: .current) }
            var st = stat()
            guard lstat(folder, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, st.st_uid == getuid(), st.st_mode & 0o077 == 0 else {
                throw .path("\(folder) is not a private folder of yours (mode 0700); put the agent socket in one, e.g. $XDG_RUNTIME_DIR/sitekeep/agent.sock")
            }
        }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw .path("\(path) exists and is not a socket; remove it or choose another path") }
            if AgentClient.isAnswering(path: path) { throw .path("an agent already listens on \(path)") }
            guard unlink(path) == 0 else { throw .call("unlink(\(path))", errno: .current) }
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .call("socket", errno: .current) }
        let old = umask(0o177)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        umask(old)
        guard rc == 0, chmod(path, 0o600) == 0, Glibc.listen(fd, 128) == 0 else {
            let e = Errno.current
            close(fd)
            throw .call("bind/listen(\(path))", errno: e)
        }
        return fd
    }
}
