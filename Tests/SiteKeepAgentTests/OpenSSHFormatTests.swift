import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepTestSupport

/// The OpenSSH encodings held to published examples and to OpenSSH's own tools: key blobs,
/// fingerprints, signature blobs, SSHSIG and its armour, and the foreign-key verifiers that
/// check a server's host key.
@Suite struct OpenSSHFormatTests {
    static let vectorNames = ["ed25519", "ecdsa256", "ecdsa384", "ecdsa521", "rsa"]

    static func fixture(_ name: String) throws -> String {
        try String(contentsOf: Fixtures.packageRoot().appendingPathComponent("Fixtures/ssh/\(name)"), encoding: .utf8)
    }

    /// RFC 4251 §5's mpint examples, and the writer's sign byte.
    @Test func mpintsEncodeAsRFC4251Shows() throws {
        func mpint(_ magnitude: [UInt8]) -> [UInt8] { var w = SSHWriter(); w.mpint(unsigned: magnitude); return w.bytes }
        #expect(mpint([]) == [0, 0, 0, 0])
        #expect(mpint([0, 0]) == [0, 0, 0, 0])
        #expect(mpint([0x09, 0xa3, 0x78, 0xf9, 0xb2, 0xe3, 0x32, 0xa7]) == [0, 0, 0, 8, 0x09, 0xa3, 0x78, 0xf9, 0xb2, 0xe3, 0x32, 0xa7])
        #expect(mpint([0x80]) == [0, 0, 0, 2, 0x00, 0x80])
        var r = SSHReader([0, 0, 0, 2, 0x00, 0x80, 0, 0, 0, 2, 0x00, 0x7f, 0, 0, 0, 1, 0x80])
        #expect(try r.mpint("a") == [0x80])
        #expect(throws: SSHWireError.invalid(field: "b", reason: "needless leading zero")) { try r.mpint("b") }
        #expect(throws: SSHWireError.invalid(field: "c", reason: "negative")) { try r.mpint("c") }
    }

    /// Every SSHSIG that ssh-keygen made verifies with SiteKeep's verifiers (Ed25519, ECDSA
    /// P-256/384/521, RSA rsa-sha2-512), names the key of its .pub file, and fails for another
    /// message or namespace.
    @Test(arguments: vectorNames) func opensshSignaturesVerify(_ name: String) throws {
        let message = Array(try Self.fixture("message.txt").utf8)
        let sig = try SSHSIG.Signature(blob: try SSHSIG.dearmor(try Self.fixture("\(name).sig")))
        let (key, comment) = try SSHPublicKey.parse(line: try Self.fixture("\(name).pub"))
        #expect(comment == "vector-\(name)")
        #expect(sig.publicKey == key)
        #expect(sig.namespace == "file")
        #expect(sig.isValid(for: message, namespace: "file"))
        #expect(!sig.isValid(for: message + [0x0a], namespace: "file"))
        #expect(!sig.isValid(for: message, namespace: "git"))
        // The same key blob re-encoded is byte-identical (one encoding per key).
        #expect(try SSHPublicKey(blob: key.blob) == key)
        #expect(Base64.encode(key.blob) == String(try Self.fixture("\(name).pub").split(separator: " ")[1]))
    }

    /// SiteKeep's own SSHSIG is byte-for-byte what ssh-keygen writes for the same Ed25519 key and
    /// message (Ed25519 is deterministic): here, against the vector's public key, the structure
    /// and armour of a re-made blob.
    @Test func armourMatchesSSHKeygen() throws {
        let text = try Self.fixture("ed25519.sig")
        let blob = try SSHSIG.dearmor(text)
        #expect(SSHSIG.armor(blob) == text)
        let sig = try SSHSIG.Signature(blob: blob)
        #expect(SSHSIG.blob(publicKey: sig.publicKey.blob, namespace: sig.namespace, hash: sig.hash, signature: sig.signature) == blob)
    }

