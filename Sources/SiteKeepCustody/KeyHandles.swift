public import SiteKeepCrypto
import Synchronization

/// A secret behind a lock. `@unchecked Sendable` because the invariant is kept by hand:
/// `secret` is only touched inside `withLock`, so page-protection toggles never race.
final class LockedSecret: @unchecked Sendable {
    private let lock = Mutex<Void>(())
    private let secret: SecretBytes
    init(_ secret: consuming SecretBytes) { self.secret = secret }
    /// A secret whose pages stay read-only while held (no mprotect pair per use).
    init(pinning secret: consuming SecretBytes) {
        var s = secret
        s.pinReadOnly()
        self.secret = s
    }
    func withLock<R: ~Copyable, E: Error>(_ body: (borrowing SecretBytes) throws(E) -> R) throws(E) -> R {
        try lock.withLock { (_: inout Void) throws(E) -> R in try body(secret) }
    }
}

enum SigningKey: ~Copyable {
    case ed25519(Ed25519.PrivateKey)
    case p256(P256.Signing.PrivateKey)
}

/// A signing key that several threads may use at once, with no lock.
///
/// `@unchecked Sendable` because the invariant is kept by hand, and it differs from
/// ``LockedSecret``'s: every use only reads the key, and no read changes any state. An Ed25519
/// key is pinned read-only for its whole life (``SigningKeyHandle/init(ed25519:)``), so a use
/// toggles no page protection; a P-256 key is an OpenSSL `EC_KEY` that signing only reads
/// (OpenSSL's rule for shared objects, which a TLS server's one private key relies on). So
/// four connections signing with one team key run on as many cores as there are, instead of
/// queueing on a mutex. Nothing mutates the key until the last reference goes, which wipes it.
/// Exports (for wrapping) are rare and go through OpenSSL's `EVP_PKEY` caches, so they take
/// turns with each other (``withExclusiveKey(_:)``); they never touch the `EC_KEY` a
/// signature reads.
final class SharedSigningKey: @unchecked Sendable {
    private let key: SigningKey
    private let exportLock = Mutex<Void>(())
    init(_ key: consuming SigningKey) { self.key = key }
    /// A use that only reads the key (signing): concurrent uses are fine.
    func withKey<R: ~Copyable, E: Error>(_ body: (borrowing SigningKey) throws(E) -> R) throws(E) -> R {
        try body(key)
    }
    /// A use that may touch OpenSSL's caches of the key (export): one at a time.
    func withExclusiveKey<R: ~Copyable, E: Error>(_ body: (borrowing SigningKey) throws(E) -> R) throws(E) -> R {
        try exportLock.withLock { (_: inout Void) throws(E) -> R in try body(key) }
    }
}

/// A symmetric key held by custody. Callers can seal, open and MAC with it; nothing can read it.
///
/// The key lives in guarded memory behind a `Mutex` (guarded pages toggle their protection per
/// use, so uses are serialised). Dropping the last reference wipes the key.
public final class SymmetricKeyHandle: Sendable {
    private let key: LockedSecret

    /// Takes ownership of a 32-byte key. Only SiteKeep's own modules can create handles.
    ///
    /// A handle is a key in active use (a partition's storage key, a vault's read key): its
    /// guarded pages stay read-only while the handle lives instead of toggling `PROT_NONE`
    /// around every use (see `SecretBytes.pinReadOnly`), which would double the cost of sealing
    /// a small value. The master key and the keys that unwrap stored items are not handles and
    /// keep the per-use protection.
    package init(taking key: consuming SecretBytes) throws(CryptoError) {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        self.hmacState = LockedSecret(try PrecomputedHMAC.state(forKey: key))
        self.key = LockedSecret(pinning: key)
    }

    /// The key's HMAC inner/outer states, computed once (guarded and pinned like the key).
    private let hmacState: LockedSecret

    /// A fresh random key.
    package static func random() throws(CryptoError) -> SymmetricKeyHandle {
        try SymmetricKeyHandle(taking: SecretBytes(randomCount: 32))
    }

