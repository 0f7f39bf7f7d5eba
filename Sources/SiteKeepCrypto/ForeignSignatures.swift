internal import COpenSSL
public import SiteKeepSecureMemory

/// Verification of signatures made by keys SiteKeep does not hold: another party's public key,
/// such as an SSH server's host key signing its session identifier. Nothing here signs or holds
/// a secret.
///
/// The low-level `EC_KEY`/`RSA` calls are used (deprecated in OpenSSL 3, still supported there),
/// as in ``P256``: they skip the provider decoder framework, which costs milliseconds on first use.
public enum ForeignSignature: Sendable {
    /// The NIST curves ECDSA is verified on, each with the hash RFC 5656 pairs it with.
    public typealias Curve = ECDSACurve

    /// The hashes an RSA PKCS#1 v1.5 signature may use here (SHA-1, `ssh-rsa`, is refused).
    public enum RSAHash: String, Sendable {
        /// `rsa-sha2-256`.
        case sha256
        /// `rsa-sha2-512`.
        case sha512
    }

    /// The smallest and largest RSA moduli accepted, in bits (OpenSSH refuses below 1024).
    public static let rsaModulusBits: ClosedRange<Int> = 1024...16384

    /// Whether (`r`, `s`) is a valid ECDSA signature of `message` under the public point `point`
    /// (SEC 1 uncompressed: `0x04 || x || y`) on `curve`, hashing with the curve's hash.
    /// `r` and `s` are unsigned big-endian integers (leading zeros allowed).
    public static func isValidECDSA(curve: Curve, point: [UInt8], r: [UInt8], s: [UInt8], message: [UInt8]) -> Bool {
        let n = curve.coordinateByteCount
        guard point.count == 1 + 2 * n, point.first == 0x04, !r.isEmpty, !s.isEmpty,
              r.count <= n + 1, s.count <= n + 1,
              let key = EC_KEY_new_by_curve_name(curve.nid) else { return false }
        defer { EC_KEY_free(key) }
        let onCurve = point.withUnsafeBufferPointer { b -> Bool in
            guard EC_KEY_oct2key(key, b.baseAddress, b.count, nil) == 1,
                  let p = EC_KEY_get0_public_key(key), let group = EC_KEY_get0_group(key) else { return false }
            return EC_POINT_is_at_infinity(group, p) == 0 && EC_POINT_is_on_curve(group, p, nil) == 1
        }
        guard onCurve, let sig = ECDSA_SIG_new() else { ERR_clear_error(); return false }
        defer { ECDSA_SIG_free(sig) }
        let rb = r.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let sb = s.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        guard let rb, let sb, ECDSA_SIG_set0(sig, rb, sb) == 1 else { BN_free(rb); BN_free(sb); return false }
        let digest = curve.digest(message)
        let rc = ECDSA_do_verify(digest, Int32(digest.count), sig, key)
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }

    /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 signature of `message` with `hash` under
    /// the key (`modulus`, `exponent`), both unsigned big-endian. Moduli outside
    /// ``rsaModulusBits`` and even or tiny exponents are refused.
    public static func isValidRSA(modulus: [UInt8], exponent: [UInt8], signature: [UInt8], message: [UInt8], hash: RSAHash) -> Bool {
        let m = Array(modulus.drop(while: { $0 == 0 })), e = Array(exponent.drop(while: { $0 == 0 }))
        guard let top = m.first, let last = e.last, last & 1 == 1, e.count <= 8, !(e.count == 1 && last < 3) else { return false }
        let bits = (m.count - 1) * 8 + (8 - top.leadingZeroBitCount)
        guard rsaModulusBits.contains(bits), signature.count <= m.count, let rsa = RSA_new() else { return false }
        defer { RSA_free(rsa) }
        let nb = m.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let eb = e.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        guard let nb, let eb, RSA_set0_key(rsa, nb, eb, nil) == 1 else { BN_free(nb); BN_free(eb); return false }
        // A signature shorter than the modulus is left-padded, as OpenSSH does.
        let padded = [UInt8](repeating: 0, count: m.count - signature.count) + signature
        let digest: [UInt8]
        let nid: Int32
        switch hash {
        case .sha256: digest = SHA256.hash(message); nid = NID_sha256
        case .sha512: digest = SHA512.hash(message); nid = NID_sha512
        }
        let rc = RSA_verify(nid, digest, UInt32(digest.count), padded, UInt32(padded.count), rsa)
        if rc != 1 { ERR_clear_error() }
        return rc == 1
    }
}

extension ECDSACurve {
    var nid: Int32 {
        switch self {
        case .p256: NID_X9_62_prime256v1
        case .p384: NID_secp384r1
        case .p521: NID_secp521r1
        }
    }

    func digest(_ message: [UInt8]) -> [UInt8] {
        switch self {
        case .p256: return SHA256.hash(message)
        case .p384:
            var out = [UInt8](repeating: 0, count: 48)
            message.withUnsafeBufferPointer { _ = COpenSSL.SHA384($0.baseAddress, $0.count, &out) }
            return out
        case .p521: return SHA512.hash(message)
        }
    }
}
