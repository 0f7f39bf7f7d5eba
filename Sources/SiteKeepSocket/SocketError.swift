public import SiteKeepSystem

/// Why a Unix socket could not be listened on, connected to or trusted.
public enum SocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A socket call failed; `call` names it (and its path).
    case call(String, errno: Errno)
    /// The path is unusable: too long, not a socket, in a folder that is not private, or taken.
    case path(String)
    /// The socket at `path` cannot be trusted with a secret: its folder, its file or the
    /// listening process is not this user's. Nothing was sent.
    case untrusted(path: String, reason: String)
    /// `LISTEN_FDS` / `LISTEN_PID` are malformed or name no usable socket.
    case activation(String)

    public var description: String {
        switch self {
        case let .call(what, e): "\(what) failed: \(e)"
        case .path(let why): why
        case let .untrusted(path, reason): "refusing the socket \(path): \(reason)"
        case .activation(let why): "systemd socket activation failed: \(why); check the .socket unit"
        }
    }
}

/// Who is at the other end of a Unix socket (`SO_PEERCRED`).
public struct PeerCredentials: Sendable, Equatable {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}