    /// Seals with XChaCha20-Poly1305 under a random nonce; `nonce || ciphertext || tag`.
    public func seal(_ plaintext: [UInt8], authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            try XChaCha20Poly1305.seal(plaintext, using: k, authenticating: associatedData)
        }
    }

    /// Opens what ``seal(_:authenticating:)`` produced.
    /// - Throws: ``CryptoError/authenticationFailed`` when the bytes or associated data differ.
    public func open(_ sealed: [UInt8], authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            try XChaCha20Poly1305.open(sealed, using: k, authenticating: associatedData)
        }
    }

    /// AES-256-GCM with a caller-chosen nonce, returning `ciphertext || tag` (the sgit format).
    public func aesGCMSeal(_ plaintext: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            try AES256GCM.seal(plaintext, using: k, nonce: nonce)
        }
    }

    /// AES-256-GCM decryption of `ciphertext || tag`.
    public func aesGCMOpen(_ ciphertextAndTag: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            try AES256GCM.open(ciphertextAndTag, using: k, nonce: nonce)
        }
    }

    /// HMAC-SHA256 of `message` under this key (keyed hashes of names, sgit file ids and
    /// deterministic IVs).
    public func authenticationCode(for message: [UInt8]) -> [UInt8] {
        hmacState.withLock { s in s.withUnsafeBytes { PrecomputedHMAC.mac(message, state: $0) } }
    }

    /// A subkey derived with HKDF-SHA256 (`info` names its purpose).
    public func deriveSubkey(info: [UInt8], salt: [UInt8] = []) throws(CryptoError) -> SymmetricKeyHandle {
        let sub = try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in
            try HKDF.deriveKey(inputKeyMaterial: k, salt: salt, info: info)
        }
        return try SymmetricKeyHandle(taking: sub)
    }

    /// Seals another secret under this key (key wrapping), without copying it out of guarded memory.
    package func wrap(_ secret: borrowing SecretBytes, authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            try XChaCha20Poly1305.sealSecret(secret, using: k, authenticating: associatedData)
        }
    }

    /// Opens a wrapped secret straight into guarded memory.
    package func unwrap(_ sealed: [UInt8], authenticating associatedData: [UInt8]) throws(CryptoError) -> SecretBytes {
        try key.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in
            try XChaCha20Poly1305.openSecret(sealed, using: k, authenticating: associatedData)
        }
    }

    /// Runs `body` with the key readable once, for batches (a partition writing thousands of
    /// rows pays the page-protection toggle once, not per row). The ``KeyScope`` must not
    /// escape the closure.
    public func withScope<R, E: Error>(_ body: (borrowing KeyScope) throws(E) -> R) throws(E) -> R {
        try withScope(macKey: self, body)
    }

    /// As ``withScope(_:)``, but the scope's keyed hashes (``KeyScope/authenticationCode(for:)``)
    /// are under `macKey`: one scope over two handles, for a caller that seals with one key and
    /// hashes names with another on every call (a partition's storage key and row key). It
    /// takes only the two locks it needs, this key's and `macKey`'s HMAC state's (an HMAC state
    /// lock is always taken last, so no two scopes can wait on each other).
    package func withScope<R, E: Error>(macKey: SymmetricKeyHandle, _ body: (borrowing KeyScope) throws(E) -> R) throws(E) -> R {
        try key.withLock { (k: borrowing SecretBytes) throws(E) -> R in
            try k.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(E) -> R in
                try macKey.hmacState.withLock { (h: borrowing SecretBytes) throws(E) -> R in
                    try h.withUnsafeBytes { (hraw: UnsafeRawBufferPointer) throws(E) -> R in
                        try body(KeyScope(raw: raw, hmacState: hraw))
                    }
                }
            }
        }
    }
}

/// The operations of a ``SymmetricKeyHandle`` while its key is readable, for batches.
/// It exposes no bytes; it exists only inside ``SymmetricKeyHandle/withScope(_:)``.
public struct KeyScope: ~Copyable {
    private let raw: UnsafeRawBufferPointer
    private let hmacState: UnsafeRawBufferPointer
    fileprivate init(raw: UnsafeRawBufferPointer, hmacState: UnsafeRawBufferPointer) {
        self.raw = raw
        self.hmacState = hmacState
    }

    /// As ``SymmetricKeyHandle/seal(_:authenticating:)``.
    public func seal(_ plaintext: [UInt8], authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try RawKeyOps.seal(plaintext, key: raw, ad: associatedData)
    }

    /// As ``SymmetricKeyHandle/open(_:authenticating:)``.
    public func open(_ sealed: [UInt8], authenticating associatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        try RawKeyOps.open(sealed, key: raw, ad: associatedData)
    }

    /// As ``SymmetricKeyHandle/authenticationCode(for:)``.
    public func authenticationCode(for message: [UInt8]) -> [UInt8] {
        PrecomputedHMAC.mac(message, state: hmacState)
    }

    /// As ``seal(_:authenticating:)``, from and into caller-owned memory: `out` must be exactly
    /// `plaintext.count + 40` bytes and receives `nonce || ciphertext || tag` (fresh random
    /// nonce). For SiteKeep's batch writers, which would otherwise allocate several arrays per row.
    package func seal(_ plaintext: UnsafeRawBufferPointer, authenticating associatedData: UnsafeRawBufferPointer,
                      into out: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        try RawKeyOps.seal(plaintext, key: raw, ad: associatedData, into: out)
    }

