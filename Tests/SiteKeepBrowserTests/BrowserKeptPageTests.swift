import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension BrowserProcessTests {
    /// A page followed by a link in the same tab, whose style sheet and figure the session already
    /// has (revalidated, HTTP 304, or from the cache): its kept copy still holds both, inlined,
    /// and shows them offline.
    @Test func aPageFollowedByALinkIsKeptWithItsCachedStyleAndFigure() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        for (name, next) in [("a", "b"), ("b", "a")] {
            let html = TestSites.article(name.uppercased()).replacingOccurrences(of: "<body>", with: "<body><p><a id=\"next\" href=\"\(next).html\">Next</a></p>")
            try rig.write(rig.ports[0], "\(name).html", html)
        }
        try rig.write(rig.ports[0], "style.css", TestSites.style)
        try rig.write(rig.ports[0], "fig.svg", TestSites.figure)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        let a = rig.origins[0] + "/a.html", b = rig.origins[0] + "/b.html"
        let p = try rig.launch(["--no-prefetch", a])
        try p.waitFor("the kept copy of \(a)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == a }
        try p.command(["cmd": "click", "selector": "#next"])
        try p.waitFor("the kept copy of \(b)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == b }
        rig.stopServer(rig.ports[0])
        #expect(!canConnect(port: rig.ports[0]), "the test site is still up")
        try p.command(["cmd": "address", "text": .string(b)])
        try p.waitFor("the kept copy of \(b) shown", timeout: 30) {
            $0["event"]?.stringValue == "loaded" && $0["url"]?.stringValue == b && $0["source"]?.stringValue == "kept"
        }
        let seen = try p.evalUntil(0, "location.href === \(JSONSerializer.string(.string(b))) && document.images[0] && document.images[0].complete ? [document.title, getComputedStyle(document.body).backgroundColor, document.images[0].naturalWidth, document.images[0].src.slice(0, 5)] : null")
        #expect(seen.arrayValue?.first?.stringValue == "Article B")
        #expect(seen.arrayValue?[1].stringValue == "rgb(244, 241, 234)", "the kept copy lost its style sheet: \(JSONSerializer.string(seen))")
        #expect(seen.arrayValue?[2].intValue == 160 && seen.arrayValue?[3].stringValue == "data:", "the kept copy lost its figure: \(JSONSerializer.string(seen))")
        try p.quit()
    }
}
