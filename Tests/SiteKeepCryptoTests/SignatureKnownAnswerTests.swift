import Foundation
import Testing
@testable import SiteKeepCrypto
import SiteKeepTestSupport

@Suite struct Ed25519KnownAnswerTests {
    struct V: Decodable { let name, secretKey, publicKey, message, signature: String }

    @Test func rfc8032() throws {
        let f = try Fixtures.load(Sourced<V>.self, from: "ed25519.json")
        #expect(f.source.contains("RFC 8032"))
        #expect(f.vectors.map(\.name) == ["TEST 1", "TEST 2", "TEST 3", "TEST 1024", "TEST SHA(abc)"])
        for v in f.vectors {
            let key = try Ed25519.PrivateKey(seed: secret(v.secretKey))
            let msg = try hx(v.message), sig = try hx(v.signature)
            #expect(key.publicKey.rawRepresentation == (try hx(v.publicKey)), "\(v.name)")
            #expect(key.signature(for: msg) == sig, "\(v.name)")
            let pub = try Ed25519.PublicKey(rawRepresentation: hx(v.publicKey))
            #expect(pub.isValidSignature(sig, for: msg), "\(v.name)")
            // Negatives: bad signature (R and S halves), wrong message, wrong key, truncated.
            #expect(!pub.isValidSignature(flipped(sig, at: 0), for: msg))
            #expect(!pub.isValidSignature(flipped(sig, at: 40), for: msg))
            #expect(!pub.isValidSignature(sig, for: msg + [0]))
            if !msg.isEmpty { #expect(!pub.isValidSignature(sig, for: flipped(msg, at: 0))) }
            #expect(!pub.isValidSignature(Array(sig.dropLast()), for: msg))
            #expect(!pub.isValidSignature(sig + [0], for: msg))
            let other = try Ed25519.PrivateKey()
            #expect(!other.publicKey.isValidSignature(sig, for: msg), "wrong key")
        }
        // S + L (non-canonical S) must be refused.
        let v = f.vectors[0]
        var sig = try hx(v.signature)
        let l: [UInt8] = [0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
                          0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10]
        var carry = 0
        for i in 0..<32 {
            let sum = Int(sig[32 + i]) + Int(l[i]) + carry
            sig[32 + i] = UInt8(sum & 0xff)
            carry = sum >> 8
        }
        #expect(carry == 0)
        #expect(!(try Ed25519.PublicKey(rawRepresentation: hx(v.publicKey))).isValidSignature(sig, for: try hx(v.message)))
    }

    @Test func refusesMalformedKeysAndSeeds() throws {
        #expect(throws: CryptoError.self) { try Ed25519.PublicKey(rawRepresentation: [UInt8](repeating: 1, count: 31)) }
        #expect(throws: CryptoError.self) { try Ed25519.PublicKey(rawRepresentation: [UInt8](repeating: 1, count: 33)) }
        #expect(throws: CryptoError.self) { _ = try Ed25519.PrivateKey(seed: SecretBytes(randomCount: 31)) }
    }
}

@Suite struct P256KnownAnswerTests {
    struct T: Decodable { let tcId: Int; let comment: String; let flags: [String]; let msg, sig, result: String }
    struct G: Decodable { let publicKeyDer, publicKeyPem: String; let tests: [T] }
    struct File: Decodable { let source: String; let testGroups: [G] }

