// `tools/bench crypto`: each SiteKeepCrypto wrapper against the library call it wraps, and a peer.
import CSodium
import COpenSSL
import SiteKeepCrypto
import Foundation

/// Boxes a noncopyable value so escaping benchmark closures can share it.
final class Box<T: ~Copyable> {
    let value: T
    init(_ value: consuming T) { self.value = value }
}

/// An OpenSSL EVP_PKEY owned for the run.
/// A C pointer the benchmark closures capture (used from one thread at a time).
struct UncheckedPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

final class EVPKey {
    let pkey: OpaquePointer
    init(_ pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }
}

/// One-shot OpenSSL EVP AEAD encryption into `out` (ciphertext then tag): the raw peer call.
func evpSeal(_ cipher: OpaquePointer?, key: [UInt8], nonce: [UInt8], message: [UInt8], out: inout [UInt8]) throws {
    guard let ctx = EVP_CIPHER_CTX_new() else { throw BenchError.setupFailed("EVP_CIPHER_CTX_new") }
    defer { EVP_CIPHER_CTX_free(ctx) }
    var len: Int32 = 0
    let ok = out.withUnsafeMutableBufferPointer { o -> Bool in
        guard EVP_EncryptInit_ex(ctx, cipher, nil, key, nonce) == 1,
              EVP_EncryptUpdate(ctx, o.baseAddress, &len, message, Int32(message.count)) == 1 else { return false }
        var fin: Int32 = 0
        guard EVP_EncryptFinal_ex(ctx, o.baseAddress! + Int(len), &fin) == 1 else { return false }
        return sitekeep_evp_gcm_get_tag(ctx, 16, o.baseAddress! + Int(len + fin)) == 1   // EVP_CTRL_AEAD_GET_TAG
    }
    guard ok else { throw BenchError.setupFailed("EVP AEAD encrypt") }
}

/// One-shot EVP_DigestSign with a fresh MD context, as a caller of OpenSSL would sign.
func evpSign(_ key: OpaquePointer, digest: OpaquePointer?, message: [UInt8], sig: inout [UInt8]) throws {
    guard let ctx = EVP_MD_CTX_new() else { throw BenchError.setupFailed("EVP_MD_CTX_new") }
    defer { EVP_MD_CTX_free(ctx) }
    var len = sig.count
    guard EVP_DigestSignInit(ctx, nil, digest, nil, key) == 1,
          EVP_DigestSign(ctx, &sig, &len, message, message.count) == 1
    else { throw BenchError.setupFailed("EVP_DigestSign") }
}

/// The calls `P256.Signing.PrivateKey.signature(for:)` makes: SHA-256 (libsodium), then
/// `ECDSA_do_sign` on the key's `EC_KEY`, and the raw `r || s` out of the signature.
func ecdsaSign(_ key: OpaquePointer, message: [UInt8], raw: inout [UInt8]) throws {
    var digest = [UInt8](repeating: 0, count: 32)
    _ = crypto_hash_sha256(&digest, message, UInt64(message.count))
    guard let sig = ECDSA_do_sign(digest, 32, key) else { throw BenchError.setupFailed("ECDSA_do_sign") }
    defer { ECDSA_SIG_free(sig) }
    var r: OpaquePointer? = nil, s: OpaquePointer? = nil
    ECDSA_SIG_get0(sig, &r, &s)
    guard BN_bn2binpad(r, &raw, 32) == 32,
          raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
    else { throw BenchError.setupFailed("BN_bn2binpad") }
}

