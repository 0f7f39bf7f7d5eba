#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SiteKeepSocket

/// The sockets' one serve loop (``SocketConnection/serveFrames(splitting:chunkBytes:wipingReads:_:)``),
/// which the bridge, the ssh-agent and (for its admission) the control server run: frames cut
/// across receives and several in one receive are each answered in order, a bound the splitter
/// keeps reaches the handler as its own frame, and a handler's "no more" closes the connection.
@Suite struct FramedLoopTests {
    /// Lines of at most 8 bytes; a longer one is `"<too long>"` (skipped to its newline).
    struct Lines: FrameSplitter {
        var line: [UInt8] = []
        var skipping = false
        mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [String] {
            var out: [String] = []
            for b in bytes {
                if b == 0x0a {
                    out.append(skipping ? "<too long>" : String(decoding: line, as: UTF8.self))
                    line.removeAll()
                    skipping = false
                } else if !skipping {
                    line.append(b)
                    if line.count > 8 { line.removeAll(); skipping = true }
                }
            }
            return out
        }
    }

    /// A listener whose connections echo each line as `re:LINE`, and end after a line `bye`.
    private static func lineServer(_ path: String) throws -> SocketListener {
        let listener = try SocketListener(path: path)
        listener.start { c in
            guard c.admit(sendTimeout: 5) != nil else { return }
            // A 4-byte buffer: every frame arrives in pieces.
            c.serveFrames(splitting: Lines(), chunkBytes: 4) { line in
                guard c.writer.send(Array("re:\(line)".utf8)) else { return false }
                return line != "bye"
            }
        }
        return listener
    }

    /// Everything the peer sends until it closes (nil after 10 s without end of stream). A
    /// server that closes with bytes of ours unread resets the connection: that is its end too.
    private static func readToEnd(_ fd: Int32) -> String? {
        UnixSocket.setReceiveTimeout(fd, seconds: 10)
        var all: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 || (n < 0 && errno == ECONNRESET) { return String(decoding: all, as: UTF8.self) }
            guard n > 0 else { return nil }
            all += buffer[0..<n]
        }
    }

    @Test func framesInPiecesAndTogetherAreAnsweredInOrderUntilTheHandlerEnds() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-frames-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let listener = try Self.lineServer(dir + "/s.sock")
        defer { listener.shutdown() }
        let fd = try UnixSocket.connect(path: dir + "/s.sock", remedy: "test")
        defer { close(fd) }
        // Three frames in one write, one over the bound, then `bye`, then a frame after it that
        // must not be answered: the handler ended the connection.
        #expect(UnixSocket.writeAll(fd, Array("a\nbcdefg\nxy\n0123456789abc\nbye\nlate\n".utf8)))
        #expect(Self.readToEnd(fd) == "re:a\nre:bcdefg\nre:xy\nre:<too long>\nre:bye\n")
    }

    @Test func aPeerThatClosesMidFrameEndsTheLoop() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-frames-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let listener = try Self.lineServer(dir + "/s.sock")
        let fd = try UnixSocket.connect(path: dir + "/s.sock", remedy: "test")
        #expect(UnixSocket.writeAll(fd, Array("one\ntw".utf8)))
        var buffer = [UInt8](repeating: 0, count: 64)
        UnixSocket.setReceiveTimeout(fd, seconds: 10)
        let n = recv(fd, &buffer, buffer.count, 0)
        #expect(n > 0 && String(decoding: buffer[0..<n], as: UTF8.self) == "re:one\n")
        close(fd)
        // The serving thread returns at end of stream (the partial frame dropped), so the
        // shutdown that waits for every handler returns.
        listener.shutdown()
    }
}
