import Testing
import SiteKeepTestSupport
@testable import SiteKeepCustody
import SiteKeepSystem

/// ``PresenceText``: how prompts quote, escape and bound what a peer chose (issue 32), and the
/// prompt's order (key, op, then what it is for).
@Suite struct PresenceTextTests {
    /// The text functions themselves: quoting, escaping, bounds.
    @Test func presenceTextQuotesEscapesAndBounds() {
        #expect(PresenceText.quoted("root") == "\"root\"")
        #expect(PresenceText.quoted("a\"b\\c") == "\"a\\\"b\\\\c\"")
        #expect(PresenceText.quoted(String(repeating: "y", count: 70)) == "\"" + String(repeating: "y", count: 64) + "…\"")
        #expect(PresenceText.quoted("a\u{202E}b") == "\"a<U+202E>b\"")
        #expect(PresenceText.escaped("ok \u{1}\u{200D}", limit: 10) == "ok <U+0001><U+200D>")
        #expect(PresenceText.escaped("plain", limit: 3) == "pla…")
        let once = PresenceText.escaped("x\u{2067}y", limit: 100)
        #expect(PresenceText.escaped(once, limit: 100) == once, "escaping twice changes nothing")
        #expect(PresenceText.firstHidden(in: "caf\u{E9} \u{3000}") == nil, "letters and visible spaces are not hidden")
        #expect(PresenceText.firstHidden(in: "a\u{E0041}") != nil, "tag characters (Cf) are hidden")
    }

    @Test func thePromptLeadsWithTheKeyAndShowsHiddenCharactersOfTheLabel() {
        let text = AskpassPresenceVerifier.promptText(siteLabel: "site \"News\u{202E}room\" (https://newsroom.sgit.ai)", op: "key.sign", keyID: "team-nr",
                                                      promptID: "0123456789abcdef", ending: "Allow?")
        #expect(text == "SiteKeep: key team-nr, key.sign, for site \"News<U+202E>room\" (https://newsroom.sgit.ai). Approval covers only this site, "
                + "key.sign and key team-nr, for at most 60 s (prompt 0123456789abcdef). Allow?")
        let long = AskpassPresenceVerifier.promptText(siteLabel: String(repeating: "w", count: 300) + " end", op: "o", keyID: nil, promptID: "p", ending: "Allow?")
        #expect(long.contains(" end. Approval covers only this site and o"), "a label is not cut at 200 scalars any more")
    }
}
