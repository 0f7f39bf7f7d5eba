import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Tabs as a reader expects them (issue 51), driven by real input: every key and click goes
/// through the X server (XTest under Xvfb) into GDK and GTK as the reader's would, never a call
/// into the browser's own shortcut code. Each wait is for an event or a state, with a deadline.
extension BrowserProcessTests {
    /// A long page with links to the site's other pages (`#b`, `#c`).
    static func linkedArticle(_ name: String) -> String {
        let paragraphs = (1...150).map { "<p>Paragraph \($0) of \(name): the reader reads down and down.</p>" }.joined(separator: "\n")
        return """
        <!DOCTYPE html><html><head><title>Page \(name)</title></head>
        <body><h1>Page \(name)</h1>
        <p><a id="b" href="b.html">To page B</a> · <a id="c" href="c.html">To page C</a></p>
        \(paragraphs)
        </body></html>
        """
    }

    static func tabURLs(_ state: JSONValue) -> [String] { state["tabs"]?.arrayValue?.compactMap { $0["url"]?.stringValue } ?? [] }

    /// Every key the window answers is listed in `sitekeep-browser --help` and in docs/browser.md.
    @Test func theKeysAreListedInTheHelpAndTheDocs() throws {
        let browser = try BrowserRig.executable("sitekeep-browser")
        let help = try Spawned.run(browser, ["--help"], env: ["PATH": "/usr/bin:/bin"])
        #expect(help.status == 0, "\(help.out)")
        let docs = try String(contentsOf: BrowserRig.repo.appendingPathComponent("docs/browser.md"), encoding: .utf8)
        for key in ["Ctrl+T", "Ctrl+click", "middle-click", "Ctrl+W", "Ctrl+Shift+T", "Ctrl+Tab", "Ctrl+Shift+Tab", "Ctrl+L",
                    "Escape", "Alt+Left", "F5", "Ctrl+R", "F9", "Ctrl+Q"] {
            #expect(help.out.contains(key), "sitekeep-browser --help does not list \(key)")
            #expect(docs.contains("**\(key)**"), "docs/browser.md does not list \(key)")
        }
    }

    /// `sitekeep open SITE URL URL` opens both pages, each in a tab. Then, by keys:
    /// Ctrl+T a new tab on the site's front page with the address bar focused; Escape gives the
    /// page the keyboard; Ctrl+W closes a tab and Ctrl+Shift+T brings it back at its page;
    /// Ctrl+Tab and Ctrl+Shift+Tab switch tabs and leave the keyboard in the page (End scrolls
    /// the page, it does not switch tabs), and so does a click on the tab strip; the window's
    /// title is the shown tab's; the tab strip, hidden while reading down, shows on a switch and
    /// hides again reading down; Ctrl+Q quits with the session saved (tabs.get).
    @Test func tabKeysOpenSwitchCloseReopenAndQuit() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        for name in ["A", "B", "C"] { try rig.write(rig.ports[0], name.lowercased() + ".html", Self.linkedArticle(name)) }
        try rig.write(rig.ports[0], "index.html", Self.linkedArticle("Front"))
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        let a = rig.origins[0] + "/a.html", b = rig.origins[0] + "/b.html", front = rig.origins[0] + "/"
        let p = try rig.launch(["--no-prefetch", "Site One", a, rig.origins[0] + "/c.html"])
        _ = try p.waitForLoads(2)
        var s = try p.stateUntil("both pages open") { Self.tabURLs($0).count == 2 && $0["active"]?.intValue == 0 && $0["title"]?.stringValue == "Page A — Site One" }
        #expect(Self.tabURLs(s) == [a, rig.origins[0] + "/c.html"], "sitekeep open SITE URL URL opened \(Self.tabURLs(s))")

