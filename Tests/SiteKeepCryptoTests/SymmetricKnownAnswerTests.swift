import Foundation
import Testing
@testable import SiteKeepCrypto
import SiteKeepTestSupport

func hx(_ s: String) throws -> [UInt8] { try Fixtures.hex(s) }
func secret(_ s: String) throws -> SecretBytes { try SecretBytes(copying: hx(s)) }
func bytes(of s: borrowing SecretBytes) -> [UInt8] { s.withUnsafeBytes { Array($0) } }
func flipped(_ b: [UInt8], at i: Int) -> [UInt8] { var c = b; c[i] ^= 0x01; return c }

struct Sourced<V: Decodable>: Decodable { let source: String; let vectors: [V] }

@Suite struct HKDFKnownAnswerTests {
    struct V: Decodable { let name, ikm, salt, info, prk, okm: String; let length: Int }

    @Test func rfc5869() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "hkdf-sha256.json")
        #expect(f.source.contains("RFC 5869"))
        #expect(f.vectors.count == 3)
        for v in f.vectors {
            let okm = try HKDF.deriveKey(inputKeyMaterial: secret(v.ikm), salt: hx(v.salt), info: hx(v.info), outputByteCount: v.length)
            #expect(bytes(of: okm) == (try hx(v.okm)), "\(v.name)")
            // Negative: a different IKM or info gives a different key.
            let wrongIKM = try HKDF.deriveKey(inputKeyMaterial: SecretBytes(copying: flipped(hx(v.ikm), at: 0)), salt: hx(v.salt), info: hx(v.info), outputByteCount: v.length)
            #expect(bytes(of: wrongIKM) != (try hx(v.okm)))
            let wrongInfo = try HKDF.deriveKey(inputKeyMaterial: secret(v.ikm), salt: hx(v.salt), info: hx(v.info) + [0], outputByteCount: v.length)
            #expect(bytes(of: wrongInfo) != (try hx(v.okm)))
        }
    }

    @Test func refusesOutputLengthsOutOfRange() throws {
        let ikm = try SecretBytes(randomCount: 32)
        #expect(throws: CryptoError.self) { _ = try HKDF.deriveKey(inputKeyMaterial: ikm, info: [], outputByteCount: 0) }
        #expect(throws: CryptoError.self) { _ = try HKDF.deriveKey(inputKeyMaterial: ikm, info: [], outputByteCount: HKDF.maximumOutputByteCount + 1) }
        #expect(try HKDF.deriveKey(inputKeyMaterial: ikm, info: [], outputByteCount: HKDF.maximumOutputByteCount).count == 255 * 32)
    }
}

@Suite struct HMACKnownAnswerTests {
    struct V: Decodable { let name, key, data, mac: String; let truncatedToBytes: Int? }

    @Test func rfc4231() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "hmac-sha256.json")
        #expect(f.source.contains("RFC 4231"))
        #expect(f.vectors.count == 7)
        for v in f.vectors {
            let expected = try hx(v.mac)
            let key = try secret(v.key), data = try hx(v.data)
            let code = HMACSHA256.authenticationCode(for: data, using: key)
            #expect(code.count == 32)
            // Case 5 publishes only the first 128 bits: compare that prefix.
            #expect(Array(code.prefix(v.truncatedToBytes ?? 32)) == expected, "\(v.name)")
            #expect(Array(HMACSHA256.authenticationCode(for: data, publicKey: try hx(v.key)).prefix(expected.count)) == expected)
            if v.truncatedToBytes == nil {
                let valid = HMACSHA256.isValidAuthenticationCode(expected, for: data, using: key)
                let flippedTag = HMACSHA256.isValidAuthenticationCode(flipped(expected, at: 31), for: data, using: key)
                let wrongKey = try SecretBytes(copying: flipped(hx(v.key), at: 0))
                let underWrongKey = HMACSHA256.isValidAuthenticationCode(expected, for: data, using: wrongKey)
                let truncatedTag = HMACSHA256.isValidAuthenticationCode(Array(expected.dropLast()), for: data, using: key)
                let truncatedMessage = HMACSHA256.isValidAuthenticationCode(expected, for: data.dropLast(), using: key)
                #expect(valid)
                #expect(!flippedTag, "flipped tag byte")
                #expect(!underWrongKey, "wrong key")
                #expect(!truncatedTag, "truncated tag")
                #expect(!truncatedMessage, "truncated message")
            } else {
                // A truncated MAC is not a valid full-length code.
                let accepted = HMACSHA256.isValidAuthenticationCode(expected, for: data, using: key)
                #expect(!accepted)
            }
        }
    }
}

