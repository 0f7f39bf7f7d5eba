/// Standard base64 (`+/`, `=` padding) and base64url (`-_`, no padding), constant-time in both
/// directions (written in Swift, pinned against libsodium's codec). Decoding is strict: no
/// whitespace, no mixed alphabets, canonical padding and trailing bits.
public enum Base64: Sendable {
    /// The alphabet and padding to use.
    public enum Variant: Sendable {
        /// RFC 4648 §4: `A–Z a–z 0–9 + /` with `=` padding.
        case standard
        /// RFC 4648 §5 without padding, as WebAuthn and URL fragments use it.
        case urlSafeNoPadding
        /// RFC 4648 §5 with `=` padding.
        case urlSafe
    }

    /// Encodes bytes.
    public static func encode(_ bytes: some Collection<UInt8>, variant: Variant = .standard) -> String {
        guard !bytes.isEmpty else { return "" }
        if let s = bytes.withContiguousStorageIfAvailable({ encode(contiguous: $0, variant: variant) }) { return s }
        return Array(bytes).withUnsafeBufferPointer { encode(contiguous: $0, variant: variant) }
    }

    /// Encodes straight into the String's storage, in Swift rather than with libsodium's
    /// `sodium_bin2base64`: the same constant-time rule (each digit computed from its 6-bit value
    /// by arithmetic on masks, no table indexed by the data, no branch on it), written so the
    /// compiler keeps it in registers instead of calling a function per character. A 4 KiB
    /// `vault.load` reply took 18.7 µs through libsodium and takes about 4 µs here
    /// (BENCHMARKS.md, "Session of 2026-12-02, morning"). Pinned against libsodium's output and
    /// RFC 4648's vectors in `SecretAndEncodingTests`.
    static func encode(contiguous src: UnsafeBufferPointer<UInt8>, variant: Variant) -> String {
        let padded = variant != .urlSafeNoPadding
        let length = padded ? (src.count + 2) / 3 * 4 : (4 * src.count + 2) / 3
        // The two digits after `9`: `+ /` (standard) or `- _` (URL-safe), as offsets from the
        // digit the rule for `0`–`9` would give.
        let (d62, d63): (Int32, Int32) = variant == .standard ? (15, 3) : (13, 49)
        return String(unsafeUninitializedCapacity: length) { out in
            var i = 0, o = 0
            let whole = src.count - src.count % 3
            while i < whole {
                let b0 = Int32(src[i]), b1 = Int32(src[i + 1]), b2 = Int32(src[i + 2])
                out[o] = digit(b0 >> 2, d62, d63)
                out[o + 1] = digit(((b0 & 3) << 4) | (b1 >> 4), d62, d63)
                out[o + 2] = digit(((b1 & 15) << 2) | (b2 >> 6), d62, d63)
                out[o + 3] = digit(b2 & 63, d62, d63)
                i += 3
                o += 4
            }
            switch src.count - whole {
            case 1:
                let b0 = Int32(src[i])
                out[o] = digit(b0 >> 2, d62, d63)
                out[o + 1] = digit((b0 & 3) << 4, d62, d63)
                o += 2
                if padded {
                    out[o] = UInt8(ascii: "=")
                    out[o + 1] = UInt8(ascii: "=")
                    o += 2
                }
            case 2:
                let b0 = Int32(src[i]), b1 = Int32(src[i + 1])
                out[o] = digit(b0 >> 2, d62, d63)
                out[o + 1] = digit(((b0 & 3) << 4) | (b1 >> 4), d62, d63)
                out[o + 2] = digit((b1 & 15) << 2, d62, d63)
                o += 3
                if padded {
                    out[o] = UInt8(ascii: "=")
                    o += 1
                }
            default: break
            }
            return o
        }
    }