    /// `ssh-keygen -l` reads a team key's OpenSSH line and prints the fingerprint, size and
    /// family `team show` prints.
    @Test(.enabled(if: OpenSSH.available), arguments: [SigningAlgorithm.ed25519, .p256])
    func sshKeygenAgreesOnFingerprints(_ algorithm: SigningAlgorithm) throws {
        let f = try AgentFixture(keys: [("k", algorithm, nil)])
        let key = try f.sshKey("k")
        let path = f.dir + "/k.pub"
        try Data((key.authorizedKeysLine(comment: "sitekeep:k Team k") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        let r = run(OpenSSH.keygen, ["-l", "-f", path])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out.trimmingCharacters(in: .newlines) == "\(key.bits) \(key.fingerprint) sitekeep:k Team k (\(key.family))")
    }

    /// The SPKI PEM `team show` gives an Ed25519 key lets openssl verify its signatures with no
    /// hand-made DER prefix.
    @Test func ed25519PEMVerifiesWithOpenSSL() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, nil)])
        let info = try f.custodian.teamKeyInfo(id: "k")
        let pem = try #require(info.versions.last?.publicKeyPEM)
        let message = Array("openssl reads this key".utf8)
        let sig = try f.custodian.sign(keyID: "k", message: message, context: .approved("k"))
        try Data(pem.utf8).write(to: URL(fileURLWithPath: f.dir + "/k.pem"))
        try Data(message).write(to: URL(fileURLWithPath: f.dir + "/m"))
        try Data(sig).write(to: URL(fileURLWithPath: f.dir + "/s"))
        let ok = run("/usr/bin/openssl", ["pkeyutl", "-verify", "-pubin", "-inkey", f.dir + "/k.pem", "-rawin", "-in", f.dir + "/m", "-sigfile", f.dir + "/s"])
        #expect(ok.status == 0, "\(ok.out) \(ok.err)")
        // openssl re-encodes the key to the very same DER (one encoding per key).
        let der = run("/usr/bin/openssl", ["pkey", "-pubin", "-in", f.dir + "/k.pem", "-outform", "DER", "-out", f.dir + "/k.der"])
        #expect(der.status == 0, "\(der.err)")
        #expect(try Array(Data(contentsOf: URL(fileURLWithPath: f.dir + "/k.der"))) == Ed25519.PublicKey(rawRepresentation: Base64.decode(info.publicKey)).derRepresentation)
        #expect(try Ed25519.PublicKey(derRepresentation: Ed25519.PublicKey(rawRepresentation: Base64.decode(info.publicKey)).derRepresentation)
            .rawRepresentation == Base64.decode(info.publicKey))
    }

    /// P-256 signature blobs carry r and s as mpints: a top bit set gains a zero byte, leading
    /// zeros go.
    @Test func p256SignatureBlobsUseMPInts() throws {
        var raw = [UInt8](repeating: 0, count: 64)
        raw[0] = 0x80; raw[63] = 1            // r = 0x80 00…00 (top bit), s = 1 (31 leading zeros)
        var r = SSHReader(try SSHSignatureBlob.make(algorithm: .p256, raw: raw))
        #expect(try r.name("alg") == "ecdsa-sha2-nistp256")
        var inner = SSHReader(try r.string("sig"))
        #expect(try inner.string("r") == [0] + raw[0..<32])
        #expect(try inner.string("s") == [1])
        #expect(inner.isAtEnd && r.isAtEnd)
    }

    /// Key blobs are parsed strictly: trailing bytes, wrong lengths, a curve that does not match
    /// the type, a certificate where a plain key is expected, and unknown types are refused.
    @Test func keyBlobsAreStrict() throws {
        let ed = SSHPublicKey.ed25519([UInt8](repeating: 7, count: 32))
        #expect(throws: SSHWireError.self) { try SSHPublicKey(blob: ed.blob + [0]) }
        var short = SSHWriter(); short.string("ssh-ed25519"); short.string([UInt8](repeating: 7, count: 31))
        #expect(throws: SSHWireError.self) { try SSHPublicKey(blob: short.bytes) }
        var mismatch = SSHWriter(); mismatch.string("ecdsa-sha2-nistp256"); mismatch.string("nistp384"); mismatch.string([4] + [UInt8](repeating: 1, count: 96))
        #expect(throws: SSHWireError.self) { try SSHPublicKey(blob: mismatch.bytes) }
        var cert = SSHWriter(); cert.string("ssh-ed25519-cert-v01@openssh.com"); cert.string([1, 2, 3]); cert.string([UInt8](repeating: 7, count: 32)); cert.uint32(9)
        #expect(throws: SSHWireError.self) { try SSHPublicKey(blob: cert.bytes) }
        #expect(try SSHPublicKey(blob: cert.bytes, acceptingCertificates: true) == ed)
        var dsa = SSHWriter(); dsa.string("ssh-dss"); dsa.string([1])
        #expect(throws: SSHWireError.self) { try SSHPublicKey(blob: dsa.bytes) }
    }
}
