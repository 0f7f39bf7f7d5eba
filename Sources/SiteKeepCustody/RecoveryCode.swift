import SiteKeepCrypto

/// A recovery code as shown to the user, once, when its slot is created.
///
/// 128 random bits and a 32-bit checksum, written as 32 Crockford base32 characters in 8
/// groups of 4 (`7K3M-...`). The checksum catches typos before any key derivation runs.
/// `description` is redacted; read the code with ``formatted``, print it once, and drop it.
public struct RecoveryCode: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The code in its display form: 8 groups of 4 characters separated by `-`.
    public let formatted: String

    init(formatted: String) { self.formatted = formatted }

    public var description: String { "RecoveryCode(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: []) }

    static let alphabet: [UInt8] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    static let dataByteCount = 16
    static let checksumByteCount = 4
    static let symbolCount = 32

    static func checksum(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var h = SHA256.Hasher()
        h.update(Array("sitekeep.recovery.v1\0".utf8))
        h.update(UnsafeRawBufferPointer(data))
        return Array(h.finalize().prefix(checksumByteCount))
    }

    /// A fresh code and its 16 secret bytes.
    struct Generated: ~Copyable {
        let code: RecoveryCode
        let secret: SecretBytes
    }

    static func generate() throws(CustodyError) -> Generated {
        let secret: SecretBytes
        do { secret = try SecretBytes(randomCount: dataByteCount) } catch { throw .crypto(error) }
        var text = [UInt8]()
        secret.withUnsafeBytes { raw in
            var all = Array(raw) + checksum(raw)
            defer { SecureMemory.zero(&all) }
            var acc: UInt32 = 0, bits = 0
            for byte in all {
                acc = (acc << 8) | UInt32(byte); bits += 8
                while bits >= 5 {
                    bits -= 5
                    if !text.isEmpty, (text.count + 1) % 5 == 0 { text.append(0x2d) }
                    text.append(alphabet[Int((acc >> UInt32(bits)) & 31)])
                }
                acc &= (1 << UInt32(bits)) - 1
            }
            acc = 0
        }
        let code = RecoveryCode(formatted: String(decoding: text, as: UTF8.self))
        SecureMemory.zero(&text)
        return Generated(code: code, secret: secret)
    }

    /// Parses typed text (case-insensitive; `-` and spaces ignored; `I`/`L` read as 1, `O` as 0)
    /// into the 16 secret bytes, checking length and checksum first.
    static func parse(_ typed: borrowing SecretBytes) throws(CustodyError) -> SecretBytes {
        try typed.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CustodyError) -> SecretBytes in
            // Reserved up front: a growing array would leave copies of the code behind.
            var symbols = [UInt8]()
            symbols.reserveCapacity(symbolCount + 1)
            defer { SecureMemory.zero(&symbols) }
            for c in raw {
                switch c {
                case 0x2d, 0x20, 0x09, 0x0a, 0x0d: continue
                default: break
                }
                var u = c
                if (0x61...0x7a).contains(u) { u -= 0x20 }
                if u == 0x49 || u == 0x4c { u = 0x31 }   // I, L → 1
                if u == 0x4f { u = 0x30 }                 // O → 0
                guard let v = alphabet.firstIndex(of: u) else {
                    throw .recoveryCodeMistyped("it contains a character that is not in a recovery code")
                }
                symbols.append(UInt8(v))
                guard symbols.count <= symbolCount else { break }
            }
            guard symbols.count == symbolCount else {
                throw .recoveryCodeMistyped("a recovery code has \(symbolCount) characters, this has \(symbols.count > symbolCount ? "more" : "\(symbols.count)")")
            }
            var bytes = [UInt8]()
            defer { SecureMemory.zero(&bytes) }
            var acc: UInt32 = 0, bits = 0
            for s in symbols {
                acc = (acc << 5) | UInt32(s); bits += 5
                if bits >= 8 { bits -= 8; bytes.append(UInt8((acc >> UInt32(bits)) & 0xff)) }
                acc &= (1 << UInt32(bits)) - 1
            }
            acc = 0
            let ok = bytes.withUnsafeBytes { b in
                ConstantTime.equals(checksum(UnsafeRawBufferPointer(rebasing: b[0..<dataByteCount])), Array(b[dataByteCount...]))
            }
            guard ok else { throw .recoveryCodeMistyped("its checksum does not match") }
            var data = Array(bytes.prefix(dataByteCount))
            return try cryptoCall { () throws(CryptoError) in try SecretBytes(consumingAndZeroing: &data) }
        }
    }
}
