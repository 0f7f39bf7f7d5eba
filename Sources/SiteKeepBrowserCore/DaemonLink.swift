import Foundation
import Glibc
import Synchronization
import SiteKeepSystem
public import SiteKeepJSON
import SiteKeepSocket
import SiteKeepBridgeProtocol

/// Why the browser could not talk to the daemon. Each case says what to do.
public enum DaemonLinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No daemon answers at the socket.
    case notRunning(String)
    /// The daemon refused (its error code and message).
    case refused(code: String, message: String)
    /// The daemon's answer was not what the protocol says.
    case protocolViolation(String)
    /// The connection closed.
    case closed

    public var description: String {
        switch self {
        case .notRunning(let path): "no SiteKeep daemon answers at \(path); start it with 'sitekeep serve' (and 'sitekeep unlock')"
        case .refused(let code, let message): "the daemon refused: \(code): \(message)"
        case .protocolViolation(let what): "the daemon's answer breaks the protocol: \(what)"
        case .closed: "the daemon closed the connection"
        }
    }
}

/// What the browser needs from the daemon, and nothing more: the app-bound sites (with the
/// folder each keeps its web data in) and one bridge connection per view, bound to a site.
public protocol DaemonLink: Sendable {
    /// The app-bound sites.
    func sites() throws(DaemonLinkError) -> [BrowserSite]
    /// Opens a connection and binds it to the site of `origin` (`hello`). `onEvent` and
    /// `onClose` are called on the connection's reader thread.
    func open(origin: String, onEvent: @escaping @Sendable (String, JSONValue) -> Void,
              onClose: @escaping @Sendable () -> Void) throws(DaemonLinkError) -> any BridgeChannel
}

/// One bridge connection, bound to one site by its `hello`.
public protocol BridgeChannel: AnyObject, Sendable {
    /// The protocol version `hello` returned.
    var version: Int { get }
    /// The ops `hello` listed for the site.
    var ops: [String] { get }
    /// Sends `op` with `args` for the connection's site; `reply` runs on the reader thread.
    func send(op: String, args: JSONValue, reply: @escaping @Sendable (PageReply) -> Void)
    /// Closes the connection; pending requests are answered with an error.
    func close()
}

/// The daemon on its Unix sockets: the bridge socket (`$SITEKEEP_SOCK`, else
/// `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`) and `control.sock` beside it, newline-delimited JSON.
public struct SocketDaemonLink: DaemonLink {
    public let bridgePath: String
    public var controlPath: String { DaemonSockets.besideBridge(bridgePath) }

    public init(bridgePath: String) { self.bridgePath = bridgePath }

    /// The daemon's socket for this environment.
    public init(environment: [String: String]) throws(DaemonLinkError) {
        do { self.init(bridgePath: try DaemonSockets.bridge(environment: environment)) } catch {
            throw .notRunning("$XDG_RUNTIME_DIR/sitekeep/bridge.sock (neither SITEKEEP_SOCK nor XDG_RUNTIME_DIR is set)")
        }
    }

