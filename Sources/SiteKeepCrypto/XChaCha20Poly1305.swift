internal import CSodium

/// XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha), libsodium's
/// `crypto_aead_xchacha20poly1305_ietf_*`: SiteKeep's own wrapping and sealing.
///
/// The 192-bit nonce is random per message, so nonce reuse is not a practical risk. The sealed
/// form is `nonce (24) || ciphertext || tag (16)`. Associated data binds a ciphertext to its
/// context (a slot header, a site, a row): the same bytes presented elsewhere fail to open.
public enum XChaCha20Poly1305: Sendable {
    /// 32.
    public static let keyByteCount = 32
    /// 24.
    public static let nonceByteCount = 24
    /// 16.
    public static let tagByteCount = 16
    /// The bytes a sealed box adds to its plaintext: nonce and tag, 40.
    public static let overheadByteCount = nonceByteCount + tagByteCount

    /// Seals `plaintext` under a fresh random nonce.
    /// - Returns: `nonce || ciphertext || tag`.
    /// - Throws: ``CryptoError/invalidKeyLength(expected:actual:)``.
    public static func seal(_ plaintext: [UInt8], using key: borrowing SecretBytes, authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        return key.withUnsafeBytes { k in
            // One allocation: nonce, ciphertext and tag written in place.
            [UInt8](unsafeUninitializedCapacity: overheadByteCount + plaintext.count) { out, initialized in
                NonceSource.fill(out.baseAddress!, count: nonceByteCount)
                var produced: UInt64 = 0
                crypto_aead_xchacha20poly1305_ietf_encrypt(
                    out.baseAddress! + nonceByteCount, &produced, plaintext, UInt64(plaintext.count),
                    associatedData, UInt64(associatedData.count), nil,
                    out.baseAddress!, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                initialized = out.count
            }
        }
    }

    /// Seals with a caller-chosen nonce and returns `ciphertext || tag` (no nonce).
    ///
    /// - Warning: Never reuse a nonce with the same key. Use ``seal(_:using:authenticating:)``
    ///   unless a test vector or a format fixes the nonce.
    public static func seal(_ plaintext: [UInt8], using key: borrowing SecretBytes, nonce: [UInt8], authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        guard nonce.count == nonceByteCount else { throw .invalidNonceLength(expected: nonceByteCount, actual: nonce.count) }
        return plaintext.withUnsafeBufferPointer { m in
            key.withUnsafeBytes { k in sealRaw(m, key: k, nonce: nonce, ad: associatedData) }
        }
    }

    /// Opens `nonce || ciphertext || tag`.
    /// - Throws: ``CryptoError/authenticationFailed`` for a wrong key, changed associated data,
    ///   or changed or truncated bytes; ``CryptoError/invalidKeyLength(expected:actual:)``.
    public static func open(_ sealed: [UInt8], using key: borrowing SecretBytes, authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= overheadByteCount else { throw .authenticationFailed }
        return try open(Array(sealed[nonceByteCount...]), using: key, nonce: Array(sealed[..<nonceByteCount]), authenticating: associatedData)
    }

    /// Opens `ciphertext || tag` sealed with an explicit nonce.
    public static func open(_ ciphertextAndTag: [UInt8], using key: borrowing SecretBytes, nonce: [UInt8], authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        guard nonce.count == nonceByteCount else { throw .invalidNonceLength(expected: nonceByteCount, actual: nonce.count) }
        guard ciphertextAndTag.count >= tagByteCount else { throw .authenticationFailed }
        var out = [UInt8](repeating: 0, count: ciphertextAndTag.count - tagByteCount)
        let rc = key.withUnsafeBytes { k in
            openRaw(ciphertextAndTag, into: &out, key: k, nonce: nonce, ad: associatedData)
        }
        guard rc == 0 else { throw .authenticationFailed }
        return out
    }

    /// Seals a secret (a key being wrapped) without copying it out of guarded memory.
    /// - Returns: `nonce || ciphertext || tag`.
    public static func sealSecret(_ secret: borrowing SecretBytes, using key: borrowing SecretBytes, authenticating associatedData: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        let nonce = SecureRandom.bytes(count: nonceByteCount)
        let body = secret.withUnsafeBytes { s in
            key.withUnsafeBytes { k in
                sealRaw(UnsafeBufferPointer(start: s.baseAddress!.assumingMemoryBound(to: UInt8.self), count: s.count),
                        key: k, nonce: nonce, ad: associatedData)
            }
        }
        return nonce + body
    }

    /// Opens a wrapped secret straight into guarded memory.
    /// - Throws: ``CryptoError/authenticationFailed`` as ``open(_:using:authenticating:)``.
    public static func openSecret(_ sealed: [UInt8], using key: borrowing SecretBytes, authenticating associatedData: [UInt8] = []) throws(CryptoError) -> SecretBytes {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        guard sealed.count > overheadByteCount else { throw .authenticationFailed }
        let nonce = Array(sealed[..<nonceByteCount])
        let body = Array(sealed[nonceByteCount...])
        return try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try SecretBytes(count: body.count - tagByteCount, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                var produced: UInt64 = 0
                let rc = body.withUnsafeBufferPointer { c in
                    crypto_aead_xchacha20poly1305_ietf_decrypt(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), &produced, nil,
                        c.baseAddress!, UInt64(c.count), associatedData, UInt64(associatedData.count),
                        nonce, k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
                guard rc == 0 else { throw .authenticationFailed }
            })
        }
    }

    private static func sealRaw(_ m: UnsafeBufferPointer<UInt8>, key: UnsafeRawBufferPointer, nonce: [UInt8], ad: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: m.count + tagByteCount) { out, initialized in
            var produced: UInt64 = 0
            crypto_aead_xchacha20poly1305_ietf_encrypt(
                out.baseAddress!, &produced, m.baseAddress, UInt64(m.count), ad, UInt64(ad.count), nil,
                nonce, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
            initialized = out.count
        }
    }

    private static func openRaw(_ c: [UInt8], into out: inout [UInt8], key: UnsafeRawBufferPointer, nonce: [UInt8], ad: [UInt8]) -> Int32 {
        var produced: UInt64 = 0
        return crypto_aead_xchacha20poly1305_ietf_decrypt(
            &out, &produced, nil, c, UInt64(c.count), ad, UInt64(ad.count),
            nonce, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
    }
}
