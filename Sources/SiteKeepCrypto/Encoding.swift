internal import CSodium

/// Lower-case hexadecimal, through libsodium's constant-time `sodium_bin2hex` / `sodium_hex2bin`.
public enum Hex: Sendable {
    /// Encodes bytes as lower-case hex.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        guard !bytes.isEmpty else { return "" }
        if let s = bytes.withContiguousStorageIfAvailable(encode(contiguous:)) { return s }
        return Array(bytes).withUnsafeBufferPointer(encode(contiguous:))
    }

    /// Encodes straight into the String's storage (no intermediate arrays).
    static func encode(contiguous src: UnsafeBufferPointer<UInt8>) -> String {
        let length = src.count * 2 + 1
        return String(unsafeUninitializedCapacity: length) { out in
            out.withMemoryRebound(to: CChar.self) { c in _ = sodium_bin2hex(c.baseAddress!, length, src.baseAddress, src.count) }
            return length - 1
        }
    }

    /// Decodes hex (either case). Refuses odd lengths and any non-hex character.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { throw .invalidEncoding("hex text has an odd number of characters") }
        guard !chars.isEmpty else { return [] }
        var out = [UInt8](repeating: 0, count: chars.count / 2)
        var written = 0
        var end: UnsafePointer<CChar>? = nil
        let rc = chars.withUnsafeBufferPointer { src in
            src.withMemoryRebound(to: CChar.self) { c in
                sodium_hex2bin(&out, out.count, c.baseAddress, c.count, nil, &written, &end)
            }
        }
        guard rc == 0, written == out.count else { throw .invalidEncoding("text is not hexadecimal") }
        return out
    }
}

/// Standard base64 (`+/`, `=` padding) and base64url (`-_`, no padding), through libsodium's
/// constant-time codec. Decoding is strict: no whitespace, no mixed alphabets.
public enum Base64: Sendable {
    /// The alphabet and padding to use.
    public enum Variant: Sendable {
        /// RFC 4648 §4: `A–Z a–z 0–9 + /` with `=` padding.
        case standard
        /// RFC 4648 §5 without padding, as WebAuthn and URL fragments use it.
        case urlSafeNoPadding
        /// RFC 4648 §5 with `=` padding.
        case urlSafe

        var sodiumValue: Int32 {
            switch self {
            case .standard: sodium_base64_VARIANT_ORIGINAL
            case .urlSafeNoPadding: sodium_base64_VARIANT_URLSAFE_NO_PADDING
            case .urlSafe: sodium_base64_VARIANT_URLSAFE
            }
        }
    }

    /// Encodes bytes.
    public static func encode(_ bytes: some Collection<UInt8>, variant: Variant = .standard) -> String {
        guard !bytes.isEmpty else { return "" }
        if let s = bytes.withContiguousStorageIfAvailable({ encode(contiguous: $0, variant: variant) }) { return s }
        return Array(bytes).withUnsafeBufferPointer { encode(contiguous: $0, variant: variant) }
    }

    /// Encodes straight into the String's storage: a 4 KiB file's reply no longer copies its
    /// bytes into an array, the text into another and then into the String.
    static func encode(contiguous src: UnsafeBufferPointer<UInt8>, variant: Variant) -> String {
        let length = sodium_base64_encoded_len(src.count, variant.sodiumValue)   // with the NUL
        return String(unsafeUninitializedCapacity: length) { out in
            out.withMemoryRebound(to: CChar.self) { c in
                _ = sodium_bin2base64(c.baseAddress!, length, src.baseAddress, src.count, variant.sodiumValue)
            }
            // The text's own length (sodium's length counts the NUL and, without padding, a
            // little more).
            return variant == .urlSafeNoPadding ? (4 * src.count + 2) / 3 : (src.count + 2) / 3 * 4
        }
    }

    /// Whether ``decode(_:variant:)`` would accept `text`, without decoding it: the alphabet, the
    /// padding the variant asks for, and zero bits after the last whole byte (one text per bytes).
    /// A plain table check, not constant-time: for validating public data, such as a message's
    /// field, before it is decoded where it is used.
    public static func isValid(_ text: String, variant: Variant = .standard) -> Bool {
        var text = text
        return text.withUTF8 { isValid(bytes: $0, variant: variant) }
    }

    /// Each byte's 6-bit value in the alphabet, 0xff for a byte outside it.
    private static let standardDigits = digitTable("+", "/")
    private static let urlSafeDigits = digitTable("-", "_")

    private static func digitTable(_ d62: Unicode.Scalar, _ d63: Unicode.Scalar) -> [UInt8] {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (value, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() {
            table[Int(c)] = UInt8(value)
        }
        table[Int(d62.value)] = 62
        table[Int(d63.value)] = 63
        return table
    }

    static func isValid(bytes: UnsafeBufferPointer<UInt8>, variant: Variant) -> Bool {
        // One table look-up a byte (a result's 4 KiB file is 5,464 of them, checked on every
        // vault.load reply).
        var last: UInt8 = 0
        var index = 0
        (variant == .standard ? standardDigits : urlSafeDigits).withUnsafeBufferPointer { table in
            while index < bytes.count {
                let v = table[Int(bytes[index])]
                if v == 0xff { break }
                last = v
                index += 1
            }
        }
        let digits = index
        let padding: Int
        switch digits % 4 {
        case 0: padding = 0
        case 1: return false
        case 2: guard last & 0x0f == 0 else { return false }; padding = 2
        default: guard last & 0x03 == 0 else { return false }; padding = 1
        }
        let rest = bytes.count - index
        if variant == .urlSafeNoPadding { return rest == 0 }
        guard rest == padding else { return false }
        for i in index..<bytes.count where bytes[i] != UInt8(ascii: "=") { return false }
        return true
    }

    /// Decodes text in the given variant. Refuses characters outside the alphabet, wrong padding
    /// and trailing garbage.
    public static func decode(_ text: String, variant: Variant = .standard) throws(CryptoError) -> [UInt8] {
        let chars = Array(text.utf8)
        guard !chars.isEmpty else { return [] }
        // libsodium 1.0.18's constant-time alphabet test misclassifies bytes >= 0x80 as valid
        // digits (found by FuzzCrypto: four U+FFFD decoded to nine 0xff bytes), so refuse any
        // non-ASCII byte first. OR-folding keeps the check independent of where such a byte is.
        guard chars.reduce(0, |) < 0x80 else {
            throw .invalidEncoding("text is not valid \(variant == .standard ? "base64" : "base64url"): non-ASCII character")
        }
        var out = [UInt8](repeating: 0, count: chars.count * 3 / 4 + 3)
        var written = 0
        var end: UnsafePointer<CChar>? = nil
        let rc = chars.withUnsafeBufferPointer { src in
            src.withMemoryRebound(to: CChar.self) { c in
                sodium_base642bin(&out, out.count, c.baseAddress, c.count, nil, &written, &end, variant.sodiumValue)
            }
        }
        guard rc == 0 else { throw .invalidEncoding("text is not valid \(variant == .standard ? "base64" : "base64url")") }
        if let end {
            let consumed = chars.withUnsafeBufferPointer { src in
                src.withMemoryRebound(to: CChar.self) { c in c.baseAddress!.distance(to: end) }
            }
            guard consumed == chars.count else { throw .invalidEncoding("trailing characters after base64 data") }
        }
        return Array(out.prefix(written))
    }
}