@Suite struct PBKDF2KnownAnswerTests {
    struct V: Decodable { let name, password, salt, dk, source: String; let iterations, length: Int }

    @Test func rfc7914AndHashlib() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "pbkdf2-sha256.json")
        #expect(f.vectors.count == 3)
        #expect(f.vectors.contains { $0.iterations == 600_000 && $0.source.contains("hashlib") })
        for v in f.vectors {
            let dk = try PBKDF2.deriveKey(password: secret(v.password), salt: hx(v.salt), iterations: v.iterations, outputByteCount: v.length)
            #expect(bytes(of: dk) == (try hx(v.dk)), "\(v.name)")
            if v.iterations == 1 {
                let wrong = try PBKDF2.deriveKey(password: SecretBytes(copying: flipped(hx(v.password), at: 0)), salt: hx(v.salt), iterations: 1, outputByteCount: v.length)
                #expect(bytes(of: wrong) != (try hx(v.dk)), "wrong password")
                let more = try PBKDF2.deriveKey(password: secret(v.password), salt: hx(v.salt), iterations: 2, outputByteCount: v.length)
                #expect(bytes(of: more) != (try hx(v.dk)), "other iteration count")
            }
        }
    }

    @Test func refusesBadParameters() throws {
        let pw = try SecretBytes(copying: Array("pw".utf8))
        #expect(throws: CryptoError.self) { _ = try PBKDF2.deriveKey(password: pw, salt: [1], iterations: 0) }
        #expect(throws: CryptoError.self) { _ = try PBKDF2.deriveKey(password: pw, salt: [1], iterations: PBKDF2.maximumIterations + 1) }
        #expect(throws: CryptoError.self) { _ = try PBKDF2.deriveKey(password: pw, salt: [1], iterations: 1, outputByteCount: 0) }
        #expect(throws: CryptoError.self) { _ = try PBKDF2.deriveKey(password: pw, salt: [1], iterations: 1, outputByteCount: 1025) }
    }
}

@Suite struct Argon2idKnownAnswerTests {
    struct V: Decodable { let password, salt, output, source: String; let iterations, memoryKiB: Int }

    @Test func referenceVectorsAtParallelismOne() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "argon2id.json")
        #expect(f.vectors.count == 4)
        #expect(f.vectors.filter { $0.source.contains("argon2-cffi") }.count == 2)
        for v in f.vectors {
            let params = try Argon2id.Parameters(iterations: v.iterations, memoryKiB: v.memoryKiB)
            let key = try Argon2id.deriveKey(password: secret(v.password), salt: hx(v.salt), parameters: params)
            #expect(bytes(of: key) == (try hx(v.output)), "t=\(v.iterations) m=\(v.memoryKiB)")
        }
        // Negative: a one-bit change in the salt changes the key; a 15-byte salt is refused.
        let v = f.vectors[1]
        let params = try Argon2id.Parameters(iterations: v.iterations, memoryKiB: v.memoryKiB)
        let other = try Argon2id.deriveKey(password: secret(v.password), salt: flipped(hx(v.salt), at: 0), parameters: params)
        #expect(bytes(of: other) != (try hx(v.output)))
        #expect(throws: CryptoError.invalidSaltLength(expected: 16, actual: 15)) {
            _ = try Argon2id.deriveKey(password: secret(v.password), salt: Array(hx(v.salt).dropLast()), parameters: params)
        }
    }

    /// Each bound crossed by one: t below 2, m below 19 MiB, t above 10, m above 1 GiB,
    /// t × m above 4 GiB-passes, and nonsense values.
    static let outOfBounds: [(Int, Int)] = [
        (1, 19 * 1024), (2, 19 * 1024 - 1), (11, 19 * 1024), (2, 1024 * 1024 + 1), (5, 1024 * 1024),
        (0, 0), (-1, 65536), (2, Int.max), (Int.max, 65536),
    ]
    static let atBounds: [(Int, Int)] = [(2, 19 * 1024), (10, 19 * 1024), (4, 1024 * 1024), (2, 1024 * 1024), (3, 65536)]

    @Test(arguments: outOfBounds)
    func parametersOutsideTheBoundsAreRefused(t: Int, m: Int) {
        #expect(throws: CryptoError.self) { try Argon2id.Parameters(iterations: t, memoryKiB: m) }
    }

    @Test(arguments: atBounds)
    func parametersAtTheBoundsAreAccepted(t: Int, m: Int) throws {
        let p = try Argon2id.Parameters(iterations: t, memoryKiB: m)
        #expect(p.iterations == t && p.memoryKiB == m)
    }
}

