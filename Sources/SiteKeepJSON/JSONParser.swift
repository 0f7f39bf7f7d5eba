/// Limits a parser enforces, so hostile input cannot exhaust memory or the stack.
public struct JSONLimits: Sendable, Equatable {
    /// The largest input in bytes.
    public var maxBytes: Int
    /// The deepest nesting of arrays and objects.
    public var maxDepth: Int
    /// The longest string (key or value) in UTF-8 bytes.
    public var maxStringBytes: Int
    /// The most elements in one array or members in one object.
    public var maxElements: Int

    public init(maxBytes: Int, maxDepth: Int, maxStringBytes: Int, maxElements: Int) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
        self.maxStringBytes = maxStringBytes
        self.maxElements = maxElements
    }

    /// 16 MiB, depth 64, 16 MiB strings, 1,000,000 elements: for trusted-format files (vault objects).
    public static let document = JSONLimits(maxBytes: 16 << 20, maxDepth: 64, maxStringBytes: 16 << 20, maxElements: 1_000_000)
    /// 1 MiB, depth 16, 256 KiB strings, 10,000 elements: for messages from callers.
    public static let message = JSONLimits(maxBytes: 1 << 20, maxDepth: 16, maxStringBytes: 256 << 10, maxElements: 10_000)
}

/// Why a JSON text was refused. The position is a byte offset into the input.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Sendable, Equatable {
        case tooLarge(limit: Int)
        case tooDeep(limit: Int)
        case stringTooLong(limit: Int)
        case tooManyElements(limit: Int)
        case unexpectedEnd
        case unexpectedCharacter(String)
        case invalidNumber
        case invalidEscape
        case invalidUTF8
        case loneSurrogate
        case controlCharacterInString
        case duplicateKey(String)
        case trailingData
    }
    public let reason: Reason
    public let offset: Int

    public init(reason: Reason, offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        let what: String
        switch reason {
        case .tooLarge(let l): what = "input larger than \(l) bytes"
        case .tooDeep(let l): what = "nesting deeper than \(l)"
        case .stringTooLong(let l): what = "a string longer than \(l) bytes"
        case .tooManyElements(let l): what = "more than \(l) elements in one array or object"
        case .unexpectedEnd: what = "unexpected end of input"
        case .unexpectedCharacter(let c): what = "unexpected character \(c)"
        case .invalidNumber: what = "malformed number"
        case .invalidEscape: what = "invalid escape sequence"
        case .invalidUTF8: what = "invalid UTF-8"
        case .loneSurrogate: what = "unpaired UTF-16 surrogate escape"
        case .controlCharacterInString: what = "unescaped control character in a string"
        case .duplicateKey(let k): what = "duplicate key \"\(k.prefix(64))\""
        case .trailingData: what = "data after the JSON value"
        }
        return "invalid JSON at byte \(offset): \(what)"
    }
}

/// A strict RFC 8259 parser: no comments, no trailing commas, no leading zeros, no lone
/// surrogates, no duplicate keys, valid UTF-8 only, and every limit enforced before the work.
public enum JSONParser: Sendable {
    /// Parses one JSON value that makes up the whole input (whitespace around it allowed).
    public static func parse(_ bytes: some Collection<UInt8>, limits: JSONLimits = .document) throws(JSONError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else { throw JSONError(reason: .tooLarge(limit: limits.maxBytes), offset: 0) }
        let input = Array(bytes)
        return try input.withUnsafeBufferPointer { (buffer: UnsafeBufferPointer<UInt8>) throws(JSONError) -> JSONValue in
            var state = State(bytes: buffer, limits: limits)
            state.skipWhitespace()
            let value = try state.parseValue(depth: 0)
            state.skipWhitespace()
            guard state.position == buffer.count else { throw JSONError(reason: .trailingData, offset: state.position) }
            return value
        }
    }