        // Ctrl+T: a third tab, shown, on the front page, the address bar up and focused.
        try p.command(["cmd": "key", "name": "ctrl+t"])
        s = try p.stateUntil("a new tab after Ctrl+T") { Self.tabURLs($0).count == 3 && $0["active"]?.intValue == 2 }
        #expect(Self.tabURLs(s).last == front, "Ctrl+T opened \(Self.tabURLs(s))")
        #expect(s["address"]?["shown"]?.boolValue == true && s["address"]?["focused"]?.boolValue == true && s["focus"]?.stringValue == "address",
                "Ctrl+T left the address bar \(s["address"].map { JSONSerializer.string($0) } ?? "-"), focus \(s["focus"]?.stringValue ?? "-")")
        try p.command(["cmd": "key", "name": "Escape"])
        try p.stateUntil("the page focused after Escape") { $0["focus"]?.stringValue == "page" && $0["address"]?["shown"]?.boolValue == false }
        _ = try p.evalUntil(2, "document.readyState === 'complete' && document.title === 'Page Front' ? true : null")

        // The new tab goes to B; Ctrl+W closes it; Ctrl+Shift+T reopens it at B.
        try p.command(["cmd": "address", "text": .string(b)])
        _ = try p.evalUntil(2, "location.href === \(JSONSerializer.string(.string(b))) && document.readyState === 'complete' ? true : null")
        try p.command(["cmd": "key", "name": "ctrl+w"])
        s = try p.stateUntil("a tab fewer after Ctrl+W") { Self.tabURLs($0).count == 2 }
        #expect(!Self.tabURLs(s).contains(b))
        try p.command(["cmd": "key", "name": "ctrl+shift+t"])
        s = try p.stateUntil("the closed tab back after Ctrl+Shift+T") { Self.tabURLs($0) == [a, rig.origins[0] + "/c.html", b] }
        #expect(s["active"]?.intValue == 2, "the reopened tab is not the one shown")

        // Ctrl+Tab from the last tab: the first, with the page holding the keyboard and the title its own.
        try p.command(["cmd": "key", "name": "ctrl+Tab"])
        s = try p.stateUntil("tab 0 shown after Ctrl+Tab, the page focused") { $0["active"]?.intValue == 0 && $0["focus"]?.stringValue == "page" }
        #expect(s["title"]?.stringValue == "Page A — Site One", "the title is \(s["title"]?.stringValue ?? "-")")
        // End scrolls the page (the keyboard is in the page, not the strip), and hides the strip reading down.
        try p.command(["cmd": "key", "name": "End"])
        _ = try p.evalUntil(0, "scrollY > innerHeight ? scrollY : null")
        s = try p.stateUntil("the tab strip hidden after End") { $0["tabStrip"]?.stringValue == "hidden" }
        #expect(s["active"]?.intValue == 0, "End switched tabs")
        // Ctrl+Shift+Tab: back to the last tab; the strip shows on the switch, the title follows.
        try p.command(["cmd": "key", "name": "ctrl+shift+Tab"])
        s = try p.stateUntil("tab 2 shown after Ctrl+Shift+Tab") { $0["active"]?.intValue == 2 && $0["focus"]?.stringValue == "page" }
        #expect(s["tabStrip"]?.stringValue == "shown", "the tab strip stayed hidden on a tab switch")
        _ = try p.evalUntil(2, "document.title === 'Page B' ? true : null")
        // The reopened tab shows B's kept copy when B was kept before Ctrl+W closed it (nothing
        // fetched the reader did not ask for), else B from the network; the title says which.
        s = try p.stateUntil("the window titled after tab 2") { state in
            let kept = state["tabs"]?.arrayValue?.dropFirst(2).first?["source"]?.stringValue == "kept"
            return state["active"]?.intValue == 2 && state["title"]?.stringValue == "Page B — Site One" + (kept ? " · kept copy" : "")
        }
        // Home/End in this page scroll it; the strip hides again reading down.
        try p.command(["cmd": "key", "name": "End"])
        _ = try p.evalUntil(2, "scrollY > innerHeight ? scrollY : null")
        s = try p.stateUntil("the tab strip hidden again reading down") { $0["tabStrip"]?.stringValue == "hidden" }
        #expect(s["active"]?.intValue == 2, "End switched tabs")
        try p.command(["cmd": "key", "name": "Home"])
        _ = try p.evalUntil(2, "scrollY === 0 ? true : null")
        // Back at the top the strip shows again; the click waits for it (on a busy machine the
        // scroll's event can come after the page reached the top, and a click on a hidden strip
        // lands in the page).
        _ = try p.stateUntil("the tab strip shown again at the top") { $0["tabStrip"]?.stringValue == "shown" }
        // A click on the strip: the tab it names, and the keyboard in its page.
        try p.command(["cmd": "click", "tabLabel": 1])
        s = try p.stateUntil("tab 1 shown after a click on the strip, the page focused") { $0["active"]?.intValue == 1 && $0["focus"]?.stringValue == "page" }
        #expect(s["title"]?.stringValue == "Page C — Site One")
        try p.command(["cmd": "key", "name": "End"])
        _ = try p.evalUntil(1, "scrollY > innerHeight ? scrollY : null")
        #expect(try p.command(["cmd": "state"])["active"]?.intValue == 1, "End after a click on the strip switched tabs")

        // Ctrl+Q: the browser quits, its session saved: the three tabs, C shown.
        // No answer comes: the browser ends first.
        p.process.send(#"{"cmd":"key","name":"ctrl+q"}"# + "\n")
        try p.waitFor("the quit after Ctrl+Q", timeout: 30) { $0["event"]?.stringValue == "quit" }
        #expect(p.process.wait(timeout: 30), "the browser did not end after Ctrl+Q")
        let saved = try rig.cli(["call", "tabs.get", "--site", rig.origins[0], "--json"])
        let session = try JSONParser.parse(Array(saved.out.utf8), limits: .document)
        let result = session["result"] ?? session
        let urls = result["tabs"]?.arrayValue?.compactMap { $0["url"]?.stringValue } ?? []
        #expect(urls == [a, rig.origins[0] + "/c.html", b] && result["active"]?.intValue == 1, "tabs.get after Ctrl+Q: \(saved.out)")
    }

    /// Ctrl+click and middle-click on a link open it in a new tab behind the page, which stays;
    /// a plain click follows the link in the same tab.
    @Test func ctrlClickAndMiddleClickOpenALinkInANewTab() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        for name in ["A", "B", "C"] { try rig.write(rig.ports[0], name.lowercased() + ".html", Self.linkedArticle(name)) }
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        let a = rig.origins[0] + "/a.html", b = rig.origins[0] + "/b.html", c = rig.origins[0] + "/c.html"
        let p = try rig.launch(["--no-prefetch", a])
        _ = try p.waitForLoads(1)
        _ = try p.evalUntil(0, "document.readyState === 'complete' ? true : null")
        try p.command(["cmd": "click", "selector": "#b", "modifiers": "ctrl"])
        var s = try p.stateUntil("B in a new tab after Ctrl+click") { Self.tabURLs($0) == [a, b] }
        #expect(s["active"]?.intValue == 0, "Ctrl+click left the page")
        try p.command(["cmd": "click", "selector": "#c", "button": 2])
        s = try p.stateUntil("C in a new tab after a middle-click") { Self.tabURLs($0) == [a, b, c] }
        #expect(s["active"]?.intValue == 0, "a middle-click left the page")
        #expect(try p.eval(0, "location.href")?.stringValue == a)
        // A plain click: the same tab goes to B.
        try p.command(["cmd": "click", "selector": "#b"])
        s = try p.stateUntil("B in the first tab after a plain click") { Self.tabURLs($0) == [b, b, c] }
        try p.quit()
    }

    /// A window manager's close request (WM_DELETE_WINDOW through the X server) is honoured the
    /// first time, 20 times in 20: right after the window comes up, after its page loaded, and
    /// with a session save pending (a page just changed). Each try waits for the `quit` event
    /// and the process's end, with a deadline; no second request is ever sent.
    @Test func aCloseRequestIsHonouredAtOnce() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "a.html", Self.linkedArticle("A"))
        try rig.write(rig.ports[0], "b.html", Self.linkedArticle("B"))
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        var slowest = 0.0
        for attempt in 0..<20 {
            let p = try rig.launch(["--no-prefetch", rig.origins[0] + "/a.html"])
            try p.waitFor("ready (try \(attempt))") { $0["event"]?.stringValue == "ready" }
            switch attempt % 3 {
            case 0: break
            case 1: _ = try p.waitForLoads(1)
            default:
                _ = try p.waitForLoads(1)
                try p.command(["cmd": "address", "text": .string(rig.origins[0] + "/b.html")])
            }
            let asked = Date()
            try p.command(["cmd": "close"])
            try p.waitFor("the quit after one close request (try \(attempt))", timeout: 20) { $0["event"]?.stringValue == "quit" }
            #expect(p.process.wait(timeout: 20), "the browser did not end after its close request (try \(attempt))")
            slowest = max(slowest, Date().timeIntervalSince(asked))
        }
        print("aCloseRequestIsHonouredAtOnce: the slowest close took \(slowest) s")
    }
}
