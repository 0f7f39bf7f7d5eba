/// Lower-case hexadecimal, constant-time in both directions: libsodium's `sodium_bin2hex` /
/// `sodium_hex2bin` rule (each digit computed from its 4-bit value by arithmetic on masks, no
/// table indexed by the data, no branch on it), written in Swift so that the encodings need no C
/// library. Pinned against libsodium's codec in `SecretAndEncodingTests`.
public enum Hex: Sendable {
    /// Encodes bytes as lower-case hex.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        guard !bytes.isEmpty else { return "" }
        if let s = bytes.withContiguousStorageIfAvailable(encode(contiguous:)) { return s }
        return Array(bytes).withUnsafeBufferPointer(encode(contiguous:))
    }

    /// Encodes straight into the String's storage (no intermediate arrays).
    static func encode(contiguous src: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: src.count * 2) { out in
            for (i, byte) in src.enumerated() {
                out[2 * i] = digit(UInt32(byte >> 4))
                out[2 * i + 1] = digit(UInt32(byte & 0x0f))
            }
            return src.count * 2
        }
    }

    /// The hex digit of the 4-bit value `v` (`sodium_bin2hex`): `87 + v` (`a` − 10 + v), moved
    /// back by 39 to `0` + v when v < 10, without a branch on `v` (`(v - 10) >> 8` is all ones
    /// exactly then).
    @inline(__always)
    private static func digit(_ v: UInt32) -> UInt8 {
        UInt8(truncatingIfNeeded: 87 &+ v &+ (((v &- 10) >> 8) & ~38))
    }

    /// Decodes hex (either case). Refuses odd lengths and any non-hex character.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { throw .invalidEncoding("hex text has an odd number of characters") }
        guard !chars.isEmpty else { return [] }
        var bad: UInt32 = 0
        let out = [UInt8](unsafeUninitializedCapacity: chars.count / 2) { buffer, initialized in
            for i in 0..<(chars.count / 2) {
                let hi = value(UInt32(chars[2 * i])), lo = value(UInt32(chars[2 * i + 1]))
                bad |= (hi | lo) & 0x100
                buffer[i] = UInt8(truncatingIfNeeded: (hi << 4) | lo)
            }
            initialized = chars.count / 2
        }
        guard bad == 0 else { throw .invalidEncoding("text is not hexadecimal") }
        return out
    }

    /// The 4-bit value of the ASCII byte `c` as a hex digit of either case, or 0x1ff when it is
    /// not one, with no branch or look-up on `c` (`sodium_hex2bin`'s rule: `c ^ 48` is the value
    /// of `0`–`9`, `(c & ~32) - 55` that of `A`–`F` and `a`–`f`, each kept by a mask that is all
    /// ones exactly when it is in range).
    @inline(__always)
    private static func value(_ c: UInt32) -> UInt32 {
        let num = c ^ 48
        let isNum = ((num &- 10) >> 8) & 1                              // 1 when c is 0-9
        let alpha = ((c & ~32) &- 55) & 0xff
        let isAlpha = (((alpha &- 10) ^ (alpha &- 16)) >> 8) & 1        // 1 when c is A-F or a-f
        let v = ((0 &- isNum) & num) | ((0 &- isAlpha) & alpha)
        return (v & 0x0f) | (((isNum | isAlpha) ^ 1) << 8)
    }
}
