import Glibc
import Foundation
public import SiteKeepJSON
public import SiteKeepSocket
public import SiteKeepBridgeProtocol
internal import SiteKeepCrypto

/// The daemon's local control socket (`control.sock`, beside the bridge socket; 0600 in a 0700
/// folder; peers of another uid refused), speaking ``ControlWire`` version 3. It is how the
/// `sitekeep` command line reaches the one process that holds a store's unlocked keys
/// (`unlock`, `lock`, `status`, `stop`, `set`, and `run`: a whole command run inside the daemon), and how a
/// web-view host (`sitekeep-browser`) learns the app-bound sites (`sites`). Sites never use it.
///
/// Every connection is one request on a thread of its own (``SocketListener``), so a long
/// command never holds up `lock`. A request that names a store (`"store"`) is refused with
/// `wrong_store` unless it is the store this daemon serves; `unlock`, `lock` and `run` must name
/// it. An unlock secret is received straight into guarded memory (``SecretBytes``), wiped and
/// freed as soon as the handler returns; it is never logged or echoed.
public final class ControlServer: Sendable {
    /// One control request's header.
    public struct Request: Sendable {
        /// `status`, `lock`, `unlock`, `sites`, `run`, or whatever else a client sent.
        public let op: String
        /// The whole header, for ops that carry more (`run`'s argv, cwd, env, tty).
        public let header: JSONValue
        /// The descriptors the client attached to the header (`launch`: the standard streams a
        /// started host is to use); the session handler owns them. Empty for every other op,
        /// whose descriptors are closed unread.
        public var descriptors: [Int32] = []
        /// `unlock`'s method: `passphrase`, `prf` or `recovery`.
        public var method: String? { header["method"]?.stringValue }
    }

    /// The header keys an `unlock` may carry to point the daemon's presence prompts at the
    /// client's terminal and display, with the environment name each stands for (the daemon
    /// adopts them only when the unlock succeeds).
    public static let unlockPromptKeys: [String: String] = [
        "tty": "SITEKEEP_TTY", "term": "TERM", "display": "DISPLAY", "wayland_display": "WAYLAND_DISPLAY", "xauthority": "XAUTHORITY",
    ]

    /// Answers a one-line op. `secret` is only valid during the call.
    public typealias Handler = @Sendable (_ request: Request, _ secret: UnsafeRawBufferPointer?) -> JSONValue
    /// Serves a `run` session on `connection` (``ControlFrame``s) until it sends `exit`.
    public typealias Session = @Sendable (_ request: Request, _ connection: SocketConnection) -> Void

    public var path: String? { listener.path }
    /// The id of the store this daemon serves.
    public let storeID: String
    private let storeLabel: String
    private let listener: SocketListener
    private let handler: Handler
    private let session: Session

    /// Listens at `path` (a stale socket is replaced).
    /// - Parameters:
    ///   - storeID: the store this daemon serves; requests naming another are refused.
    ///   - storeLabel: how a refusal names it (the store's folder).
    public init(path: String, storeID: String, storeLabel: String, handler: @escaping Handler,
                session: @escaping Session) throws(BridgeError) {
        self.storeID = storeID
        self.storeLabel = storeLabel
        self.handler = handler
        self.session = session
        do { listener = try SocketListener(path: path) } catch { throw BridgeError(error) }
    }

    /// Starts accepting (see ``SocketListener``: a thread per connection).
    public func start() {
        listener.start { [self] connection in serve(connection) }
    }

    /// Stops accepting, lets running requests finish, and removes the socket.
    public func shutdown() {
        listener.shutdown()
    }

    private static func reply(_ connection: SocketConnection, _ value: JSONValue) {
        _ = connection.writer.send(JSONSerializer.bytes(value))
    }

    private static func refuse(_ connection: SocketConnection, _ code: String, _ message: String) {
        reply(connection, ["ok": false, "code": .string(code), "error": .string(message)])
    }

