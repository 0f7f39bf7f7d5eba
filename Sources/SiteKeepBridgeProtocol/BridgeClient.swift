import Glibc
import SiteKeepSystem
import Synchronization
public import SiteKeepJSON
import SiteKeepSocket

/// A blocking client for the daemon's socket: connect, `hello`, call ops, receive events.
///
/// Used by the tests, the benchmark and `sitekeep call`. One request at a time per client; events
/// that arrive while waiting for a reply are kept for ``nextEvent(timeout:)``.
///
/// ```swift
/// let client = try BridgeClient.connect()
/// let hello = try client.hello(origin: "https://promptugal.news")
/// let picks = try client.call("schedule.get")
/// ```
public final class BridgeClient: Sendable {
    private struct State {
        var events: [(name: String, data: JSONValue)] = []
        var nextID: Int64 = 1
    }
    private let fd: Int32
    private let state = Mutex(State())
    /// The frames arriving (the framing the browser's channel shares); held only while reading.
    private let receiver: Mutex<FrameReceiver>
    private let writer: SocketWriter
    /// How long to wait for a reply.
    public let timeout: Duration
    /// How long to look for a reply without sleeping before blocking (zero: block at once).
    public let spin: Duration

    private init(fd: Int32, timeout: Duration, spin: Duration) {
        self.fd = fd
        self.timeout = timeout
        self.spin = spin
        writer = SocketWriter(fd: fd)
        receiver = Mutex(FrameReceiver(fd: fd))
    }

    deinit { writer.close() }

    /// Connects to `path`, or to ``DaemonSockets/bridge(environment:)`` when nil, after the
    /// checks every client makes before sending (folder private to this user, socket file and
    /// listener this user's; see ``BridgeError/untrustedSocket(path:reason:)``).
    /// - Parameter spin: how long each wait for a reply polls without sleeping first (a
    ///   benchmark or latency-bound caller may set ~100 µs; the default blocks at once).
    public static func connect(path: String? = nil, timeout: Duration = .seconds(30), spin: Duration = .zero) throws(BridgeError) -> BridgeClient {
        let p: String
        if let path { p = path } else { p = try DaemonSockets.bridge(environment: ProcessEnvironment.current()) }
        do { return BridgeClient(fd: try UnixSocket.connect(path: p, remedy: clientRemedy), timeout: timeout, spin: spin) } catch {
            throw BridgeError(error)
        }
    }

    /// What a client tells the user when it refuses a socket.
    public static let clientRemedy = "start 'sitekeep serve' yourself and point SITEKEEP_SOCK into a folder only you can enter (mode 0700), or unset it to use $XDG_RUNTIME_DIR/sitekeep/bridge.sock"

    /// A client over a socket that is already connected (the caller checked it); the client
    /// owns and closes it.
    public static func adopting(fd: Int32, timeout: Duration = .seconds(30), spin: Duration = .zero) -> BridgeClient {
        BridgeClient(fd: fd, timeout: timeout, spin: spin)
    }

    /// Closes the connection.
    public func close() { writer.close() }

    /// Binds the connection to `origin`'s site; returns the protocol version and the allowed ops.
    public func hello(origin: String) throws(BridgeError) -> (version: Int, ops: [String]) {
        let r = try call("hello", args: ["origin": .string(origin)])
        guard let v = r["version"]?.intValue, let ops = r["ops"]?.arrayValue?.compactMap(\.stringValue) else {
            throw .protocolViolation("hello reply lacks version or ops")
        }
        return (Int(v), ops)
    }

    /// Calls `op` and returns its `result`.
    /// - Throws: ``BridgeError/reply(_:)`` with the daemon's error reply.
    public func call(_ op: String, args: JSONValue = .object([]), origin: String? = nil) throws(BridgeError) -> JSONValue {
        let id = state.withLock { s -> Int64 in defer { s.nextID += 1 }; return s.nextID }
        let reply = try send(BridgeRequest(id: .int(id), op: op, args: args, origin: origin))
        switch reply {
        case .success(_, let result): return result
        case .failure(_, let f): throw .reply(f)
        case .event: throw .protocolViolation("an event where a reply was due")
        }
    }

    /// Sends `request` and returns its reply (success or failure).
    public func send(_ request: BridgeRequest) throws(BridgeError) -> BridgeMessage {
        try sendRaw(JSONSerializer.bytes(request.json, style: .compact))
        return try nextReply()
    }

    /// Writes `frame` and a newline as they are (for tests of malformed frames).
    public func sendRaw(_ frame: [UInt8]) throws(BridgeError) {
        guard writer.send(frame) else { throw .connectionClosed }
    }

    /// The next reply frame, keeping events that arrive first.
    public func nextReply() throws(BridgeError) -> BridgeMessage {
        while true {
            let message = try BridgeMessage.parse(try nextFrame(timeout: timeout))
            if case let .event(name, data) = message {
                state.withLock { $0.events.append((name, data)) }
                continue
            }
            return message
        }
    }

    /// The next event, waiting up to `timeout`.
    public func nextEvent(timeout: Duration = .seconds(5)) throws(BridgeError) -> (name: String, data: JSONValue) {
        if let e = state.withLock({ s in s.events.isEmpty ? nil : s.events.removeFirst() }) { return e }
        let message = try BridgeMessage.parse(try nextFrame(timeout: timeout))
        guard case let .event(name, data) = message else { throw .protocolViolation("a reply where an event was due") }
        return (name, data)
    }

    private func nextFrame(timeout: Duration) throws(BridgeError) -> [UInt8] {
        let deadline = Clocks.monotonicNow().advanced(by: timeout)
        let spin = spin
        return try receiver.withLock { r throws(BridgeError) -> [UInt8] in
            while true {
                // A line over the limit is skipped: its reply cannot be read, so the wait goes on
                // (and ends in a timeout when it was the reply awaited).
                guard let frame = try r.next(until: deadline, spin: spin) else { throw .connectionClosed }
                if case .frame(let bytes) = frame { return bytes }
            }
        }
    }
}
