/// Why a JSON document does not have the shape a reader expects.
public enum JSONShapeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The value at `path` is not an object.
    case notAnObject(path: String)
    /// A required member is absent.
    case missing(path: String)
    /// A member has the wrong JSON type.
    case wrongType(path: String, expected: String, found: String)
    /// A member the schema does not know.
    case unknownField(path: String)
    /// A member's value is out of its allowed range or form.
    case invalidValue(path: String, reason: String)

    public var description: String {
        switch self {
        case .notAnObject(let p): "\(p) must be a JSON object"
        case .missing(let p): "\(p) is missing"
        case let .wrongType(p, e, f): "\(p) must be \(e), found \(f)"
        case .unknownField(let p): "\(p) is not a known field"
        case let .invalidValue(p, r): "\(p) is invalid: \(r)"
        }
    }
}

/// Reads an object member by member and refuses what it did not read.
///
/// ```swift
/// var reader = try JSONObjectReader(value, path: "request")
/// let id = try reader.string("id")
/// let args = try reader.optional("args")
/// try reader.finish()              // throws .unknownField for anything not read
/// ```
public struct JSONObjectReader: Sendable {
    private let members: [JSONMember]
    private var consumed: Set<[UInt8]> = []
    /// The path of this object in the document, for messages (`request.args`).
    public let path: String

    /// Starts reading `value`, which must be an object.
    public init(_ value: JSONValue, path: String) throws(JSONShapeError) {
        guard case .object(let members) = value else { throw .notAnObject(path: path) }
        self.members = members
        self.path = path
    }

    private func sub(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The member `key`, or nil when absent; marks it read.
    public mutating func optional(_ key: String) -> JSONValue? {
        guard let m = members.first(where: { $0.key.hasSameUTF8(as: key) }) else { return nil }
        consumed.insert(Array(key.utf8))
        return m.value
    }

    /// The member `key`; throws ``JSONShapeError/missing(path:)`` when absent.
    public mutating func required(_ key: String) throws(JSONShapeError) -> JSONValue {
        guard let v = optional(key) else { throw .missing(path: sub(key)) }
        return v
    }

    /// A required string.
    public mutating func string(_ key: String) throws(JSONShapeError) -> String {
        let v = try required(key)
        guard case .string(let s) = v else { throw .wrongType(path: sub(key), expected: "a string", found: v.typeName) }
        return s
    }

    /// An optional string (absent or null → nil).
    public mutating func optionalString(_ key: String) throws(JSONShapeError) -> String? {
        guard let v = optional(key), !v.isNull else { return nil }
        guard case .string(let s) = v else { throw .wrongType(path: sub(key), expected: "a string or null", found: v.typeName) }
        return s
    }

    /// A required integer.
    public mutating func int(_ key: String) throws(JSONShapeError) -> Int64 {
        let v = try required(key)
        guard case .int(let i) = v else { throw .wrongType(path: sub(key), expected: "an integer", found: v.typeName) }
        return i
    }

    /// A required Boolean.
    public mutating func bool(_ key: String) throws(JSONShapeError) -> Bool {
        let v = try required(key)
        guard case .bool(let b) = v else { throw .wrongType(path: sub(key), expected: "a boolean", found: v.typeName) }
        return b
    }

    /// A required array.
    public mutating func array(_ key: String) throws(JSONShapeError) -> [JSONValue] {
        let v = try required(key)
        guard case .array(let a) = v else { throw .wrongType(path: sub(key), expected: "an array", found: v.typeName) }
        return a
    }

    /// A reader for a required nested object.
    public mutating func object(_ key: String) throws(JSONShapeError) -> JSONObjectReader {
        try JSONObjectReader(try required(key), path: sub(key))
    }

    /// Throws ``JSONShapeError/unknownField(path:)`` for the first member not read.
    public func finish() throws(JSONShapeError) {
        for m in members where !consumed.contains(Array(m.key.utf8)) {
            throw .unknownField(path: sub(m.key))
        }
    }
}
