import SiteKeepNames
public import SiteKeepCrypto

// The key files `team import` reads besides seeds, P-256 PKCS#8 and links: OpenSSH private keys
// (`-----BEGIN OPENSSH PRIVATE KEY-----`, `openssh-key-v1`, unencrypted) of Ed25519 and ECDSA
// P-256, and Ed25519 PKCS#8. Parsed in plain arrays that are wiped before returning; the key
// goes on in guarded memory.

/// What a key file held, as `team import` names it ("an OpenSSH Ed25519 key, comment \"me@laptop\"").
public struct KeyFileKind: Sendable, Equatable, CustomStringConvertible {
    /// The words naming the format and algorithm.
    public let description: String

    /// A kind named by `description`.
    public init(description: String) { self.description = description }
}

extension TeamKeyMaterial {
    /// ``detect(_:)``, also saying what the file held.
    /// - Throws: ``CustodyError/invalidKeyMaterial(_:)``; for an encrypted OpenSSH key,
    ///   ``CustodyError/invalidKeyMaterial(_:)`` saying to remove its passphrase first.
    public static func detect(_ contents: borrowing SecretBytes, kind: inout KeyFileKind) throws(CustodyError) -> TeamKeyMaterial {
        let text = contents.withUnsafeBytes { raw -> String? in
            guard raw.count < 64 << 10, let start = raw.firstIndex(where: { ![0x20, 0x0a, 0x0d, 0x09].contains($0) }),
                  UnsafeRawBufferPointer(rebasing: raw[start...]).starts(with: Array("-----BEGIN ".utf8)) else { return nil }
            let end = min(raw.count, start + 64)
            return String(decoding: UnsafeRawBufferPointer(rebasing: raw[start..<end]), as: UTF8.self)
        }
        if let text, text.hasPrefix("-----BEGIN OPENSSH PRIVATE KEY-----") {
            return try openSSH(contents, kind: &kind)
        }
        if let text, text.hasPrefix("-----BEGIN PRIVATE KEY-----"), let seed = try ed25519PKCS8(contents) {
            kind = KeyFileKind(description: "a PKCS#8 Ed25519 key")
            return .ed25519Seed(seed)
        }
        let material = try detect(contents)
        switch material {
        case .ed25519Seed: kind = KeyFileKind(description: contents.count == 32 ? "a raw 32-byte Ed25519 seed" : "an Ed25519 seed")
        case .p256PKCS8: kind = KeyFileKind(description: "a PKCS#8 P-256 key")
        case .p256Scalar: kind = KeyFileKind(description: "a P-256 key")
        }
        return material
    }

