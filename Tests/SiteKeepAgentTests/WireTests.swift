import Testing
@testable import SiteKeepAgent
import SiteKeepWiring

/// The agent protocol's framing and request decoder: what a malformed client can send.
@Suite struct WireTests {
    static func feed(_ reader: inout AgentFrameReader, _ bytes: [UInt8]) -> [AgentFrameReader.Event] {
        bytes.withUnsafeBytes { reader.feed($0) }
    }

    @Test func framesAreSplitWhateverTheChunking() {
        let a = AgentFrameReader.frame([11]), b = AgentFrameReader.frame([13, 1, 2, 3])
        let stream = a + b + a
        for cut in 0...stream.count {
            var reader = AgentFrameReader()
            let events = Self.feed(&reader, Array(stream[..<cut])) + Self.feed(&reader, Array(stream[cut...]))
            #expect(events == [.message([11]), .message([13, 1, 2, 3]), .message([11])], "cut at \(cut)")
            #expect(!reader.hasPartialMessage)
        }
    }

    @Test func aTruncatedMessageStaysPartial() {
        var reader = AgentFrameReader()
        #expect(Self.feed(&reader, [0, 0, 0, 9, 13, 0]).isEmpty)
        #expect(reader.hasPartialMessage)
    }

    /// A length over 256 KiB ends the stream: nothing after it is read as a message.
    @Test func aLengthOver256KiBIsRefusedOnce() {
        var reader = AgentFrameReader()
        let exact = UInt32(AgentFrameReader.maximumMessageBytes)
        #expect(Self.feed(&reader, [0x00, 0x04, 0x00, 0x00]).isEmpty)   // exactly 256 KiB: fine, waits for the body
        var over = AgentFrameReader()
        let n = exact + 1
        let events = Self.feed(&over, [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + AgentFrameReader.frame([11]))
        #expect(events == [.tooLong(n)])
        #expect(Self.feed(&over, AgentFrameReader.frame([11])).isEmpty)
    }

    @Test func requestsDecode() throws {
        #expect(try AgentRequest.decode([11]) == .requestIdentities)
        #expect(try AgentRequest.decode(signRequest(blob: [1, 2], data: [3], flags: 4)) == .sign(keyBlob: [1, 2], data: [3], flags: 4))
        #expect(try AgentRequest.decode(extensionRequest("query")) == .extension(name: "query", contents: []))
        #expect(try AgentRequest.decode(extensionRequest("x@example.com", [9, 9])) == .extension(name: "x@example.com", contents: [9, 9]))
        for t in AgentMessageType.keyManagement { #expect(try AgentRequest.decode([t, 0, 0]) == .keyManagement(type: t)) }
        #expect(try AgentRequest.decode([1]) == .unknown(type: 1))
        #expect(try AgentRequest.decode([200, 1, 2]) == .unknown(type: 200))
    }

    /// Truncated lengths, short fields and trailing bytes are errors, never a crash or a read
    /// past the end.
    @Test(arguments: [
        [UInt8](),                                            // no type
        [13],                                                 // sign: no key blob
        [13, 0, 0, 0, 5, 1, 2],                               // key blob shorter than its length
        [13, 0xff, 0xff, 0xff, 0xff],                         // a 4 GiB length
        [13, 0, 0, 0, 1, 1, 0, 0, 0, 1, 2, 0, 0],             // flags truncated
        [13, 0, 0, 0, 1, 1, 0, 0, 0, 1, 2, 0, 0, 0, 0, 9],    // trailing byte
        [11, 0],                                              // identities request with contents
        [27, 0, 0, 0, 3, 0x71, 0x75],                         // extension name truncated
        [27, 0, 0, 0, 2, 0x0a, 0x00],                         // extension name not printable
    ]) func malformedRequestsThrow(_ payload: [UInt8]) {
        #expect(throws: SSHWireError.self) { try AgentRequest.decode(payload) }
    }

    @Test func repliesEncode() {
        #expect(AgentReply.failure.framed == [0, 0, 0, 1, 5])
        #expect(AgentReply.success.framed == [0, 0, 0, 1, 6])
        #expect(AgentReply.extensionFailure.framed == [0, 0, 0, 1, 28])
        #expect(AgentReply.identities([([1], "c")]).payload == [12, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0x63])
        #expect(AgentReply.signature([7]).payload == [14, 0, 0, 0, 1, 7])
    }
}
