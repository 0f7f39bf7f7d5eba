import Testing
import Foundation
import Glibc
import SiteKeepBridgeProtocol
import SiteKeepJSON
import SiteKeepSocket

/// The bridge's client framing (``FrameReceiver``), the one reader of ``BridgeClient`` and the
/// browser's pipelined channel, over a real socket pair: a line split across sends, a line over
/// the limit, a closed socket.
@Suite struct FramingTests {
    /// A connected pair of stream sockets: (ours, the peer's).
    static func pair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw BridgeError.socket(call: "socketpair", errno: errno) }
        return (fds[0], fds[1])
    }

    static func write(_ fd: Int32, _ text: String) { _ = UnixSocket.writeAll(fd, Array(text.utf8)) }

    static func text(_ frame: FrameReader.Frame?) -> String? {
        guard case .frame(let bytes)? = frame else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A line whose halves arrive 100 ms apart is one frame; a CR before the newline is not part of it.
    @Test func aSplitLineIsOneFrame() throws {
        let (mine, peer) = try Self.pair()
        defer { close(mine); close(peer) }
        var frames = FrameReceiver(fd: mine)
        Self.write(peer, #"{"id":1,"ok":tr"#)
        let later = Thread { usleep(100_000); Self.write(peer, "ue}\r\n{\"id\":2,\"ok\":true}\n") }
        later.start()
        #expect(Self.text(try frames.next(until: ContinuousClock.now.advanced(by: .seconds(5)))) == #"{"id":1,"ok":true}"#)
        #expect(Self.text(try frames.next(until: ContinuousClock.now.advanced(by: .seconds(5)))) == #"{"id":2,"ok":true}"#)
        #expect(throws: BridgeError.timeout) { _ = try frames.next(until: ContinuousClock.now.advanced(by: .milliseconds(50))) }
    }

    /// A line over the limit is reported once as oversized and skipped to its newline; the next
    /// line is read. Both clients read with the same limit.
    @Test func anOverlongLineIsSkipped() throws {
        let (mine, peer) = try Self.pair()
        defer { close(mine); close(peer) }
        var frames = FrameReceiver(fd: mine, maxFrame: 16)
        Self.write(peer, String(repeating: "x", count: 40) + "\n" + #"{"ok":1}"# + "\n")
        #expect(try frames.next(until: ContinuousClock.now.advanced(by: .seconds(5))) == .oversized)
        #expect(Self.text(try frames.next(until: ContinuousClock.now.advanced(by: .seconds(5)))) == #"{"ok":1}"#)
        #expect(FrameReceiver(fd: mine).maxFrame == BridgeFraming.maximumReply)
        #expect(BridgeFraming.maximumReply == 16 << 20)
    }

    /// At the end of the stream the reader says so; bytes after the last newline are not a frame.
    @Test func aClosedSocketEndsTheFrames() throws {
        let (mine, peer) = try Self.pair()
        defer { close(mine) }
        var frames = FrameReceiver(fd: mine)
        Self.write(peer, "{\"id\":1}\n{\"partial")
        close(peer)
        #expect(Self.text(try frames.next()) == #"{"id":1}"#)
        #expect(try frames.next() == nil)
    }

    /// BridgeClient reads through the same framing: a reply over 16 MiB is skipped (the wait goes
    /// on to the next reply), a reply split across sends is whole, and a closed socket is
    /// ``BridgeError/connectionClosed``.
    @Test func bridgeClientReadsThroughTheSharedFraming() throws {
        let (mine, peer) = try Self.pair()
        defer { close(peer) }
        let client = BridgeClient.adopting(fd: mine, timeout: .seconds(20))
        let daemon = Thread {
            var request: [UInt8] = []
            var b: UInt8 = 0
            while recv(peer, &b, 1, 0) == 1, b != 0x0a { request.append(b) }
            Self.write(peer, String(repeating: "x", count: BridgeFraming.maximumReply + 1) + "\n")
            Self.write(peer, #"{"id":1,"ok":true,"re"#)
            usleep(100_000)
            Self.write(peer, #"sult":{"value":"after"}}"# + "\n")
            while recv(peer, &b, 1, 0) == 1, b != 0x0a {}
            shutdown(peer, Int32(SHUT_RDWR))
        }
        daemon.start()
        #expect(try client.call("storage.get", args: ["key": "k"]) == ["value": "after"])
        #expect(throws: BridgeError.connectionClosed) { _ = try client.call("storage.get", args: ["key": "k"]) }
        client.close()
    }

    /// However a stream of lines is cut into reads, the frames are the same: each line without
    /// its newline (and a CR before it), empty lines skipped, a line over the limit reported once
    /// as oversized whether it arrives in one read or across many. Checked against a plain
    /// line split for 300 random streams and cuts (a line that ends inside one read is copied
    /// straight into its frame; one that spans reads goes through the reader's buffer).
    @Test func framesDoNotDependOnHowTheStreamIsCut() {
        var rng = SystemRandomNumberGenerator()
        let limit = 24
        for _ in 0..<300 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 0...12, using: &rng) {
                let length = [0, 1, 5, limit - 1, limit, limit + 1, 40].randomElement(using: &rng)!
                stream += (0..<length).map { _ in UInt8.random(in: 0x61...0x7a, using: &rng) }
                if Bool.random(using: &rng) { stream.append(0x0d) }
                stream.append(0x0a)
            }
            // The plain split: what every cut must give.
            var expected: [FrameReader.Frame] = []
            var line: [UInt8] = []
            for b in stream {
                guard b == 0x0a else { line.append(b); continue }
                if line.count > limit { expected.append(.oversized) } else {
                    if line.last == 0x0d { line.removeLast() }
                    if !line.isEmpty { expected.append(.frame(line)) }
                }
                line = []
            }
            var reader = FrameReader(maxFrame: limit)
            var got: [FrameReader.Frame] = []
            var at = 0
            while at < stream.count {
                let n = min(stream.count - at, Int.random(in: 1...60, using: &rng))
                got += stream[at..<(at + n)].withUnsafeBytes { reader.feed($0) }
                at += n
            }
            #expect(got == expected, "stream \(String(decoding: stream, as: UTF8.self).debugDescription)")
        }
    }
}
