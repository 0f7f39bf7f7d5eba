import Foundation
import Testing
@testable import SiteKeepVocabulary
@testable import SiteKeepNames

/// The vocabulary's names other than origins: each parses once, refuses anything off its rule
/// with a ``VocabularyError``, and prints its canonical form.
@Suite struct NameTests {
    @Test func aSiteIDIsTheUUIDFormInLowerCase() throws {
        let id = try SiteID(parsing: "6F1C3A52-0D7E-4B8A-9F57-2C1E0B4D9A13")
        #expect(id.description == "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13")
        #expect(id == (try SiteID(parsing: "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13")))
        for bad in ["", "../x", "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a1\u{0}", "{6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13}",
                    "6f1c3a520d7e4b8a9f572c1e0b4d9a13", "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13/.."] {
            #expect(throws: VocabularyError.invalidSiteIdentifier(bad)) { try SiteID(parsing: bad) }
        }
    }

    @Test func anErrorKeepsABoundedPrefixAndPrintsItEscaped() {
        let long = String(repeating: "a", count: 500)
        #expect(throws: VocabularyError.invalidSiteIdentifier(String(repeating: "a", count: 65))) { try SiteID(parsing: long) }
        let shown = VocabularyError.invalidSiteIdentifier("a\"\n").description
        #expect(shown.hasPrefix(#""a\"\n" is not a site identifier"#))
        #expect(VocabularyError.invalidKeyID(String(repeating: "b", count: 65)).description.hasPrefix("\"" + String(repeating: "b", count: 64) + "\"…"))
    }

    @Test func theKeyIDRule() throws {
        for ok in ["a", "z", "0", "9", "a.", "a_", "a-", "team-ed", "team.p256_v2", "0team", String(repeating: "z", count: 64)] {
            #expect(KeyID.isValid(ok), "\(ok)")
            #expect(try KeyID(parsing: ok).description == ok)
        }
        for bad in [".team", "_team", "-team", "", "A", "teamA", "`a", "a`", "{a", "a{", "/a", "a/", ":a", "a:",
                    "a b", "é", "a\u{0}", String(repeating: "z", count: 65)] {
            #expect(!KeyID.isValid(bad), "\(bad)")
            #expect(throws: VocabularyError.self) { try KeyID(parsing: bad) }
        }
    }

    @Test func theOpNameRule() throws {
        for ok in ["hello", "storage.get", "vault.status", "a.b.c", "ops2.v1", String(repeating: "a", count: 64)] {
            #expect(OpName.isValid(ok), "\(ok)")
            #expect(try OpName(parsing: ok).description == ok)
        }
        for bad in ["", ".", "a.", ".a", "a..b", "Storage.get", "storage_get", "storage-get", "storage get", "storage.get\u{0}",
                    "ſtorage.get", "storage.ge\u{0301}t", "\u{212A}", String(repeating: "a", count: 65)] {
            #expect(!OpName.isValid(bad), "\(bad)")
            #expect(throws: VocabularyError.invalidOpName(VocabularyError.kept(bad))) { try OpName(parsing: bad) }
        }
    }

    @Test func theItemKindsKeepTheirStoredSpellings() throws {
        #expect(ItemKind.allCases.map(\.description) == ["slot", "team-key", "device-key", "storage-key", "storage-key-wu", "vault-key", "agent-key"])
        for kind in ItemKind.allCases { #expect(try ItemKind(parsing: kind.rawValue) == kind) }
        #expect(throws: VocabularyError.unknownItemKind("Team-Key")) { try ItemKind(parsing: "Team-Key") }
    }
}
