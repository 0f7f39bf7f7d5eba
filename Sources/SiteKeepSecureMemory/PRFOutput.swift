/// A passkey's WebAuthn PRF output as a file or a pipe gives it: exactly 32 raw bytes, or 64
/// hexadecimal digits (either case) followed by at most one line ending (`\n`, `\r\n` or `\r`).
/// The one rule for every reader of `--prf-file`.
public enum PRFOutput {
    /// The output's length in bytes.
    public static let count = 32

    /// The 32 bytes `input` holds by the rule above, in guarded memory; nil when `input` is
    /// anything else (the caller says what was wrong: it knows where the bytes came from).
    public static func decode(_ input: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes? {
        if input.count == count {
            return try SecretBytes(count: count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                out.copyMemory(from: input)
            })
        }
        var length = input.count
        if length > 0, input[length - 1] == 0x0a { length -= 1 }
        if length > 0, input[length - 1] == 0x0d { length -= 1 }
        guard length == 2 * count, input[0..<length].allSatisfy({ nibble($0) != nil }) else { return nil }
        return try SecretBytes(count: count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            for i in 0..<count { out[i] = nibble(input[2 * i])! << 4 | nibble(input[2 * i + 1])! }
        })
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        case 0x41...0x46: c - 0x41 + 10
        default: nil
        }
    }
}