func cryptoGroup(_ settings: Settings) throws -> [Row] {
    let sink = Sink()
    var rows: [Row] = []
    let keyBytes = SecureRandom.bytes(count: 32)
    // Keys as custody holds its hot keys: guarded pages left read-only while held
    // (SecretBytes.pinReadOnly). `guardedKey` toggles PROT_NONE around every use instead; its
    // row shows what that protection costs per call.
    var pinnedKey = try SecretBytes(copying: keyBytes)
    pinnedKey.pinReadOnly()
    let key = Box(pinnedKey)
    let guardedKey = Box(try SecretBytes(copying: keyBytes))

    // AEAD: seal only (open costs the same plus a tag compare).
    for size in [4096, 1 << 20] {
        let sizeName = size == 4096 ? "4 KiB" : "1 MiB"
        let message = SecureRandom.bytes(count: size)
        var out = [UInt8](repeating: 0, count: size + 16)
        var produced: UInt64 = 0

        let xnonce = SecureRandom.bytes(count: 24)
        rows.append(try compare(
            "XChaCha20-Poly1305 seal \(sizeName)", unit: .megabytesPerSecond(bytes: size),
            wrapper: .op("SiteKeep") { sink.consume(try XChaCha20Poly1305.seal(message, using: key.value, nonce: xnonce)) },
            raw: .op("libsodium") {
                crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &produced, message, UInt64(size), nil, 0, nil, xnonce, keyBytes)
                sink.consume(out[size])
            },
            peer: .op("OpenSSL ChaCha20-Poly1305 IETF") {
                try evpSeal(EVP_chacha20_poly1305(), key: keyBytes, nonce: Array(xnonce.prefix(12)), message: message, out: &out)
                sink.consume(out[size])
            },
            settings: settings))
        if size == 4096 {
            rows.append(try compare(
                "XChaCha20-Poly1305 seal 4 KiB, key PROT_NONE between uses", unit: .megabytesPerSecond(bytes: size),
                wrapper: .op("SiteKeep") { sink.consume(try XChaCha20Poly1305.seal(message, using: guardedKey.value, nonce: xnonce)) },
                raw: .op("libsodium") {
                    crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &produced, message, UInt64(size), nil, 0, nil, xnonce, keyBytes)
                    sink.consume(out[size])
                },
                settings: settings))
        }
        rows.append(try compare(
            "XChaCha20-Poly1305 seal \(sizeName), random nonce (nonce‖ct‖tag)", unit: .megabytesPerSecond(bytes: size),
            wrapper: .op("SiteKeep") { sink.consume(try XChaCha20Poly1305.seal(message, using: key.value)) },
            raw: .op("libsodium + randombytes") {
                var n = [UInt8](repeating: 0, count: 24)
                randombytes_buf(&n, 24)
                crypto_aead_xchacha20poly1305_ietf_encrypt(&out, &produced, message, UInt64(size), nil, 0, nil, n, keyBytes)
                sink.consume(out[size])
            },
            settings: settings))

        let gnonce = SecureRandom.bytes(count: 12)
        if Sodium.hardwareAESGCMAvailable {
            rows.append(try compare(
                "AES-256-GCM seal \(sizeName) (automatic → libsodium)", unit: .megabytesPerSecond(bytes: size),
                wrapper: .op("SiteKeep") { sink.consume(try AES256GCM.seal(message, using: key.value, nonce: gnonce)) },
                raw: .op("libsodium") {
                    crypto_aead_aes256gcm_encrypt(&out, &produced, message, UInt64(size), nil, 0, nil, gnonce, keyBytes)
                    sink.consume(out[size])
                },
                peer: .op("OpenSSL EVP") {
                    try evpSeal(EVP_aes_256_gcm(), key: keyBytes, nonce: gnonce, message: message, out: &out)
                    sink.consume(out[size])
                },
                settings: settings))
        }
        rows.append(try compare(
            "AES-256-GCM seal \(sizeName) (OpenSSL backend)", unit: .megabytesPerSecond(bytes: size),
            wrapper: .op("SiteKeep") { sink.consume(try AES256GCM.seal(message, using: key.value, nonce: gnonce, backend: .openSSL)) },
            raw: .op("OpenSSL EVP") {
                try evpSeal(EVP_aes_256_gcm(), key: keyBytes, nonce: gnonce, message: message, out: &out)
                sink.consume(out[size])
            },
            settings: settings))
    }

    // Argon2id: the floor and a default (custody will calibrate its default to ~0.5 s).
    let password = Array("correct horse battery staple".utf8)
    let pwBox = Box(try SecretBytes(copying: password))
    let salt = SecureRandom.bytes(count: 16)
    let saltHex = salt.map { String(format: "%02x", $0) }.joined()
    for (t, mib, label) in [(2, 19, "minimum"), (3, 64, "default")] {
        let parameters = try Argon2id.Parameters(iterations: t, memoryKiB: mib * 1024)
        var out = [UInt8](repeating: 0, count: 32)
        rows.append(try compare(
            "Argon2id t=\(t) m=\(mib) MiB p=1 (\(label))", unit: .milliseconds,
            wrapper: .op("SiteKeep") {
                let k = try Argon2id.deriveKey(password: pwBox.value, salt: salt, parameters: parameters)
                sink.consume(UInt8(truncatingIfNeeded: k.count))
            },
            raw: .op("crypto_pwhash") {
                let rc = password.withUnsafeBufferPointer { p in
                    p.withMemoryRebound(to: CChar.self) { c in
                        crypto_pwhash(&out, 32, c.baseAddress!, UInt64(password.count), salt, UInt64(t), mib << 20, crypto_pwhash_ALG_ARGON2ID13)
                    }
                }
                guard rc == 0 else { throw BenchError.setupFailed("crypto_pwhash") }
                sink.consume(out[0])
            },
            peer: pythonContender("argon2-cffi",
                setup: "from argon2.low_level import hash_secret_raw, Type\nsalt = bytes.fromhex('\(saltHex)')",
                statement: "hash_secret_raw(b'correct horse battery staple', salt, time_cost=\(t), memory_cost=\(mib * 1024), parallelism=1, hash_len=32, type=Type.ID)"),
            slow: true, settings: settings))
    }

    // Signatures over a 64-byte message (a commit or challenge digest).
    let message = SecureRandom.bytes(count: 64)
    var sig = [UInt8](repeating: 0, count: 80)
    let seed = Box(try SecretBytes(copying: keyBytes))
    var pinnedEd = try Ed25519.PrivateKey(seed: seed.value)
    pinnedEd.pinReadOnly()          // as custody's SigningKeyHandle holds it
    let edKey = Box(pinnedEd)
    var pk = [UInt8](repeating: 0, count: 32), sk = [UInt8](repeating: 0, count: 64)
    crypto_sign_seed_keypair(&pk, &sk, keyBytes)
    guard let edPeer = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, keyBytes, 32) else { throw BenchError.setupFailed("Ed25519 EVP key") }
    let edPeerKey = EVPKey(edPeer)
    rows.append(try compare(
        "Ed25519 sign (64-byte message)", unit: .perSecond,
        wrapper: .op("SiteKeep") { sink.consume(edKey.value.signature(for: message)) },
        raw: .op("crypto_sign_detached") {
            crypto_sign_detached(&sig, nil, message, UInt64(message.count), sk)
            sink.consume(sig[0])
        },
        peer: .op("OpenSSL EVP") { try evpSign(edPeerKey.pkey, digest: nil, message: message, sig: &sig); sink.consume(sig[0]) },
        settings: settings))

    let p256 = Box(try P256.Signing.PrivateKey())
    guard let gen = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nil) else { throw BenchError.setupFailed("EVP_PKEY_CTX_new_id") }
    var rawPKey: OpaquePointer? = nil
    guard EVP_PKEY_keygen_init(gen) == 1, EVP_PKEY_CTX_set_ec_paramgen_curve_nid(gen, NID_X9_62_prime256v1) == 1,
          EVP_PKEY_keygen(gen, &rawPKey) == 1, let rawPKey else { throw BenchError.setupFailed("P-256 keygen") }
    EVP_PKEY_CTX_free(gen)
    let rawP256 = EVPKey(rawPKey)
    guard let rawEC = EVP_PKEY_get1_EC_KEY(rawPKey) else { throw BenchError.setupFailed("EVP_PKEY_get1_EC_KEY") }
    defer { EC_KEY_free(rawEC) }
    let rawECKey = UncheckedPointer(rawEC)
    var rawSig = [UInt8](repeating: 0, count: 64)
    rows.append(try compare(
        "ECDSA P-256 SHA-256 sign (64-byte message)", unit: .perSecond,
        wrapper: .op("SiteKeep") { sink.consume(try p256.value.signature(for: message).rawRepresentation) },
        raw: .op("SHA-256 + ECDSA_do_sign") { try ecdsaSign(rawECKey.pointer, message: message, raw: &rawSig); sink.consume(rawSig[0]) },
        peer: .op("OpenSSL EVP_DigestSign") { try evpSign(rawP256.pkey, digest: EVP_sha256(), message: message, sig: &sig); sink.consume(sig[0]) },
        settings: settings))

    // PBKDF2-HMAC-SHA256 at the sgit format's 600,000 iterations.
    let iterations = 600_000
    var dk = [UInt8](repeating: 0, count: 32)
    rows.append(try compare(
        "PBKDF2-HMAC-SHA256 600k iterations", unit: .milliseconds,
        wrapper: .op("SiteKeep") {
            let k = try PBKDF2.deriveKey(password: pwBox.value, salt: salt, iterations: iterations)
            sink.consume(UInt8(truncatingIfNeeded: k.count))
        },
        raw: .op("PKCS5_PBKDF2_HMAC") {
            let rc = password.withUnsafeBufferPointer { p in
                p.withMemoryRebound(to: CChar.self) { c in
                    PKCS5_PBKDF2_HMAC(c.baseAddress, Int32(password.count), salt, Int32(salt.count), Int32(iterations), EVP_sha256(), 32, &dk)
                }
            }
            guard rc == 1 else { throw BenchError.setupFailed("PKCS5_PBKDF2_HMAC") }
            sink.consume(dk[0])
        },
        peer: pythonContender("Python hashlib",
            setup: "import hashlib\nsalt = bytes.fromhex('\(saltHex)')",
            statement: "hashlib.pbkdf2_hmac('sha256', b'correct horse battery staple', salt, \(iterations), 32)"),
        target: 1.10, targetAgainstPeer: true, slow: true, settings: settings))

    if sink.value == 0x5a { FileHandle.standardError.write(Data(" \n".utf8)) }   // keep the sink observable
    return rows
}