    /// Wycheproof DER signatures. `valid` must parse and verify, `invalid` must fail to parse or
    /// fail to verify. `acceptable` (none in the current file) is treated as must-reject:
    /// SiteKeep's DER parser is strict, so BER leniencies Wycheproof calls acceptable are refused.
    @Test func wycheproofDER() throws {
        let f = try Fixtures.load(File.self, from: "ecdsa-p256-sha256-der.json")
        var counts = (valid: 0, invalid: 0)
        for g in f.testGroups {
            let key = try P256.Signing.PublicKey(derRepresentation: hx(g.publicKeyDer))
            let fromPEM = try P256.Signing.PublicKey(pemRepresentation: g.publicKeyPem)
            #expect(fromPEM == key)
            for t in g.tests {
                let msg = try hx(t.msg)
                let accepted = (try? P256.Signing.Signature(derRepresentation: hx(t.sig))).map { key.isValidSignature($0, for: msg) } ?? false
                if t.result == "valid" {
                    counts.valid += 1
                    #expect(accepted, "tcId \(t.tcId) (\(t.comment)) must verify")
                    // The strict parser round-trips valid signatures byte for byte.
                    #expect(try P256.Signing.Signature(derRepresentation: hx(t.sig)).derRepresentation == (try hx(t.sig)))
                } else {
                    counts.invalid += 1
                    #expect(!accepted, "tcId \(t.tcId) (\(t.comment)) \(t.flags) must be rejected")
                }
            }
        }
        #expect(counts.valid > 100)
        #expect(counts.invalid > 100)
    }

    @Test func wycheproofP1363() throws {
        let f = try Fixtures.load(File.self, from: "ecdsa-p256-sha256-p1363.json")
        var counts = (valid: 0, invalid: 0)
        for g in f.testGroups {
            let key = try P256.Signing.PublicKey(derRepresentation: hx(g.publicKeyDer))
            for t in g.tests {
                let msg = try hx(t.msg)
                let accepted = (try? P256.Signing.Signature(rawRepresentation: hx(t.sig))).map { key.isValidSignature($0, for: msg) } ?? false
                if t.result == "valid" {
                    counts.valid += 1
                    #expect(accepted, "tcId \(t.tcId) (\(t.comment)) must verify")
                } else {
                    counts.invalid += 1
                    #expect(!accepted, "tcId \(t.tcId) (\(t.comment)) \(t.flags) must be rejected")
                }
            }
        }
        #expect(counts.valid > 100)
        #expect(counts.invalid > 50)
    }

    struct R6979: Decodable {
        struct V: Decodable { let message, r, s: String }
        let source, privateKey, publicKeyDer: String
        let vectors: [V]
    }

    @Test func rfc6979A25() throws {
        let f = try Fixtures.load(R6979.self, from: "ecdsa-p256-rfc6979.json")
        #expect(f.source.contains("RFC 6979"))
        #expect(f.vectors.count == 2)
        let key = try P256.Signing.PublicKey(derRepresentation: hx(f.publicKeyDer))
        for v in f.vectors {
            let raw = try hx(v.r) + hx(v.s)
            let msg = try hx(v.message)
            let sig = try P256.Signing.Signature(rawRepresentation: raw)
            #expect(key.isValidSignature(sig, for: msg), "message \(String(decoding: msg, as: UTF8.self))")
            #expect(try P256.Signing.Signature(derRepresentation: sig.derRepresentation) == sig)
            #expect(!key.isValidSignature(try P256.Signing.Signature(rawRepresentation: flipped(raw, at: 63)), for: msg), "bad signature")
            #expect(!key.isValidSignature(try P256.Signing.Signature(rawRepresentation: flipped(raw, at: 0)), for: msg), "bad r")
            #expect(!key.isValidSignature(sig, for: msg + [0]), "wrong message")
            let other = try P256.Signing.PrivateKey()
            #expect(!other.publicKey.isValidSignature(sig, for: msg), "wrong key")
        }
    }

    @Test func signVerifyRoundTripAndRefusals() throws {
        let key = try P256.Signing.PrivateKey()
        let sig = try key.signature(for: [1, 2, 3])
        #expect(sig.rawRepresentation.count == 64)
        #expect(key.publicKey.isValidSignature(sig, for: [1, 2, 3]))
        #expect(!key.publicKey.isValidSignature(sig, for: [1, 2, 4]))
        #expect(key.publicKey.derRepresentation.count == 91)
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(rawRepresentation: Array(sig.rawRepresentation.dropLast())) }
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(rawRepresentation: sig.rawRepresentation + [0]) }
    }
}

