import Testing
import SiteKeepCrypto
@testable import SiteKeepCustody
@testable import SiteKeepVault

/// The §1.3 vectors of SGIT-FORMAT.md (checked there against `sgit vault derive-keys`).
enum Vectors {
    static let first: Result<SgitKeys, any Error> = Result { try SgitFixture.keys("sgit_private_vault_some pass phrase:abcd1234") }
    static let second: Result<SgitKeys, any Error> = Result { try SgitFixture.keys("other phrase:pk12ab") }

    /// The exported key material as hex (test-only, through the package export).
    static func hex(_ keys: SgitKeys) throws -> (read: String, write: String?) {
        let secret = try keys.exportForWrapping()
        let bytes = secret.withUnsafeBytes { Array($0) }
        return (Hex.encode(bytes.prefix(32)), bytes.count == 64 ? Hex.encode(bytes.suffix(32)) : nil)
    }
}

@Suite("SgitKeys: parsing and derivation (§1)")
struct SgitKeysTests {
    @Test("§1.3 vector 1: read key, write key, ref/index/branch-ref/cache file ids")
    func vectorOne() throws {
        let keys = try Vectors.first.get()
        #expect(keys.vaultID == "abcd1234")
        #expect(!keys.isReadOnly)
        let hex = try Vectors.hex(keys)
        #expect(hex.read == "2479e29c0460eb7891581ead6ae29903592ab0684c911e98a535235cf3da0912")
        #expect(hex.write == "68e71271a992d19cd172c5fafc806b474d004ea19555177d70e8f26254f03474")
        #expect(keys.namedRefFileID == "ref-pid-muw-4a6c6b871295")
        #expect(keys.branchIndexFileID == "idx-pid-muw-5062d251eb63")
        #expect(keys.branchRefFileID(branchName: "local") == "ref-pid-snw-e9d896c397ea")
        #expect("cch-pid-snw-" + keys.fileIDTail("sg-vault-v1:file-id:cache-value:abcd1234:README.md") == "cch-pid-snw-b59b47b4e20b")
    }

    @Test("§1.3 vector 2 (no prefix)")
    func vectorTwo() throws {
        let keys = try Vectors.second.get()
        let hex = try Vectors.hex(keys)
        #expect(hex.read == "a9b36e58f0ebc25210fcdd7d107e13647609314499c76ce12d69ec0306126a0c")
        #expect(hex.write == "da2eb219b61ef7fe12fbce1afaaa648c1051f755f4a358c9f8f8d7ec321dcfc3")
        #expect(keys.namedRefFileID == "ref-pid-muw-70c383b5447b")
        #expect(keys.branchIndexFileID == "idx-pid-muw-7bb220d5d2d1")
        #expect(keys.branchRefFileID(branchName: "local") == "ref-pid-snw-224eef7e7f36")
    }

    @Test("§1.3: the empty tree's stored bytes and ids, deterministic name_enc")
    func emptyTreeVector() throws {
        let keys = try Vectors.first.get()
        let plain = Array(#"{"schema": "tree_v1", "entries": []}"#.utf8)
        #expect(plain.count == 36)
        let iv = Envelope.deterministicIV(for: plain, key: keys.readKey)
        #expect(Hex.encode(iv) == "d651d8984062c08b10b043fa")
        let stored = try Envelope.sealV1(plain, key: keys.readKey, iv: iv)
        #expect(stored.count == 64)
        #expect(Hex.encode(stored[12..<48]) == "84e5c7f5a201e8cd68fa5bad5aed532fa3f676ee468404dfb773843139be1e8b8dfd1718")
        #expect(Hex.encode(stored[48...]) == "f08554a80c01ece9d5c653b4caecf8c1")
        let digest = Hex.encode(SHA256.hash(stored))
        #expect("obj-cas-imm-" + digest.prefix(12) == "obj-cas-imm-9f5613e8b39d")
        #expect("obj-cas-imm-" + digest.prefix(32) == "obj-cas-imm-9f5613e8b39dc12bbf17287482edf2fb")
        #expect(try Envelope.open(stored, key: keys.readKey, inflateLimit: 100) == plain)

        let docs = Array("docs".utf8)
        let docsIV = Envelope.deterministicIV(for: docs, key: keys.readKey)
        #expect(Hex.encode(docsIV) == "6dcf7b23c4f0625562d3958a")
        #expect(Base64.encode(try Envelope.sealV1(docs, key: keys.readKey, iv: docsIV)) == "bc97I8TwYlVi05WKAf5lwLdz6/JWlwEpohOHptMuJSw=")
        let src = Array("src".utf8)
        #expect(Base64.encode(try Envelope.sealV1(src, key: keys.readKey, iv: Envelope.deterministicIV(for: src, key: keys.readKey)))
                == "kL2Y35R3tfNAhAinojzZH4dW8Ngkh3GpV6pXc2xUhw==")
    }

