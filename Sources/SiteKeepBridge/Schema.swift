public import SiteKeepJSON
import SiteKeepEncoding
import SiteKeepSystem

/// The JSON type a field of an op's args or result must have.
public enum FieldKind: String, Sendable, Equatable, CaseIterable {
    case string, integer, number, boolean, object, array
    /// A string holding standard Base64 (with padding); `maxLength` bounds the decoded bytes.
    case base64
    /// Any JSON value (used only where the catalogue says the op ignores the shape).
    case any
}

/// The shape of one field, read from the catalogue: enough for the dispatcher to refuse unknown
/// fields, wrong types and oversized values without any per-op code.
public struct FieldSchema: Sendable, Equatable {
    public var kind: FieldKind
    public var required: Bool
    /// `null` is accepted as well as `kind`.
    public var nullable: Bool
    /// Strings: most UTF-8 bytes; base64: most decoded bytes.
    public var maxLength: Int?
    /// Arrays: most elements.
    public var maxItems: Int?
    /// Integers: inclusive bounds.
    public var minimum: Int64?
    public var maximum: Int64?
    /// Strings: the only values allowed.
    public var allowed: [String]?
    /// Objects: the members, in order; no others are allowed.
    public var fields: [(name: String, schema: FieldSchema)]
    /// Arrays: the element shape.
    public var items: [FieldSchema]   // zero or one element (indirect storage)
    /// One line for the op document.
    public var summary: String?

    public init(kind: FieldKind, required: Bool = true, nullable: Bool = false, maxLength: Int? = nil,
                maxItems: Int? = nil, minimum: Int64? = nil, maximum: Int64? = nil, allowed: [String]? = nil,
                fields: [(name: String, schema: FieldSchema)] = [], items: FieldSchema? = nil, summary: String? = nil) {
        self.kind = kind
        self.required = required
        self.nullable = nullable
        self.maxLength = maxLength
        self.maxItems = maxItems
        self.minimum = minimum
        self.maximum = maximum
        self.allowed = allowed
        self.fields = fields
        self.items = items.map { [$0] } ?? []
        self.summary = summary
    }

    /// An object schema with `fields` and nothing else.
    public static func object(_ fields: [(name: String, schema: FieldSchema)]) -> FieldSchema {
        FieldSchema(kind: .object, fields: fields)
    }

    public static func == (a: FieldSchema, b: FieldSchema) -> Bool {
        a.kind == b.kind && a.required == b.required && a.nullable == b.nullable && a.maxLength == b.maxLength
            && a.maxItems == b.maxItems && a.minimum == b.minimum && a.maximum == b.maximum && a.allowed == b.allowed
            && a.fields.count == b.fields.count
            && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.schema == $1.schema }
            && a.items == b.items && a.summary == b.summary
    }
}

extension FieldSchema {
    /// Checks `value` against this schema.
    ///
    /// - Throws: ``BridgeFailure`` with `unknown_field` for a member the schema does not list,
    ///   `too_large` for a string, byte string or array over its limit, and `bad_request` for a
    ///   missing member, a wrong type or a value outside its range or set.
    public func validate(_ value: JSONValue, path: String) throws(BridgeFailure) {
        try check(value, path: { path })
    }

    /// ``validate(_:path:)`` with the path built only when a message needs it (every request
    /// passes through here; a valid one builds no strings).
    func check(_ value: JSONValue, path: () -> String) throws(BridgeFailure) {
        if value.isNull {
            if nullable || kind == .any { return }
            throw BridgeFailure(.badRequest, "\(path()) must be \(kind.article), found null")
        }
        switch kind {
        case .any:
            return
        case .string:
            guard case .string(let s) = value else { throw wrongType(path(), value) }
            if let maxLength, s.utf8.count > maxLength {
                throw BridgeFailure(.tooLarge, "\(path()) is longer than \(maxLength) bytes")
            }
            if let allowed, !allowed.contains(where: { $0.hasSameUTF8(as: s) }) {
                throw BridgeFailure(.badRequest, "\(path()) must be one of \(allowed.joined(separator: ", "))")
            }
        case .base64:
            guard case .string(let s) = value else { throw wrongType(path(), value) }
            if let maxLength, s.utf8.count > (maxLength + 2) / 3 * 4 {
                throw BridgeFailure(.tooLarge, "\(path()) decodes to more than \(maxLength) bytes")
            }
            guard Base64.isValid(s, variant: .standard) else {
                throw BridgeFailure(.badRequest, "\(path()) must be standard Base64 with padding")
            }
        case .integer:
            guard case .int(let i) = value else { throw wrongType(path(), value) }
            if let minimum, i < minimum { throw BridgeFailure(.badRequest, "\(path()) must be at least \(minimum)") }
            if let maximum, i > maximum { throw BridgeFailure(.badRequest, "\(path()) must be at most \(maximum)") }
        case .number:
            guard value.doubleValue != nil else { throw wrongType(path(), value) }
        case .boolean:
            guard case .bool = value else { throw wrongType(path(), value) }
        case .array:
            guard case .array(let elements) = value else { throw wrongType(path(), value) }
            if let maxItems, elements.count > maxItems {
                throw BridgeFailure(.tooLarge, "\(path()) has more than \(maxItems) elements")
            }
            if let item = items.first {
                for (i, e) in elements.enumerated() { try item.check(e, path: { "\(path())[\(i)]" }) }
            }
        case .object:
            guard case .object(let members) = value else { throw wrongType(path(), value) }
            for m in members where !fields.contains(where: { $0.name.hasSameUTF8(as: m.key) }) {
                throw BridgeFailure(.unknownField, "\(path()).\(Self.printable(m.key)) is not a field of this op")
            }
            for f in fields {
                if let v = members.first(where: { $0.key.hasSameUTF8(as: f.name) })?.value {
                    try f.schema.check(v, path: { "\(path()).\(f.name)" })
                } else if f.schema.required {
                    throw BridgeFailure(.badRequest, "\(path()).\(f.name) is missing")
                }
            }
        }
    }

    private func wrongType(_ path: String, _ value: JSONValue) -> BridgeFailure {
        BridgeFailure(.badRequest, "\(path) must be \(kind.article), found \(value.typeName)")
    }

    /// A key as it may appear in a message: at most 64 characters, hidden characters escaped
    /// (SiteKeepSystem's ``DisplayText/escaped(_:limit:)``).
    package static func printable(_ key: String) -> String { DisplayText.escaped(key, limit: 64) }
}

extension FieldKind {
    var article: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .number: "a number"
        case .boolean: "a boolean"
        case .object: "an object"
        case .array: "an array"
        case .base64: "a Base64 string"
        case .any: "any value"
        }
    }
}