@Suite struct DERStrictnessTests {
    /// A valid DER signature from RFC 6979 A.2.5, re-encoded; then BER variants of it.
    func base() throws -> [UInt8] {
        let f = try Fixtures.load(P256KnownAnswerTests.R6979.self, from: "ecdsa-p256-rfc6979.json")
        return try P256.Signing.Signature(rawRepresentation: hx(f.vectors[0].r) + hx(f.vectors[0].s)).derRepresentation
    }

    @Test func refusesBERVariantsAndGarbage() throws {
        let der = try base()
        #expect(throws: Never.self) { try P256.Signing.Signature(derRepresentation: der) }
        // Trailing byte.
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: der + [0]) }
        // Truncated.
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: Array(der.dropLast())) }
        // Long-form length for the SEQUENCE (0x81 nn) where short form is required.
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: [0x30, 0x81, der[1]] + der[2...]) }
        // Wrong outer tag.
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: [0x31] + der.dropFirst()) }
        // Empty and oversized inputs.
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: []) }
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: [UInt8](repeating: 0x30, count: 200)) }
        // An extra leading zero on r (non-minimal INTEGER).
        let rLen = Int(der[3])
        let r = Array(der[4..<(4 + rLen)])
        let rest = Array(der[(4 + rLen)...])
        let padded: [UInt8] = [0x30, UInt8(der.count - 2 + 1), 0x02, UInt8(rLen + 1), 0x00] + r + rest
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: padded) }
        // Negative r: drop r's leading 0x00 so its top bit reads as a sign bit.
        if r.first == 0x00 {
            let negative: [UInt8] = [0x30, UInt8(der.count - 2 - 1), 0x02, UInt8(rLen - 1)] + r.dropFirst() + rest
            #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: negative) }
        }
    }

    @Test func refusesZeroAndNegativeIntegers() throws {
        // SEQUENCE { INTEGER 0, INTEGER 1 }
        let zeroR: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x01]
        let parsed = try? P256.Signing.Signature(derRepresentation: zeroR)
        if let parsed {
            let key = try P256.Signing.PrivateKey()
            #expect(!key.publicKey.isValidSignature(parsed, for: []))
        }
        // SEQUENCE { INTEGER -1, INTEGER 1 }
        let negativeR: [UInt8] = [0x30, 0x06, 0x02, 0x01, 0xff, 0x02, 0x01, 0x01]
        #expect(throws: CryptoError.self) { try P256.Signing.Signature(derRepresentation: negativeR) }
    }
}