    public func sites() throws(DaemonLinkError) -> [BrowserSite] {
        let fd = try DaemonSocket.connect(controlPath)
        defer { Glibc.close(fd) }
        guard DaemonSocket.writeAll(fd, Array(#"{"op":"sites","length":0}"#.utf8) + [0x0a]) else { throw .closed }
        var frames = FrameReceiver(fd: fd)
        let line = try DaemonSocket.nextLine(&frames)
        let value: JSONValue
        do { value = try JSONParser.parse(line, limits: .document) } catch { throw .protocolViolation("control reply is not JSON") }
        guard value["ok"]?.boolValue == true else {
            let message = value["error"]?.stringValue ?? "unknown error"
            if message == "unknown control op" {
                throw .refused(code: "unsupported", message: "this daemon has no 'sites' control op; update sitekeep")
            }
            throw .refused(code: "control", message: message)
        }
        guard let list = value["sites"]?.arrayValue else { throw .protocolViolation("control reply lacks sites") }
        return try list.map { s throws(DaemonLinkError) -> BrowserSite in
            guard let id = s["id"]?.stringValue, let name = s["name"]?.stringValue,
                  let origins = s["origins"]?.arrayValue?.compactMap(\.stringValue), !origins.isEmpty,
                  let folder = s["webFolder"]?.stringValue, folder.hasPrefix("/") else {
                throw .protocolViolation("a site lacks id, name, origins or webFolder")
            }
            do { return try BrowserSite(id: id, name: name, origins: origins, webFolder: folder) } catch {
                throw .protocolViolation("a site's origin is not an origin: \(error)")
            }
        }
    }

    public func open(origin: String, onEvent: @escaping @Sendable (String, JSONValue) -> Void,
                     onClose: @escaping @Sendable () -> Void) throws(DaemonLinkError) -> any BridgeChannel {
        try Self.hello(on: try DaemonSocket.connect(bridgePath), origin: origin, onEvent: onEvent, onClose: onClose)
    }

    /// Sends `hello` for `origin` on the connected bridge socket `fd` (owned from here: closed
    /// on failure) and returns the bound channel.
    static func hello(on fd: Int32, origin: String, onEvent: @escaping @Sendable (String, JSONValue) -> Void,
                      onClose: @escaping @Sendable () -> Void) throws(DaemonLinkError) -> any BridgeChannel {
        var frames = FrameReceiver(fd: fd)
        let hello: JSONValue = ["v": 1, "id": 0, "op": "hello", "args": ["origin": .string(origin)]]
        guard DaemonSocket.writeAll(fd, BridgeFraming.frame(hello)) else {
            Glibc.close(fd); throw .closed
        }
        do {
            let line = try DaemonSocket.nextLine(&frames)
            guard let reply = try? JSONParser.parse(line, limits: .document) else { throw DaemonLinkError.protocolViolation("hello reply is not JSON") }
            guard reply["ok"]?.boolValue == true else {
                let r = PageReply.from(frame: reply).json["error"]
                throw DaemonLinkError.refused(code: r?["code"]?.stringValue ?? "internal", message: r?["message"]?.stringValue ?? "")
            }
            guard let v = reply["result"]?["version"]?.intValue,
                  let ops = reply["result"]?["ops"]?.arrayValue?.compactMap(\.stringValue) else {
                throw DaemonLinkError.protocolViolation("hello reply lacks version or ops")
            }
            return SocketBridgeChannel(fd: fd, version: Int(v), ops: ops, frames: frames, onEvent: onEvent, onClose: onClose)
        } catch let e as DaemonLinkError {
            Glibc.close(fd)
            throw e
        } catch {
            Glibc.close(fd)
            throw .closed
        }
    }
}

/// The daemon as a host it started sees it: the ``HostChannel`` it was given at launch
/// (descriptor 3), which lists the sites it acts for and hands it bridge connections bound to
/// them. The only link that binds a site: a browser started any other way gets none.
public struct ChannelDaemonLink: DaemonLink {
    let channel: HostChannelClient

    /// The channel this process was started with; throws when the daemon did not start it.
    public init(environment: [String: String]) throws(DaemonLinkError) {
        do { channel = try HostChannelClient.inherited(environment: environment) } catch {
            throw .refused(code: "not_started_by_daemon", message: error.description)
        }
    }

    public func sites() throws(DaemonLinkError) -> [BrowserSite] {
        let list: JSONValue
        do { list = try channel.sites() } catch { throw Self.map(error) }
        return try (list.arrayValue ?? []).map { s throws(DaemonLinkError) -> BrowserSite in
            guard let id = s["id"]?.stringValue, let name = s["name"]?.stringValue,
                  let origins = s["origins"]?.arrayValue?.compactMap(\.stringValue), !origins.isEmpty,
                  let folder = s["webFolder"]?.stringValue, folder.hasPrefix("/") else {
                throw .protocolViolation("a site lacks id, name, origins or webFolder")
            }
            do { return try BrowserSite(id: id, name: name, origins: origins, webFolder: folder) } catch {
                throw .protocolViolation("a site's origin is not an origin: \(error)")
            }
        }
    }

    public func open(origin: String, onEvent: @escaping @Sendable (String, JSONValue) -> Void,
                     onClose: @escaping @Sendable () -> Void) throws(DaemonLinkError) -> any BridgeChannel {
        let fd: Int32
        do { fd = try channel.connect() } catch { throw Self.map(error) }
        return try SocketDaemonLink.hello(on: fd, origin: origin, onEvent: onEvent, onClose: onClose)
    }

    private static func map(_ error: HostChannelError) -> DaemonLinkError {
        switch error {
        case .notStartedByTheDaemon: .refused(code: "not_started_by_daemon", message: error.description)
        case let .refused(code, message): .refused(code: code, message: message)
        case .closed: .closed
        }
    }
}

/// A pipelined bridge connection: requests are written as they come, a reader thread matches
/// replies to requests by id and passes events on. Its framing is the bridge's own
/// (``FrameReceiver``, ``BridgeFraming``), as ``BridgeClient``'s: the same line limit, the same
/// handling of a line split across receives. A line over the limit ends the connection (the
/// reply it carried cannot be matched to its request), and every request still waiting is
/// answered with an error naming why.
final class SocketBridgeChannel: BridgeChannel {
    private struct State {
        var nextID: Int64 = 1
        var pending: [Int64: @Sendable (PageReply) -> Void] = [:]
        var closed = false
    }
    let version: Int
    let ops: [String]
    private let writer: SocketWriter
    private let state = Mutex(State())

    init(fd: Int32, version: Int, ops: [String], frames: FrameReceiver, onEvent: @escaping @Sendable (String, JSONValue) -> Void,
         onClose: @escaping @Sendable () -> Void) {
        self.version = version
        self.ops = ops
        writer = SocketWriter(fd: fd)
        Thread.detachNewThread { [self, frames] in
            var frames = frames
            var why = "the connection to the SiteKeep daemon closed"
            while true {
                let frame: FrameReader.Frame?
                do { frame = try frames.next() } catch { why = "the connection to the SiteKeep daemon failed: \(error)"; break }
                guard let frame else { break }
                guard case .frame(let line) = frame else {
                    why = "the SiteKeep daemon sent a line longer than \(frames.maxFrame) bytes; the connection was closed"
                    break
                }
                guard let message = try? JSONParser.parse(line, limits: .document) else { continue }
                if let name = message["event"]?.stringValue {
                    onEvent(name, message["data"] ?? .null)
                    continue
                }
                guard let id = message["id"]?.intValue else { continue }
                let callback = state.withLock { $0.pending.removeValue(forKey: id) }
                callback?(PageReply.from(frame: message))
            }
            let orphans = state.withLock { s -> [@Sendable (PageReply) -> Void] in
                s.closed = true
                defer { s.pending.removeAll() }
                return Array(s.pending.values)
            }
            for o in orphans { o(.error("internal", why)) }
            writer.close()
            onClose()
        }
    }

    func send(op: String, args: JSONValue, reply: @escaping @Sendable (PageReply) -> Void) {
        let id: Int64? = state.withLock { s in
            guard !s.closed else { return nil }
            defer { s.nextID += 1 }
            s.pending[s.nextID] = reply
            return s.nextID
        }
        guard let id else { reply(.error("internal", "the connection to the SiteKeep daemon is closed")); return }
        let frame: JSONValue = ["v": 1, "id": .int(id), "op": .string(op), "args": args]
        if !writer.send(BridgeFraming.frame(frame), terminator: nil), let callback = state.withLock({ $0.pending.removeValue(forKey: id) }) {
            callback(.error("internal", "the connection to the SiteKeep daemon closed"))
        }
    }

    func close() { writer.shutdown() }
}

/// Unix-socket calls, through the shared socket target: before the browser sends a byte (a
/// page's call, the site list request), the socket's folder must be private to this user, the
/// socket file this user's, and the listener's `SO_PEERCRED` uid this user's, exactly as the
/// command line checks it (a listener another user placed would otherwise hear every page).
enum DaemonSocket {
    static func connect(_ path: String) throws(DaemonLinkError) -> Int32 {
        do {
            return try UnixSocket.connect(path: path, remedy: ControlClient.remedy)
        } catch {
            if case let .untrusted(refused, reason) = error {
                throw .refused(code: "untrusted_socket", message: "refusing \(refused), nothing was sent: \(reason)")
            }
            throw .notRunning(path)
        }
    }

    /// The next line from the daemon, for a single request and reply (the site list, `hello`).
    static func nextLine(_ frames: inout FrameReceiver) throws(DaemonLinkError) -> [UInt8] {
        let frame: FrameReader.Frame?
        do { frame = try frames.next(until: Clocks.monotonicNow().advanced(by: .seconds(30))) } catch {
            if error == .timeout { throw .protocolViolation("no answer within 30 s") }
            throw .closed
        }
        switch frame {
        case .frame(let line)?: return line
        case .oversized?: throw .protocolViolation("a line longer than \(frames.maxFrame) bytes")
        case nil: throw .closed
        }
    }

    /// Sends every byte (``FileIO/writeAll(_:_:socket:)``, `MSG_NOSIGNAL`: a closed daemon is
    /// an error, not `SIGPIPE`); false when the send fails.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        (try? FileIO.writeAll(fd, bytes, socket: true)) != nil
    }
}
