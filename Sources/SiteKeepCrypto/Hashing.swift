internal import CSodium

/// SHA-256 (`crypto_hash_sha256`).
public enum SHA256: Sendable {
    /// The digest length, 32.
    public static let byteCount = 32

    /// The SHA-256 digest of `message`.
    public static func hash(_ message: some Collection<UInt8>) -> [UInt8] {
        try? Sodium.ensureInitialized()
        let input = Array(message)
        var out = [UInt8](repeating: 0, count: byteCount)
        input.withUnsafeBufferPointer { src in
            _ = crypto_hash_sha256(&out, src.baseAddress ?? UnsafePointer(bitPattern: 1)!, UInt64(src.count))
        }
        return out
    }

    /// An incremental SHA-256 over several pieces.
    public struct Hasher: Sendable {
        private var state = crypto_hash_sha256_state()
        /// Starts a new hash.
        public init() {
            try? Sodium.ensureInitialized()
            crypto_hash_sha256_init(&state)
        }
        /// Adds bytes.
        public mutating func update(_ bytes: some Collection<UInt8>) {
            let input = Array(bytes)
            input.withUnsafeBufferPointer { src in
                _ = crypto_hash_sha256_update(&state, src.baseAddress ?? UnsafePointer(bitPattern: 1)!, UInt64(src.count))
            }
        }
        /// Adds bytes read in place, with no copy (for key material in guarded memory).
        public mutating func update(borrowing bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), !bytes.isEmpty else { return }
            _ = crypto_hash_sha256_update(&state, base, UInt64(bytes.count))
        }
        /// Returns the digest. The hasher must not be used afterwards.
        public mutating func finalize() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: SHA256.byteCount)
            crypto_hash_sha256_final(&state, &out)
            return out
        }
    }
}

/// SHA-512 (`crypto_hash_sha512`): the hash `ssh-keygen -Y sign` puts in an SSHSIG signature.
public enum SHA512: Sendable {
    /// The digest length, 64.
    public static let byteCount = 64

    /// The SHA-512 digest of `message`.
    public static func hash(_ message: some Collection<UInt8>) -> [UInt8] {
        try? Sodium.ensureInitialized()
        let input = Array(message)
        var out = [UInt8](repeating: 0, count: byteCount)
        input.withUnsafeBufferPointer { src in
            _ = crypto_hash_sha512(&out, src.baseAddress ?? UnsafePointer(bitPattern: 1)!, UInt64(src.count))
        }
        return out
    }
}

/// HMAC-SHA256 (RFC 2104) through libsodium's `crypto_auth_hmacsha256_*`, which takes keys of
/// any length.
public enum HMACSHA256: Sendable {
    /// The MAC length, 32.
    public static let byteCount = 32

    /// The MAC of `message` under a secret key.
    public static func authenticationCode(for message: some Collection<UInt8>, using key: borrowing SecretBytes) -> [UInt8] {
        key.withUnsafeBytes { k in mac(message: Array(message), key: k) }
    }

    /// The MAC of `message` under a non-secret key (for test vectors and public derivations).
    public static func authenticationCode(for message: some Collection<UInt8>, publicKey: [UInt8]) -> [UInt8] {
        publicKey.withUnsafeBytes { k in mac(message: Array(message), key: k) }
    }

    /// Whether `code` is the MAC of `message`, compared in constant time.
    public static func isValidAuthenticationCode(_ code: [UInt8], for message: some Collection<UInt8>, using key: borrowing SecretBytes) -> Bool {
        ConstantTime.equals(authenticationCode(for: message, using: key), code)
    }

    static func mac(message: [UInt8], key: UnsafeRawBufferPointer) -> [UInt8] {
        try? Sodium.ensureInitialized()
        var state = crypto_auth_hmacsha256_state()
        let keyPtr = key.baseAddress?.assumingMemoryBound(to: UInt8.self)
        crypto_auth_hmacsha256_init(&state, keyPtr ?? UnsafePointer(bitPattern: 1)!, key.count)
        message.withUnsafeBufferPointer { src in
            _ = crypto_auth_hmacsha256_update(&state, src.baseAddress ?? UnsafePointer(bitPattern: 1)!, UInt64(src.count))
        }
        var out = [UInt8](repeating: 0, count: byteCount)
        crypto_auth_hmacsha256_final(&state, &out)
        sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
        return out
    }
}

/// The WebAuthn PRF extension's salt transform (W3C WebAuthn Level 3, §10.1.4):
/// `salt = SHA-256("WebAuthn PRF" || 0x00 || input)`. A browser applies it to a PRF eval input
/// before handing the salt to the authenticator's CTAP2 `hmac-secret` extension, so a FIDO2
/// tool given this salt (`fido2-assert -G -h`) yields the same 32 bytes a page gets.
public enum WebAuthnPRF: Sendable {
    /// The PRF output length, 32.
    public static let outputByteCount = 32

    /// The CTAP2 `hmac-secret` salt for a PRF eval input.
    public static func hmacSecretSalt(forEvalInput input: some Collection<UInt8>) -> [UInt8] {
        var hasher = SHA256.Hasher()
        hasher.update(Array("WebAuthn PRF".utf8) + [0])
        hasher.update(input)
        return hasher.finalize()
    }
}