    /// Parses a `String`.
    public static func parse(_ text: String, limits: JSONLimits = .document) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8), limits: limits)
    }

    private struct State {
        let bytes: UnsafeBufferPointer<UInt8>
        let limits: JSONLimits
        var position = 0

        init(bytes: UnsafeBufferPointer<UInt8>, limits: JSONLimits) {
            self.bytes = bytes
            self.limits = limits
        }

        func fail(_ reason: JSONError.Reason) -> JSONError { JSONError(reason: reason, offset: position) }

        mutating func skipWhitespace() {
            while position < bytes.count {
                switch bytes[position] {
                case 0x20, 0x09, 0x0a, 0x0d: position += 1
                default: return
                }
            }
        }

        func describe(_ byte: UInt8) -> String {
            (0x21...0x7e).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        }

        mutating func expect(_ literal: StaticString, value: JSONValue) throws(JSONError) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard position + count <= bytes.count else { throw fail(.unexpectedEnd) }
            let p = literal.utf8Start
            for i in 0..<count where bytes[position + i] != p[i] {
                position += i
                throw fail(.unexpectedCharacter(describe(bytes[position])))
            }
            position += count
            return value
        }

        mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
            guard position < bytes.count else { throw fail(.unexpectedEnd) }
            switch bytes[position] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): return try expect("true", value: .bool(true))
            case UInt8(ascii: "f"): return try expect("false", value: .bool(false))
            case UInt8(ascii: "n"): return try expect("null", value: .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            default: throw fail(.unexpectedCharacter(describe(bytes[position])))
            }
        }

        mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
            guard depth <= limits.maxDepth else { throw fail(.tooDeep(limit: limits.maxDepth)) }
            position += 1
            var members: [JSONMember] = []
            var seen = Set<[UInt8]>()
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "}") { position += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard position < bytes.count else { throw fail(.unexpectedEnd) }
                guard bytes[position] == UInt8(ascii: "\"") else { throw fail(.unexpectedCharacter(describe(bytes[position]))) }
                let keyStart = position
                let key = try parseString()
                // Small objects (every message) compare against the keys so far; large ones hash.
                let duplicate: Bool
                if members.count < 16 {
                    duplicate = members.contains { $0.key.hasSameUTF8(as: key) }
                } else {
                    if seen.isEmpty { for m in members { seen.insert(Array(m.key.utf8)) } }
                    duplicate = !seen.insert(Array(key.utf8)).inserted
                }
                guard !duplicate else {
                    throw JSONError(reason: .duplicateKey(key), offset: keyStart)
                }
                skipWhitespace()
                guard position < bytes.count else { throw fail(.unexpectedEnd) }
                guard bytes[position] == UInt8(ascii: ":") else { throw fail(.unexpectedCharacter(describe(bytes[position]))) }
                position += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                members.append(JSONMember(key: key, value: value))
                guard members.count <= limits.maxElements else { throw fail(.tooManyElements(limit: limits.maxElements)) }
                skipWhitespace()
                guard position < bytes.count else { throw fail(.unexpectedEnd) }
                switch bytes[position] {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "}"): position += 1; return .object(members)
                default: throw fail(.unexpectedCharacter(describe(bytes[position])))
                }
            }
        }

        mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
            guard depth <= limits.maxDepth else { throw fail(.tooDeep(limit: limits.maxDepth)) }
            position += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if position < bytes.count, bytes[position] == UInt8(ascii: "]") { position += 1; return .array(elements) }
            while true {
                skipWhitespace()
                elements.append(try parseValue(depth: depth))
                guard elements.count <= limits.maxElements else { throw fail(.tooManyElements(limit: limits.maxElements)) }
                skipWhitespace()
                guard position < bytes.count else { throw fail(.unexpectedEnd) }
                switch bytes[position] {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "]"): position += 1; return .array(elements)
                default: throw fail(.unexpectedCharacter(describe(bytes[position])))
                }
            }
        }

        mutating func parseNumber() throws(JSONError) -> JSONValue {
            let start = position
            if bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count else { throw fail(.invalidNumber) }
            if bytes[position] == UInt8(ascii: "0") {
                position += 1
                if position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                    throw fail(.invalidNumber)
                }
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[position]) {
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            } else {
                throw fail(.invalidNumber)
            }
            var integral = true
            if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
                integral = false
                position += 1
                let digits = position
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
                guard position > digits else { throw fail(.invalidNumber) }
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
                integral = false
                position += 1
                if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
                let digits = position
                while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
                guard position > digits else { throw fail(.invalidNumber) }
            }
            guard position - start <= 64 else { throw JSONError(reason: .invalidNumber, offset: start) }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            if integral, let i = Int64(text) { return .int(i) }
            guard let d = Double(text), d.isFinite else { throw JSONError(reason: .invalidNumber, offset: start) }
            return .double(d)
        }

        mutating func hex4() throws(JSONError) -> UInt32 {
            guard position + 4 <= bytes.count else { throw fail(.unexpectedEnd) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[position]
                let digit: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail(.invalidEscape)
                }
                value = value << 4 | digit
                position += 1
            }
            return value
        }

        mutating func parseString() throws(JSONError) -> String {
            position += 1   // opening quote
            // Fast path: no escape before the closing quote, so the String is made straight from
            // the input (UTF-8 validated on the way, control characters refused).
            let start = position
            var nextRun = position   // where a run of 16 plain bytes is looked for again
            while position < bytes.count {
                if position >= nextRun {
                    // Runs of 16 bytes with nothing to look at (no quote, backslash, control or
                    // non-ASCII byte) are skipped whole: `|` of 0/1 values, no branch per byte, so
                    // the check vectorizes (a vault.load reply's 5,464 base64 characters).
                    while position + 16 <= bytes.count {
                        var special: UInt8 = 0
                        for k in position..<(position + 16) {
                            let b = bytes[k]
                            special |= (b == 0x22 ? 1 : 0) | (b == 0x5c ? 1 : 0) | (b < 0x20 ? 1 : 0) | (b >= 0x80 ? 1 : 0)
                        }
                        if special != 0 { break }
                        position += 16
                        guard position - start <= limits.maxStringBytes else { throw fail(.stringTooLong(limit: limits.maxStringBytes)) }
                    }
                    nextRun = position + 16   // byte by byte past what stopped the run
                    // A run can end exactly at the input's end (an unterminated string).
                    guard position < bytes.count else { break }
                }
                let c = bytes[position]
                if c == UInt8(ascii: "\"") {
                    guard position - start <= limits.maxStringBytes else { throw fail(.stringTooLong(limit: limits.maxStringBytes)) }
                    defer { position += 1 }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
                }
                if c == UInt8(ascii: "\\") { break }
                if c < 0x20 { throw fail(.controlCharacterInString) }
                position += c < 0x80 ? 1 : try utf8SequenceLength(at: position)
                guard position - start <= limits.maxStringBytes else { throw fail(.stringTooLong(limit: limits.maxStringBytes)) }
            }
            var out = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
            while true {
                guard position < bytes.count else { throw fail(.unexpectedEnd) }
                let c = bytes[position]
                switch c {
                case UInt8(ascii: "\""):
                    position += 1
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    position += 1
                    guard position < bytes.count else { throw fail(.unexpectedEnd) }
                    let e = bytes[position]
                    position += 1
                    switch e {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5c)
                    case UInt8(ascii: "/"): out.append(0x2f)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0c)
                    case UInt8(ascii: "n"): out.append(0x0a)
                    case UInt8(ascii: "r"): out.append(0x0d)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800...0xDBFF).contains(scalar) {
                            guard position + 6 <= bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                                throw fail(.loneSurrogate)
                            }
                            position += 2
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw fail(.loneSurrogate) }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00...0xDFFF).contains(scalar) {
                            throw fail(.loneSurrogate)
                        }
                        guard let u = Unicode.Scalar(scalar) else { throw fail(.invalidEscape) }
                        out.append(contentsOf: Array(String(Character(u)).utf8))
                    default:
                        position -= 1
                        throw fail(.invalidEscape)
                    }
                case 0x00..<0x20:
                    throw fail(.controlCharacterInString)
                case 0x00..<0x80:
                    out.append(c)
                    position += 1
                default:
                    let n = try utf8SequenceLength(at: position)
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[position..<(position + n)]))
                    position += n
                }
                guard out.count <= limits.maxStringBytes else { throw fail(.stringTooLong(limit: limits.maxStringBytes)) }
            }
        }

        /// Validates one multi-byte UTF-8 sequence (no overlongs, no surrogates, ≤ U+10FFFF).
        func utf8SequenceLength(at i: Int) throws(JSONError) -> Int {
            let b0 = bytes[i]
            let n: Int
            var minimum: UInt32
            var scalar: UInt32
            switch b0 {
            case 0xC2...0xDF: n = 2; minimum = 0x80; scalar = UInt32(b0 & 0x1F)
            case 0xE0...0xEF: n = 3; minimum = 0x800; scalar = UInt32(b0 & 0x0F)
            case 0xF0...0xF4: n = 4; minimum = 0x10000; scalar = UInt32(b0 & 0x07)
            default: throw fail(.invalidUTF8)
            }
            guard i + n <= bytes.count else { throw fail(.invalidUTF8) }
            for k in 1..<n {
                let b = bytes[i + k]
                guard b & 0xC0 == 0x80 else { throw fail(.invalidUTF8) }
                scalar = scalar << 6 | UInt32(b & 0x3F)
            }
            guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800...0xDFFF).contains(scalar) else { throw fail(.invalidUTF8) }
            return n
        }
    }
}