    @Test("export for wrapping and re-import: same keys, no PBKDF2")
    func wrapRoundTrip() throws {
        let keys = try Vectors.first.get()
        let clock = ContinuousClock()
        var again: SgitKeys?
        let took = try clock.measure { again = try SgitKeys.importWrapped(try keys.exportForWrapping(), vaultID: "abcd1234") }
        let imported = try #require(again)
        #expect(took < .milliseconds(50))   // PBKDF2 at 600k would take ~200 ms per key
        #expect(try Vectors.hex(imported).read == Vectors.hex(keys).read)
        #expect(try Vectors.hex(imported).write == Vectors.hex(keys).write)
        #expect(imported.namedRefFileID == "ref-pid-muw-4a6c6b871295")
        #expect(throws: SgitKeyError.invalidVaultID) { try SgitKeys.importWrapped(try keys.exportForWrapping(), vaultID: "ABCD") }
        #expect(throws: SgitKeyError.malformedWrappedKey(5)) { try SgitKeys.importWrapped(try SecretBytes(randomCount: 5), vaultID: "abcd1234") }
    }

    @Test("a read key (any read prefix, or bare) gives read-only keys without PBKDF2")
    func readKeyForms() throws {
        let hex = "2479e29c0460eb7891581ead6ae29903592ab0684c911e98a535235cf3da0912"
        for text in ["\(hex):abcd1234", "sgit_private_read_\(hex):abcd1234", "sgit_public_read_\(hex):abcd1234", "  sgit_rk1_\(hex):abcd1234\n"] {
            let keys = try SgitFixture.keys(text)
            #expect(keys.isReadOnly)
            #expect(keys.writeKey == nil)
            #expect(keys.vaultID == "abcd1234")
            #expect(keys.namedRefFileID == "ref-pid-muw-4a6c6b871295")
            #expect(try Vectors.hex(keys).read == hex)
            #expect(try Vectors.hex(keys).write == nil)
        }
        // As in sgit (checked with `sgit vault derive-keys`), the form is decided by the text, not
        // the prefix: 64 lowercase hex after a vault prefix is a read key…
        let vk = try SgitFixture.keys("sgit_private_vault_\(hex):abcd1234")
        #expect(vk.isReadOnly)
        #expect(try Vectors.hex(vk).read == hex)
        // …and anything else after a read prefix is a passphrase (sgit: read key 07aab176…).
        let pass = try SgitFixture.keys("sgit_private_read_notahexkey:abcd1234")
        #expect(!pass.isReadOnly)
        #expect(try Vectors.hex(pass).read == "07aab176bfbaa6f68e2017e14c97168abc9770ec31e5201155e7f70c10ac29b7")
        // Upper-case hex is not a read key either (sgit: a passphrase, read key 4de6e222…).
        let upper = try SgitFixture.keys("sgit_vk1_" + hex.uppercased() + ":abcd1234")
        #expect(try Vectors.hex(upper).read == "4de6e222a0921d66c567ff425a8bfff03e27eb057c324084d62e05e511faa98b")
    }

    @Test("key text is refused with a clear error that never echoes the secret")
    func refusals() throws {
        let cases: [(String, SgitKeyError)] = [
            ("no colon here", .malformedKey("there is no ':' before the vault id")),
            (":abcd1234", .malformedKey("the passphrase or the vault id is empty")),
            ("secretpass:", .malformedKey("the passphrase or the vault id is empty")),
            ("secretpass:ABCD1234", .invalidVaultID),
            ("secretpass:abc", .invalidVaultID),
            ("secretpass:abcd-1234", .invalidVaultID),
            ("secretpass:" + String(repeating: "a", count: 25), .invalidVaultID),
            ("sgit_private_vault_secretpass:ab cd", .invalidVaultID),
        ]
        for (text, expected) in cases {
            let error = #expect(throws: SgitKeyError.self) { try SgitFixture.keys(text) }
            #expect(error == expected, "for \(text)")
            #expect(!(error?.description.contains("secretpass") ?? true))
        }
    }

    @Test("the passphrase is everything before the LAST colon; the prefix and outer whitespace are not part of it")
    func lastColonAndPrefix() throws {
        let id1 = try SgitKeys.vaultID(ofKeyText: SecretBytes(copying: Array("a:b:c d:wxyz".utf8)))
        #expect(id1 == "wxyz")
        // Prefixed and bare forms derive the same keys (vector 1 with and without the prefix).
        let bare = try SgitFixture.keys("  some pass phrase:abcd1234\n")
        #expect(try Vectors.hex(bare).read == Vectors.hex(Vectors.first.get()).read)
        // sgit strips like Python's str.strip(): Unicode spaces too (checked with `sgit vault derive-keys`).
        #expect(try SgitKeys.vaultID(ofKeyText: SecretBytes(copying: Array("\u{a0}\u{1f}pass:abcd1234\u{3000}\u{2029}".utf8))) == "abcd1234")
        #expect(throws: SgitKeyError.invalidVaultID) {
            try SgitKeys.vaultID(ofKeyText: SecretBytes(copying: Array("caf\u{e9} pass\u{a0}:abcd1234\u{e9}".utf8)))
        }
        let unicodeTrimmed = try SgitFixture.keys("\u{a0}some pass phrase:abcd1234\u{3000}")
        #expect(try Vectors.hex(unicodeTrimmed).read == "2479e29c0460eb7891581ead6ae29903592ab0684c911e98a535235cf3da0912")
    }
}
