internal import CSodium

/// libsodium's sealed box (`crypto_box_seal`): anonymous public-key encryption. A sender who
/// knows only the recipient's X25519 public key seals a message with a fresh ephemeral key pair;
/// only the holder of the secret key opens it, and the sealed bytes say nothing of the sender.
///
/// The recipient's key pair is made from a 32-byte seed (`crypto_box_seed_keypair`), so a caller
/// that derives the seed (custody, from a key it holds) keeps no second secret; the secret key
/// lives in guarded memory only while a box is opened.
///
/// The sealed form is `ephemeral public key (32) || XSalsa20-Poly1305 ciphertext and tag`:
/// ``overheadByteCount`` bytes more than the message.
public enum SealedBox: Sendable {
    /// 32 (`crypto_box_PUBLICKEYBYTES`).
    public static let publicKeyByteCount = 32
    /// 32 (`crypto_box_SEEDBYTES`).
    public static let seedByteCount = 32
    /// 48 (`crypto_box_SEALBYTES`).
    public static let overheadByteCount = 48

    /// Seals `message` to `publicKey`.
    /// - Throws: ``CryptoError/invalidKeyLength(expected:actual:)``, or
    ///   ``CryptoError/operationFailed(_:)`` for a public key libsodium refuses.
    public static func seal(_ message: [UInt8], to publicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard publicKey.count == publicKeyByteCount else { throw .invalidKeyLength(expected: publicKeyByteCount, actual: publicKey.count) }
        try Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: message.count + overheadByteCount)
        let rc = crypto_box_seal(&out, message, UInt64(message.count), publicKey)
        guard rc == 0 else { throw .operationFailed("crypto_box_seal refused the public key") }
        return out
    }

    /// The public key of the key pair made from `seed`.
    /// - Throws: ``CryptoError/invalidKeyLength(expected:actual:)``.
    public static func publicKey(fromSeed seed: borrowing SecretBytes) throws(CryptoError) -> [UInt8] {
        try withKeyPair(seed) { (pk: [UInt8], _: UnsafeRawBufferPointer) in pk }
    }

    /// Opens `sealed` with the key pair made from `seed`.
    /// - Throws: ``CryptoError/authenticationFailed`` for bytes not sealed to this key pair,
    ///   changed or truncated; ``CryptoError/invalidKeyLength(expected:actual:)``.
    public static func open(_ sealed: [UInt8], seed: borrowing SecretBytes) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= overheadByteCount else { throw .authenticationFailed }
        return try withKeyPair(seed) { (pk: [UInt8], sk: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in
            var out = [UInt8](repeating: 0, count: sealed.count - overheadByteCount)
            let rc = crypto_box_seal_open(&out, sealed, UInt64(sealed.count), pk, sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            guard rc == 0 else { throw .authenticationFailed }
            return out
        }
    }

    /// Runs `body` with the key pair of `seed`: the public key, and the secret key in guarded
    /// memory (freed, so wiped, when `body` returns).
    static func withKeyPair<R>(_ seed: borrowing SecretBytes, _ body: ([UInt8], UnsafeRawBufferPointer) throws(CryptoError) -> R) throws(CryptoError) -> R {
        guard seed.count == seedByteCount else { throw .invalidKeyLength(expected: seedByteCount, actual: seed.count) }
        try Sodium.ensureInitialized()
        var pk = [UInt8](repeating: 0, count: publicKeyByteCount)
        let sk = try seed.withUnsafeBytes { (s: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try SecretBytes(count: 32, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                guard crypto_box_seed_keypair(&pk, out.baseAddress!.assumingMemoryBound(to: UInt8.self), s.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0 else {
                    throw .operationFailed("crypto_box_seed_keypair failed")
                }
            })
        }
        let publicKey = pk
        return try sk.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> R in try body(publicKey, raw) }
    }
}
