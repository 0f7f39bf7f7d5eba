/// A JSON value with the distinctions SiteKeep's formats need.
///
/// Integers and fractional numbers are kept apart (the sgit format refuses `5.0` where it wants
/// `5`), object members keep their order, and keys are compared by their UTF-8 bytes, never by
/// `String` equality (which would treat a composed and a decomposed accent as the same key).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number written without fraction or exponent that fits in 64 bits.
    case int(Int64)
    /// Any other finite number.
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// Members in their written order. Keys are unique by UTF-8 bytes.
    case object([JSONMember])

    /// The string, if this is a string.
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    /// The integer, if this is an integer.
    public var intValue: Int64? { if case .int(let i) = self { i } else { nil } }
    /// The number as a `Double`, if this is any number.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }
    /// The Boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    /// The members, if this is an object.
    public var objectValue: [JSONMember]? { if case .object(let o) = self { o } else { nil } }
    /// Whether this is `null`.
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The member named `key` (compared by UTF-8 bytes), if this is an object holding it.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key.hasSameUTF8(as: key) }?.value
    }

    /// A short name of this value's type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// Builds an object from key/value pairs, in order.
    public static func object(_ pairs: KeyValuePairs<String, JSONValue>) -> JSONValue {
        .object(pairs.map { JSONMember(key: $0.key, value: $0.value) })
    }
}

/// One member of a JSON object.
public struct JSONMember: Sendable, Equatable {
    public var key: String
    public var value: JSONValue
    public init(key: String, value: JSONValue) {
        self.key = key
        self.value = value
    }
    public static func == (a: JSONMember, b: JSONMember) -> Bool {
        a.key.hasSameUTF8(as: b.key) && a.value == b.value
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { JSONMember(key: $0.0, value: $0.1) })
    }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue {
    /// `.string`, or `.null` for nil.
    public static func string(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    /// An integer from any `BinaryInteger` that fits.
    public static func integer(_ value: some BinaryInteger) -> JSONValue { .int(Int64(value)) }
}

extension String {
    /// Whether two strings hold the same UTF-8 bytes. Unlike `==`, which compares by Unicode
    /// canonical equivalence, a composed and a decomposed accent (or U+212A KELVIN SIGN and `K`)
    /// are different here, as they are in every format SiteKeep reads. The lengths are compared
    /// first, then the bytes in place when both strings are contiguous (native strings are).
    public func hasSameUTF8(as other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        if let same = a.withContiguousStorageIfAvailable({ x in
            b.withContiguousStorageIfAvailable { y in
                x.elementsEqual(y)
            }
        }), let same {
            return same
        }
        return a.elementsEqual(b)
    }
}
