/// Writers for the exact JSON byte forms SiteKeep needs.
public enum JSONSerializer: Sendable {
    /// The byte form to produce.
    public enum Style: Sendable, Equatable {
        /// `,` and `:` with no whitespace, members in their order, non-ASCII as UTF-8.
        case compact
        /// As ``compact`` with object keys sorted by Unicode code point (equal to UTF-8 byte
        /// order) at every level: the canonical form of sgit's signing bytes (RFC 8785 for these
        /// value types, with Python's `sort_keys` order).
        case canonical
        /// Python's `json.dumps` default: `", "` and `": "`, members in their order, every
        /// non-ASCII character escaped as `\uXXXX` (surrogate pairs above U+FFFF). The sgit
        /// writer's form.
        case python
        /// Two-space indentation for people, members in order, non-ASCII as UTF-8.
        case pretty
        /// The form Foundation's `JSONEncoder` wrote with `.prettyPrinted`, byte for byte: two-space
        /// indentation, `" : "` between key and value, an empty array or object as its brackets
        /// around a blank line (`[\n\n  ]`), `/` escaped as `\/`, other escapes as ``compact``'s
        /// (`\u001f` in lower case), non-ASCII as UTF-8, members in their order (a caller that
        /// wants `.sortedKeys`' order gives them sorted). No trailing newline. The form of files
        /// and outputs first written by `JSONEncoder` that readers may compare (`sites.json`,
        /// `sitekeep audit --json`). Fractional numbers are written as in the other styles, not
        /// as Foundation wrote them: no format that uses this style holds one.
        case foundationPretty
    }

    /// Serialises `value` in `style`.
    public static func bytes(_ value: JSONValue, style: Style = .compact) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, style: style, indent: 0, into: &out)
        return out
    }

    /// Serialises `value` in `style` as a `String`.
    public static func string(_ value: JSONValue, style: Style = .compact) -> String {
        String(decoding: bytes(value, style: style), as: UTF8.self)
    }

    private static func newline(_ indent: Int, into out: inout [UInt8]) {
        out.append(0x0a)
        out.append(contentsOf: repeatElement(0x20, count: indent * 2))
    }

    private static func write(_ value: JSONValue, style: Style, indent: Int, into out: inout [UInt8]) {
        let indented = style == .pretty || style == .foundationPretty
        let slashes = style == .foundationPretty
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .bool(let b): out.append(contentsOf: Array((b ? "true" : "false").utf8))
        case .int(let i): out.append(contentsOf: Array(String(i).utf8))
        case .double(let d): out.append(contentsOf: Array(formatDouble(d).utf8))
        case .string(let s): writeString(s, asciiOnly: style == .python, escapingSlashes: slashes, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(contentsOf: style == .python ? [0x2c, 0x20] : [0x2c]) }
                if indented { newline(indent + 1, into: &out) }
                write(element, style: style, indent: indent + 1, into: &out)
            }
            if style == .foundationPretty, elements.isEmpty { out.append(0x0a) }
            if indented, !elements.isEmpty || style == .foundationPretty { newline(indent, into: &out) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            let ordered = style == .canonical
                ? members.sorted { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) { $0.value < $1.value } }
                : members
            out.append(UInt8(ascii: "{"))
            for (i, member) in ordered.enumerated() {
                if i > 0 { out.append(contentsOf: style == .python ? [0x2c, 0x20] : [0x2c]) }
                if indented { newline(indent + 1, into: &out) }
                writeString(member.key, asciiOnly: style == .python, escapingSlashes: slashes, into: &out)
                switch style {
                case .python, .pretty: out.append(contentsOf: [0x3a, 0x20])
                case .foundationPretty: out.append(contentsOf: [0x20, 0x3a, 0x20])
                case .compact, .canonical: out.append(0x3a)
                }
                write(member.value, style: style, indent: indent + 1, into: &out)
            }
            if style == .foundationPretty, members.isEmpty { out.append(0x0a) }
            if indented, !members.isEmpty || style == .foundationPretty { newline(indent, into: &out) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Python's `repr(float)` style: shortest round-trip digits, always with a `.` or exponent.
    static func formatDouble(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        var text = d.description          // shortest round-trip, e.g. "1.0", "1e-05", "0.1"
        if !text.contains(".") && !text.contains("e") { text += ".0" }
        return text
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func writeEscape(_ unit: UInt16, into out: inout [UInt8]) {
        out.append(contentsOf: [0x5c, UInt8(ascii: "u"),
                                hexDigits[Int(unit >> 12 & 0xF)], hexDigits[Int(unit >> 8 & 0xF)],
                                hexDigits[Int(unit >> 4 & 0xF)], hexDigits[Int(unit & 0xF)]])
    }

    private static func writeString(_ s: String, asciiOnly: Bool, escapingSlashes: Bool, into out: inout [UInt8]) {
        out.append(0x22)
        // Fast path: nothing to escape, so the UTF-8 bytes are the output (what the loop below
        // would write, byte for byte).
        // One pass without an early exit and without `||` (0/1 values joined with `|`), which
        // the compiler vectorizes: a vault.load reply's 5,464 base64 characters go through here.
        let plain: (UnsafeBufferPointer<UInt8>) -> Bool = { bytes in
            let nonASCII: UInt8 = asciiOnly ? 1 : 0   // whether 0x7f and above must be escaped
            let slash: UInt8 = escapingSlashes ? 1 : 0
            var special: UInt8 = 0
            for b in bytes {
                special |= (b < 0x20 ? 1 : 0) | (b == 0x22 ? 1 : 0) | (b == 0x5c ? 1 : 0) | ((b >= 0x7f ? 1 : 0) & nonASCII)
                    | ((b == 0x2f ? 1 : 0) & slash)
            }
            return special == 0
        }
        if let done = s.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            guard plain(bytes) else { return false }
            out.append(contentsOf: bytes)
            return true
        }), done {
            out.append(0x22)
            return
        }
        for scalar in s.unicodeScalars {
            switch scalar.value {
            case 0x22: out.append(contentsOf: [0x5c, 0x22])
            case 0x5c: out.append(contentsOf: [0x5c, 0x5c])
            case 0x2f where escapingSlashes: out.append(contentsOf: [0x5c, 0x2f])
            case 0x0a: out.append(contentsOf: [0x5c, UInt8(ascii: "n")])
            case 0x0d: out.append(contentsOf: [0x5c, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5c, UInt8(ascii: "t")])
            case 0x08: out.append(contentsOf: [0x5c, UInt8(ascii: "b")])
            case 0x0c: out.append(contentsOf: [0x5c, UInt8(ascii: "f")])
            case 0x00..<0x20: writeEscape(UInt16(scalar.value), into: &out)
            case 0x20..<0x7f: out.append(UInt8(scalar.value))
            default:
                if asciiOnly {
                    for unit in String(scalar).utf16 { writeEscape(unit, into: &out) }
                } else {
                    out.append(contentsOf: Array(String(scalar).utf8))
                }
            }
        }
        out.append(0x22)
    }
}