    private func serve(_ connection: SocketConnection) {
        let fd = connection.fd
        // Admitted as the bridge and the agent admit; the request is then one header line
        // (read here: descriptors ride on it), not a stream of frames.
        guard connection.admit(sendTimeout: 10, receiveTimeout: 10, refusingStrangers: { out in
            _ = out.send(JSONSerializer.bytes(["ok": false, "code": "forbidden_peer", "error": "the SiteKeep daemon serves only its own user"]))
        }) != nil else { return }
        guard let (header, descriptors) = Self.readHeader(fd) else {
            Self.refuse(connection, "bad_request", "the control request is not one JSON object line")
            return
        }
        guard let op = header["op"]?.stringValue, op == "launch" || descriptors.isEmpty else {
            for d in descriptors { close(d) }
            Self.refuse(connection, "bad_request", header["op"]?.stringValue == nil ? "the control request names no op" : "only 'launch' carries descriptors")
            return
        }
        var request = Request(op: op, header: header)
        request.descriptors = descriptors
        var handedOn = false
        defer { if !handedOn { for d in descriptors { close(d) } } }
        if let v = header["v"], v != .int(Int64(ControlWire.version)) {
            Self.refuse(connection, "version", "this daemon speaks control version \(ControlWire.version); restart it or the client so both are the same build")
            return
        }
        let allowed: Set<String> = op == "run" ? ["v", "op", "store", "argv", "cwd", "env", "tty"]
            : op == "launch" ? ["v", "op", "store", "program", "site", "path", "argv", "env", "cwd", "method", "length"]
            : op == "unlock" ? Set(["v", "op", "store", "method", "length", "idle_lock"]).union(ControlServer.unlockPromptKeys.keys)
            : ["v", "op", "store", "method", "length"]
        // `set`: a setting of this run only (`unlock --idle-lock` against a running daemon).
        let settingFields: Set<String> = op == "set" ? ["key", "value"] : []
        if let unknown = header.objectValue?.first(where: { !allowed.contains($0.key) && !settingFields.contains($0.key) }) {
            Self.refuse(connection, "bad_request", "the control request has an unknown field '\(unknown.key)'")
            return
        }
        let store = header["store"]?.stringValue
        if let store, store != storeID {
            Self.refuse(connection, "wrong_store", "the daemon on \(path ?? "this socket") serves the store in \(storeLabel), not the one asked for")
            return
        }
        if store == nil, ["unlock", "unlock-check", "lock", "run", "stop", "set", "launch"].contains(op) {
            Self.refuse(connection, "bad_request", "\(op) must name the store it means")
            return
        }
        if op == "run" || op == "launch" {
            UnixSocket.setReceiveTimeout(fd, seconds: 0)
            handedOn = true
            session(request, connection)
            return
        }
        let length = header["length"]?.intValue ?? 0
        guard length >= 0, length <= ControlWire.maximumSecretLength else {
            Self.refuse(connection, "bad_request", "an unlock secret is at most \(ControlWire.maximumSecretLength) bytes")
            return
        }
        guard length > 0 else {
            Self.reply(connection, handler(request, nil))
            return
        }
        // Received straight into guarded memory (sodium_malloc; wiped when freed), never an array.
        var complete = false
        guard let secret = try? SecretBytes(count: Int(length), initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            complete = ControlFrame.receiveExactly(fd, into: buffer)
        }), complete else { return }
        let answer = secret.withUnsafeBytes { handler(request, $0) }
        Self.reply(connection, answer)
    }

    /// The header line, at most ``ControlWire/maximumHeaderBytes``, as a JSON object, with the
    /// descriptors (at most three) attached to it.
    private static func readHeader(_ fd: Int32) -> (JSONValue, [Int32])? {
        guard let (header, descriptors) = DescriptorPassing.receiveLine(fd, limit: ControlWire.maximumHeaderBytes, maximumDescriptors: 3) else { return nil }
        guard let value = try? JSONParser.parse(header, limits: .message), case .object = value else {
            for d in descriptors { close(d) }
            return nil
        }
        return (value, descriptors)
    }
}