@Suite struct XChaCha20Poly1305KnownAnswerTests {
    struct Draft: Decodable { let name, key, nonce, aad, plaintext, ciphertext, tag: String }
    struct WP: Decodable { let tcId: Int; let comment, key, iv, aad, msg, ct, tag, result: String }
    struct File: Decodable { let source: String; let draft: [Draft]; let wycheproof: [WP] }

    @Test func draftA31() throws {
        let f = try Fixtures.load(File.self, from: "xchacha20poly1305.json")
        let v = try #require(f.draft.first)
        let key = try secret(v.key), nonce = try hx(v.nonce), aad = try hx(v.aad), pt = try hx(v.plaintext)
        let sealed = try XChaCha20Poly1305.seal(pt, using: key, nonce: nonce, authenticating: aad)
        #expect(sealed == (try hx(v.ciphertext) + hx(v.tag)))
        #expect(try XChaCha20Poly1305.open(sealed, using: key, nonce: nonce, authenticating: aad) == pt)
        // Negatives.
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(flipped(sealed, at: sealed.count - 1), using: key, nonce: nonce, authenticating: aad) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(flipped(sealed, at: 0), using: key, nonce: nonce, authenticating: aad) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(sealed, using: SecretBytes(randomCount: 32), nonce: nonce, authenticating: aad) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(Array(sealed.dropLast()), using: key, nonce: nonce, authenticating: aad) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(Array(sealed.prefix(15)), using: key, nonce: nonce, authenticating: aad) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(sealed, using: key, nonce: nonce, authenticating: aad + [0]) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(sealed, using: key, nonce: flipped(nonce, at: 23), authenticating: aad) }
        #expect(throws: CryptoError.invalidNonceLength(expected: 24, actual: 12)) { try XChaCha20Poly1305.open(sealed, using: key, nonce: Array(nonce.prefix(12)), authenticating: aad) }
        #expect(throws: CryptoError.invalidKeyLength(expected: 32, actual: 16)) { try XChaCha20Poly1305.open(sealed, using: SecretBytes(randomCount: 16), nonce: nonce, authenticating: aad) }
    }

    /// Wycheproof: every `valid` case opens and re-seals to the same bytes, every `invalid`
    /// one is refused. (The file has no `acceptable` cases; one would be treated as invalid.)
    @Test func wycheproof() throws {
        let f = try Fixtures.load(File.self, from: "xchacha20poly1305.json")
        #expect(f.wycheproof.count > 100)
        for t in f.wycheproof {
            let key = try secret(t.key), iv = try hx(t.iv), aad = try hx(t.aad), msg = try hx(t.msg)
            let sealed = try hx(t.ct) + hx(t.tag)
            let opened = try? XChaCha20Poly1305.open(sealed, using: key, nonce: iv, authenticating: aad)
            if t.result == "valid" {
                #expect(opened == msg, "tcId \(t.tcId)")
                #expect(try XChaCha20Poly1305.seal(msg, using: key, nonce: iv, authenticating: aad) == sealed, "tcId \(t.tcId)")
            } else {
                #expect(opened == nil, "tcId \(t.tcId) (\(t.comment)) must be rejected")
            }
        }
    }

    @Test func randomNonceSealAndSecretWrapping() throws {
        let key = try SecretBytes(randomCount: 32)
        let a = try XChaCha20Poly1305.seal([1, 2, 3], using: key, authenticating: [9])
        let b = try XChaCha20Poly1305.seal([1, 2, 3], using: key, authenticating: [9])
        #expect(a != b)
        #expect(a.count == 3 + XChaCha20Poly1305.overheadByteCount)
        #expect(try XChaCha20Poly1305.open(a, using: key, authenticating: [9]) == [1, 2, 3])
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(a, using: key, authenticating: [8]) }
        #expect(throws: CryptoError.authenticationFailed) { try XChaCha20Poly1305.open(Array(a.prefix(39)), using: key) }
        let inner = try SecretBytes(randomCount: 32)
        let wrapped = try XChaCha20Poly1305.sealSecret(inner, using: key, authenticating: [7])
        let unwrapped = try XChaCha20Poly1305.openSecret(wrapped, using: key, authenticating: [7])
        let same = unwrapped.constantTimeEquals(inner)
        #expect(same)
        #expect(throws: CryptoError.authenticationFailed) { _ = try XChaCha20Poly1305.openSecret(wrapped, using: key, authenticating: [6]) }
        #expect(throws: CryptoError.authenticationFailed) { _ = try XChaCha20Poly1305.openSecret(flipped(wrapped, at: wrapped.count - 1), using: key, authenticating: [7]) }
        #expect(throws: CryptoError.authenticationFailed) { _ = try XChaCha20Poly1305.openSecret(Array(wrapped.prefix(40)), using: key) }
    }
}

