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
