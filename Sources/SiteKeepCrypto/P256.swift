internal import COpenSSL
import Synchronization

/// ECDSA over NIST P-256 with SHA-256, through OpenSSL's libcrypto (libsodium has no P-256).
///
/// Signatures come in two forms: raw `r || s` (64 bytes, IEEE P1363, as WebCrypto and the sgit
/// format use) and DER (X9.62, as X.509 and most tools use). Public keys travel as
/// SubjectPublicKeyInfo (DER or PEM); private keys as PKCS#8.
public enum P256: Sendable {}

extension P256 {
    /// Signing and verification.
    public enum Signing: Sendable {}
}

extension P256.Signing {
    /// An ECDSA signature, held in raw `r || s` form.
    public struct Signature: Sendable, Hashable {
        /// `r || s`, each a 32-byte big-endian integer.
        public let rawRepresentation: [UInt8]

        /// Wraps a raw 64-byte `r || s` signature.
        /// - Throws: ``CryptoError/invalidSignatureEncoding(_:)`` for any other length.
        public init(rawRepresentation: [UInt8]) throws(CryptoError) {
            guard rawRepresentation.count == 64 else {
                throw .invalidSignatureEncoding("a raw P-256 signature is 64 bytes, got \(rawRepresentation.count)")
            }
            self.rawRepresentation = rawRepresentation
        }

