public import SiteKeepJSON

/// One request a page made through `window.webkit.messageHandlers.pt.postMessage({op, ...})`:
/// `op` names the op and every other member is an argument. The page never chooses the site, the
/// request id or the origin: the host sends the frame on the view's own connection.
public struct PageRequest: Sendable, Equatable {
    public var op: String
    public var args: JSONValue

    /// The most bytes one page message may have (the bridge's own frame limit).
    public static let maximumBytes = 1 << 20

    /// Parses the JSON text the relay passes on.
    /// - Returns: the request, or the reply the page gets instead (`bad_request`, `not_allowed`).
    public static func parse(_ text: String) -> Result<PageRequest, PageReply> {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumBytes else {
            return .failure(.error("too_large", "the message is larger than \(maximumBytes) bytes"))
        }
        let value: JSONValue
        do { value = try JSONParser.parse(bytes, limits: .message) } catch {
            return .failure(.error("bad_request", "the message is not JSON: \(error.description)"))
        }
        guard case .object(let members) = value else {
            return .failure(.error("bad_request", "postMessage takes an object {op, ...args}"))
        }
        guard let op = value["op"]?.stringValue else {
            return .failure(.error("bad_request", "postMessage needs a string member op, e.g. {op: \"storage.get\", key: \"k\"}"))
        }
        if op == "hello" {
            return .failure(.error("not_allowed", "the browser binds this page's connection itself; a page does not send hello"))
        }
        return .success(PageRequest(op: op, args: .object(members.filter { $0.key != "op" })))
    }
}

/// What the page's promise gets: `{ok: true, result}` resolves it, `{ok: false, error: {code,
/// message}}` rejects it with an `Error` carrying `code`.
public struct PageReply: Error, Sendable, Equatable {
    public var json: JSONValue

    public static func result(_ value: JSONValue) -> PageReply {
        PageReply(json: ["ok": true, "result": value])
    }

    public static func error(_ code: String, _ message: String) -> PageReply {
        PageReply(json: ["ok": false, "error": ["code": .string(code), "message": .string(message)]])
    }

    /// The reply for a daemon frame `{id, ok, result}` / `{id, ok: false, error}`.
    public static func from(frame: JSONValue) -> PageReply {
        if frame["ok"]?.boolValue == true { return .result(frame["result"] ?? .null) }
        let code = frame["error"]?["code"]?.stringValue ?? "internal"
        let message = frame["error"]?["message"]?.stringValue ?? "the daemon sent a malformed reply"
        return .error(code, message)
    }

    /// The JSON text handed to the relay.
    public var text: String { JSONSerializer.string(json, style: .compact) }
}