@Suite struct AES256GCMKnownAnswerTests {
    struct WP: Decodable { let tcId: Int; let comment, key, iv, aad, msg, ct, tag, result: String }
    struct NIST: Decodable { let file: String; let count: Int; let key, iv, aad, pt, ct, tag, result: String }
    struct File: Decodable { let source: String; let wycheproof: [WP]; let nist: [NIST] }

    static let backends: [AES256GCM.Backend] = [.libsodium, .openSSL]

    /// Whether a backend can run here (libsodium's needs AES-NI). Checked inside the test with
    /// `#require`, so a machine without it fails loudly instead of skipping.
    static func usable(_ backend: AES256GCM.Backend) -> Bool {
        backend != .libsodium || Sodium.hardwareAESGCMAvailable
    }

    @Test(arguments: backends)
    func wycheproof(backend: AES256GCM.Backend) throws {
        try #require(Self.usable(backend), "libsodium AES-GCM needs AES-NI on this CPU")
        let f = try Fixtures.load(File.self, from: "aes256gcm.json")
        #expect(f.wycheproof.count > 50)
        #expect(f.wycheproof.contains { $0.result == "invalid" })
        for t in f.wycheproof {
            let key = try secret(t.key), iv = try hx(t.iv), aad = try hx(t.aad), msg = try hx(t.msg)
            let sealed = try hx(t.ct) + hx(t.tag)
            let opened = try? AES256GCM.open(sealed, using: key, nonce: iv, authenticating: aad, backend: backend)
            if t.result == "valid" {
                #expect(opened == msg, "tcId \(t.tcId)")
                #expect(try AES256GCM.seal(msg, using: key, nonce: iv, authenticating: aad, backend: backend) == sealed, "tcId \(t.tcId)")
            } else {
                #expect(opened == nil, "tcId \(t.tcId) (\(t.comment)) must be rejected")
            }
        }
    }

    @Test(arguments: backends)
    func nist(backend: AES256GCM.Backend) throws {
        try #require(Self.usable(backend))
        let f = try Fixtures.load(File.self, from: "aes256gcm.json")
        #expect(f.nist.count >= 100)
        #expect(f.nist.contains { $0.result == "invalid" })
        for t in f.nist {
            let key = try secret(t.key), iv = try hx(t.iv), aad = try hx(t.aad), pt = try hx(t.pt)
            let sealed = try hx(t.ct) + hx(t.tag)
            let opened = try? AES256GCM.open(sealed, using: key, nonce: iv, authenticating: aad, backend: backend)
            if t.result == "valid" {
                #expect(opened == pt, "\(t.file) #\(t.count)")
                #expect(try AES256GCM.seal(pt, using: key, nonce: iv, authenticating: aad, backend: backend) == sealed, "\(t.file) #\(t.count)")
            } else {
                #expect(opened == nil, "\(t.file) #\(t.count) must fail")
            }
        }
    }

