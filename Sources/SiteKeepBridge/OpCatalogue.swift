internal import SiteKeepJSON
import SiteKeepVocabulary
import Foundation

/// Whether the caller sends the op or SiteKeep does.
public enum OpDirection: String, Sendable, Equatable {
    /// Caller → SiteKeep; answered by one reply.
    case request
    /// SiteKeep → caller (`{event, data}`); it cannot be called.
    case event
}

/// Who may use an op.
public enum SiteRule: Sendable, Equatable, CustomStringConvertible {
    /// The site owning this origin (as written in the catalogue; compared after canonicalisation).
    case origin(String)
    /// Every app-bound site, each on its own partition only.
    case appBound

    /// The catalogue token for ``appBound``.
    public static let appBoundToken = "*app-bound*"

    public var description: String {
        switch self {
        case .origin(let o): o
        case .appBound: Self.appBoundToken
        }
    }
}

/// A per-connection token bucket: `burst` tokens, refilled at `perSecond`.
public struct RateLimit: Sendable, Equatable {
    public var burst: Int
    public var perSecond: Double
    public init(burst: Int, perSecond: Double) {
        self.burst = burst
        self.perSecond = perSecond
    }
}

/// One op and its whole policy, as the catalogue states it.
public struct OpPolicy: Sendable, Equatable {
    public var name: String
    public var version: Int
    public var direction: OpDirection
    public var summary: String
    /// Who may call it (requests) or receive it (events).
    public var sites: [SiteRule]
    /// Whether the user may open it to a site the allow-list does not name (`sitekeep site grant`).
    /// A grant opens the allow-list only: presence, size and rate limits stay the catalogue's.
    /// Never true for events (they follow from the requests a site may call) or for `hello`.
    public var grantable: Bool = false
    /// Whether a presence proof no older than 60 s is needed before the handler runs.
    public var presence: Bool
    /// The largest request frame, in bytes (the whole JSON line).
    public var maxRequestBytes: Int
    public var rateLimit: RateLimit
    /// The op exists but answers `unsupported` with this message on this platform.
    public var unsupportedMessage: String?
    /// The shape of `args` (requests) — an object schema.
    public var args: FieldSchema
    /// The shape of `result` (requests) or `data` (events) — an object schema.
    public var result: FieldSchema
}

/// The op catalogue: the one file (`ops.json`) listing every op with its policy.
///
/// Loaded and validated at start; any member it does not know is refused, so a typo in a policy
/// fails the daemon's start instead of silently loosening it.
public struct OpCatalogue: Sendable, Equatable {
    /// The catalogue format this code reads.
    public static let format = "sitekeep.ops.v1"
    /// The protocol version requests carry in `v` and `hello` reports.
    public var protocolVersion: Int
    /// Every op, in catalogue order.
    public var ops: [OpPolicy]

    /// The op named `name`.
    public subscript(name: String) -> OpPolicy? { ops.first { $0.name.hasSameUTF8(as: name) } }

    public init(protocolVersion: Int, ops: [OpPolicy]) {
        self.protocolVersion = protocolVersion
        self.ops = ops
    }

    /// The catalogue shipped with SiteKeep (`Sources/SiteKeepBridge/ops.json`).
    public static func bundled() throws(BridgeError) -> OpCatalogue {
        guard let url = Bundle.module.url(forResource: "ops", withExtension: "json"),
              let data = try? Data(contentsOf: url) else {
            throw .invalidCatalogue("ops.json is missing from the SiteKeepBridge resources; reinstall SiteKeep")
        }
        return try load(Array(data))
    }

