public import SiteKeepCustody
public import SiteKeepCrypto

/// The sgit encryption envelopes (SGIT-FORMAT.md §3.1, §3.2), opened through a key handle.
public enum Envelope: Sendable {
    /// `00 73 67 7A 31`, the marker of a deflated (sgz1) blob.
    public static let sgz1Magic: [UInt8] = [0x00, 0x73, 0x67, 0x7a, 0x31]
    /// 12-byte IV + 16-byte tag.
    public static let overhead = 28

    /// Why an envelope did not open.
    public enum Failure: Error, Sendable, Equatable {
        /// Too short, or GCM refused it.
        case authentication
        /// It decrypted as sgz1 but did not inflate within the limit.
        case inflate(String)
    }

    /// Opens v1 (`iv || ct || tag`) or sgz1 (`magic || iv || ct || tag`, then zlib) bytes.
    /// An sgz1-looking object whose tag fails is retried as v1, as sgit does.
    /// - Parameter inflateLimit: the most bytes an sgz1 blob may inflate to.
    public static func open(_ stored: [UInt8], key: SymmetricKeyHandle, inflateLimit: Int) throws(Failure) -> [UInt8] {
        if stored.count > 17 + 11, stored.starts(with: sgz1Magic) {
            let body = Array(stored[5...])
            if let packed = try? openV1(body, key: key) {
                do {
                    return try Zlib.decompress(packed, limit: inflateLimit)
                } catch {
                    throw .inflate(error.description)
                }
            }
        }
        return try openV1(stored, key: key)
    }

    static func openV1(_ stored: [UInt8], key: SymmetricKeyHandle) throws(Failure) -> [UInt8] {
        guard stored.count >= overhead else { throw .authentication }
        do {
            return try key.aesGCMOpen(Array(stored[12...]), nonce: Array(stored[0..<12]))
        } catch {
            throw .authentication
        }
    }

    /// Seals `plaintext` as envelope v1 with `iv` (random, or deterministic for trees).
    public static func sealV1(_ plaintext: [UInt8], key: SymmetricKeyHandle, iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try iv + key.aesGCMSeal(plaintext, nonce: iv)
    }

    /// The deterministic IV of trees and `*_enc` metadata: `HMAC(read_key, plaintext)[:12]`.
    public static func deterministicIV(for plaintext: [UInt8], key: SymmetricKeyHandle) -> [UInt8] {
        Array(key.authenticationCode(for: plaintext).prefix(12))
    }
}