    @Test(arguments: backends)
    func negatives(backend: AES256GCM.Backend) throws {
        try #require(Self.usable(backend))
        let f = try Fixtures.load(File.self, from: "aes256gcm.json")
        let t = try #require(f.wycheproof.first { $0.result == "valid" && !$0.msg.isEmpty && !$0.aad.isEmpty })
        let key = try secret(t.key), iv = try hx(t.iv), aad = try hx(t.aad)
        let sealed = try hx(t.ct) + hx(t.tag)
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(flipped(sealed, at: sealed.count - 1), using: key, nonce: iv, authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(flipped(sealed, at: 0), using: key, nonce: iv, authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(sealed, using: SecretBytes(randomCount: 32), nonce: iv, authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(Array(sealed.dropLast()), using: key, nonce: iv, authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(Array(sealed.prefix(15)), using: key, nonce: iv, authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(sealed, using: key, nonce: iv, authenticating: aad + [1], backend: backend) }
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(sealed, using: key, nonce: flipped(iv, at: 0), authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.invalidNonceLength(expected: 12, actual: 16)) { try AES256GCM.open(sealed, using: key, nonce: iv + [0, 0, 0, 0], authenticating: aad, backend: backend) }
        #expect(throws: CryptoError.invalidKeyLength(expected: 32, actual: 16)) { try AES256GCM.seal([1], using: SecretBytes(randomCount: 16), nonce: iv, backend: backend) }
        // Empty plaintext and empty AD round-trip.
        let k = try SecretBytes(randomCount: 32), n = SecureRandom.bytes(count: 12)
        let tagOnly = try AES256GCM.seal([], using: k, nonce: n, backend: backend)
        #expect(tagOnly.count == 16)
        #expect(try AES256GCM.open(tagOnly, using: k, nonce: n, backend: backend) == [])
        #expect(throws: CryptoError.authenticationFailed) { try AES256GCM.open(flipped(tagOnly, at: 3), using: k, nonce: n, backend: backend) }
    }

    @Test func backendsAgree() throws {
        try #require(Sodium.hardwareAESGCMAvailable)
        let k = try SecretBytes(randomCount: 32), n = SecureRandom.bytes(count: 12)
        for size in [0, 1, 15, 16, 17, 4096, 65_537] {
            let m = SecureRandom.bytes(count: size)
            let a = try AES256GCM.seal(m, using: k, nonce: n, authenticating: [1, 2], backend: .libsodium)
            let b = try AES256GCM.seal(m, using: k, nonce: n, authenticating: [1, 2], backend: .openSSL)
            #expect(a == b, "size \(size)")
            #expect(try AES256GCM.open(a, using: k, nonce: n, authenticating: [1, 2], backend: .openSSL) == m)
            #expect(try AES256GCM.open(b, using: k, nonce: n, authenticating: [1, 2], backend: .libsodium) == m)
        }
    }
}

@Suite struct SHA256KnownAnswerTests {
    struct V: Decodable { let message, digest: String }

    @Test func nistShortMessages() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "sha256.json")
        #expect(f.source.contains("NIST"))
        #expect(f.vectors.count == 65)
        for v in f.vectors {
            let msg = try hx(v.message), digest = try hx(v.digest)
            #expect(SHA256.hash(msg) == digest, "\(msg.count)-byte message")
            // Incremental hashing in uneven pieces gives the same digest.
            var hasher = SHA256.Hasher()
            var i = 0, step = 1
            while i < msg.count {
                let end = min(i + step, msg.count)
                hasher.update(msg[i..<end])
                i = end
                step += 2
            }
            #expect(hasher.finalize() == digest)
            if !msg.isEmpty { #expect(SHA256.hash(flipped(msg, at: 0)) != digest) }
        }
    }
}
