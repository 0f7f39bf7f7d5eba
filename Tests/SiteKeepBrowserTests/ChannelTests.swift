import Foundation
import Synchronization
import Testing
import SiteKeepBridgeProtocol
import SiteKeepBrowserCore
import SiteKeepJSON
import SiteKeepSocket
#if canImport(Glibc)
import Glibc
#endif

/// A daemon stand-in on a real Unix socket in a private folder: it accepts one connection,
/// answers `hello`, and then does what the test says with the connection.
final class ScriptedDaemon: Sendable {
    let dir: String
    let path: String
    private let listener: Int32

    init() throws {
        var template = Array("\(NSTemporaryDirectory())/sk-channel.XXXXXX".utf8CString)
        guard let d = mkdtemp(&template) else { throw RigError("mkdtemp failed") }
        dir = String(cString: d)
        path = dir + "/bridge.sock"
        do { listener = try UnixSocket.listen(path: path) } catch { throw RigError("cannot listen at \(path): \(error)") }
    }

    deinit {
        close(listener)
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// One line from `fd` (without its newline); nil at the end of the stream.
    static func line(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var b: UInt8 = 0
        while true {
            guard recv(fd, &b, 1, 0) == 1 else { return nil }
            if b == 0x0a { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(b)
        }
    }

    static func write(_ fd: Int32, _ text: String) { _ = UnixSocket.writeAll(fd, Array(text.utf8)) }

    /// Serves the next connection on a thread: `hello` is answered, then `script` runs.
    func serve(_ script: @escaping @Sendable (Int32) -> Void) {
        let listener = listener
        Thread.detachNewThread {
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            _ = Self.line(fd)
            Self.write(fd, #"{"id":0,"ok":true,"result":{"version":1,"ops":["hello","storage.get"]}}"# + "\n")
            script(fd)
            close(fd)
        }
    }
}

/// What the channel hands back, gathered across its reader thread.
final class ChannelLog: Sendable {
    private let state = Mutex<(replies: [String], events: [String], closed: Bool)>(([], [], false))
    func reply(_ r: PageReply) { state.withLock { $0.replies.append(r.text) } }
    func event(_ name: String) { state.withLock { $0.events.append(name) } }
    func close() { state.withLock { $0.closed = true } }
    var replies: [String] { state.withLock { $0.replies } }
    var events: [String] { state.withLock { $0.events } }
    var closed: Bool { state.withLock { $0.closed } }

    /// Waits up to 10 s for `done`.
    func wait(_ done: () -> Bool) -> Bool {
        for _ in 0..<200 {
            if done() { return true }
            usleep(50_000)
        }
        return false
    }
}

/// The browser's pipelined channel reads the bridge through the shared framing (``FrameReceiver``),
/// matching replies to its own requests by id: a reply split across sends is whole, a line over
/// the limit ends the connection with every waiting request answered, a closed socket too.
@Suite(.serialized) struct BrowserChannelTests {
    func open(_ daemon: ScriptedDaemon, _ log: ChannelLog) throws -> any BridgeChannel {
        try SocketDaemonLink(bridgePath: daemon.path).open(origin: "http://127.0.0.1:8001", onEvent: { name, _ in log.event(name) },
                                                           onClose: { log.close() })
    }

    /// Two requests in flight, answered out of order, the first reply split across two sends
    /// 100 ms apart with an event between the replies: each reply reaches its own request.
    @Test func aSplitReplyReachesItsRequest() throws {
        let daemon = try ScriptedDaemon()
        daemon.serve { fd in
            _ = ScriptedDaemon.line(fd)
            _ = ScriptedDaemon.line(fd)
            ScriptedDaemon.write(fd, #"{"id":2,"ok":true,"result":{"value":"second"}}"# + "\n" + #"{"event":"schedule.changed","data":{}}"# + "\n")
            ScriptedDaemon.write(fd, #"{"id":1,"ok":true,"re"#)
            usleep(100_000)
            ScriptedDaemon.write(fd, #"sult":{"value":"first"}}"# + "\n")
            _ = ScriptedDaemon.line(fd)
        }
        let log = ChannelLog()
        let channel = try open(daemon, log)
        #expect(channel.version == 1 && channel.ops.contains("storage.get"))
        let first = ChannelLog(), second = ChannelLog()
        channel.send(op: "storage.get", args: ["key": "a"]) { first.reply($0) }
        channel.send(op: "storage.get", args: ["key": "b"]) { second.reply($0) }
        #expect(first.wait { !first.replies.isEmpty } && second.wait { !second.replies.isEmpty })
        #expect(first.replies == [#"{"ok":true,"result":{"value":"first"}}"#])
        #expect(second.replies == [#"{"ok":true,"result":{"value":"second"}}"#])
        #expect(log.events == ["schedule.changed"])
        channel.close()
        #expect(log.wait { log.closed })
    }

    /// A reply line over the limit (16 MiB, as BridgeClient's) cannot be matched to its request:
    /// the channel closes, the waiting request is answered with an error that says why, and
    /// later requests are refused at once.
    @Test func anOverlongLineEndsTheConnection() throws {
        let daemon = try ScriptedDaemon()
        daemon.serve { fd in
            _ = ScriptedDaemon.line(fd)
            ScriptedDaemon.write(fd, String(repeating: "x", count: BridgeFraming.maximumReply + 1) + "\n")
            ScriptedDaemon.write(fd, #"{"id":1,"ok":true,"result":{}}"# + "\n")
            _ = ScriptedDaemon.line(fd)
        }
        let log = ChannelLog()
        let channel = try open(daemon, log)
        let waiting = ChannelLog()
        channel.send(op: "storage.get", args: ["key": "a"]) { waiting.reply($0) }
        #expect(waiting.wait { !waiting.replies.isEmpty })
        let reply = try JSONParser.parse(Array((waiting.replies.first ?? "{}").utf8))
        #expect(reply["ok"]?.boolValue == false)
        #expect(reply["error"]?["message"]?.stringValue?.contains("longer than \(BridgeFraming.maximumReply) bytes") == true, "\(waiting.replies)")
        #expect(log.wait { log.closed }, "the channel did not close")
        let late = ChannelLog()
        channel.send(op: "storage.get", args: ["key": "b"]) { late.reply($0) }
        #expect(late.replies.first?.contains("is closed") == true, "\(late.replies)")
    }

    /// The daemon closing the socket answers every waiting request and tells the owner.
    @Test func aClosedSocketAnswersWhatWaits() throws {
        let daemon = try ScriptedDaemon()
        daemon.serve { fd in
            _ = ScriptedDaemon.line(fd)
            ScriptedDaemon.write(fd, #"{"id":1,"ok":tr"#)
        }
        let log = ChannelLog()
        let channel = try open(daemon, log)
        let waiting = ChannelLog()
        channel.send(op: "storage.get", args: ["key": "a"]) { waiting.reply($0) }
        #expect(waiting.wait { !waiting.replies.isEmpty })
        #expect(waiting.replies.first?.contains("closed") == true && waiting.replies.first?.contains(#""ok":false"#) == true, "\(waiting.replies)")
        #expect(log.wait { log.closed })
    }
}
