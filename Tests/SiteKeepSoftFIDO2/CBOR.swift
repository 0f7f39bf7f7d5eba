/// A minimal CBOR codec for the software authenticator: the data items CTAP2 uses (unsigned and
/// negative integers, byte and text strings, arrays, maps, booleans, null), definite lengths
/// only. ``encoded`` writes CTAP2's canonical form (RFC 7049 §3.9 as CTAP 2.1 §8 restates it:
/// shortest integer and length encodings, map keys sorted by their encoded bytes, shorter
/// first); ``decode(_:)`` reads one item that fills the input, bounded in depth and size.
public indirect enum CBOR: Hashable, Sendable {
    case unsigned(UInt64)
    /// The integer -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// Pairs in the order given; ``encoded`` sorts them.
    case map([Pair])
    case bool(Bool)
    case null

    public struct Pair: Hashable, Sendable {
        public let key: CBOR
        public let value: CBOR
        public init(_ key: CBOR, _ value: CBOR) { self.key = key; self.value = value }
    }

    /// An integer item.
    public static func int(_ v: Int) -> CBOR { v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(-1 - v)) }

    public enum DecodeError: Error, Equatable, Sendable {
        case truncated, trailingBytes, unsupported(String), tooDeep, duplicateKey, invalidText
    }

    // MARK: Encoding

    /// The canonical CTAP2 encoding.
    public var encoded: [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private static func head(_ major: UInt8, _ value: UInt64, into out: inout [UInt8]) {
        let m = major << 5
        switch value {
        case 0..<24: out.append(m | UInt8(value))
        case 24...0xff: out += [m | 24, UInt8(value)]
        case 0x100...0xffff: out += [m | 25, UInt8(value >> 8), UInt8(value & 0xff)]
        case 0x10000...0xffff_ffff: out.append(m | 26); for s in stride(from: 24, through: 0, by: -8) { out.append(UInt8((value >> UInt64(s)) & 0xff)) }
        default: out.append(m | 27); for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8((value >> UInt64(s)) & 0xff)) }
        }
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let v): Self.head(0, v, into: &out)
        case .negative(let v): Self.head(1, v, into: &out)
        case .bytes(let b): Self.head(2, UInt64(b.count), into: &out); out += b
        case .text(let t): let u = Array(t.utf8); Self.head(3, UInt64(u.count), into: &out); out += u
        case .array(let items): Self.head(4, UInt64(items.count), into: &out); for i in items { i.encode(into: &out) }
        case .map(let pairs):
            Self.head(5, UInt64(pairs.count), into: &out)
            let sorted = pairs.map { ($0.key.encoded, $0.value.encoded) }.sorted { a, b in
                a.0.count != b.0.count ? a.0.count < b.0.count : a.0.lexicographicallyPrecedes(b.0)
            }
            for (k, v) in sorted { out += k; out += v }
        case .bool(let b): out.append(b ? 0xf5 : 0xf4)
        case .null: out.append(0xf6)
        }
    }

    // MARK: Decoding

    /// Decodes the one item `bytes` holds; nesting deeper than `maxDepth` is refused.
    public static func decode(_ bytes: [UInt8], maxDepth: Int = 8) throws(DecodeError) -> CBOR {
        var reader = Reader(bytes: bytes)
        let item = try reader.item(depth: 0, maxDepth: maxDepth)
        guard reader.offset == bytes.count else { throw .trailingBytes }
        return item
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0

        mutating func byte() throws(DecodeError) -> UInt8 {
            guard offset < bytes.count else { throw .truncated }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func take(_ n: UInt64) throws(DecodeError) -> [UInt8] {
            guard n <= UInt64(bytes.count - offset) else { throw .truncated }
            defer { offset += Int(n) }
            return Array(bytes[offset..<offset + Int(n)])
        }

        mutating func argument(_ info: UInt8) throws(DecodeError) -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24...27:
                var v: UInt64 = 0
                for _ in 0..<(1 << Int(info - 24)) { v = v << 8 | UInt64(try byte()) }
                return v
            default: throw .unsupported("indefinite length or reserved additional information \(info)")
            }
        }

        mutating func item(depth: Int, maxDepth: Int) throws(DecodeError) -> CBOR {
            guard depth <= maxDepth else { throw .tooDeep }
            let initial = try byte()
            let major = initial >> 5, info = initial & 0x1f
            switch major {
            case 0: return .unsigned(try argument(info))
            case 1: return .negative(try argument(info))
            case 2: return .bytes(try take(try argument(info)))
            case 3:
                let raw = try take(try argument(info))
                guard let s = String(validating: raw, as: UTF8.self) else { throw .invalidText }
                return .text(s)
            case 4:
                let n = try argument(info)
                guard n <= UInt64(bytes.count - offset) else { throw .truncated }
                var items: [CBOR] = []
                for _ in 0..<n { items.append(try item(depth: depth + 1, maxDepth: maxDepth)) }
                return .array(items)
            case 5:
                let n = try argument(info)
                guard n <= UInt64(bytes.count - offset) else { throw .truncated }
                var pairs: [Pair] = []
                var seen = Set<CBOR>()
                for _ in 0..<n {
                    let k = try item(depth: depth + 1, maxDepth: maxDepth)
                    guard seen.insert(k).inserted else { throw .duplicateKey }
                    pairs.append(Pair(k, try item(depth: depth + 1, maxDepth: maxDepth)))
                }
                return .map(pairs)
            case 7:
                switch info {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                default: throw .unsupported("simple value or float \(info)")
                }
            default: throw .unsupported("tag")
            }
        }
    }

    // MARK: Reading

    /// The value under `key` in a map.
    public subscript(key: CBOR) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first(where: { $0.key == key })?.value
    }
    public subscript(int key: Int) -> CBOR? { self[.int(key)] }
    public subscript(text key: String) -> CBOR? { self[.text(key)] }

    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
    public var textValue: String? { if case .text(let t) = self { t } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var arrayValue: [CBOR]? { if case .array(let a) = self { a } else { nil } }
    public var intValue: Int? {
        switch self {
        case .unsigned(let v) where v <= UInt64(Int.max): Int(v)
        case .negative(let v) where v < UInt64(Int.max): -1 - Int(v)
        default: nil
        }
    }
    public var isMap: Bool { if case .map = self { true } else { false } }
}