    /// The seed of an Ed25519 PKCS#8 PEM (RFC 8410: `30 2e 02 01 00 30 05 06 03 2b 65 70 04 22 04 20` and 32 bytes), or nil
    /// when the PEM holds another key.
    static func ed25519PKCS8(_ contents: borrowing SecretBytes) throws(CustodyError) -> SecretBytes? {
        let prefix: [UInt8] = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]
        var der: [UInt8]
        do { der = try contents.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in try PEM.decode(raw, label: "PRIVATE KEY") } } catch {
            throw .invalidKeyMaterial("the PRIVATE KEY block is not valid PEM")
        }
        defer { SecureMemory.zero(&der) }
        guard der.count == prefix.count + 32, Array(der[..<prefix.count]) == prefix else { return nil }
        var seed = Array(der[prefix.count...])
        do { return try SecretBytes(consumingAndZeroing: &seed) } catch { throw .crypto(error) }
    }

    /// An unencrypted `openssh-key-v1` private key of Ed25519 or ECDSA P-256 (OpenSSH's
    /// PROTOCOL.key).
    static func openSSH(_ contents: borrowing SecretBytes, kind: inout KeyFileKind) throws(CustodyError) -> TeamKeyMaterial {
        let blob: [UInt8]
        do { blob = try contents.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in try PEM.decode(raw, label: "OPENSSH PRIVATE KEY") } } catch {
            throw .invalidKeyMaterial("the OPENSSH PRIVATE KEY block is not valid PEM")
        }
        // The reader owns the only copy, and wipes it (a copy shared with a local would be
        // copied, not wiped, by the write).
        var r = KeyFileReader(consume blob)
        defer { r.wipe() }
        guard r.take(15) == Array("openssh-key-v1\0".utf8) else { throw .invalidKeyMaterial("not an openssh-key-v1 private key") }
        let cipher = String(decoding: try r.string(), as: UTF8.self)
        _ = try r.string()   // kdf name
        _ = try r.string()   // kdf options
        guard cipher == "none" else {
            throw .invalidKeyMaterial("the OpenSSH key is encrypted (\(cipher)); remove its passphrase on a copy first "
                + "('cp KEY /tmp/k && ssh-keygen -p -N \"\" -f /tmp/k', then import /tmp/k and delete it), or add it with 'ssh-add KEY' instead")
        }
        guard try r.uint32() == 1 else { throw .invalidKeyMaterial("the OpenSSH file holds more than one key") }
        _ = try r.string()   // public key
        var p = KeyFileReader(try r.string())
        defer { p.wipe() }
        guard try p.uint32() == (try p.uint32()) else { throw .invalidKeyMaterial("the OpenSSH key's check numbers differ (damaged file)") }
        let type = String(decoding: try p.string(), as: UTF8.self)
        switch type {
        case "ssh-ed25519":
            let pk = try p.string()
            var sk = try p.string()
            defer { SecureMemory.zero(&sk) }
            guard pk.count == 32, sk.count == 64, Array(sk[32...]) == pk else { throw .invalidKeyMaterial("the OpenSSH Ed25519 key is malformed") }
            let comment = String(decoding: try p.string(), as: UTF8.self)
            kind = KeyFileKind(description: "an OpenSSH Ed25519 key, comment \(quoted(comment))")
            var seed = Array(sk[..<32])
            do { return .ed25519Seed(try SecretBytes(consumingAndZeroing: &seed)) } catch { throw .crypto(error) }
        case "ecdsa-sha2-nistp256":
            guard String(decoding: try p.string(), as: UTF8.self) == "nistp256" else { throw .invalidKeyMaterial("the OpenSSH ECDSA key is not on nistp256") }
            _ = try p.string()   // Q
            var d = try p.string()
            defer { SecureMemory.zero(&d) }
            while d.first == 0 { d.removeFirst() }
            guard !d.isEmpty, d.count <= 32 else { throw .invalidKeyMaterial("the OpenSSH ECDSA key's scalar is malformed") }
            let comment = String(decoding: try p.string(), as: UTF8.self)
            kind = KeyFileKind(description: "an OpenSSH ECDSA P-256 key, comment \(quoted(comment))")
            var scalar = [UInt8](repeating: 0, count: 32 - d.count) + d
            do { return .p256Scalar(try SecretBytes(consumingAndZeroing: &scalar)) } catch { throw .crypto(error) }
        default:
            throw .invalidKeyMaterial("an OpenSSH \(quoted(type)) key: SiteKeep's team keys are Ed25519 or ECDSA P-256")
        }
    }

    static func quoted(_ text: String) -> String {
        "\"" + String(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f && $0 != "\"" }.prefix(64)) + "\""
    }
}

/// Reads the `uint32` and `string` fields of an OpenSSH key file, bounds-checked.
struct KeyFileReader {
    private var bytes: [UInt8]
    private var offset = 0
    init(_ bytes: consuming [UInt8]) { self.bytes = bytes }

    /// Zeroes the bytes read from.
    mutating func wipe() { SecureMemory.zero(&bytes) }

    mutating func take(_ n: Int) -> [UInt8] {
        guard n <= bytes.count - offset else { return [] }
        defer { offset += n }
        return Array(bytes[offset..<(offset + n)])
    }

    mutating func uint32() throws(CustodyError) -> UInt32 {
        let b = take(4)
        guard b.count == 4 else { throw .invalidKeyMaterial("the OpenSSH key file is truncated") }
        return UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3])
    }

    mutating func string() throws(CustodyError) -> [UInt8] {
        let n = Int(try uint32())
        guard n <= bytes.count - offset else { throw .invalidKeyMaterial("the OpenSSH key file is truncated") }
        return take(n)
    }
}