    /// The base64 digit of the 6-bit value `v`, without a branch or a look-up on `v`: `A` + v,
    /// moved by 6 past 25 (to `a`), back by 75 past 51 (to `0`), and by the variant's offsets
    /// past 61 and 62. `(k - v) >> 8` is all ones exactly when v > k (an arithmetic shift of a
    /// small negative number).
    @inline(__always)
    private static func digit(_ v: Int32, _ d62: Int32, _ d63: Int32) -> UInt8 {
        var c = v &+ 65
        c &+= ((25 &- v) >> 8) & 6
        c &-= ((51 &- v) >> 8) & 75
        c &-= ((61 &- v) >> 8) & d62
        c &+= ((62 &- v) >> 8) & d63
        return UInt8(truncatingIfNeeded: c)
    }

    /// Whether ``decode(_:variant:)`` would accept `text`, without decoding it: the alphabet, the
    /// padding the variant asks for, and zero bits after the last whole byte (one text per bytes).
    /// Not constant-time (it stops at bad padding and looks the last digit up in a table): for
    /// validating public data, such as a message's field, before it is decoded where it is used.
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
        // The padding first (at most two `=` at the end), then every other byte checked in one
        // pass without an early exit, which the compiler vectorizes: a result's 4 KiB file is
        // 5,464 bytes, checked on every vault.load reply.
        let n = bytes.count
        var padding = 0
        while padding < 2, padding < n, bytes[n - 1 - padding] == UInt8(ascii: "=") { padding += 1 }
        let digits = n - padding
        let (c62, c63) = variant == .standard ? (UInt8(ascii: "+"), UInt8(ascii: "/")) : (UInt8(ascii: "-"), UInt8(ascii: "_"))
        var allDigits: UInt8 = 1   // `|` of 0/1 values, not `||`: no branch per byte, so it vectorizes
        for i in 0..<digits {
            let b = bytes[i]
            allDigits &= (b &- 65 < 26 ? 1 : 0) | (b &- 97 < 26 ? 1 : 0) | (b &- 48 < 10 ? 1 : 0) | (b == c62 ? 1 : 0) | (b == c63 ? 1 : 0)
        }
        guard allDigits == 1 else { return false }
        let last = digits > 0 ? (variant == .standard ? standardDigits : urlSafeDigits)[Int(bytes[digits - 1])] : 0
        let expected: Int
        switch digits % 4 {
        case 0: expected = 0
        case 1: return false
        case 2: guard last & 0x0f == 0 else { return false }; expected = 2
        default: guard last & 0x03 == 0 else { return false }; expected = 1
        }
        return variant == .urlSafeNoPadding ? padding == 0 : padding == expected
    }

    /// Decodes text in the given variant. Refuses characters outside the alphabet, wrong padding
    /// and trailing garbage: exactly what libsodium's `sodium_base642bin` accepts (with no
    /// ignored characters), and the one text per bytes ``isValid(_:variant:)`` describes.
    ///
    /// In Swift rather than through libsodium, with the same constant-time rule as
    /// ``encode(_:variant:)``: each digit's value is computed by arithmetic on masks, with no
    /// table indexed by the data and no branch on it; what is branched on is the length and
    /// where the padding starts, which the text's length already shows. libsodium's decoder
    /// calls a function per character and was a fifth of decoding a vault tree (four fields per
    /// entry, each base64). Pinned against libsodium on valid and mutated texts of every length
    /// in `SecretAndEncodingTests`.
    public static func decode(_ text: String, variant: Variant = .standard) throws(CryptoError) -> [UInt8] {
        var text = text
        let name = variant == .standard ? "base64" : "base64url"
        let decoded = text.withUTF8 { decode(bytes: $0, variant: variant) }
        switch decoded {
        case .success(let bytes): return bytes
        case .failure(.nonASCII): throw .invalidEncoding("text is not valid \(name): non-ASCII character")
        case .failure(.invalid): throw .invalidEncoding("text is not valid \(name)")
        }
    }

    enum DecodeFailure: Error { case nonASCII, invalid }

    static func decode(bytes src: UnsafeBufferPointer<UInt8>, variant: Variant) -> Result<[UInt8], DecodeFailure> {
        let n = src.count
        guard n > 0 else { return .success([]) }
        // Non-ASCII first, OR-folded so the check does not depend on where such a byte is.
        var high: UInt8 = 0
        for b in src { high |= b }
        guard high < 0x80 else { return .failure(.nonASCII) }
        var padding = 0
        while padding < 2, padding < n, src[n - 1 - padding] == UInt8(ascii: "=") { padding += 1 }
        let digits = n - padding
        let tail = digits % 4
        guard tail != 1 else { return .failure(.invalid) }
        let expected = tail == 0 ? 0 : 4 - tail   // `=` after 2 digits: 2; after 3: 1
        guard variant == .urlSafeNoPadding ? padding == 0 : padding == expected else { return .failure(.invalid) }
        let (c62, c63): (UInt32, UInt32) = variant == .standard ? (0x2b, 0x2f) : (0x2d, 0x5f)
        let length = digits / 4 * 3 + (tail == 0 ? 0 : tail - 1)
        var bad: UInt32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            var i = 0, o = 0
            while i + 4 <= digits {
                let a = value(UInt32(src[i]), c62, c63), b = value(UInt32(src[i + 1]), c62, c63)
                let c = value(UInt32(src[i + 2]), c62, c63), d = value(UInt32(src[i + 3]), c62, c63)
                bad |= (a | b | c | d) & 0x100
                buffer[o] = UInt8(truncatingIfNeeded: (a << 2) | (b >> 4))
                buffer[o + 1] = UInt8(truncatingIfNeeded: (b << 4) | (c >> 2))
                buffer[o + 2] = UInt8(truncatingIfNeeded: (c << 6) | d)
                i += 4
                o += 3
            }
            if tail >= 2 {
                let a = value(UInt32(src[i]), c62, c63), b = value(UInt32(src[i + 1]), c62, c63)
                bad |= (a | b) & 0x100
                buffer[o] = UInt8(truncatingIfNeeded: (a << 2) | (b >> 4))
                if tail == 3 {
                    let c = value(UInt32(src[i + 2]), c62, c63)
                    bad |= c & 0x100
                    buffer[o + 1] = UInt8(truncatingIfNeeded: (b << 4) | (c >> 2))
                    bad |= (c & 0x03) << 8        // bits after the last whole byte must be zero
                } else {
                    bad |= (b & 0x0f) << 8
                }
            }
            initialized = length
        }
        guard bad == 0 else { return .failure(.invalid) }
        return .success(out)
    }

    /// The 6-bit value of the ASCII byte `c` as a digit (`c62`, `c63`: the variant's last two),
    /// or 0x1ff when it is not one, with no branch or look-up on `c`. `in(lo, hi)` is all ones
    /// exactly when lo <= c <= hi: `(c - lo)` and `(hi - c)` both non-negative, tested on the
    /// sign bit of 32-bit differences of small numbers.
    @inline(__always)
    private static func value(_ c: UInt32, _ c62: UInt32, _ c63: UInt32) -> UInt32 {
        @inline(__always) func within(_ lo: UInt32, _ hi: UInt32) -> UInt32 {
            ((((c &- lo) | (hi &- c)) >> 31) & 1) &- 1      // 0xffffffff inside, 0 outside
        }
        @inline(__always) func equal(_ x: UInt32) -> UInt32 { within(x, x) }
        let upper = within(0x41, 0x5a), lower = within(0x61, 0x7a), digit = within(0x30, 0x39)
        let is62 = equal(c62), is63 = equal(c63)
        let v = (upper & (c &- 0x41)) | (lower & (c &- 0x61 &+ 26)) | (digit & (c &- 0x30 &+ 52)) | (is62 & 62) | (is63 & 63)
        let valid = upper | lower | digit | is62 | is63
        return v | (~valid & 0x1ff)
    }
}