        /// Parses a strict DER `ECDSA-Sig-Value`. BER variants (long-form lengths, extra leading
        /// zeros, trailing bytes) are refused, because the re-encoding must equal the input.
        public init(derRepresentation der: [UInt8]) throws(CryptoError) {
            guard !der.isEmpty, der.count <= 72 else { throw .invalidSignatureEncoding("DER signature has a bad length") }
            let raw: [UInt8]? = der.withUnsafeBufferPointer { buffer -> [UInt8]? in
                var p: UnsafePointer<UInt8>? = buffer.baseAddress
                guard let sig = d2i_ECDSA_SIG(nil, &p, buffer.count) else { return nil }
                defer { ECDSA_SIG_free(sig) }
                guard let p, buffer.baseAddress!.distance(to: p) == buffer.count else { return nil }
                // Strict DER: the canonical re-encoding must be byte-identical.
                var out: UnsafeMutablePointer<UInt8>? = nil
                let n = i2d_ECDSA_SIG(sig, &out)
                guard n > 0, let out else { return nil }
                defer { CRYPTO_free(out, #fileID, #line) }
                guard Int(n) == der.count, memcmp(out, buffer.baseAddress!, der.count) == 0 else { return nil }
                var r: OpaquePointer? = nil, s: OpaquePointer? = nil
                ECDSA_SIG_get0(sig, &r, &s)
                var bytes = [UInt8](repeating: 0, count: 64)
                guard (BN_num_bits(r) + 7) / 8 <= 32, (BN_num_bits(s) + 7) / 8 <= 32,
                      BN_bn2binpad(r, &bytes, 32) == 32,
                      bytes.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
                else { return nil }
                return bytes
            }
            guard let raw else { throw .invalidSignatureEncoding("not a strict DER ECDSA signature") }
            rawRepresentation = raw
        }

        /// The DER encoding (`SEQUENCE { INTEGER r, INTEGER s }`).
        public var derRepresentation: [UInt8] {
            Self.der(fromRaw: rawRepresentation) ?? []
        }

        static func der(fromRaw raw: [UInt8]) -> [UInt8]? {
            guard let sig = ECDSA_SIG_new() else { return nil }
            defer { ECDSA_SIG_free(sig) }
            let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
            let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
            guard let r, let s else { BN_free(r); BN_free(s); return nil }
            guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let n = i2d_ECDSA_SIG(sig, &out)
            guard n > 0, let out else { return nil }
            defer { CRYPTO_free(out, #fileID, #line) }
            return Array(UnsafeBufferPointer(start: out, count: Int(n)))
        }
    }

    /// A P-256 public key, held as its SubjectPublicKeyInfo DER (91 bytes).
    public struct PublicKey: Sendable, Hashable {
        /// The SubjectPublicKeyInfo DER encoding.
        public let derRepresentation: [UInt8]

        /// Parses SubjectPublicKeyInfo DER; refuses keys on other curves or of other types, BER
        /// encodings, compressed points and points not on the curve (the DER must be the canonical
        /// 91 bytes, so one key has exactly one encoding).
        public init(derRepresentation der: [UInt8]) throws(CryptoError) {
            if !Self.recentlyValidated.withLock({ $0.contains(der) }) {
                guard let key = OpenSSLKey.ecPublicKey(fromSPKI: der) else {
                    throw .invalidKeyEncoding("not a P-256 SubjectPublicKeyInfo")
                }
                EC_KEY_free(key)
                Self.recentlyValidated.withLock { seen in
                    if seen.count >= Self.maximumRemembered { seen.removeAll() }
                    seen.insert(der)
                }
            }
            derRepresentation = der
        }

        /// Encodings that passed the checks lately: parsing a point and checking it lies on the
        /// curve costs tens of microseconds, and the same few team keys are parsed on every
        /// ssh-agent connection. Public keys only; a miss checks in full.
        private static let recentlyValidated = Mutex<Set<[UInt8]>>([])
        private static let maximumRemembered = 256

        /// Parses a `-----BEGIN PUBLIC KEY-----` PEM block.
        public init(pemRepresentation pem: String) throws(CryptoError) {
            let der = try PEM.decode(pem, label: "PUBLIC KEY")
            try self.init(derRepresentation: der)
        }

        /// The PEM form: the header, base64 of the DER in lines of 64, the footer, each line
        /// ending in `\n` (the form the sgit format stores).
        public var pemRepresentation: String { PEM.encode(derRepresentation, label: "PUBLIC KEY") }

        /// Whether `signature` is a valid ECDSA-SHA256 signature of `message`.
        public func isValidSignature(_ signature: Signature, for message: [UInt8]) -> Bool {
            guard let key = OpenSSLKey.ecPublicKey(fromSPKI: derRepresentation) else { return false }
            defer { EC_KEY_free(key) }
            return OpenSSLKey.verify(key: key, raw: signature.rawRepresentation, digest: SHA256.hash(message))
        }
    }

    /// A P-256 signing key. Noncopyable; the key lives in OpenSSL's memory (its secure heap when
    /// the process hardening has initialised it) and is freed with `EVP_PKEY_free`, which clears
    /// the private scalar. Export is `package`-only, for wrapping by custody.
    public struct PrivateKey: ~Copyable {
        private let key: OpaquePointer
        /// `key` as an `EC_KEY` (our own reference, freed in `deinit`), which signs with no
        /// provider fetch per call.
        private let ecKey: OpaquePointer
        /// The matching public key.
        public let publicKey: PublicKey

        /// Generates a new key.
        public init() throws(CryptoError) {
            guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw .allocationFailed }
            defer { EVP_PKEY_CTX_free(ctx) }
            var pkey: OpaquePointer? = nil
            guard EVP_PKEY_keygen_init(ctx) == 1,
                  EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx, NID_X9_62_prime256v1) == 1,
                  EVP_PKEY_keygen(ctx, &pkey) == 1, let pkey
            else { throw .operationFailed("P-256 key generation") }
            try self.init(taking: pkey)
        }

        /// Imports an unencrypted PKCS#8 private key, DER or PEM (`-----BEGIN PRIVATE KEY-----`).
        /// - Throws: ``CryptoError/invalidKeyEncoding(_:)`` for anything that is not a P-256
        ///   PKCS#8 key.
        public init(pkcs8: borrowing SecretBytes) throws(CryptoError) {
            let pkey: OpaquePointer? = try pkcs8.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(CryptoError) -> OpaquePointer? in
                let text = bytes.starts(with: Array("-----BEGIN".utf8)) || bytes.first(where: { $0 != 0x20 && $0 != 0x0a && $0 != 0x0d && $0 != 0x09 }) == UInt8(ascii: "-")
                if text {
                    var der = try PEM.decode(bytes, label: "PRIVATE KEY")
                    defer { SecureMemory.zero(&der) }
                    return der.withUnsafeBytes { OpenSSLKey.privateKey(fromPKCS8: $0) }
                }
                return OpenSSLKey.privateKey(fromPKCS8: bytes)
            }
            guard let pkey else { throw .invalidKeyEncoding("not an unencrypted P-256 PKCS#8 private key") }
            try self.init(taking: pkey)
        }

        /// Imports a private scalar: 32 big-endian bytes (`d`, as an OpenSSH agent or key file
        /// carries it), through ``init(pkcs8:)`` of the RFC 5915 `ECPrivateKey` that holds it
        /// without its public key (OpenSSL's `d2i_ECPrivateKey` computes `d·G`). The DER is
        /// built in guarded memory and wiped.
        /// - Throws: ``CryptoError/invalidKeyLength(expected:actual:)``, or
        ///   ``CryptoError/invalidKeyEncoding(_:)`` for a scalar that is not a P-256 private key.
        public init(rawScalar scalar: borrowing SecretBytes) throws(CryptoError) {
            guard scalar.count == 32 else { throw .invalidKeyLength(expected: 32, actual: scalar.count) }
            // PKCS#8 { version 0, { id-ecPublicKey, prime256v1 }, OCTET STRING { ECPrivateKey { 1, d } } }.
            let prefix: [UInt8] = [0x30, 0x41, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
                                   0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x27, 0x30, 0x25, 0x02, 0x01,
                                   0x01, 0x04, 0x20]
            let der = try scalar.withUnsafeBytes { (d: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                try SecretBytes(count: prefix.count + 32, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    for (i, b) in prefix.enumerated() { out[i] = b }
                    for i in 0..<32 { out[prefix.count + i] = d[i] }
                })
            }
            try self.init(pkcs8: der)
        }

        private init(taking pkey: OpaquePointer) throws(CryptoError) {
            // get1, not get0: OpenSSL 3 keeps get0's EC_KEY in a cache it may drop when the key is
            // exported (pkcs8DER), which would leave a dangling pointer here.
            guard OpenSSLKey.isP256(pkey), let ec = EVP_PKEY_get1_EC_KEY(pkey) else {
                EVP_PKEY_free(pkey)
                throw .invalidKeyEncoding("key is not on the P-256 curve")
            }
            let publicKey: PublicKey
            do throws(CryptoError) {
                guard let spki = OpenSSLKey.spki(of: ec) else { throw .invalidKeyEncoding("key is not on the P-256 curve") }
                publicKey = try PublicKey(derRepresentation: spki)
            } catch {
                EC_KEY_free(ec)
                EVP_PKEY_free(pkey)
                throw error
            }
            self.key = pkey
            self.ecKey = ec
            self.publicKey = publicKey
        }

        /// Signs SHA-256(`message`) and returns the raw `r || s` signature (randomised k).
        public borrowing func signature(for message: [UInt8]) throws(CryptoError) -> Signature {
            guard let raw = OpenSSLKey.sign(key: ecKey, digest: SHA256.hash(message)) else { throw .operationFailed("ECDSA signing") }
            return try Signature(rawRepresentation: raw)
        }

        /// The PKCS#8 DER encoding, in guarded memory, for wrapping by custody.
        package borrowing func pkcs8DER() throws(CryptoError) -> SecretBytes {
            guard let p8 = EVP_PKEY2PKCS8(key) else { throw .operationFailed("EVP_PKEY2PKCS8") }
            defer { PKCS8_PRIV_KEY_INFO_free(p8) }
            var out: UnsafeMutablePointer<UInt8>? = nil
            let n = i2d_PKCS8_PRIV_KEY_INFO(p8, &out)
            guard n > 0, let out else { throw .operationFailed("i2d_PKCS8_PRIV_KEY_INFO") }
            defer { OPENSSL_cleanse(out, Int(n)); CRYPTO_free(out, #fileID, #line) }
            return try SecretBytes(count: Int(n), initializingWith: { (dst: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                dst.copyMemory(from: UnsafeRawBufferPointer(start: out, count: Int(n)))
            })
        }

        /// The PKCS#8 PEM encoding (`-----BEGIN PRIVATE KEY-----`), in guarded memory.
        package borrowing func pkcs8PEM() throws(CryptoError) -> SecretBytes {
            let der = try pkcs8DER()
            return try der.withUnsafeBytes { (d: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                var text = Array(PEM.encode(Array(d), label: "PRIVATE KEY").utf8)
                return try SecretBytes(consumingAndZeroing: &text)
            }
        }

        deinit {
            EC_KEY_free(ecKey)
            EVP_PKEY_free(key)
        }
    }
}

@available(*, unavailable)
extension P256.Signing.PrivateKey: Sendable {}

/// libcrypto key helpers. Every returned key is owned by the caller.
///
/// Public keys and signatures go through the `EC_KEY`/`ECDSA_do_*` calls rather than
/// `d2i_PUBKEY`/`EVP_DigestVerify`: in OpenSSL 3 the latter run the provider decoder and encoder
/// framework, ~14 million instructions on first use, most of what a one-shot `vault cat` cost.
/// The SubjectPublicKeyInfo is checked byte for byte against the one canonical P-256 form instead.
enum OpenSSLKey {
    /// The length of a P-256 SubjectPublicKeyInfo with an uncompressed point, the only form
    /// SiteKeep accepts, so that one key has exactly one encoding.
    static let spkiByteCount = 91

    /// `SEQUENCE { SEQUENCE { OID id-ecPublicKey, OID prime256v1 }, BIT STRING (0 unused bits) }`
    /// up to the point: the DER every canonical P-256 SPKI starts with.
    static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
        0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// Parses a strict DER, uncompressed-point P-256 SPKI whose point lies on the curve. (OpenSSL's
    /// own parser also accepts BER lengths and compressed points, which would give one key several
    /// encodings.) Returns an `EC_KEY` the caller frees.
    static func ecPublicKey(fromSPKI der: [UInt8]) -> OpaquePointer? {
        guard der.count == spkiByteCount, der.starts(with: spkiPrefix), der[spkiPrefix.count] == 0x04,
              let key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1) else { return nil }
        let ok = der.withUnsafeBufferPointer { b -> Bool in
            guard EC_KEY_oct2key(key, b.baseAddress! + spkiPrefix.count, 65, nil) == 1,
                  let point = EC_KEY_get0_public_key(key), let group = EC_KEY_get0_group(key) else { return false }
            return EC_POINT_is_at_infinity(group, point) == 0 && EC_POINT_is_on_curve(group, point, nil) == 1
        }
        guard ok else { EC_KEY_free(key); ERR_clear_error(); return nil }
        return key
    }

    static func privateKey(fromPKCS8 der: UnsafeRawBufferPointer) -> OpaquePointer? {
        guard der.count > 0, der.count < 4096 else { return nil }
        var p: UnsafePointer<UInt8>? = der.baseAddress!.assumingMemoryBound(to: UInt8.self)
        guard let info = d2i_PKCS8_PRIV_KEY_INFO(nil, &p, der.count) else { ERR_clear_error(); return nil }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        guard let p, der.baseAddress!.assumingMemoryBound(to: UInt8.self).distance(to: p) == der.count else { return nil }
        guard let key = EVP_PKCS82PKEY(info) else { ERR_clear_error(); return nil }
        guard isP256(key) else { EVP_PKEY_free(key); return nil }
        return key
    }

    static func isP256(_ key: OpaquePointer) -> Bool {
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC, let ec = EVP_PKEY_get0_EC_KEY(key),
              let group = EC_KEY_get0_group(ec) else { return false }
        return EC_GROUP_get_curve_name(group) == NID_X9_62_prime256v1
    }

    /// The canonical SPKI of an EC_KEY's public point.
    static func spki(of key: OpaquePointer) -> [UInt8]? {
        guard let point = EC_KEY_get0_public_key(key), let group = EC_KEY_get0_group(key) else { return nil }
        var out = spkiPrefix + [UInt8](repeating: 0, count: 65)
        let n = out.withUnsafeMutableBufferPointer { b in
            EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, b.baseAddress! + spkiPrefix.count, 65, nil)
        }
        guard n == 65 else { ERR_clear_error(); return nil }
        return out
    }

    /// ECDSA over a SHA-256 digest; the raw `r || s` (64 bytes).
    static func sign(key: OpaquePointer, digest: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_do_sign(digest, Int32(digest.count), key) else { ERR_clear_error(); return nil }
        defer { ECDSA_SIG_free(sig) }
        var r: OpaquePointer? = nil, s: OpaquePointer? = nil
        ECDSA_SIG_get0(sig, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        let ok = raw.withUnsafeMutableBufferPointer { b in
            BN_bn2binpad(r, b.baseAddress!, 32) == 32 && BN_bn2binpad(s, b.baseAddress! + 32, 32) == 32
        }
        return ok ? raw : nil
    }

    /// Whether the raw `r || s` signature is valid for the SHA-256 `digest` under `key`.
    static func verify(key: OpaquePointer, raw: [UInt8], digest: [UInt8]) -> Bool {
        guard raw.count == 64, let sig = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return false }
        let rc = ECDSA_do_verify(digest, Int32(digest.count), sig, key)
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }
}
