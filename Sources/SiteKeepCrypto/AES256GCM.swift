internal import CSodium
internal import COpenSSL

/// AES-256-GCM with a caller-chosen 96-bit nonce and a 128-bit tag, as the sgit vault format
/// uses it (`iv || ciphertext || tag`, the IV prepended by the format, not here).
///
/// libsodium's implementation is used where the CPU has AES-NI and PCLMUL
/// (`crypto_aead_aes256gcm_is_available`); elsewhere, OpenSSL's portable `EVP_aes_256_gcm`.
/// Both are checked against the same Wycheproof and NIST vectors.
///
/// - Warning: GCM fails catastrophically on nonce reuse with different plaintexts. Random
///   nonces, or the sgit format's deterministic ones (which repeat only for identical
///   plaintexts), are the only safe choices.
public enum AES256GCM: Sendable {
    /// 32.
    public static let keyByteCount = 32
    /// 12.
    public static let nonceByteCount = 12
    /// 16.
    public static let tagByteCount = 16

    /// Which implementation to use.
    public enum Backend: Sendable, Equatable, CaseIterable {
        /// libsodium when the CPU supports it, else OpenSSL.
        case automatic
        /// libsodium's AES-NI implementation; fails if the CPU lacks AES-NI.
        case libsodium
        /// OpenSSL's EVP implementation, available everywhere.
        case openSSL
    }

    /// The backend ``Backend/automatic`` resolves to on this machine.
    public static var automaticBackend: Backend { Sodium.hardwareAESGCMAvailable ? .libsodium : .openSSL }

    /// Encrypts and returns `ciphertext || tag`.
    /// - Throws: key or nonce length errors; ``CryptoError/libraryUnavailable(_:)`` if the
    ///   libsodium backend is forced on a CPU without AES-NI.
    public static func seal(_ plaintext: [UInt8], using key: borrowing SecretBytes, nonce: [UInt8], authenticating associatedData: [UInt8] = [], backend: Backend = .automatic) throws(CryptoError) -> [UInt8] {
        try check(key: key, nonce: nonce)
        switch try resolve(backend) {
        case .libsodium:
            return key.withUnsafeBytes { k in
                [UInt8](unsafeUninitializedCapacity: plaintext.count + tagByteCount) { out, initialized in
                    var produced: UInt64 = 0
                    _ = crypto_aead_aes256gcm_encrypt(out.baseAddress!, &produced, plaintext, UInt64(plaintext.count),
                                                      associatedData, UInt64(associatedData.count), nil, nonce,
                                                      k.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    initialized = out.count
                }
            }
        default:
            return try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in
                try OpenSSLGCM.seal(plaintext, key: k, nonce: nonce, ad: associatedData)
            }
        }
    }

