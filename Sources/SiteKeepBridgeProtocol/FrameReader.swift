import Glibc
public import SiteKeepJSON
import SiteKeepSocket
import SiteKeepSystem

/// Splits a byte stream into newline-terminated frames of at most `maxFrame` bytes.
///
/// A line longer than `maxFrame` is skipped up to its newline and reported once as
/// ``Frame/oversized``, so one bad frame does not end the connection.
public struct FrameReader: Sendable {
    public enum Frame: Sendable, Equatable {
        case frame([UInt8])
        case oversized
    }
    public let maxFrame: Int
    private var buffer: [UInt8] = []
    private var discarding = false

    public init(maxFrame: Int) { self.maxFrame = maxFrame }

    /// Adds bytes and returns the complete frames they finish.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Frame] {
        var out: [Frame] = []
        guard let base = bytes.baseAddress, bytes.count > 0 else { return out }
        var start = 0
        // memchr finds each newline (a reply is kilobytes of base64: a loop over every byte
        // was a measurable part of a client's wait for it).
        while start < bytes.count, let hit = memchr(base + start, 0x0a, bytes.count - start) {
            let end = base.distance(to: UnsafeRawPointer(hit))
            if discarding {
                discarding = false
                out.append(.oversized)
            } else if buffer.isEmpty {
                // The whole line is in these bytes: one copy, straight into the frame.
                var line = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
                if line.count > maxFrame {
                    out.append(.oversized)
                } else {
                    if line.last == 0x0d { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
                    if !line.isEmpty { out.append(.frame(Array(line))) }
                }
            } else {
                buffer.append(contentsOf: bytes[start..<end])
                if buffer.count > maxFrame {
                    out.append(.oversized)
                } else {
                    if buffer.last == 0x0d { buffer.removeLast() }
                    if !buffer.isEmpty { out.append(.frame(buffer)) }
                }
                buffer.removeAll(keepingCapacity: true)
            }
            start = end + 1
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

/// The bridge's wire: one JSON value per line (newline-delimited), both ways.
public enum BridgeFraming {
    /// The longest reply or event line a client reads (16 MiB). ``BridgeClient`` and the
    /// browser's pipelined channel read with this limit; the daemon's own limit for requests is
    /// the smaller ``JSONLimits/message``.
    public static let maximumReply = 16 << 20

    /// `value` as one frame: compact JSON and a newline.
    public static func frame(_ value: JSONValue) -> [UInt8] {
        var bytes = JSONSerializer.bytes(value, style: .compact)
        bytes.append(0x0a)
        return bytes
    }
}

/// The frames arriving on a connected stream socket: ``FrameReader``'s splitting over blocking
/// receives, one frame at a time. The one reader of the bridge's clients (``BridgeClient`` and
/// the browser's channel), so a line split across receives, a line over the limit and a closed
/// socket mean the same to both.
public struct FrameReceiver: Sendable {
    /// The socket read from (the owner closes it).
    public let fd: Int32
    private var reader: FrameReader
    private var ready: [FrameReader.Frame] = []

    /// - Parameter maxFrame: the longest line taken (``BridgeFraming/maximumReply`` for a client).
    public init(fd: Int32, maxFrame: Int = BridgeFraming.maximumReply) {
        self.fd = fd
        reader = FrameReader(maxFrame: maxFrame)
    }

    /// The longest line taken.
    public var maxFrame: Int { reader.maxFrame }

    /// The next frame, or ``FrameReader/Frame/oversized`` for a line over the limit (skipped to
    /// its newline); nil when the peer closed the connection (bytes after the last newline are
    /// not a frame).
    /// - Parameters:
    ///   - deadline: when to give up with ``BridgeError/timeout`` (nil: wait as long as it takes).
    ///   - spin: how long to look for bytes without sleeping before each blocking wait.
    /// - Throws: ``BridgeError/timeout``, or ``BridgeError/socket(call:errno:)`` when `poll` or `recv` fails.
    public mutating func next(until deadline: ContinuousClock.Instant? = nil, spin: Duration = .zero) throws(BridgeError) -> FrameReader.Frame? {
        if !ready.isEmpty { return ready.removeFirst() }
        // A receive buffer on the stack: no allocation or zeroing per frame.
        return try withUnsafeTemporaryAllocation(byteCount: 16 << 10, alignment: 16) { chunk throws(BridgeError) -> FrameReader.Frame? in
            while true {
                if !ready.isEmpty { return ready.removeFirst() }
                if let deadline {
                    let left = Clocks.monotonicNow().duration(to: deadline)
                    guard left > .zero else { throw .timeout }
                    let ms = Int32(min(Int64(left.components.seconds) * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 3_600_000))
                    let spinNs = UInt64(spin.components.seconds) * 1_000_000_000 + UInt64(spin.components.attoseconds / 1_000_000_000)
                    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    let rc = UnixSocket.spinUntilReadable(fd, spinNanoseconds: spinNs) ? 1 : poll(&p, 1, ms)
                    if rc < 0 { if errno == EINTR { continue } else { throw .socket(call: "poll", errno: errno) } }
                    if rc == 0 { continue }
                }
                let n = recv(fd, chunk.baseAddress, chunk.count, 0)
                if n < 0 { if errno == EINTR { continue } else { throw .socket(call: "recv", errno: errno) } }
                if n == 0 { return nil }
                ready.append(contentsOf: reader.feed(UnsafeRawBufferPointer(rebasing: chunk[0..<n])))
            }
        }
    }
}