@Suite struct KeyEncodingTests {
    @Test func pkcs8AndSPKIRoundTrips() throws {
        let pem = try Fixtures.text("keys/p256-pkcs8.pem")
        let key = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: Array(pem.utf8)))
        let spki = try P256.Signing.PublicKey(pemRepresentation: Fixtures.text("keys/p256-spki.pem"))
        #expect(key.publicKey == spki)
        #expect(spki.pemRepresentation == (try Fixtures.text("keys/p256-spki.pem")))
        // DER in, same key out; PEM out, same key in.
        let der = try key.pkcs8DER()
        let again = try P256.Signing.PrivateKey(pkcs8: der)
        #expect(again.publicKey == key.publicKey)
        let pemOut = try key.pkcs8PEM()
        let text = bytes(of: pemOut)
        #expect(text.starts(with: Array("-----BEGIN PRIVATE KEY-----\n".utf8)))
        let third = try P256.Signing.PrivateKey(pkcs8: pemOut)
        #expect(third.publicKey == key.publicKey)
        let sig = try third.signature(for: [42])
        #expect(spki.isValidSignature(sig, for: [42]))
        // Generated keys round-trip too.
        let fresh = try P256.Signing.PrivateKey()
        let reimported = try P256.Signing.PrivateKey(pkcs8: fresh.pkcs8DER())
        #expect(reimported.publicKey == fresh.publicKey)
        #expect(try P256.Signing.PublicKey(pemRepresentation: fresh.publicKey.pemRepresentation) == fresh.publicKey)
    }

    /// Signing and verifying run on `ECDSA_do_sign`/`ECDSA_do_verify` and a byte-level SPKI check
    /// (not OpenSSL's decoder framework): an independent verifier, the `openssl` command, must
    /// accept what SiteKeep signs, and SiteKeep must accept what `openssl` signs.
    @Test func signaturesInteroperateWithTheOpenSSLCommand() throws {
        let openssl = "/usr/bin/openssl"
        guard FileManager.default.isExecutableFile(atPath: openssl) else { return }
        let dir = try Fixtures.temporaryDirectory("p256-interop")
        defer { try? FileManager.default.removeItem(at: dir) }
        let key = try P256.Signing.PrivateKey()
        let message = Array("SiteKeep signs; openssl checks".utf8)
        let sig = try key.signature(for: message)
        try Data(key.publicKey.pemRepresentation.utf8).write(to: dir.appendingPathComponent("pub.pem"))
        try Data(message).write(to: dir.appendingPathComponent("msg"))
        try Data(sig.derRepresentation).write(to: dir.appendingPathComponent("sig.der"))
        #expect(ChildProcess.run(openssl, ["dgst", "-sha256", "-verify", dir.path + "/pub.pem", "-signature", dir.path + "/sig.der", dir.path + "/msg"]) == 0)
        // A changed message fails the same check (so the exit status above means something).
        try Data(message + [0]).write(to: dir.appendingPathComponent("msg2"))
        #expect(ChildProcess.run(openssl, ["dgst", "-sha256", "-verify", dir.path + "/pub.pem", "-signature", dir.path + "/sig.der", dir.path + "/msg2"]) != 0)
        // The other way: openssl signs with the fixture key, SiteKeep verifies.
        let fixtureKey = try Fixtures.directory().appendingPathComponent("keys/p256-pkcs8.pem").path
        #expect(ChildProcess.run(openssl, ["dgst", "-sha256", "-sign", fixtureKey, "-out", dir.path + "/osig.der", dir.path + "/msg"]) == 0)
        let theirs = try P256.Signing.Signature(derRepresentation: Array(Data(contentsOf: dir.appendingPathComponent("osig.der"))))
        let fixturePublic = try P256.Signing.PublicKey(pemRepresentation: Fixtures.text("keys/p256-spki.pem"))
        #expect(fixturePublic.isValidSignature(theirs, for: message))
        #expect(!fixturePublic.isValidSignature(theirs, for: message + [0]))
        #expect(!key.publicKey.isValidSignature(theirs, for: message))
    }

    /// Points the byte-level SPKI check must still refuse: off the curve, the point at infinity's
    /// coordinates, coordinates not below the field prime.
    @Test func publicPointsOffTheCurveAreRefused() throws {
        let der = try PEM.decode(Fixtures.text("keys/p256-spki.pem"), label: "PUBLIC KEY")
        let prefix = Array(der.prefix(der.count - 65))
        let x = Array(der.suffix(64).prefix(32)), y = Array(der.suffix(32))
        var badY = y
        badY[0] ^= 0x80
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: prefix + [0x04] + x + badY) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: prefix + [0x04] + [UInt8](repeating: 0, count: 64)) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: prefix + [0x04] + [UInt8](repeating: 0xff, count: 64)) }
        // The same point with a hybrid-form tag (0x06/0x07) is another encoding of it: refused.
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: prefix + [y[31] & 1 == 0 ? 0x06 : 0x07] + x + y) }
        #expect(try P256.Signing.PublicKey(derRepresentation: prefix + [0x04] + x + y).derRepresentation == der)
    }

    @Test(arguments: ["keys/p384-pkcs8.pem", "keys/ed25519-pkcs8.pem"])
    func wrongCurvePrivateKeysAreRefused(name: String) throws {
        let pem = try Fixtures.text(name)
        #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: Array(pem.utf8))) }
        let der = try PEM.decode(pem, label: "PRIVATE KEY")
        #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: der)) }
    }

    @Test(arguments: ["keys/p384-spki.pem", "keys/ed25519-spki.pem"])
    func wrongCurvePublicKeysAreRefused(name: String) throws {
        let pem = try Fixtures.text(name)
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(pemRepresentation: pem) }
        let der = try PEM.decode(pem, label: "PUBLIC KEY")
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: der) }
    }

    @Test func malformedPEMAndDERAreRefused() throws {
        let pem = try Fixtures.text("keys/p256-spki.pem")
        let der = try PEM.decode(pem, label: "PUBLIC KEY")
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: der + [0]) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: Array(der.dropLast())) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: flipped(der, at: der.count - 1)) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: []) }
        // BER, not DER: the outer SEQUENCE length in long form (0x81 0x59 instead of 0x59).
        #expect(der[0] == 0x30 && der[1] == 0x59)
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: [0x30, 0x81, 0x59] + der[2...]) }
        // The same point in compressed form is a different encoding: SiteKeep stores the 91-byte
        // uncompressed SPKI, so a compressed one is refused rather than kept non-canonically.
        let point = Array(der.suffix(65))
        #expect(point[0] == 0x04)
        let compressed: [UInt8] = [point[64] & 1 == 0 ? 0x02 : 0x03] + point[1...32]
        let prefix = Array(der[2..<(der.count - 65 - 3)])   // AlgorithmIdentifier, unchanged
        let bitString: [UInt8] = [0x03, 34, 0x00] + compressed
        let body = prefix + bitString
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(derRepresentation: [0x30, UInt8(body.count)] + body) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(pemRepresentation: pem.replacingOccurrences(of: "PUBLIC KEY", with: "PRIVATE KEY")) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(pemRepresentation: pem.replacingOccurrences(of: "-----END PUBLIC KEY-----", with: "")) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(pemRepresentation: pem.replacingOccurrences(of: "M", with: "*")) }
        #expect(throws: CryptoError.self) { try P256.Signing.PublicKey(pemRepresentation: "") }
        #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: Array("-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----\n".utf8))) }
        #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: [0x30, 0x03, 0x02, 0x01, 0x00])) }
        #expect(throws: CryptoError.self) { _ = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: der)) }
    }
}

