internal import CSodium

/// Ed25519 signatures (RFC 8032), libsodium's `crypto_sign_*`.
public enum Ed25519: Sendable {
    /// 32.
    public static let seedByteCount = 32
    /// 64.
    public static let signatureByteCount = 64

    /// An Ed25519 public key: 32 bytes, public.
    public struct PublicKey: Sendable, Hashable {
        /// The 32-byte encoded point.
        public let rawRepresentation: [UInt8]

        /// Wraps a 32-byte public key.
        /// - Throws: ``CryptoError/invalidKeyEncoding(_:)`` for any other length.
        public init(rawRepresentation: [UInt8]) throws(CryptoError) {
            guard rawRepresentation.count == 32 else {
                throw .invalidKeyEncoding("an Ed25519 public key is 32 bytes, got \(rawRepresentation.count)")
            }
            self.rawRepresentation = rawRepresentation
        }

        /// The DER `SubjectPublicKeyInfo` prefix of every Ed25519 key (RFC 8410 §4:
        /// `SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING (0 unused bits) }`), before the
        /// 32 key bytes.
        static let spkiPrefix: [UInt8] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]

        /// The key as a DER `SubjectPublicKeyInfo` (RFC 8410), 44 bytes: what `openssl pkey
        /// -pubin` and X.509 tools read.
        public var derRepresentation: [UInt8] { Self.spkiPrefix + rawRepresentation }

        /// The SubjectPublicKeyInfo as PEM (`-----BEGIN PUBLIC KEY-----`, lines of 64).
        public var pemRepresentation: String { PEM.encode(derRepresentation, label: "PUBLIC KEY") }

        /// Parses the 44-byte DER `SubjectPublicKeyInfo` form (the only encoding of one key).
        /// - Throws: ``CryptoError/invalidKeyEncoding(_:)``.
        public init(derRepresentation der: [UInt8]) throws(CryptoError) {
            guard der.count == Self.spkiPrefix.count + 32, der.starts(with: Self.spkiPrefix) else {
                throw .invalidKeyEncoding("not an Ed25519 SubjectPublicKeyInfo")
            }
            try self.init(rawRepresentation: Array(der[Self.spkiPrefix.count...]))
        }

        /// Whether `signature` is a valid signature of `message` under this key
        /// (`crypto_sign_verify_detached`, which also rejects non-canonical encodings).
        public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
            guard signature.count == signatureByteCount else { return false }
            try? Sodium.ensureInitialized()
            return crypto_sign_verify_detached(signature, message, UInt64(message.count), rawRepresentation) == 0
        }
    }

    /// An Ed25519 signing key in guarded memory. Noncopyable; the seed never leaves SiteKeep's
    /// own modules.
    public struct PrivateKey: ~Copyable {
        private var secretKey: SecretBytes          // libsodium's 64-byte form: seed || public key
        /// The matching public key.
        public let publicKey: PublicKey

        /// Generates a new key from the CSPRNG.
        public init() throws(CryptoError) {
            let seed = try SecretBytes(randomCount: seedByteCount)
            try self.init(seed: seed)
        }

        /// Derives the key from a 32-byte seed (RFC 8032's private key).
        /// - Throws: ``CryptoError/invalidKeyLength(expected:actual:)``.
        public init(seed: borrowing SecretBytes) throws(CryptoError) {
            guard seed.count == seedByteCount else { throw .invalidKeyLength(expected: seedByteCount, actual: seed.count) }
            try Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: 32)
            let sk = try seed.withUnsafeBytes { (s: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                try SecretBytes(count: 64, initializingWith: { (sk: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    guard crypto_sign_seed_keypair(&pk, sk.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                   s.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
                    else { throw .operationFailed("crypto_sign_seed_keypair") }
                })
            }
            let publicKey = try PublicKey(rawRepresentation: pk)
            self.secretKey = sk
            self.publicKey = publicKey
        }

        /// Signs `message` (`crypto_sign_detached`); deterministic, 64 bytes.
        public borrowing func signature(for message: [UInt8]) -> [UInt8] {
            var sig = [UInt8](repeating: 0, count: signatureByteCount)
            secretKey.withUnsafeBytes { sk in
                _ = crypto_sign_detached(&sig, nil, message, UInt64(message.count),
                                         sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            return sig
        }

        /// Keeps the key's pages read-only while it lives (see ``SecretBytes/pinReadOnly()``),
        /// for a key that signs on a hot path.
        package mutating func pinReadOnly() { secretKey.pinReadOnly() }

        /// A guarded copy of the 32-byte seed, for wrapping by custody.
        package borrowing func seed() throws(CryptoError) -> SecretBytes {
            try secretKey.withUnsafeBytes { (sk: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                try SecretBytes(count: seedByteCount, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    out.copyMemory(from: UnsafeRawBufferPointer(rebasing: sk[0..<seedByteCount]))
                })
            }
        }
    }
}

@available(*, unavailable)
extension Ed25519.PrivateKey: Sendable {}