/// Where a wrapper's overhead goes: the fixed costs it adds to every call, measured alone.
func cryptoOverheadComponents(_ settings: Settings) throws -> [(String, Double)] {
    let sink = Sink()
    let key = Box(try SecretBytes(randomCount: 32))
    func measure(_ op: () -> Void) -> Double {
        var xs: [Double] = []
        for _ in 0..<settings.rounds {
            let n = 2000
            let start = now()
            for _ in 0..<n { op() }
            xs.append(Double(now() - start) / 1e9 / Double(n))
        }
        return median(xs)
    }
    let pair = measure { key.value.withUnsafeBytes { sink.consume($0[0]) } }
    let small = measure { sink.consume([UInt8](repeating: 0, count: 4096 + 16)) }
    let large = measure { sink.consume([UInt8](repeating: 0, count: (1 << 20) + 16)) }
    let message = [UInt8](repeating: 1, count: 1 << 20)
    let concat = measure { sink.consume([0, 0, 0] + message) }
    return [
        ("SecretBytes.withUnsafeBytes (sodium_mprotect_readonly + _noaccess)", pair),
        ("new zero-filled [UInt8], 4 KiB + tag", small),
        ("new zero-filled [UInt8], 1 MiB + tag", large),
        ("prefix + 1 MiB array concatenation", concat),
    ]
}
