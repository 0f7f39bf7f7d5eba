internal import CSodium

/// Primitives over a key that is already readable (inside a `SecretBytes.withUnsafeBytes`
/// scope), for custody's batch scopes. `package`: not part of the public API.
package enum RawKeyOps {
    /// XChaCha20-Poly1305 seal with a random nonce: `nonce || ciphertext || tag`.
    package static func seal(_ plaintext: [UInt8], key: UnsafeRawBufferPointer, ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount
        var out = [UInt8](repeating: 0, count: n + plaintext.count + XChaCha20Poly1305.tagByteCount)
        out.withUnsafeMutableBufferPointer { o in
            randombytes_buf(o.baseAddress!, n)
            var produced: UInt64 = 0
            crypto_aead_xchacha20poly1305_ietf_encrypt(
                o.baseAddress! + n, &produced, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil,
                o.baseAddress!, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return out
    }

    /// XChaCha20-Poly1305 open of `nonce || ciphertext || tag`.
    package static func open(_ sealed: [UInt8], key: UnsafeRawBufferPointer, ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount, t = XChaCha20Poly1305.tagByteCount
        guard sealed.count >= n + t else { throw .authenticationFailed }
        var out = [UInt8](repeating: 0, count: sealed.count - n - t)
        let rc = sealed.withUnsafeBufferPointer { s in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &out, nil, nil, s.baseAddress! + n, UInt64(sealed.count - n), ad, UInt64(ad.count),
                s.baseAddress!, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard rc == 0 else { throw .authenticationFailed }
        return out
    }
}

extension HMACSHA256 {
    /// HMAC-SHA256 under a key that is already readable. `package`: for custody's scopes.
    package static func authenticationCode(for message: [UInt8], rawKey: UnsafeRawBufferPointer) -> [UInt8] {
        mac(message: message, key: rawKey)
    }
}
