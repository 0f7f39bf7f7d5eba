#if canImport(Glibc)
import Glibc
#endif
internal import CLinux
import SiteKeepSystem

/// Connections handed from one process to another as descriptors (`SCM_RIGHTS`), never as
/// paths: how the daemon gives a host it started connections already bound to its sites, and
/// how a client gives the daemon the terminal a started host should use.
public enum DescriptorPassing {
    /// The most descriptors one message carries.
    public static let maximumPerMessage = 8

    /// A connected pair of Unix stream sockets, both close-on-exec.
    public static func socketPair() throws(SocketError) -> (Int32, Int32) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw .call("socketpair", errno: .current)
        }
        return (pair[0], pair[1])
    }

    /// Sends all of `bytes` (at least one) on `socket`, with `descriptors` attached to the first
    /// byte. The descriptors stay open here (the receiver gets copies).
    public static func send(_ socket: Int32, _ bytes: [UInt8], descriptors: [Int32]) throws(SocketError) {
        precondition(!bytes.isEmpty && descriptors.count <= maximumPerMessage)
        let n = bytes.withUnsafeBytes { raw in
            descriptors.withUnsafeBufferPointer { fds in
                sitekeep_send_fds(socket, raw.baseAddress, UInt(raw.count), fds.baseAddress, Int32(fds.count))
            }
        }
        guard n > 0 else { throw .call("sendmsg", errno: .current) }
        if n < bytes.count, !UnixSocket.writeAll(socket, Array(bytes[n...])) {
            throw .call("send", errno: .current)
        }
    }

    /// One line (up to and without its `\n`, at most `limit` bytes) from `socket`, read a byte
    /// at a time so nothing after the line is consumed, with the descriptors that arrived with
    /// it (close-on-exec; the caller owns them). Nil at the end of the stream, on an error, on a
    /// line longer than `limit`, or when more descriptors came than `maximumDescriptors` (all of
    /// them are closed then).
    public static func receiveLine(_ socket: Int32, limit: Int, maximumDescriptors: Int) -> (line: [UInt8], descriptors: [Int32])? {
        var line: [UInt8] = []
        var descriptors: [Int32] = []
        var fds = [Int32](repeating: -1, count: maximumPerMessage)
        func fail() -> (line: [UInt8], descriptors: [Int32])? {
            for fd in descriptors { close(fd) }
            return nil
        }
        while line.count <= limit {
            var byte: UInt8 = 0
            var count: Int32 = 0
            var truncated: Int32 = 0
            let room = Int32(max(0, min(maximumPerMessage, maximumDescriptors - descriptors.count)))
            let n = fds.withUnsafeMutableBufferPointer { f in
                sitekeep_recv_fds(socket, &byte, 1, f.baseAddress, room, &count, &truncated)
            }
            descriptors += fds.prefix(Int(count))
            if truncated != 0 || n <= 0 { return fail() }
            if byte == 0x0a { return (line, descriptors) }
            line.append(byte)
        }
        return fail()
    }
}
