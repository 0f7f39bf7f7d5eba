import Testing
import SiteKeepBrowserCore
import SiteKeepVocabulary

/// The browser decides every origin question with the vocabulary's ``Origin`` (issue 35, item
/// 2), no longer with a second parser of its own on `URLComponents` (`WebOrigin`). Where the
/// two disagreed, the browser now takes the stricter answer: an address whose origin could pass
/// for another's belongs to no site, receives no bridge events and is not loaded.
@Suite struct OriginDecisionTests {
    let policy = NavigationPolicy(sites: [one, two])

    /// Spellings of the same origin are that origin: upper case, the default port, the path.
    @Test func spellingsOfASitesOriginAreThatSite() {
        for url in ["https://PROMPTUGAL.NEWS/x", "HTTPS://promptugal.news:443/", "https://promptugal.news", "http://127.0.0.1:8001/a?b#c"] {
            #expect(one.owns(url: url), "\(url)")
            #expect(policy.decide(url, in: one) == .stay, "\(url)")
        }
    }

    /// An IDN host is the Punycode host WebKit reports: either spelling is the site, and the
    /// page's origin is written in Punycode, as `location.origin` gives it.
    @Test func anIDNHostIsItsPunycodeOrigin() throws {
        let idn = try BrowserSite(id: "33333333-3333-4333-8333-333333333333", name: "Bücher",
                                  origins: ["https://bücher.example"], webFolder: "/s/3/web")
        #expect(idn.origins.map(\.serialized) == ["https://xn--bcher-kva.example:443"])
        #expect(idn.pageOrigins == ["https://xn--bcher-kva.example"])
        #expect(idn.owns(url: "https://xn--bcher-kva.example/shelf") && idn.owns(url: "https://BÜCHER.example/shelf"))
        #expect(!idn.owns(url: "https://bucher.example/"))
    }

    /// WebOrigin took the host after `user@` (and so gave `https://user@promptugal.news/` the
    /// site's bridge); an origin has no user information, so such an address is no site's and
    /// is not loaded.
    @Test func anAddressWithUserInformationIsNoSitesAndIsRefused() {
        for url in ["https://user@promptugal.news/", "https://user:pw@promptugal.news/", "http://x@127.0.0.1:8001/"] {
            #expect(!one.owns(url: url), "\(url)")
            guard case .refuse = policy.decide(url, in: one) else { Issue.record("\(url) was not refused"); continue }
        }
    }

    /// A trailing dot makes another origin in the web's rules (its own cookies and storage):
    /// WebOrigin happened to agree by comparing text, Origin alone would strip the dot; the
    /// browser refuses it (``OriginError/hostEndsInDot(_:)``).
    @Test func aHostEndingInADotIsAnotherOriginAndIsRefused() {
        for url in ["https://promptugal.news./", "https://promptugal.news.:443/x", "https://promptugal.news\u{3002}/"] {
            #expect(!one.owns(url: url), "\(url)")
            guard case .refuse = policy.decide(url, in: one) else { Issue.record("\(url) was not refused"); continue }
        }
        #expect(throws: OriginError.hostEndsInDot("promptugal.news.")) { try Origin(ofURL: "https://promptugal.news./") }
    }

    /// Addresses whose host could be read two ways (a backslash, an IPv4 address in a form other
    /// than dotted decimal, a Latin/Cyrillic look-alike) were handed to the system browser;
    /// now they are not loaded anywhere.
    @Test func ambiguousHostsAreRefusedNotHandedOn() {
        for url in ["https://promptugal.news\\@evil.example/", "http://2130706433:8001/", "http://0x7f.0.0.1:8001/",
                    "http://127.1:8001/", "https://\u{0430}pple.com/", "https://xn--pple-43d.com/"] {
            #expect(!one.owns(url: url) && !two.owns(url: url), "\(url)")
            guard case .refuse = policy.decide(url, in: one) else { Issue.record("\(url) was not refused"); continue }
        }
    }

    /// Unchanged: plain http off loopback is no site's origin and goes to the system browser,
    /// as does https elsewhere.
    @Test func foreignHTTPAddressesStillGoToTheSystemBrowser() {
        #expect(policy.decide("http://example.org/a", in: one) == .external("http://example.org/a"))
        #expect(policy.decide("https://example.org/a", in: one) == .external("https://example.org/a"))
        #expect(policy.decide("http://127.0.0.1:8002/", in: one) == .openSite(two))
    }

    /// A site whose origin does not parse cannot be made (the daemon's list is parsed once).
    @Test func aSiteIsMadeOnlyFromOrigins() {
        #expect(throws: OriginError.userinfoNotAllowed) {
            try BrowserSite(id: "x", name: "x", origins: ["https://u@a.example"], webFolder: "/s/x/web")
        }
    }
}
