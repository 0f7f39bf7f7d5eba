internal import COpenSSL

/// The authenticator's crypto, straight on OpenSSL's libcrypto (test side: the production code
/// never links this): P-256 keys, ECDH, ECDSA, AES-256-CBC without padding, SHA-256, HMAC-SHA-256
/// and HKDF-SHA256.
enum SoftCrypto {
    static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = data.withUnsafeBufferPointer { SHA256($0.baseAddress, data.count, &out) }
        return out
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var k = key.count > 64 ? sha256(key) : key
        k += [UInt8](repeating: 0, count: 64 - k.count)
        let inner = sha256(k.map { $0 ^ 0x36 } + message)
        return sha256(k.map { $0 ^ 0x5c } + inner)
    }

    /// HKDF-SHA256 (RFC 5869) for up to 32 bytes of output.
    static func hkdf(salt: [UInt8], ikm: [UInt8], info: [UInt8], length: Int = 32) -> [UInt8] {
        let prk = hmac(key: salt, ikm)
        return Array(hmac(key: prk, info + [1]).prefix(length))
    }

    static func random(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        _ = RAND_bytes(&out, Int32(n))
        return out
    }

    /// AES-256-CBC, no padding; nil when the data is not whole blocks.
    static func aesCBC(encrypt: Bool, key: [UInt8], iv: [UInt8], _ data: [UInt8]) -> [UInt8]? {
        guard key.count == 32, iv.count == 16, data.count % 16 == 0 else { return nil }
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        guard EVP_CipherInit_ex(ctx, EVP_aes_256_cbc(), nil, key, iv, encrypt ? 1 : 0) == 1 else { return nil }
        EVP_CIPHER_CTX_set_padding(ctx, 0)
        var out = [UInt8](repeating: 0, count: data.count + 16)
        var n: Int32 = 0, m: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &n, data, Int32(data.count)) == 1 else { return nil }
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + Int(n), &m) }
        guard ok == 1 else { return nil }
        return Array(out.prefix(Int(n + m)))
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }
}

/// A P-256 key pair (an EC_KEY, freed with the object).
final class P256Key: @unchecked Sendable {
    private let key: OpaquePointer

    init() {
        let k = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1)!
        precondition(EC_KEY_generate_key(k) == 1, "P-256 key generation failed")
        key = k
    }

    deinit { EC_KEY_free(key) }

    /// The public point, x ‖ y (64 bytes).
    var publicXY: [UInt8] {
        var out = [UInt8](repeating: 0, count: 65)
        let n = EC_POINT_point2oct(EC_KEY_get0_group(key), EC_KEY_get0_public_key(key), POINT_CONVERSION_UNCOMPRESSED, &out, 65, nil)
        precondition(n == 65)
        return Array(out[1...])
    }

    /// The COSE_Key of the public key: EC2, P-256, with `alg`.
    func coseKey(alg: Int) -> CBOR {
        let xy = publicXY
        return .map([.init(.int(1), .int(2)), .init(.int(3), .int(alg)), .init(.int(-1), .int(1)),
                     .init(.int(-2), .bytes(Array(xy[0..<32]))), .init(.int(-3), .bytes(Array(xy[32..<64])))])
    }

    /// ECDH with the peer's point: the shared x coordinate (32 bytes), nil for a point not on the curve.
    func ecdh(peerX x: [UInt8], y: [UInt8]) -> [UInt8]? {
        guard x.count == 32, y.count == 32 else { return nil }
        let group = EC_KEY_get0_group(key)
        guard let point = EC_POINT_new(group) else { return nil }
        defer { EC_POINT_free(point) }
        let oct = [UInt8(4)] + x + y
        guard EC_POINT_oct2point(group, point, oct, oct.count, nil) == 1, EC_POINT_is_on_curve(group, point, nil) == 1 else { return nil }
        var z = [UInt8](repeating: 0, count: 32)
        guard ECDH_compute_key(&z, 32, point, key, nil) == 32 else { return nil }
        return z
    }

    /// ECDSA-SHA256 of `message`, DER.
    func sign(_ message: [UInt8]) -> [UInt8] {
        let digest = SoftCrypto.sha256(message)
        guard let sig = ECDSA_do_sign(digest, 32, key) else { return [] }
        defer { ECDSA_SIG_free(sig) }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let n = i2d_ECDSA_SIG(sig, &out)
        guard n > 0, let out else { return [] }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }
}

/// CTAP 2.1's PIN/UV auth protocols one and two (§6.5.6, §6.5.7): the shared secret from ECDH,
/// encryption and authentication.
enum PINProtocol: Int, Sendable {
    case one = 1, two = 2

    /// The shared secret from the ECDH x coordinate `z`.
    func kdf(_ z: [UInt8]) -> [UInt8] {
        switch self {
        case .one: return SoftCrypto.sha256(z)
        case .two:
            let salt = [UInt8](repeating: 0, count: 32)
            return SoftCrypto.hkdf(salt: salt, ikm: z, info: Array("CTAP2 HMAC key".utf8))
                + SoftCrypto.hkdf(salt: salt, ikm: z, info: Array("CTAP2 AES key".utf8))
        }
    }

    func encrypt(_ key: [UInt8], _ plaintext: [UInt8]) -> [UInt8]? {
        switch self {
        case .one: return SoftCrypto.aesCBC(encrypt: true, key: key, iv: [UInt8](repeating: 0, count: 16), plaintext)
        case .two:
            let iv = SoftCrypto.random(16)
            return SoftCrypto.aesCBC(encrypt: true, key: Array(key[32..<64]), iv: iv, plaintext).map { iv + $0 }
        }
    }

    func decrypt(_ key: [UInt8], _ ciphertext: [UInt8]) -> [UInt8]? {
        switch self {
        case .one: return SoftCrypto.aesCBC(encrypt: false, key: key, iv: [UInt8](repeating: 0, count: 16), ciphertext)
        case .two:
            guard ciphertext.count >= 16 else { return nil }
            return SoftCrypto.aesCBC(encrypt: false, key: Array(key[32..<64]), iv: Array(ciphertext[0..<16]), Array(ciphertext[16...]))
        }
    }

    /// The MAC of `message` under `key` (a shared secret, or a pinUvAuthToken).
    func authenticate(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        switch self {
        case .one: return Array(SoftCrypto.hmac(key: key, message).prefix(16))
        case .two: return SoftCrypto.hmac(key: key.count == 64 ? Array(key[0..<32]) : key, message)
        }
    }

    func verify(_ key: [UInt8], _ message: [UInt8], _ signature: [UInt8]) -> Bool {
        SoftCrypto.constantTimeEqual(authenticate(key, message), signature)
    }
}