    /// Decrypts `ciphertext || tag`.
    /// - Throws: ``CryptoError/authenticationFailed`` for any wrong key, nonce, associated data,
    ///   or changed or truncated bytes.
    public static func open(_ ciphertextAndTag: [UInt8], using key: borrowing SecretBytes, nonce: [UInt8], authenticating associatedData: [UInt8] = [], backend: Backend = .automatic) throws(CryptoError) -> [UInt8] {
        try check(key: key, nonce: nonce)
        guard ciphertextAndTag.count >= tagByteCount else { throw .authenticationFailed }
        switch try resolve(backend) {
        case .libsodium:
            var out = [UInt8](repeating: 0, count: ciphertextAndTag.count - tagByteCount)
            var produced: UInt64 = 0
            let rc = key.withUnsafeBytes { k in
                crypto_aead_aes256gcm_decrypt(&out, &produced, nil, ciphertextAndTag, UInt64(ciphertextAndTag.count),
                                              associatedData, UInt64(associatedData.count), nonce,
                                              k.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            guard rc == 0 else { throw .authenticationFailed }
            return out
        default:
            return try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in
                try OpenSSLGCM.open(ciphertextAndTag, key: k, nonce: nonce, ad: associatedData)
            }
        }
    }

    private static func check(key: borrowing SecretBytes, nonce: [UInt8]) throws(CryptoError) {
        guard key.count == keyByteCount else { throw .invalidKeyLength(expected: keyByteCount, actual: key.count) }
        guard nonce.count == nonceByteCount else { throw .invalidNonceLength(expected: nonceByteCount, actual: nonce.count) }
    }

    private static func resolve(_ backend: Backend) throws(CryptoError) -> Backend {
        switch backend {
        case .automatic: return automaticBackend
        case .libsodium:
            guard Sodium.hardwareAESGCMAvailable else { throw .libraryUnavailable("this CPU lacks AES-NI/PCLMUL for libsodium's AES-GCM") }
            return .libsodium
        case .openSSL: return .openSSL
        }
    }
}

/// OpenSSL EVP AES-256-GCM, one context per call, freed on every path.
enum OpenSSLGCM {
    static func seal(_ plaintext: [UInt8], key: UnsafeRawBufferPointer, nonce: [UInt8], ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .allocationFailed }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var len: Int32 = 0
        // 12 bytes is GCM's default IV length, so one init call sets cipher, key and IV.
        guard EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) == 1
        else { throw .operationFailed("EVP_EncryptInit_ex (AES-256-GCM)") }
        if !ad.isEmpty {
            guard EVP_EncryptUpdate(ctx, nil, &len, ad, Int32(ad.count)) == 1 else { throw .operationFailed("EVP_EncryptUpdate (AAD)") }
        }
        var ok = false
        let out = [UInt8](unsafeUninitializedCapacity: plaintext.count + AES256GCM.tagByteCount) { o, initialized in
            var total: Int32 = 0
            if !plaintext.isEmpty {
                guard EVP_EncryptUpdate(ctx, o.baseAddress, &len, plaintext, Int32(plaintext.count)) == 1 else { return }
                total = len
            }
            guard EVP_EncryptFinal_ex(ctx, o.baseAddress! + Int(total), &len) == 1 else { return }
            total += len
            guard sitekeep_evp_gcm_get_tag(ctx, Int32(AES256GCM.tagByteCount), o.baseAddress! + Int(total)) == 1 else { return }
            initialized = o.count
            ok = true
        }
        guard ok else { throw .operationFailed("EVP_Encrypt (AES-256-GCM)") }
        return out
    }

    static func open(_ sealed: [UInt8], key: UnsafeRawBufferPointer, nonce: [UInt8], ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .allocationFailed }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let bodyCount = sealed.count - AES256GCM.tagByteCount
        var tag = Array(sealed[bodyCount...])
        var out = [UInt8](repeating: 0, count: max(bodyCount, 1))
        var len: Int32 = 0
        guard EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nil, key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) == 1
        else { throw .operationFailed("EVP_DecryptInit_ex (AES-256-GCM)") }
        if !ad.isEmpty {
            guard EVP_DecryptUpdate(ctx, nil, &len, ad, Int32(ad.count)) == 1 else { throw .authenticationFailed }
        }
        var total: Int32 = 0
        let ok: Bool = sealed.withUnsafeBufferPointer { s in
            out.withUnsafeMutableBufferPointer { o in
                if bodyCount > 0 {
                    guard EVP_DecryptUpdate(ctx, o.baseAddress, &len, s.baseAddress, Int32(bodyCount)) == 1 else { return false }
                    total = len
                }
                guard sitekeep_evp_gcm_set_tag(ctx, Int32(AES256GCM.tagByteCount), &tag) == 1 else { return false }
                return EVP_DecryptFinal_ex(ctx, o.baseAddress! + Int(total), &len) == 1
            }
        }
        guard ok else {
            SecureMemory.zero(&out)
            throw .authenticationFailed
        }
        return bodyCount == 0 ? [] : out
    }
}
