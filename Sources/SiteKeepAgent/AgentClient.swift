import Glibc
import CLinux
internal import SiteKeepSocket
public import SiteKeepSystem

/// A small client of the agent protocol, for any agent socket (SiteKeep's or OpenSSH's):
/// `sitekeep agent env` uses it to check the socket answers, the benchmark to drive both agents
/// the same way, the tests to send what real clients would not.
public final class AgentClient {
    private let fd: Int32

    /// Why a call failed.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The socket could not be reached.
        case connect(path: String, errno: Errno)
        /// The agent closed the connection.
        case closed
        /// The agent answered something else than the request calls for (its type byte).
        case refused(UInt8)
        /// The reply is malformed.
        case malformed(String)

        public var description: String {
            switch self {
            case let .connect(path, e): "cannot connect to the agent at \(path): \(e)"
            case .closed: "the agent closed the connection"
            case .refused(let t): "the agent refused (reply type \(t))"
            case .malformed(let why): "malformed agent reply: \(why)"
            }
        }
    }

    /// Connects to the agent socket at `path`. With `timeout`, a connect, a send or a read of a
    /// reply that takes longer is a failure (``Failure/connect(path:errno:)`` or
    /// ``Failure/closed``) rather than a wait without end.
    public init(path: String, timeout: Duration? = nil) throws(Failure) {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count <= 107, !bytes.isEmpty else { throw .connect(path: path, errno: Errno(rawValue: ENAMETOOLONG)) }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
            raw[bytes.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connect(path: path, errno: .current) }
        if let timeout {
            // Before connect: on Linux a Unix socket's connect to a full backlog waits for the
            // send time-out, and a peer that stops reading blocks a write no longer than it.
            let c = timeout.components
            var tv = timeval(tv_sec: Int(c.seconds), tv_usec: Int(c.attoseconds / 1_000_000_000_000))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else {
            let e = Errno.current
            close(fd)
            throw .connect(path: path, errno: e)
        }
        if let timeout {
            let c = timeout.components
            var tv = timeval(tv_sec: Int(c.seconds), tv_usec: Int(c.attoseconds / 1_000_000_000_000))
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Whether something accepts connections at `path`.
    public static func isAnswering(path: String) -> Bool { (try? AgentClient(path: path)) != nil }

    /// Sends raw bytes as they are (for tests of malformed input).
    public func send(raw bytes: [UInt8]) throws(Failure) {
        guard UnixSocket.writeAll(fd, bytes) else { throw .closed }
    }

    /// Says the client sends nothing more (`shutdown(SHUT_WR)`), as a client that exits does.
    public func finishSending() { _ = shutdown(fd, Int32(SHUT_WR)) }

    /// Reads one reply's payload.
    public func readReply() throws(Failure) -> [UInt8] {
        var header = try readExactly(4)
        let n = Int(try SSHReaderShim.uint32(&header))
        guard n <= AgentFrameReader.maximumMessageBytes else { throw .malformed("a reply of \(n) bytes") }
        return try readExactly(n)
    }

    /// Sends one request payload and returns the reply payload.
    public func roundTrip(_ payload: [UInt8]) throws(Failure) -> [UInt8] {
        try send(raw: AgentFrameReader.frame(payload))
        return try readReply()
    }

    /// `SSH_AGENTC_REQUEST_IDENTITIES`: each key's blob and comment.
    public func identities() throws(Failure) -> [(blob: [UInt8], comment: String)] {
        let reply = try roundTrip([AgentMessageType.requestIdentities])
        var r = SSHReader(reply)
        do {
            let type = try r.byte("reply type")
            guard type == AgentMessageType.identitiesAnswer else { throw Failure.refused(type) }
            let count = try r.uint32("key count")
            var out: [(blob: [UInt8], comment: String)] = []
            for _ in 0..<min(count, 1024) {
                out.append((try r.string("key blob"), String(decoding: try r.string("comment"), as: UTF8.self)))
            }
            return out
        } catch let e as Failure { throw e } catch { throw .malformed("\(error)") }
    }

    /// `SSH_AGENTC_SIGN_REQUEST`: the SSH signature blob.
    public func sign(blob: [UInt8], data: [UInt8], flags: UInt32 = 0) throws(Failure) -> [UInt8] {
        var w = SSHWriter(capacity: blob.count + data.count + 16)
        w.byte(AgentMessageType.signRequest)
        w.string(blob)
        w.string(data)
        w.uint32(flags)
        let reply = try roundTrip(w.bytes)
        var r = SSHReader(reply)
        do {
            let type = try r.byte("reply type")
            guard type == AgentMessageType.signResponse else { throw Failure.refused(type) }
            let sig = try r.string("signature")
            try r.expectEnd("sign response")
            return sig
        } catch let e as Failure { throw e } catch { throw .malformed("\(error)") }
    }

    private func readExactly(_ n: Int) throws(Failure) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        var got = 0
        while got < n {
            let k = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, n - got, 0) }
            if k < 0 && errno == EINTR { continue }
            guard k > 0 else { throw .closed }
            got += k
        }
        return out
    }
}

enum SSHReaderShim {
    static func uint32(_ b: inout [UInt8]) throws(AgentClient.Failure) -> UInt32 {
        var r = SSHReader(b)
        do { return try r.uint32("length") } catch { throw .malformed("short length") }
    }
}
