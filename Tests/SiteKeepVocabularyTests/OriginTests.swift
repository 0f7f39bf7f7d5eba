import Testing
@testable import SiteKeepVocabulary

@Suite struct OriginTests {
    static let good: [(String, String)] = [
        ("https://newsroom.sgit.ai", "https://newsroom.sgit.ai:443"),
        ("HTTPS://NewsRoom.SGIT.ai", "https://newsroom.sgit.ai:443"),
        ("https://newsroom.sgit.ai.", "https://newsroom.sgit.ai:443"),
        ("https://newsroom.sgit.ai:443", "https://newsroom.sgit.ai:443"),
        ("https://newsroom.sgit.ai/", "https://newsroom.sgit.ai:443"),
        ("https://newsroom.sgit.ai:8443", "https://newsroom.sgit.ai:8443"),
        ("http://localhost", "http://localhost:80"),
        ("http://LOCALHOST:8080", "http://localhost:8080"),
        ("http://127.0.0.1:3000", "http://127.0.0.1:3000"),
        ("http://127.9.8.7", "http://127.9.8.7:80"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("http://[0:0:0:0:0:0:0:1]", "http://[::1]:80"),
        ("https://[2001:DB8:0:0:0:0:0:1]", "https://[2001:db8::1]:443"),
        ("https://bücher.example", "https://xn--bcher-kva.example:443"),
        ("https://BÜCHER.example", "https://xn--bcher-kva.example:443"),
        ("https://bu\u{0308}cher.example", "https://xn--bcher-kva.example:443"),
        ("https://xn--bcher-kva.example", "https://xn--bcher-kva.example:443"),
        ("https://bücher。example", "https://xn--bcher-kva.example:443"),
        ("https://ｅｘａｍｐｌｅ.com", "https://example.com:443"),
        ("https://münchen.de", "https://xn--mnchen-3ya.de:443"),
        ("https://例え.テスト", "https://xn--r8jz45g.xn--zckzah:443"),
        ("https://пример.рф", "https://xn--e1afmkfd.xn--p1ai:443"),
        ("https://8.8.8.8", "https://8.8.8.8:443"),
    ]

    @Test(arguments: Self.good)
    func canonicalises(_ input: String, _ expected: String) throws {
        #expect(try Origin(parsing: input).serialized == expected)
    }

    static let refused: [(String, OriginError)] = [
        ("", OriginError.empty),
        ("null", .opaqueOrigin),
        ("NULL", .opaqueOrigin),
        ("file:///etc/passwd", .forbiddenScheme("file")),
        ("data:text/html,hi", .forbiddenScheme("data")),
        ("blob:https://a.example/uuid", .forbiddenScheme("blob")),
        ("javascript:alert(1)", .forbiddenScheme("javascript")),
        ("ftp://a.example", .unsupportedScheme("ftp")),
        ("newsroom.sgit.ai", .missingScheme),
        ("https:newsroom.sgit.ai", .missingScheme),
        ("http://newsroom.sgit.ai", .insecureScheme(host: "newsroom.sgit.ai")),
        ("http://localhost.example", .insecureScheme(host: "localhost.example")),
        ("http://10.0.0.1", .insecureScheme(host: "10.0.0.1")),
        ("https://user@newsroom.sgit.ai", .userinfoNotAllowed),
        ("https://user:pw@newsroom.sgit.ai", .userinfoNotAllowed),
        ("https://newsroom.sgit.ai@evil.example", .userinfoNotAllowed),
        ("https://newsroom.sgit.ai/path", .pathNotAllowed),
        ("https://newsroom.sgit.ai//", .pathNotAllowed),
        ("https://newsroom.sgit.ai?q=1", .queryNotAllowed),
        ("https://newsroom.sgit.ai/?q", .queryNotAllowed),
        ("https://newsroom.sgit.ai#top", .fragmentNotAllowed),
        ("https://", .emptyHost),
        ("https://:443", .emptyHost),
        ("https://newsroom.sgit.ai:", .invalidPort("")),
        ("https://newsroom.sgit.ai:0", .invalidPort("0")),
        ("https://newsroom.sgit.ai:65536", .invalidPort("65536")),
        ("https://newsroom.sgit.ai:0443", .invalidPort("0443")),
        ("https://newsroom.sgit.ai:-1", .invalidPort("-1")),
        ("https://newsroom.sgit.ai:44a", .invalidPort("44a")),
        ("https://news%72oom.sgit.ai", .percentEncodedHost),
        (" https://newsroom.sgit.ai", .forbiddenCharacter("U+0020")),
        ("https://newsroom.sgit.ai ", .forbiddenCharacter("U+0020")),
        ("https://news room.sgit.ai", .forbiddenCharacter("U+0020")),
        ("https://newsroom.sgit.ai\u{0}", .forbiddenCharacter("U+0000")),
        ("https://newsroom\t.sgit.ai", .forbiddenCharacter("U+0009")),
        ("https://newsroom.sgit.ai\n", .forbiddenCharacter("U+000A")),
        ("https://news\u{200B}room.sgit.ai", .forbiddenCharacter("U+200B")),
        ("https:\\\\newsroom.sgit.ai", .forbiddenCharacter("U+005C")),
        ("http://2130706433", .nonCanonicalIPv4("2130706433")),
        ("http://0x7f.0.0.1", .nonCanonicalIPv4("0x7f.0.0.1")),
        ("http://0177.0.0.1", .nonCanonicalIPv4("0177.0.0.1")),
        ("http://127.1", .nonCanonicalIPv4("127.1")),
        ("https://1.2.3.256", .nonCanonicalIPv4("1.2.3.256")),
        ("https://[::1", .invalidIPv6("[::1")),
        ("https://[1:2:3]", .invalidIPv6("1:2:3")),
        ("https://[::1%25eth0]", .percentEncodedHost),
        ("https://news_room.sgit.ai", .invalidHostCharacter("'_'")),
        ("https://a..example", .invalidLabel("")),
        ("https://-a.example", .invalidLabel("-a")),
        ("https://ab--c.example", .invalidLabel("ab--c")),
        ("https://xn--abc-.example", .invalidPunycode("xn--abc-")),
        ("https://xn--bcher-kvb.example", .invalidPunycode("xn--bcher-kvb")),
        ("https://xn--newsroom.sgit.ai", .invalidPunycode("xn--newsroom")),
        ("https://newsrооm.sgit.ai", .mixedScript("newsrооm")),
        ("https://\u{0430}pple.com", .mixedScript("\u{0430}pple")),
        ("https://" + String(repeating: "a", count: 64) + ".example", .invalidLabel(String(repeating: "a", count: 64))),
        ("https://☃.example", .invalidHostCharacter("U+2603")),
    ]

    @Test(arguments: Self.refused)
    func refuses(_ input: String, _ error: OriginError) {
        #expect(throws: error) { try Origin(parsing: input) }
    }

    @Test func homographPunycodeIsAnotherOrigin() throws {
        // A whole-Cyrillic look-alike is a valid IDN but never equal to the Latin one.
        let cyr = try Origin(parsing: "https://\u{0430}\u{0440}\u{0440}\u{04CF}\u{0435}.com")
        #expect(cyr.host.hasPrefix("xn--"))
        #expect(cyr != (try Origin(parsing: "https://apple.com")))
        #expect(throws: OriginError.mixedScript("xn--pple-43d")) { try Origin(parsing: "https://xn--pple-43d.com") }
    }

    @Test func matchingIsCanonicalEquality() throws {
        let a = try Origin(parsing: "https://newsroom.sgit.ai")
        #expect(a == (try Origin(parsing: "HTTPS://NEWSROOM.SGIT.AI.:443/")))
        #expect(a != (try Origin(parsing: "https://newsroom.sgit.ai:8443")))
        #expect(a != (try Origin(parsing: "https://www.newsroom.sgit.ai")))
        #expect(a != (try Origin(parsing: "https://newsroom.sgit.ai.example.com")))
        #expect(a != (try Origin(parsing: "https://example.com.newsroom.sgit.ai")))
    }

    /// The one short form: the scheme's default port left out, any other port and an IPv6
    /// host's brackets kept (the bridge's refusals and the browser's page origins use it).
    @Test func pageFormLeavesOutOnlyTheDefaultPort() throws {
        #expect(try Origin(parsing: "https://newsroom.sgit.ai:443").pageForm == "https://newsroom.sgit.ai")
        #expect(try Origin(parsing: "https://newsroom.sgit.ai:8443").pageForm == "https://newsroom.sgit.ai:8443")
        #expect(try Origin(parsing: "http://localhost:80").pageForm == "http://localhost")
        #expect(try Origin(parsing: "http://127.0.0.1:443").pageForm == "http://127.0.0.1:443")
        #expect(try Origin(parsing: "http://[::1]:8001").pageForm == "http://[::1]:8001")
    }

    @Test func errorsSayWhatToDo() {
        #expect(OriginError.insecureScheme(host: "a.example").description.contains("use https"))
        #expect(OriginError.nonCanonicalIPv4("127.1").description.contains("dotted-decimal"))
    }

    @Test func punycodeRFC3492Samples() {
        // RFC 3492 section 7.1 (A) Arabic (Egyptian), (B) Chinese simplified, (L) 3<nen>B<gumi>...
        let arabic = "\u{0644}\u{064A}\u{0647}\u{0645}\u{0627}\u{0628}\u{062A}\u{0643}\u{0644}\u{0645}\u{0648}\u{0634}\u{0639}\u{0631}\u{0628}\u{064A}\u{061F}"
        #expect(Punycode.encode(Array(arabic.unicodeScalars)) == "egbpdaj6bu4bxfgehfvwxn")
        let chinese = "\u{4ED6}\u{4EEC}\u{4E3A}\u{4EC0}\u{4E48}\u{4E0D}\u{8BF4}\u{4E2D}\u{6587}"
        #expect(Punycode.encode(Array(chinese.unicodeScalars)) == "ihqwcrb4cv8a8dqg056pqjye")
        let mixed = "3\u{5E74}B\u{7D44}\u{91D1}\u{516B}\u{5148}\u{751F}"
        #expect(Punycode.encode(Array(mixed.unicodeScalars)) == "3B-ww4c5e180e575a65lsy2b")
        #expect(Punycode.decode("3B-ww4c5e180e575a65lsy2b").map { String(String.UnicodeScalarView($0)) } == mixed)
        #expect(Punycode.decode("egbpdaj6bu4bxfgehfvwxn").map { String(String.UnicodeScalarView($0)) } == arabic)
        #expect(Punycode.decode("99999999999999999999") == nil)
        #expect(Punycode.decode("ab!") == nil)
    }
}
