internal import CSodium

/// HKDF with HMAC-SHA256 (RFC 5869), composed from libsodium's HMAC-SHA256.
///
/// libsodium 1.0.18 has no HKDF of its own (it arrived in 1.0.19); this is the RFC's
/// extract-then-expand construction and nothing more, checked against RFC 5869 Appendix A.
/// The pseudorandom key and every intermediate block are kept in guarded or wiped memory.
public enum HKDF: Sendable {
    /// The largest output RFC 5869 allows for SHA-256: 255 blocks of 32 bytes.
    public static let maximumOutputByteCount = 255 * 32

    /// Derives `outputByteCount` bytes of key material into guarded memory.
    ///
    /// - Parameters:
    ///   - inputKeyMaterial: The secret input (IKM).
    ///   - salt: Optional salt; an empty salt means 32 zero bytes, as the RFC says.
    ///   - info: Context and application-specific information, binding the key to its use.
    ///   - outputByteCount: 1 ... ``maximumOutputByteCount``.
    /// - Throws: ``CryptoError/invalidLength(what:detail:)`` for an output length out of range.
    public static func deriveKey(
        inputKeyMaterial: borrowing SecretBytes,
        salt: [UInt8] = [],
        info: [UInt8],
        outputByteCount: Int = 32
    ) throws(CryptoError) -> SecretBytes {
        try inputKeyMaterial.withUnsafeBytes { (ikm: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try derive(ikm: ikm, salt: salt, info: info, count: outputByteCount)
        }
    }

    static func derive(ikm: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], count: Int) throws(CryptoError) -> SecretBytes {
        guard count > 0, count <= maximumOutputByteCount else {
            throw .invalidLength(what: "HKDF output", detail: "must be 1...\(maximumOutputByteCount) bytes, got \(count)")
        }
        try Sodium.ensureInitialized()
        // Extract: PRK = HMAC(salt, IKM).
        var prk = [UInt8](repeating: 0, count: 32)
        defer { SecureMemory.zero(&prk) }
        let effectiveSalt = salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt
        var state = crypto_auth_hmacsha256_state()
        defer { sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size) }
        crypto_auth_hmacsha256_init(&state, effectiveSalt, effectiveSalt.count)
        if let p = ikm.baseAddress {
            crypto_auth_hmacsha256_update(&state, p.assumingMemoryBound(to: UInt8.self), UInt64(ikm.count))
        }
        crypto_auth_hmacsha256_final(&state, &prk)

        // Expand: T(i) = HMAC(PRK, T(i-1) || info || i).
        return try SecretBytes(count: count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var block = [UInt8](repeating: 0, count: 32)
            defer { SecureMemory.zero(&block) }
            var written = 0
            var counter: UInt8 = 1
            while written < count {
                crypto_auth_hmacsha256_init(&state, prk, prk.count)
                if counter > 1 { crypto_auth_hmacsha256_update(&state, block, 32) }
                if !info.isEmpty { crypto_auth_hmacsha256_update(&state, info, UInt64(info.count)) }
                crypto_auth_hmacsha256_update(&state, [counter], 1)
                crypto_auth_hmacsha256_final(&state, &block)
                let n = min(32, count - written)
                for i in 0..<n { out[written + i] = block[i] }
                written += n
                counter &+= 1
            }
        })
    }
}