    /// Parses and validates a catalogue.
    /// - Throws: ``BridgeError/invalidCatalogue(_:)`` naming the first problem.
    public static func load(_ bytes: [UInt8]) throws(BridgeError) -> OpCatalogue {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes, limits: .document) } catch {
            throw .invalidCatalogue(error.description)
        }
        do {
            return try read(value)
        } catch let e as JSONShapeError {
            throw .invalidCatalogue(e.description)
        } catch let e as BridgeError {
            throw e
        } catch {
            throw .invalidCatalogue("\(error)")
        }
    }

    private static func read(_ value: JSONValue) throws -> OpCatalogue {
        var top = try JSONObjectReader(value, path: "catalogue")
        let format = try top.string("format")
        guard format == Self.format else {
            throw BridgeError.invalidCatalogue("catalogue.format is \"\(format)\"; this SiteKeep reads \"\(Self.format)\"")
        }
        let protocolVersion = try top.int("protocolVersion")
        guard protocolVersion >= 1, protocolVersion <= 1000 else {
            throw BridgeError.invalidCatalogue("catalogue.protocolVersion must be 1…1000")
        }
        var ops: [OpPolicy] = []
        for (i, opValue) in try top.array("ops").enumerated() {
            let op = try readOp(opValue, path: "catalogue.ops[\(i)]")
            guard !ops.contains(where: { $0.name == op.name }) else {
                throw BridgeError.invalidCatalogue("op \(op.name) is listed twice")
            }
            ops.append(op)
        }
        try top.finish()
        guard !ops.isEmpty else { throw BridgeError.invalidCatalogue("catalogue.ops is empty") }
        return OpCatalogue(protocolVersion: Int(protocolVersion), ops: ops)
    }

    private static func readOp(_ value: JSONValue, path: String) throws -> OpPolicy {
        var r = try JSONObjectReader(value, path: path)
        let name = try r.string("name")
        guard isOpName(name) else {
            throw BridgeError.invalidCatalogue("\(path).name \"\(name)\" must be lower-case words joined by dots (a–z, 0–9)")
        }
        let p = "op \(name)"
        let version = try r.int("version")
        guard version >= 1, version <= 1000 else { throw BridgeError.invalidCatalogue("\(p): version must be 1…1000") }
        let directionText = try r.string("direction")
        guard let direction = OpDirection(rawValue: directionText) else {
            throw BridgeError.invalidCatalogue("\(p): direction must be request or event")
        }
        let summary = try r.string("summary")
        var sites: [SiteRule] = []
        for s in try r.array("sites") {
            guard case .string(let text) = s else { throw BridgeError.invalidCatalogue("\(p): sites holds strings") }
            if text == SiteRule.appBoundToken {
                sites.append(.appBound)
            } else if (text.hasPrefix("https://") || text.hasPrefix("http://")) && text.utf8.count <= 253 + 16 {
                sites.append(.origin(text))
            } else {
                throw BridgeError.invalidCatalogue("\(p): site \"\(text)\" must be an http(s) origin or \(SiteRule.appBoundToken)")
            }
        }
        guard !sites.isEmpty else { throw BridgeError.invalidCatalogue("\(p): sites is empty; remove the op instead") }
        // Absent means false: an op is open to grants only where the catalogue says so.
        var grantable = false
        if let v = r.optional("grantable") {
            guard let b = v.boolValue else { throw BridgeError.invalidCatalogue("\(p): grantable must be a boolean") }
            grantable = b
        }
        if grantable && (direction == .event || name == "hello") {
            throw BridgeError.invalidCatalogue("\(p): grantable must be false for \(direction == .event ? "an event (a site gets events through the requests it may call)" : "hello (every app-bound site has it)")")
        }

        var presence = false
        var maxRequestBytes = 0
        var rate = RateLimit(burst: 0, perSecond: 0)
        var unsupported: String?
        var args = FieldSchema.object([])
        let result: FieldSchema
        switch direction {
        case .request:
            presence = try r.bool("presence")
            let m = try r.int("maxRequestBytes")
            guard m >= 64, m <= Int64(JSONLimits.message.maxBytes) else {
                throw BridgeError.invalidCatalogue("\(p): maxRequestBytes must be 64…\(JSONLimits.message.maxBytes)")
            }
            maxRequestBytes = Int(m)
            var rr = try r.object("rateLimit")
            let burst = try rr.int("burst")
            let perSecond = try rr.required("perSecond").doubleValue ?? -1
            try rr.finish()
            guard burst >= 1, burst <= 1_000_000, perSecond > 0, perSecond <= 1_000_000 else {
                throw BridgeError.invalidCatalogue("\(p): rateLimit needs burst 1…1000000 and perSecond in (0, 1000000]")
            }
            rate = RateLimit(burst: Int(burst), perSecond: perSecond)
            unsupported = try r.optionalString("unsupported")
            args = try readFields(try r.required("args"), path: "\(p) args")
            result = try readFields(try r.required("result"), path: "\(p) result")
        case .event:
            result = try readFields(try r.required("data"), path: "\(p) data")
        }
        try r.finish()
        return OpPolicy(name: name, version: Int(version), direction: direction, summary: summary, sites: sites,
                        grantable: grantable, presence: presence, maxRequestBytes: maxRequestBytes, rateLimit: rate,
                        unsupportedMessage: unsupported, args: args, result: result)
    }

    /// `{"field": {schema}, ...}` → an object schema.
    private static func readFields(_ value: JSONValue, path: String) throws -> FieldSchema {
        guard case .object(let members) = value else { throw BridgeError.invalidCatalogue("\(path) must be an object of fields") }
        var fields: [(name: String, schema: FieldSchema)] = []
        for m in members {
            guard isFieldName(m.key) else {
                throw BridgeError.invalidCatalogue("\(path): field name \"\(m.key)\" must be 1…64 ASCII letters, digits or _")
            }
            fields.append((m.key, try readField(m.value, path: "\(path).\(m.key)")))
        }
        return .object(fields)
    }

    private static func readField(_ value: JSONValue, path: String) throws -> FieldSchema {
        var r = try JSONObjectReader(value, path: path)
        let typeText = try r.string("type")
        guard let kind = FieldKind(rawValue: typeText) else {
            throw BridgeError.invalidCatalogue("\(path).type must be one of \(FieldKind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var s = FieldSchema(kind: kind)
        if let v = r.optional("required") {
            guard let b = v.boolValue else { throw BridgeError.invalidCatalogue("\(path).required must be a boolean") }
            s.required = b
        }
        if let v = r.optional("nullable") {
            guard let b = v.boolValue else { throw BridgeError.invalidCatalogue("\(path).nullable must be a boolean") }
            s.nullable = b
        }
        s.summary = try r.optionalString("summary")
        func intMember(_ key: String, allowed: Bool) throws -> Int64? {
            guard let v = r.optional(key) else { return nil }
            guard allowed else { throw BridgeError.invalidCatalogue("\(path).\(key) does not apply to \(kind.rawValue)") }
            guard let i = v.intValue else { throw BridgeError.invalidCatalogue("\(path).\(key) must be an integer") }
            return i
        }
        if let m = try intMember("maxLength", allowed: kind == .string || kind == .base64) {
            guard m >= 1, m <= Int64(JSONLimits.message.maxStringBytes) else {
                throw BridgeError.invalidCatalogue("\(path).maxLength must be 1…\(JSONLimits.message.maxStringBytes)")
            }
            s.maxLength = Int(m)
        }
        if let m = try intMember("maxItems", allowed: kind == .array) {
            guard m >= 1, m <= Int64(JSONLimits.message.maxElements) else {
                throw BridgeError.invalidCatalogue("\(path).maxItems must be 1…\(JSONLimits.message.maxElements)")
            }
            s.maxItems = Int(m)
        }
        s.minimum = try intMember("min", allowed: kind == .integer)
        s.maximum = try intMember("max", allowed: kind == .integer)
        if let v = r.optional("enum") {
            guard kind == .string, let list = v.arrayValue, !list.isEmpty,
                  case let strings = list.compactMap(\.stringValue), strings.count == list.count else {
                throw BridgeError.invalidCatalogue("\(path).enum must be a non-empty array of strings on a string field")
            }
            s.allowed = strings
        }
        if let v = r.optional("fields") {
            guard kind == .object else { throw BridgeError.invalidCatalogue("\(path).fields applies to objects only") }
            s.fields = try readFields(v, path: path).fields
        }
        if let v = r.optional("items") {
            guard kind == .array else { throw BridgeError.invalidCatalogue("\(path).items applies to arrays only") }
            s.items = [try readField(v, path: "\(path)[]")]
        }
        try r.finish()
        // Every string and array is bounded, so no op can accept an unbounded value by omission.
        if (kind == .string || kind == .base64) && s.maxLength == nil && s.allowed == nil {
            throw BridgeError.invalidCatalogue("\(path) needs maxLength (every string is bounded)")
        }
        if kind == .array && (s.maxItems == nil || s.items.isEmpty) {
            throw BridgeError.invalidCatalogue("\(path) needs maxItems and items (every array is bounded and typed)")
        }
        return s
    }

    /// The catalogue's op-name rule: the vocabulary's (``OpName``).
    static func isOpName(_ s: String) -> Bool { OpName.isValid(s) }

    static func isFieldName(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 64 && s.utf8.allSatisfy {
            ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5f
        }
    }
}