    /// As ``open(_:authenticating:)``, from and into caller-owned memory: `out` must be exactly
    /// `sealed.count - 40` bytes. On failure it is zeroed and the call throws
    /// ``CryptoError/authenticationFailed``.
    package func open(_ sealed: UnsafeRawBufferPointer, authenticating associatedData: UnsafeRawBufferPointer,
                      into out: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        try RawKeyOps.open(sealed, key: raw, ad: associatedData, into: out)
    }

    /// As ``authenticationCode(for:)``, written to `out` (32 bytes).
    package func authenticationCode(for message: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        PrecomputedHMAC.mac(message, state: hmacState, into: out)
    }
}

@available(*, unavailable)
extension KeyScope: Sendable {}

/// A signing key held by custody. `sign` returns a signature; the key cannot be read.
public final class SigningKeyHandle: Sendable {
    private let key: SharedSigningKey
    /// The key's algorithm.
    public let algorithm: SigningAlgorithm
    /// The public key: 32 raw bytes for Ed25519, SubjectPublicKeyInfo DER for P-256.
    public let publicKey: [UInt8]

    /// Takes ownership of an Ed25519 key.
    package init(ed25519 key: consuming Ed25519.PrivateKey) {
        algorithm = .ed25519
        publicKey = key.publicKey.rawRepresentation
        // A signing key is hot: keep its pages read-only while held rather than toggling
        // PROT_NONE per signature (SecretBytes.pinReadOnly documents the trade).
        var key = key
        key.pinReadOnly()
        self.key = SharedSigningKey(.ed25519(key))
    }

    /// Takes ownership of a P-256 key.
    package init(p256 key: consuming P256.Signing.PrivateKey) {
        algorithm = .p256
        publicKey = key.publicKey.derRepresentation
        self.key = SharedSigningKey(.p256(key))
    }

    /// Signs `message`: Ed25519, or ECDSA P-256/SHA-256 in raw `r || s` form.
    ///
    /// No lock is taken (``SharedSigningKey``): libcrypto's `ECDSA_do_sign` only reads the
    /// `EC_KEY` (each call has its own `BN_CTX` and nonce), an Ed25519 key is pinned read-only,
    /// and this handle (so the key) lives until the call returns. A lock made every connection
    /// of the agent and the bridge wait for one another's signatures with the same team key
    /// (the 4-connection rows).
    public func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try key.withKey { (k: borrowing SigningKey) throws(CryptoError) -> [UInt8] in
            switch k {
            case .ed25519(let ed): return ed.signature(for: message)
            case .p256(let p): return try p.signature(for: message).rawRepresentation
            }
        }
    }

    /// Whether `signature` verifies under this key's public key.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        SignatureVerifier.isValid(signature, for: message, publicKey: publicKey, algorithm: algorithm)
    }

    /// The private key in its storable form (Ed25519 seed or P-256 PKCS#8 DER), for wrapping.
    package func exportForWrapping() throws(CryptoError) -> SecretBytes {
        try key.withExclusiveKey { (k: borrowing SigningKey) throws(CryptoError) -> SecretBytes in
            switch k {
            case .ed25519(let ed): return try ed.seed()
            case .p256(let p): return try p.pkcs8DER()
            }
        }
    }

    /// Rebuilds a handle from ``exportForWrapping()`` output.
    package static func importWrapped(_ secret: consuming SecretBytes, algorithm: SigningAlgorithm) throws(CryptoError) -> SigningKeyHandle {
        switch algorithm {
        case .ed25519: return SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: secret))
        case .p256: return SigningKeyHandle(p256: try P256.Signing.PrivateKey(pkcs8: secret))
        }
    }
}

/// Verification of the signatures custody's keys make, from public keys alone.
public enum SignatureVerifier: Sendable {
    /// Whether `signature` is valid for `message` under `publicKey` (32 raw bytes for Ed25519,
    /// SPKI DER for P-256; raw `r || s` signatures for P-256).
    public static func isValid(_ signature: [UInt8], for message: [UInt8], publicKey: [UInt8], algorithm: SigningAlgorithm) -> Bool {
        switch algorithm {
        case .ed25519:
            guard let pk = try? Ed25519.PublicKey(rawRepresentation: publicKey) else { return false }
            return pk.isValidSignature(signature, for: message)
        case .p256:
            guard let pk = try? P256.Signing.PublicKey(derRepresentation: publicKey),
                  let sig = try? P256.Signing.Signature(rawRepresentation: signature) else { return false }
            return pk.isValidSignature(sig, for: message)
        }
    }
}
