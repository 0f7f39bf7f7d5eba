#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// Serialises writes to one socket (replies from its own thread, events from others) and makes
/// sure nothing is written after close, when the descriptor number could already name another
/// file.
public final class SocketWriter: Sendable {
    private let fd: Int32
    private let closed = Mutex<Bool>(false)

    public init(fd: Int32) { self.fd = fd }

    /// Writes `frame` followed by `terminator` (a newline for NDJSON; nil for none); false when
    /// closed or the peer is gone.
    public func send(_ frame: [UInt8], terminator: UInt8? = 0x0a) -> Bool {
        closed.withLock { closed in
            guard !closed else { return false }
            guard let terminator else { return UnixSocket.writeAll(fd, frame) }
            var bytes = frame
            bytes.append(terminator)
            return UnixSocket.writeAll(fd, bytes)
        }
    }

    /// Closes the socket (once; later sends fail).
    public func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            Glibc.close(fd)
        }
    }

    /// Shuts the socket down for both directions without closing the descriptor: a reader
    /// blocked on it wakes with end of stream (the owner closes it afterwards).
    public func shutdown() {
        closed.withLock { closed in
            guard !closed else { return }
            _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
        }
    }
}
