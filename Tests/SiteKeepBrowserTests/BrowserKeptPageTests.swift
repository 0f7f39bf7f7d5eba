import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension BrowserProcessTests {
    /// A store, the daemon, and two articles A and B on the first test site, each linking to
    /// the other (`#next`), sharing the site's style sheet and figure.
    static func linkedPagesRig() throws -> BrowserRig {
        let rig = try BrowserRig()
        try rig.makeStore()
        for (name, next) in [("a", "b"), ("b", "a")] {
            let html = TestSites.article(name.uppercased()).replacingOccurrences(of: "<body>", with: "<body><p><a id=\"next\" href=\"\(next).html\">Next</a></p>")
            try rig.write(rig.ports[0], "\(name).html", html)
        }
        try rig.write(rig.ports[0], "style.css", TestSites.style)
        try rig.write(rig.ports[0], "fig.svg", TestSites.figure)
        try rig.startDaemon()
        return rig
    }

    /// A page followed by a link in the same tab, whose style sheet and figure the session already
    /// has (revalidated, HTTP 304, or from the cache): its kept copy still holds both, inlined,
    /// and shows them offline.
    @Test func aPageFollowedByALinkIsKeptWithItsCachedStyleAndFigure() throws {
        let rig = try Self.linkedPagesRig()
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

    /// Issue 51's must-show: a page followed by a link in the same tab, sharing a style sheet and
    /// a figure with the page before it, all served `no-cache` with ETags (so WebKit revalidates
    /// both, HTTP 304, and hands over no body). A relaunch online asks the server nothing (the
    /// kept copy is shown, the window says so, F5 would fetch it); a relaunch offline shows the
    /// page as it showed online: its screenshot has the same colours (the style sheet's
    /// background, the figure's red) in the same shares as the online one.
    @Test func aFollowedPageComesBackOfflineAsItShowedOnlineAndARelaunchAsksNothing() throws {
        let rig = try Self.linkedPagesRig()
        try rig.startRevalidatingServer(rig.ports[0])
        let a = rig.origins[0] + "/a.html", b = rig.origins[0] + "/b.html"
        let first = try rig.launch(["--no-prefetch", a])
        try first.waitFor("the kept copy of \(a)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == a }
        try first.command(["cmd": "click", "selector": "#next"])
        try first.waitFor("the kept copy of \(b)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == b }
        #expect(rig.serverRequests(rig.ports[0]).contains { $0.hasPrefix("GET /style.css") }, "the style sheet was never asked for")
        let online = rig.screenshotPath("browser-followed-online.png")
        try rig.screenshot(first, name: "browser-followed-online.png")
        try first.quit()

        // Online again: the session comes back from the kept copy, and nothing is fetched.
        let asked = rig.serverRequests(rig.ports[0])
        let second = try rig.launch(["--no-prefetch"])
        let back = try second.waitFor("\(b) restored") { $0["event"]?.stringValue == "loaded" && $0["url"]?.stringValue == b }
        #expect(back["source"]?.stringValue == "kept", "the relaunch fetched \(b) instead of showing its kept copy")
        _ = try second.evalUntil(0, "document.images[0] && document.images[0].complete ? true : null")
        let titled = try second.stateUntil("the window says the page is a kept copy") { $0["title"]?.stringValue?.hasSuffix("· kept copy") == true }
        #expect(titled["title"]?.stringValue == "Article B — Site One · kept copy", "title: \(titled["title"]?.stringValue ?? "-")")
        #expect(second.events.contains { $0["event"]?.stringValue == "note" && $0["text"]?.stringValue?.contains("shown from its kept copy") == true },
                "the relaunch did not say it shows a kept copy")
        usleep(2_000_000)   // a request the page would make late (a font, a lazy figure) has had its time
        let more = Array(rig.serverRequests(rig.ports[0]).dropFirst(asked.count))
        #expect(more.isEmpty, "a relaunch asked the server for \(more)")
        try second.quit()

        // Offline: the same page, the same colours.
        rig.stopServer(rig.ports[0])
        #expect(!canConnect(port: rig.ports[0]), "the test site is still up")
        let third = try rig.launch(["--no-prefetch"])
        let shown = try third.waitFor("\(b) restored offline") { $0["event"]?.stringValue == "loaded" && $0["url"]?.stringValue == b }
        #expect(shown["source"]?.stringValue == "kept")
        let seen = try third.evalUntil(0, "document.images[0] && document.images[0].complete ? [getComputedStyle(document.body).backgroundColor, document.images[0].naturalWidth] : null")
        #expect(seen.arrayValue?[0].stringValue == "rgb(244, 241, 234)" && seen.arrayValue?[1].intValue == 160, "offline: \(JSONSerializer.string(seen))")
        let offline = rig.screenshotPath("browser-offline-followed.png")
        try rig.screenshot(third, name: "browser-offline-followed.png")
        try third.quit()

        let before = try BrowserRig.colours(ofPNG: online), after = try BrowserRig.colours(ofPNG: offline)
        let background = "240,240,232", figure = "176,64,40"   // #f4f1ea and #b5452f, quantized by 8
        #expect((before[background] ?? 0) > 0.2 && (before[figure] ?? 0) > 0.005, "the online screenshot lacks the page's colours: \(before)")
        for colour in [background, figure] {
            let was = before[colour] ?? 0, now = after[colour] ?? 0
            #expect(abs(now - was) <= max(0.002, was * 0.05), "colour \(colour) covers \(now) of the offline screenshot, \(was) of the online one")
        }
    }
}