@Suite struct WebAuthnPRFKnownAnswerTests {
    struct V: Decodable { let name, input, salt: String }
    struct Outputs: Decodable { let authenticatorCredRandom, output1, output2: String }
    struct File: Decodable { let source: String; let vectors: [V]; let hmacSecret: Outputs }

    @Test func w3cVectors() throws {
        let f = try Fixtures.load(File.self, from: "webauthn-prf.json")
        #expect(f.source.contains("W3C Web Authentication"))
        #expect(f.vectors.count == 2)
        for v in f.vectors {
            #expect(WebAuthnPRF.hmacSecretSalt(forEvalInput: try hx(v.input)) == (try hx(v.salt)), "\(v.name)")
            #expect(WebAuthnPRF.hmacSecretSalt(forEvalInput: flipped(try hx(v.input), at: 0)) != (try hx(v.salt)))
            #expect(SHA256.hash(try hx(v.input)) != (try hx(v.salt)), "the prefix is part of the transform")
        }
        // The authenticator side: output = HMAC-SHA-256(CredRandom, salt).
        let credRandom = try secret(f.hmacSecret.authenticatorCredRandom)
        #expect(HMACSHA256.authenticationCode(for: try hx(f.vectors[0].salt), using: credRandom) == (try hx(f.hmacSecret.output1)))
        #expect(HMACSHA256.authenticationCode(for: try hx(f.vectors[1].salt), using: credRandom) == (try hx(f.hmacSecret.output2)))
    }
}
