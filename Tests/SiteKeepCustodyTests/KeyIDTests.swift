import Testing
@testable import SiteKeepCustody
import SiteKeepVocabulary

/// The one key-id rule (issue 13, item 6): its edge characters, and custody refusing what the
/// rule refuses when a key is made.
@Suite struct KeyIDTests {
    @Test func theFirstCharacterIsALetterOrDigitAndTheRestMayAddDotUnderscoreDash() {
        for ok in ["a", "z", "0", "9", "a.", "a_", "a-", "team-ed", "team.p256_v2", "0team", String(repeating: "z", count: 64)] {
            #expect(KeyID.isValid(ok), "\(ok)")
        }
        // Edges of each byte range, the three punctuation marks in first place, and length.
        for bad in [".team", "_team", "-team", "", "A", "teamA", "`a", "a`", "{a", "a{", "/a", "a/", ":a", "a:",
                    "a b", "é", "a\u{0}", String(repeating: "z", count: 65)] {
            #expect(!KeyID.isValid(bad), "\(bad)")
        }
    }

    @Test(arguments: Backend.allCases) func custodyRefusesAnIDThatStartsWithPunctuation(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        for bad in ["-team", ".team", "_team"] {
            #expect(throws: CustodyError.invalidKeyID(bad)) { try f.custodian.generateTeamKey(id: bad, name: "x") }
        }
        _ = try f.custodian.generateTeamKey(id: "0team", name: "x")
        #expect(CustodyError.invalidKeyID("-team").description.contains(KeyID.rule))
    }
}
