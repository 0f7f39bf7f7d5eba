/// Why SSH wire bytes (RFC 4251 §5) could not be read. Names the field; never quotes key bytes.
public enum SSHWireError: Error, Sendable, Equatable {
    /// The bytes end inside `field`.
    case truncated(field: String)
    /// `field` is present but not acceptable (`reason` says why).
    case invalid(field: String, reason: String)
    /// Bytes are left over after `what`.
    case trailingBytes(after: String)
}

extension SSHWireError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .truncated(let field): "the message ends inside its \(field)"
        case let .invalid(field, reason): "bad \(field): \(reason)"
        case .trailingBytes(let what): "unexpected bytes after the \(what)"
        }
    }
}

/// Reads the SSH data types of RFC 4251 §5 (`byte`, `boolean`, `uint32`, `string`, `mpint`)
/// from a byte array, front to back. Every read is bounds-checked; nothing is copied but the
/// values returned.
public struct SSHReader: Sendable {
    private let bytes: [UInt8]
    private var offset: Int

    /// A reader over `bytes`.
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
    }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { offset == bytes.count }
    /// How many bytes are left.
    public var remainingCount: Int { bytes.count - offset }

    /// One byte.
    public mutating func byte(_ field: String) throws(SSHWireError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated(field: field) }
        defer { offset += 1 }
        return bytes[offset]
    }

    /// A `boolean`: zero is false, anything else true (RFC 4251 §5).
    public mutating func boolean(_ field: String) throws(SSHWireError) -> Bool {
        try byte(field) != 0
    }

    /// A big-endian `uint32`.
    public mutating func uint32(_ field: String) throws(SSHWireError) -> UInt32 {
        guard remainingCount >= 4 else { throw .truncated(field: field) }
        defer { offset += 4 }
        return UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    /// A `string`: a `uint32` length and that many bytes, at most `limit`.
    public mutating func string(_ field: String, limit: Int = Int.max) throws(SSHWireError) -> [UInt8] {
        let n = Int(try uint32(field))
        guard n <= remainingCount else { throw .truncated(field: field) }
        guard n <= limit else { throw .invalid(field: field, reason: "\(n) bytes, more than \(limit)") }
        defer { offset += n }
        return Array(bytes[offset..<(offset + n)])
    }

    /// A `string` holding a name or other text: printable US-ASCII (names in SSH are ASCII,
    /// RFC 4251 §6), at most `limit` bytes.
    public mutating func name(_ field: String, limit: Int = 256) throws(SSHWireError) -> String {
        let raw = try string(field, limit: limit)
        guard raw.allSatisfy({ (0x20...0x7e).contains($0) }) else {
            throw .invalid(field: field, reason: "not printable ASCII")
        }
        return String(decoding: raw, as: UTF8.self)
    }

    /// A `string` holding UTF-8 text (a user name), at most `limit` bytes.
    public mutating func utf8(_ field: String, limit: Int = 1024) throws(SSHWireError) -> String {
        let raw = try string(field, limit: limit)
        guard let text = String(validating: raw, as: UTF8.self) else { throw .invalid(field: field, reason: "not UTF-8") }
        return text
    }

    /// A non-negative `mpint`: its magnitude, big-endian, without the sign byte. Negative
    /// values and non-minimal encodings (a needless leading zero) are refused.
    public mutating func mpint(_ field: String, limit: Int = 2049) throws(SSHWireError) -> [UInt8] {
        let raw = try string(field, limit: limit)
        guard let first = raw.first else { return [] }
        guard first & 0x80 == 0 else { throw .invalid(field: field, reason: "negative") }
        if first == 0 {
            guard raw.count > 1, raw[1] & 0x80 != 0 else { throw .invalid(field: field, reason: "needless leading zero") }
            return Array(raw.dropFirst())
        }
        return raw
    }

    /// Everything not read yet.
    public mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// Throws unless every byte has been read.
    public func expectEnd(_ what: String) throws(SSHWireError) {
        guard isAtEnd else { throw .trailingBytes(after: what) }
    }
}

/// Writes the SSH data types of RFC 4251 §5.
public struct SSHWriter: Sendable {
    /// What has been written.
    public private(set) var bytes: [UInt8]

    /// An empty writer with room for `capacity` bytes.
    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// One byte.
    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// A `boolean` (1 or 0).
    public mutating func boolean(_ value: Bool) { bytes.append(value ? 1 : 0) }

    /// A big-endian `uint32`.
    public mutating func uint32(_ value: UInt32) {
        bytes.append(UInt8(value >> 24)); bytes.append(UInt8(value >> 16 & 0xff))
        bytes.append(UInt8(value >> 8 & 0xff)); bytes.append(UInt8(value & 0xff))
    }

    /// A `string` of raw bytes.
    public mutating func string(_ value: some Collection<UInt8>) {
        uint32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    /// A `string` of text.
    public mutating func string(_ text: String) { string(Array(text.utf8)) }

    /// A non-negative `mpint` from an unsigned big-endian magnitude: leading zeros dropped, a zero
    /// byte added when the top bit is set (RFC 4251 §5), zero as the empty string.
    public mutating func mpint(unsigned magnitude: some Collection<UInt8>) {
        let trimmed = magnitude.drop(while: { $0 == 0 })
        if let first = trimmed.first, first & 0x80 != 0 {
            uint32(UInt32(trimmed.count + 1))
            bytes.append(0)
        } else {
            uint32(UInt32(trimmed.count))
        }
        bytes.append(contentsOf: trimmed)
    }

    /// Raw bytes, as they are.
    public mutating func raw(_ value: some Collection<UInt8>) { bytes.append(contentsOf: value) }
}
