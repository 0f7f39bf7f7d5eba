import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault

@Suite("Vault paths, ids and strict parsing")
struct VaultUnitTests {
    @Test("request paths: '..', absolute, NUL, empty segments, control characters are refused")
    func pathSafety() throws {
        for bad in ["../x", "a/../b", "..", "/etc/passwd", "/", "a//b", "a/\u{0}b", "./a", "a/.", "a\nb", "//"] {
            #expect(throws: VaultError.self, "\(bad.debugDescription)") { try VaultPath(validating: bad) }
        }
        let e = #expect(throws: VaultError.self) { try VaultPath(validating: "docs/../../etc") }
        #expect(e?.description.contains("'..' segments are refused") == true)
        #expect(try VaultPath(validating: "") == .root)
        #expect(try VaultPath(validating: "docs/").string == "docs")
        #expect(try VaultPath(validating: "a b/c..d/.hidden").segments.count == 3)
    }

    @Test("NFC and NFD paths are different paths, ordered by UTF-8 bytes")
    func unicodeBytes() throws {
        let nfc = try VaultPath(validating: "caf\u{e9}.txt"), nfd = try VaultPath(validating: "cafe\u{301}.txt")
        #expect("caf\u{e9}.txt" == "cafe\u{301}.txt")     // what String equality would wrongly do
        #expect(nfc != nfd)
        #expect(Set([nfc, nfd]).count == 2)
        #expect(nfd < nfc)                                  // 'e' (0x65) < 0xC3
    }

    @Test("object ids: both widths, normalised, everything else refused")
    func objectIDs() {
        #expect(ObjectID("obj-cas-imm-9f5613e8b39d")?.width == 12)
        #expect(ObjectID("obj-cas-imm-9f5613e8b39dc12bbf17287482edf2fb")?.width == 32)
        #expect(ObjectID(" OBJ-CAS-IMM-9F5613E8B39D ")?.rawValue == "obj-cas-imm-9f5613e8b39d")
        for bad in ["obj-cas-imm-9f5613e8b39", "obj-cas-imm-9f5613e8b39d0", "obj-cas-imm-../../x", "obj-cas-imm-9f5613e8b39g",
                    "../data/obj-cas-imm-9f5613e8b39d", "obj-cas-imm-9f5613e8b39d/x", ""] {
            #expect(ObjectID(bad) == nil, "\(bad)")
        }
        #expect(Identifiers.refID("ref-pid-snw-e9d896c397ea") != nil)
        #expect(Identifiers.refID("ref-pid-snw-../../../x") == nil)
        #expect(Identifiers.keyID("key-rnd-imm-1a064d7bd08a7250") != nil)
        #expect(Identifiers.keyID("key-rnd-imm-1a06") == nil)
    }

    static let exampleCommit = #"{"schema": "commit_v1", "tree_id": "obj-cas-imm-9f5613e8b39d", "message_enc": "d0dZF6W5JxRNvAbbHI1MGp6ll01Rtf1HVJGdtZTVzzM=", "branch_id": "branch-clone-e4f153e46c4a9de4", "signature": "kj4bABpG83UEHBUIyv91h4WnxnTL1iyLGFSP6Loz1v+1vALA6bbjGo78mtBnqyWgA3J24/x1fOfmb6IRCa9Bjw==", "author_key_id": "key-rnd-imm-1a064d7bd08a7250", "author_signature": null, "parents": [], "timestamp_ms": 1795957712240, "attestations": []}"#

    @Test("§4.4: canonical signing bytes of the example commit")
    func canonicalSigningBytes() throws {
        let id = try #require(ObjectID("obj-cas-imm-000000000000"))
        let c = try Commit.parse(Array(Self.exampleCommit.utf8), id: id)
        let expected = #"{"attestations":[],"author_key_id":"key-rnd-imm-1a064d7bd08a7250","author_signature":null,"branch_id":"branch-clone-e4f153e46c4a9de4","message_enc":"d0dZF6W5JxRNvAbbHI1MGp6ll01Rtf1HVJGdtZTVzzM=","parents":[],"schema":"commit_v1","timestamp_ms":1795957712240,"tree_id":"obj-cas-imm-9f5613e8b39d"}"#
        #expect(String(decoding: c.canonicalSigningBytes, as: UTF8.self) == expected)
        let legacy = String(decoding: c.legacySigningBytes, as: UTF8.self)
        #expect(legacy.hasPrefix(#"{"schema": "commit_v1", "tree_id": "obj-cas-imm-9f5613e8b39d", "message_enc": "#))
        #expect(legacy.contains(#""signature": null, "author_key_id": "key-rnd-imm-1a064d7bd08a7250""#))
        // Key order and whitespace of the stored form do not matter; normalisation does.
        let shuffled = #"{"timestamp_ms": 1795957712240, "parents": [], "tree_id": " OBJ-CAS-IMM-9F5613E8B39D", "schema": "commit_v1", "message_enc": "d0dZF6W5JxRNvAbbHI1MGp6ll01Rtf1HVJGdtZTVzzM=", "branch_id": "branch-clone-e4f153e46c4a9de4", "author_key_id": "key-rnd-imm-1a064d7bd08a7250", "author_signature": null, "attestations": [], "unknown": 1}"#
        #expect(String(decoding: try Commit.parse(Array(shuffled.utf8), id: id).canonicalSigningBytes, as: UTF8.self) == expected)
    }

    @Test("commits: a wrong JSON type refuses the object, as sgit's schema layer does")
    func strictCommits() throws {
        let id = try #require(ObjectID("obj-cas-imm-000000000000"))
        let variants: [(String, String)] = [
            (#""timestamp_ms": 1795957712240"#, #""timestamp_ms": 5.0"#),
            (#""timestamp_ms": 1795957712240"#, #""timestamp_ms": -1"#),
            (#""timestamp_ms": 1795957712240"#, #""timestamp_ms": "1795957712240""#),
            (#""parents": []"#, #""parents": "obj-cas-imm-9f5613e8b39d""#),
            (#""parents": []"#, #""parents": [5]"#),
            (#""parents": []"#, #""parents": ["../../../etc/passwd"]"#),
            (#""tree_id": "obj-cas-imm-9f5613e8b39d""#, #""tree_id": "obj-cas-imm-../x""#),
            (#""tree_id": "obj-cas-imm-9f5613e8b39d""#, #""tree_id": 7"#),
            (#""author_signature": null"#, #""author_signature": false"#),
            (#""schema": "commit_v1""#, #""schema": "tree_v1""#),
            (#""signature": "kj4"#, #""signature": "!!"#),
        ]
        for (from, to) in variants {
            let text = Self.exampleCommit.replacingOccurrences(of: from, with: to)
            #expect(text != Self.exampleCommit)
            #expect(throws: VaultError.self, "\(to)") { try Commit.parse(Array(text.utf8), id: id) }
        }
    }
}

