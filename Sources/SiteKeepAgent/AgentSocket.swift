// The agent's Unix socket on the shared listener (SiteKeepSocket: private folder, SO_PEERCRED,
// one thread per connection, drain on shutdown); the protocol is AgentSession's.
import Glibc
internal import CLinux
internal import SiteKeepSocket
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
    private let listener: SocketListener
    private let onRefusal: @Sendable (AgentPeer, AgentRefusal) -> Void

    /// Listens at `path`. `onRefusal` hears why requests were refused (for the daemon's log).
    public init(path: String, keys: any AgentKeySource,
                onRefusal: @escaping @Sendable (AgentPeer, AgentRefusal) -> Void = { _, _ in }) throws(AgentSocketError) {
        do {
            listener = try SocketListener(path: path, what: "an agent")
        } catch {
            switch error {
            case let .call(what, errno): throw .call(what, errno: errno)
            default: throw .path(error.description)
            }
        }
        self.path = path
        self.keys = keys
        self.onRefusal = onRefusal
    }

    /// Starts accepting on a thread of its own.
    public func start() { listener.start { [self] connection in serve(connection) } }

    /// Stops gracefully and returns when every connection is closed and the socket removed.
    public func shutdown() { listener.shutdown() }

    private func serve(_ connection: SocketConnection) {
        guard let cred = connection.admit(sendTimeout: 5) else { return }
        let peer = AgentPeer(pid: cred.pid, uid: cred.uid, command: Self.command(of: cred.pid),
                             startTime: Self.startTime(ofPeerOf: connection.fd, pid: cred.pid))
        let session = AgentSession(keys: keys, peer: peer)
        // An agent request is small (a sign request: a key blob and the data); a longer one
        // arrives in several reads, which the frame reader joins.
        connection.serveFrames(splitting: AgentFrames(), chunkBytes: 16 << 10) { event in
            guard case .message(let payload) = event else {
                onRefusal(peer, .malformed("a message longer than 256 KiB; the connection was closed"))
                return false
            }
            let reply = session.reply(to: payload)
            if let why = session.lastRefusal { onRefusal(peer, why) }
            return connection.writer.send(reply.framed, terminator: nil)
        }
    }

    /// When the process that connected to `fd` started (``AgentPeer/startTime``): read from
    /// `/proc/PID/stat` while the peer's pidfd (`SO_PEERPIDFD`, which names the process that
    /// called `connect`, whatever its pid became) shows it still runs, so the pid was not
    /// reused in between. Nil on a kernel without `SO_PEERPIDFD` (before 6.5), when the peer has
    /// exited, or when the file cannot be read: the agent then keeps no approval for the peer.
    static func startTime(ofPeerOf fd: Int32, pid: Int32) -> UInt64? {
        guard pid > 0 else { return nil }
        let pidfd = sitekeep_peer_pidfd(fd)
        guard pidfd >= 0 else { return nil }
        defer { close(pidfd) }
        let stat = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard stat >= 0 else { return nil }
        defer { close(stat) }
        var buf = [UInt8](repeating: 0, count: 1024)
        let n = buf.withUnsafeMutableBytes { read(stat, $0.baseAddress, $0.count) }
        guard n > 0, let end = buf[0..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After the command name (which may hold spaces and parentheses): field 3 onwards, so
        // the start time (field 22) is the 20th.
        let fields = buf[(end + 1)..<n].split(separator: UInt8(ascii: " "))
        guard fields.count > 19, let ticks = UInt64(String(decoding: fields[19], as: UTF8.self)) else { return nil }
        // What was read was this process's only if it still runs (a pid is not reused before).
        guard sitekeep_pidfd_alive(pidfd) == 1 else { return nil }
        return ticks
    }

    /// The peer's command name, from `/proc/PID/comm` (a hint for the prompt, nothing more):
    /// one `open` and one `read` (the name is at most 15 bytes and a newline), on every connection.
    public static func command(of pid: Int32) -> String? {
        guard pid > 0 else { return nil }
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let n = withUnsafeMutableBytes(of: &buf) { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        var bytes = withUnsafeBytes(of: &buf) { Array($0.prefix(n)) }
        while let last = bytes.last, last == 0x0a || last == 0x20 || last == 0 { bytes.removeLast() }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }
}

/// The agent's messages (``AgentFrameReader``: length-prefixed, at most 256 KiB) through the
/// sockets' one serve loop.
private struct AgentFrames: FrameSplitter {
    var reader = AgentFrameReader()
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [AgentFrameReader.Event] { reader.feed(bytes) }
}
