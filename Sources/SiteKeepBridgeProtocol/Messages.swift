public import SiteKeepJSON

/// A decoded request: `{v, id, op, args}` plus, optionally, the `origin` the message claims.
///
/// There is no site parameter: the site comes from the connection. A claimed `origin` is only
/// checked against the connection's binding.
public struct BridgeRequest: Sendable, Equatable {
    /// Protocol version (`v`).
    public var version: Int64
    /// The caller's id, echoed in the reply: a string (≤ 128 bytes) or an integer.
    public var id: JSONValue
    public var op: String
    /// Always an object (absent `args` reads as `{}`).
    public var args: JSONValue
    /// The origin the message claims, if any.
    public var origin: String?

    public init(version: Int64 = 1, id: JSONValue, op: String, args: JSONValue = .object([]), origin: String? = nil) {
        self.version = version
        self.id = id
        self.op = op
        self.args = args
        self.origin = origin
    }

    /// The request as JSON, as a client sends it.
    public var json: JSONValue {
        var members = [JSONMember(key: "v", value: .int(version)), JSONMember(key: "id", value: id),
                       JSONMember(key: "op", value: .string(op)), JSONMember(key: "args", value: args)]
        if let origin { members.append(JSONMember(key: "origin", value: .string(origin))) }
        return .object(members)
    }
}

/// What the daemon sends: a reply to one request, or an event.
public enum BridgeMessage: Sendable, Equatable {
    /// `{id, ok: true, result}`.
    case success(id: JSONValue, result: JSONValue)
    /// `{id, ok: false, error: {code, message}}`.
    case failure(id: JSONValue, BridgeFailure)
    /// `{event, data}`.
    case event(name: String, data: JSONValue)

    /// The JSON form. Built from ``JSONValue`` only: no key type can reach it.
    public var json: JSONValue {
        switch self {
        case let .success(id, result):
            .object([JSONMember(key: "id", value: id), JSONMember(key: "ok", value: true), JSONMember(key: "result", value: result)])
        case let .failure(id, f):
            .object([JSONMember(key: "id", value: id), JSONMember(key: "ok", value: false),
                     JSONMember(key: "error", value: .object([JSONMember(key: "code", value: .string(f.code.rawValue)),
                                                              JSONMember(key: "message", value: .string(f.message))]))])
        case let .event(name, data):
            .object([JSONMember(key: "event", value: .string(name)), JSONMember(key: "data", value: data)])
        }
    }

    /// The compact JSON bytes of one frame (without the newline).
    public var bytes: [UInt8] { JSONSerializer.bytes(json, style: .compact) }

    /// Parses a frame the daemon sent (used by ``BridgeClient``).
    /// - Throws: ``BridgeError/protocolViolation(_:)`` when it is not a reply or an event.
    public static func parse(_ bytes: [UInt8]) throws(BridgeError) -> BridgeMessage {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes, limits: .document) } catch { throw .protocolViolation(error.description) }
        do {
            var r = try JSONObjectReader(value, path: "message")
            if let event = r.optional("event") {
                guard let name = event.stringValue else { throw BridgeError.protocolViolation("event must be a string") }
                let data = try r.required("data")
                try r.finish()
                return .event(name: name, data: data)
            }
            let id = try r.required("id")
            if try r.bool("ok") {
                let result = try r.required("result")
                try r.finish()
                return .success(id: id, result: result)
            }
            var e = try r.object("error")
            let codeText = try e.string("code")
            let message = try e.string("message")
            try e.finish()
            try r.finish()
            guard let code = BridgeErrorCode(rawValue: codeText) else {
                throw BridgeError.protocolViolation("unknown error code \(codeText)")
            }
            return .failure(id: id, BridgeFailure(code, message))
        } catch let e as BridgeError {
            throw e
        } catch {
            throw .protocolViolation("\(error)")
        }
    }
}
