import Foundation
import Testing
@testable import SiteKeepBrowserCore
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

let one = try! BrowserSite(id: "11111111-1111-4111-8111-111111111111", name: "One",
                      origins: ["https://promptugal.news:443", "http://127.0.0.1:8001"], webFolder: "/s/1/web")
let two = try! BrowserSite(id: "22222222-2222-4222-8222-222222222222", name: "Two", origins: ["http://127.0.0.1:8002"], webFolder: "/s/2/web")

@Suite struct NavigationPolicyTests {
    let policy = NavigationPolicy(sites: [one, two])

    /// Ports tell sites apart (WebKit's own allow lists ignore them); default ports are one origin.
    @Test func originsAreComparedWithTheirPorts() {
        #expect(one.owns(url: "http://127.0.0.1:8001/a?b#c"))
        #expect(!one.owns(url: "http://127.0.0.1:8002/"))
        #expect(!one.owns(url: "http://127.0.0.1/"))
        #expect(one.owns(url: "https://PROMPTUGAL.news/x") && one.owns(url: "https://promptugal.news:443/"))
        #expect(!one.owns(url: "http://promptugal.news/"), "http is another origin than https")
        #expect(!one.owns(url: "https://www.promptugal.news/"), "a subdomain is another origin")
        #expect(one.pageOrigins == ["https://promptugal.news", "http://127.0.0.1:8001"])
    }

    /// Ctrl+T's front page is the root of the origin the reader is on, on a site served on several.
    @Test func aNewTabOpensTheFrontPageOfTheOriginTheReaderIsOn() {
        #expect(one.frontPage(from: "http://127.0.0.1:8001/a/b.html?x#y") == "http://127.0.0.1:8001/")
        #expect(one.frontPage(from: "https://promptugal.news:443/x") == "https://promptugal.news/")
        #expect(one.frontPage(from: "http://127.0.0.1:8002/") == one.startURL, "another site's page gives the site's own start")
        #expect(one.frontPage(from: nil) == "https://promptugal.news/" && one.frontPage(from: "about:blank") == one.startURL)
    }

    @Test func aViewStaysOnItsSite() {
        #expect(policy.decide("http://127.0.0.1:8001/next", in: one) == .stay)
        #expect(policy.decide("http://127.0.0.1:8002/", in: one) == .openSite(two))
        #expect(policy.decide("https://example.org/", in: one) == .external("https://example.org/"))
        #expect(policy.decide("http://localhost:8001/", in: one) == .external("http://localhost:8001/"), "localhost is not 127.0.0.1")
        #expect(policy.decide("mailto:a@b.c", in: one) == .external("mailto:a@b.c"))
        for url in ["javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "blob:http://127.0.0.1:8001/x", "about:config"] {
            guard case .refuse = policy.decide(url, in: one) else { Issue.record("\(url) was not refused"); continue }
        }
    }

    /// Issue 33: a foreign address stops at the navigation action, before any request, gesture
    /// or not (a link, a form, a script, a redirect, a frame); the site's own addresses go on;
    /// another app-bound site stops there only when the reader asked for it (as a frame of the
    /// page it is decided at its response).
    @Test func foreignNavigationActionsStopBeforeAnyRequest() {
        for gesture in [true, false] {
            #expect(policy.decideAction("https://example.org/a", in: one, userGesture: gesture) == .stopHere(.external("https://example.org/a")))
            #expect(policy.decideAction("http://localhost:8001/", in: one, userGesture: gesture) == .stopHere(.external("http://localhost:8001/")))
            #expect(policy.decideAction("http://127.0.0.1:8001/next", in: one, userGesture: gesture) == .proceed)
            #expect(policy.decideAction("about:blank", in: one, userGesture: gesture) == .proceed)
        }
        #expect(policy.decideAction("http://127.0.0.1:8002/", in: one, userGesture: true) == .stopHere(.openSite(two)))
        #expect(policy.decideAction("http://127.0.0.1:8002/frame.html", in: one, userGesture: false) == .proceed)
    }
}

@Suite struct PageRequestTests {
    @Test func theOpAndTheRestAreTheArguments() throws {
        let r = try PageRequest.parse(#"{"op":"storage.set","key":"k","value":"v"}"#).get()
        #expect(r.op == "storage.set")
        #expect(r.args == ["key": "k", "value": "v"])
    }

    @Test func malformedMessagesAndHelloAreRefused() {
        for (text, code) in [("[1]", "bad_request"), ("{\"key\":1}", "bad_request"), ("not json", "bad_request"),
                             (#"{"op":"hello","origin":"https://evil.example"}"#, "not_allowed")] {
            guard case .failure(let reply) = PageRequest.parse(text) else { Issue.record("\(text) was accepted"); continue }
            #expect(reply.json["error"]?["code"]?.stringValue == code, "\(text)")
        }
        guard case .failure(let big) = PageRequest.parse("{\"op\":\"x\",\"v\":\"" + String(repeating: "a", count: 1 << 20) + "\"}") else {
            Issue.record("an oversized message was accepted"); return
        }
        #expect(big.json["error"]?["code"]?.stringValue == "too_large")
    }

    @Test func daemonRepliesBecomePageReplies() throws {
        let ok = PageReply.from(frame: try JSONParser.parse(Array(#"{"id":3,"ok":true,"result":{"value":"x"}}"#.utf8)))
        #expect(ok.text == #"{"ok":true,"result":{"value":"x"}}"#)
        let no = PageReply.from(frame: try JSONParser.parse(Array(#"{"id":3,"ok":false,"error":{"code":"not_allowed","message":"m"}}"#.utf8)))
        #expect(no.json["error"]?["code"]?.stringValue == "not_allowed")
    }
}

@Suite struct PageScriptsTests {
    @Test func eventsBecomeNrEvents() {
        #expect(PageScripts.pageEventName(for: "schedule.changed") == "nr:schedule")
        #expect(PageScripts.pageEventName(for: "vault.changed") == "nr:vault")
        #expect(PageScripts.pageEventName(for: "schedule.set") == nil)
        #expect(PageScripts.pageEventName(for: "a\"b.changed") == nil)
        let js = PageScripts.dispatch(event: "schedule.changed", data: ["note": "</script>\u{2028}"]) ?? ""
        #expect(js.contains("\"nr:schedule\"") && js.contains("\\u2028") && !js.contains("\u{2028}"))
    }

    /// Both scripts check the top frame and the site's own origins, and the relay is the only
    /// code that names the isolated handler.
    @Test func scriptsCheckTheTopFrameAndOrigin() {
        let relay = PageScripts.relay(site: one)
        let shim = PageScripts.pageShim(site: one, version: 1, ops: ["hello", "storage.get"])
        for s in [relay, shim] {
            #expect(s.contains("window.top !== window"))
            #expect(s.contains(#"["https://promptugal.news","http://127.0.0.1:8001"]"#))
        }
        #expect(relay.contains("handlers.pt.postMessage"))
        #expect(!shim.contains("\"hello\""), "ptApp.ops lists hello")
        #expect(shim.contains(#"ops: Object.freeze(["storage.get"])"#))
    }
}

@Suite struct TabSessionTests {
    /// A session is restored into this site's views only: URLs of other origins are dropped (a
    /// page could have put them there with tabs.set), and the active index follows.
    @Test func foreignURLsAreDroppedOnRestore() throws {
        let saved: JSONValue = ["tabs": [["url": "https://evil.example/"], ["url": "http://127.0.0.1:8001/a", "scroll": 0.4, "title": "A"],
                                         ["url": "http://127.0.0.1:8001/b", "scroll": 7.0]], "active": 2]
        let s = TabSession(result: saved, site: one)
        #expect(s.tabs.map(\.url) == ["http://127.0.0.1:8001/a", "http://127.0.0.1:8001/b"])
        #expect(s.tabs[1].scroll == 1, "scroll is clamped to 0…1")
        #expect(s.active == 1)
        #expect(s.arguments["active"]?.intValue == 1)
        #expect(s.arguments["tabs"]?.arrayValue?.first?["title"]?.stringValue == "A")
    }
}

@Suite struct KeptPageCacheTests {
    static let digest: @Sendable ([UInt8]) -> String = { bytes in SHA256.hash(bytes).map { String(format: "%02x", $0) }.joined() }

    func cache(budget: Int64 = 1 << 20) throws -> (KeptPageCache, String) {
        var template = Array("\(NSTemporaryDirectory())/kept.XXXXXX".utf8CString)
        let dir = String(cString: mkdtemp(&template)!)
        return (KeptPageCache(folder: dir + "/kept", budget: budget, digest: Self.digest), dir)
    }

    /// A document is stored under the SHA-256 of its bytes, once, whatever the URL; the fragment is not part of the page.
    @Test func contentAddressed() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let doc = Array("<p>article</p>".utf8)
        try c.keep(url: "http://127.0.0.1:8001/a#top", title: "A", document: doc)
        try c.keep(url: "http://127.0.0.1:8001/a-copy", title: "A", document: doc)
        let name = Self.digest(doc)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/kept/objects/\(name.prefix(2))/\(name)"))
        #expect(c.usage() == Int64(doc.count), "one object for two URLs")
        #expect(c.page(for: "http://127.0.0.1:8001/a")?.document == doc)
        #expect(c.page(for: "http://127.0.0.1:8001/a")?.title == "A")
        #expect(c.page(for: "http://127.0.0.1:8001/b") == nil)
        var st = stat()
        #expect(stat("\(dir)/kept/objects/\(name.prefix(2))/\(name)", &st) == 0 && st.st_mode & 0o077 == 0, "kept files are private")
    }

    /// A copy whose bytes do not match its name is not shown, and is removed.
    @Test func damagedCopiesAreDropped() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let doc = Array("<p>original</p>".utf8)
        try c.keep(url: "http://127.0.0.1:8001/a", title: nil, document: doc)
        let name = Self.digest(doc)
        try Data("<p>tampered</p>".utf8).write(to: URL(fileURLWithPath: "\(dir)/kept/objects/\(name.prefix(2))/\(name)"))
        #expect(c.page(for: "http://127.0.0.1:8001/a") == nil)
        #expect(!c.contains(url: "http://127.0.0.1:8001/a"))
    }

    /// Past the budget the least recently used pages go first; a page larger than the budget is refused.
    @Test func sizeBudget() throws {
        let (c, dir) = try cache(budget: 250)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = { (n: Int) in [UInt8](repeating: UInt8(n), count: 100) }
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        try c.keep(url: "http://x/1", title: nil, document: page(1), now: t0)
        try c.keep(url: "http://x/2", title: nil, document: page(2), now: t0.addingTimeInterval(1))
        _ = c.page(for: "http://x/1", now: t0.addingTimeInterval(2))   // 1 read again: 2 is now the oldest use
        try c.keep(url: "http://x/3", title: nil, document: page(3), now: t0.addingTimeInterval(3))
        #expect(c.usage() <= 250)
        #expect(c.contains(url: "http://x/1") && c.contains(url: "http://x/3"))
        #expect(!c.contains(url: "http://x/2"), "the least recently used page was not dropped")
        let objects = try FileManager.default.subpathsOfDirectory(atPath: dir + "/kept/objects").filter { $0.count > 3 }
        #expect(objects.count == 2, "an object no page names was left behind")
        #expect(throws: KeptPageError.tooLarge(bytes: 300, budget: 250)) { try c.keep(url: "http://x/4", title: nil, document: [UInt8](repeating: 4, count: 300)) }
    }
}

extension KeptPageCacheTests {
    /// A prefetch keeps within what is left of the budget: it never drops a page to make room,
    /// and says the budget is reached instead.
    @Test func aPrefetchNeverPushesOutKeptPages() throws {
        let (c, dir) = try cache(budget: 250)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let page = { (n: Int) in [UInt8](repeating: UInt8(n), count: 100) }
        try c.keep(url: "http://x/1", title: nil, document: page(1))
        try c.keep(url: "http://x/2", title: nil, document: page(2), makeRoom: false)
        #expect(throws: KeptPageError.full(bytes: 100, used: 200, budget: 250)) {
            try c.keep(url: "http://x/3", title: nil, document: page(3), makeRoom: false)
        }
        #expect(c.contains(url: "http://x/1") && c.contains(url: "http://x/2") && !c.contains(url: "http://x/3"))
        // A copy of bytes already kept takes no room.
        try c.keep(url: "http://x/1-again", title: nil, document: page(1), makeRoom: false)
        #expect(c.usage() == 200)
    }
}

/// The lines of the reading list F9 shows: each state's mark, and how far for an article part read.
@Suite struct ReadingListLineTests {
    @Test func eachStateHasItsMark() {
        #expect(ReadingItem(id: "/a.html", state: "read").listLine == "✓ read  /a.html")
        #expect(ReadingItem(id: "/b.html", state: "partial", progress: 0.4).listLine == "◐ part read  /b.html  40%")
        #expect(ReadingItem(id: "/c.html", state: "partial").listLine == "◐ part read  /c.html")
        #expect(ReadingItem(id: "/d.html", state: "unread").listLine == "○ unread  /d.html")
        // How far is shown only for an article part read.
        #expect(ReadingItem(id: "a7", state: "read", progress: 1).listLine == "✓ read  a7")
    }
}

/// The list F9 shows: the site's records, and its kept pages with no record as unread, matched
/// as prefetching matches them, only the site's own pages, part read first, bounded.
@Suite struct ReadingListMergeTests {
    @Test func keptPagesWithoutARecordAreUnread() {
        let records = [ReadingItem(id: "http://127.0.0.1:8001/done.html", state: "read"),
                       ReadingItem(id: "/half.html", state: "partial", progress: 0.4),
                       ReadingItem(id: "a7", state: "read")]
        let kept = ["http://127.0.0.1:8001/new.html", "http://127.0.0.1:8001/done.html",
                    "https://promptugal.news/half.html#part2", "http://127.0.0.1:8001/b.html"]
        let list = ReadingList.merge(records: records, kept: kept, site: one)
        #expect(list.items == [
            ReadingItem(id: "/half.html", state: "partial", progress: 0.4),
            ReadingItem(id: "http://127.0.0.1:8001/b.html", state: "unread"),
            ReadingItem(id: "http://127.0.0.1:8001/new.html", state: "unread"),
            ReadingItem(id: "a7", state: "read"),
            ReadingItem(id: "http://127.0.0.1:8001/done.html", state: "read"),
        ])
        #expect(list.omitted == 0)
        #expect(list.items.map(\.listLine).contains("○ unread  http://127.0.0.1:8001/new.html"))
    }

    /// The record ↔ kept URL rule is prefetching's: a path is on the site's first origin (so
    /// `/b.html` names https://promptugal.news/b.html, not the loopback origin's), the fragment is
    /// not part of the page, and a kept URL is listed once however many times it is kept.
    @Test func recordsMatchKeptURLsAsPrefetchingDoes() {
        let records = [ReadingItem(id: "/b.html", state: "read"), ReadingItem(id: "http://127.0.0.1:8001/c.html#x", state: "read")]
        let kept = ["http://127.0.0.1:8001/b.html", "https://promptugal.news/b.html", "http://127.0.0.1:8001/c.html",
                    "http://127.0.0.1:8001/d.html#one", "http://127.0.0.1:8001/d.html#two"]
        let unread = ReadingList.merge(records: records, kept: kept, site: one).items.filter { $0.state == "unread" }.map(\.id)
        #expect(unread == ["http://127.0.0.1:8001/b.html", "http://127.0.0.1:8001/d.html"])
        // The same rule as the plan's: what the list shows as recorded, a round does not fetch again.
        for url in kept.map(KeptPageCache.key(for:)) where !unread.contains(url) {
            #expect(records.contains { PrefetchPlan.address(of: $0.id, on: one) == .page(url) }, "\(url)")
        }
    }

    /// A site's list never shows another site's pages, even if one were in its cache folder.
    @Test func anotherSitesPagesAreNeverShown() {
        let kept = ["http://127.0.0.1:8002/theirs.html", "https://evil.example/x", "http://promptugal.news/a",
                    "file:///etc/passwd", "http://127.0.0.1:8001/mine.html"]
        let list = ReadingList.merge(records: [], kept: kept, site: one)
        #expect(list.items == [ReadingItem(id: "http://127.0.0.1:8001/mine.html", state: "unread")])
        #expect(ReadingList.merge(records: [], kept: kept, site: two).items == [ReadingItem(id: "http://127.0.0.1:8002/theirs.html", state: "unread")])
        #expect(list.items.allSatisfy { one.owns(url: $0.id) })
    }

    /// At most the limit, cut from the end (read articles first), the rest counted.
    @Test func boundedReadFirstToGo() {
        let records = (0..<5000).map { ReadingItem(id: "/read-\($0)", state: "read") } + [ReadingItem(id: "/p", state: "partial")]
        let kept = (0..<3000).map { "http://127.0.0.1:8001/kept-\($0)" }
        let list = ReadingList.merge(records: records, kept: kept, site: one)
        #expect(list.items.count == ReadingList.limit && list.omitted == 8001 - ReadingList.limit)
        #expect(list.items.first == ReadingItem(id: "/p", state: "partial"))
        #expect(list.items.dropFirst().allSatisfy { $0.state == "unread" })
        #expect(ReadingList.merge(records: records, kept: [], site: one, limit: 3).items.map(\.id) == ["/p", "/read-0", "/read-1"])
    }
}

extension KeptPageCacheTests {
    /// The cache lists its pages (for the reading list) without their documents, and listing
    /// them does not count as using them.
    @Test func listsKeptPages() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try c.keep(url: "http://127.0.0.1:8001/a#top", title: "A", document: Array("<p>a</p>".utf8), now: Date(timeIntervalSince1970: 100))
        try c.keep(url: "http://127.0.0.1:8001/b", title: nil, document: Array("<p>b</p>".utf8), now: Date(timeIntervalSince1970: 200))
        let pages = c.keptPages().sorted { $0.url < $1.url }
        #expect(pages.map(\.url) == ["http://127.0.0.1:8001/a", "http://127.0.0.1:8001/b"])
        #expect(pages.first?.title == "A" && pages.first?.usedAt == Date(timeIntervalSince1970: 100))
        #expect(c.keptPages().first { $0.url.hasSuffix("/a") }?.usedAt == Date(timeIntervalSince1970: 100), "listing used the page")
    }
}

/// What a prefetch round fetches from a site's reading list: the site's own pages, not read yet,
/// not kept yet, part read first, at most a round's worth; ids on other origins are refused.
@Suite struct PrefetchPlanTests {
    @Test func addressesOnTheSiteOnly() {
        #expect(PrefetchPlan.address(of: "/a.html", on: one) == .page("https://promptugal.news/a.html"))
        #expect(PrefetchPlan.address(of: "http://127.0.0.1:8001/b.html#part", on: one) == .page("http://127.0.0.1:8001/b.html"))
        #expect(PrefetchPlan.address(of: "https://PROMPTUGAL.news/c", on: one) == .page("https://PROMPTUGAL.news/c"))
        for foreign in ["http://127.0.0.1:8002/x", "https://evil.example/a", "http://promptugal.news/a", "//evil.example/a",
                        "/\\evil.example/a", "javascript:alert(1)", "file:///etc/passwd", "data:text/html,x", "ftp://127.0.0.1:8001/x"] {
            #expect(PrefetchPlan.address(of: foreign, on: one) == .foreign, "\(foreign)")
        }
        for plain in ["a1", "", "article 7", "/a b", String(repeating: "/", count: 1) + String(repeating: "a", count: 300)] {
            #expect(PrefetchPlan.address(of: plain, on: one) == .notAnAddress, "\(plain)")
        }
    }

    @Test func partReadFirstNotKeptAndBounded() {
        let items = [ReadingItem(id: "/u1", state: "unread"), ReadingItem(id: "/r1", state: "read"),
                     ReadingItem(id: "/p1", state: "partial", progress: 0.3), ReadingItem(id: "/kept", state: "partial"),
                     ReadingItem(id: "http://127.0.0.1:8002/other-site", state: "partial"), ReadingItem(id: "a7", state: "unread"),
                     ReadingItem(id: "/p1#again", state: "unread")]
        let plan = PrefetchPlan.make(items, site: one) { $0 == "https://promptugal.news/kept" }
        #expect(plan.urls == ["https://promptugal.news/p1", "https://promptugal.news/u1"])
        #expect(plan.refused == ["http://127.0.0.1:8002/other-site"] && plan.refusedCount == 1)
        // A huge list: one round takes at most its limit, and asks isKept no more than that.
        var asked = 0
        let huge = (0..<5000).map { ReadingItem(id: "/article-\($0)", state: "unread") } +
                   (0..<100).map { ReadingItem(id: "https://evil.example/\($0)", state: "partial") }
        let big = PrefetchPlan.make(huge, site: one) { _ in asked += 1; return false }
        #expect(big.urls.count == PrefetchPlan.limit && big.deferred == 5000 - PrefetchPlan.limit)
        #expect(asked == PrefetchPlan.limit)
        #expect(big.refusedCount == 100 && big.refused.count == PrefetchPlan.reportedRefusals)
    }

    @Test func theReadingListOfAReply() throws {
        let reply = PageReply.from(frame: try JSONParser.parse(Array(#"{"id":1,"ok":true,"result":{"articles":[{"id":"/a","state":"partial","progress":0.5},{"id":7}]}}"#.utf8)))
        #expect(ReadingItem.list(from: reply) == [ReadingItem(id: "/a", state: "partial", progress: 0.5)])
        #expect(ReadingItem.list(from: .error("locked", "m")).isEmpty)
    }
}

/// The browser checks the daemon's socket before it sends a byte, as the command line does: a
/// listener in a folder another user can enter never hears the site-list request or a page's
/// call (threat T64 family: the browser links only the wire, with its checks).
@Suite(.serialized, .enabled(if: FakeDaemon.available)) struct BrowserSocketTrustTests {
    @Test func aDaemonSocketInAFolderOpenToOthersGetsNothing() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-browser-trust-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        chmod(dir, 0o777)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let control = try FakeDaemon(path: dir + "/control.sock")
        defer { control.stop() }
        let bridge = try FakeDaemon(path: dir + "/bridge.sock")
        defer { bridge.stop() }
        let link = SocketDaemonLink(bridgePath: bridge.path)
        #expect(throws: DaemonLinkError.self) { _ = try link.sites() }
        do { _ = try link.sites() } catch {
            #expect(error.description.contains("untrusted_socket") && error.description.contains(control.path), "\(error)")
        }
        #expect(throws: DaemonLinkError.self) { _ = try link.open(origin: "https://a.example", onEvent: { _, _ in }, onClose: {}) }
        usleep(200_000)
        #expect(control.connections(atLeast: 0, timeout: 0.1).allSatisfy { $0 == 0 }, "the fake control socket received bytes")
        #expect(bridge.connections(atLeast: 0, timeout: 0.1).allSatisfy { $0 == 0 }, "the fake bridge socket received bytes")
    }
}

extension KeptPageCacheTests {
    static func sharedPage(_ body: String, figure: String, style: String) -> [UInt8] {
        Array("<!DOCTYPE html><html><head><style media=\"screen\">\(style)</style></head><body><img src=\"\(figure)\" alt=\"masthead\"><p>\(body)</p></body></html>".utf8)
    }

    /// Issue 51: a figure and a style sheet that every page of a site shows are kept once for
    /// the site and counted once against its budget, and each page comes back byte for byte.
    @Test func sharedPartsAreKeptOnceAndCountedOnce() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let figure = "data:image/png;base64," + String(repeating: "QUJD", count: 4000)   // 16 KB
        let style = "body { background: #f4f1ea } " + String(repeating: "p { margin: 0 } ", count: 400)
        let pages = (1...5).map { Self.sharedPage("article \($0) " + String(repeating: "text ", count: 50), figure: figure, style: style) }
        for (i, p) in pages.enumerated() { try c.keep(url: "http://x/\(i)", title: nil, document: p) }
        for (i, p) in pages.enumerated() { #expect(c.page(for: "http://x/\(i)")?.document.elementsEqual(p) == true, "page \(i) did not come back whole") }
        let shared = Int64(figure.utf8.count + style.utf8.count)
        let whole = pages.reduce(Int64(0)) { $0 + Int64($1.count) }
        #expect(c.usage() < whole - 3 * shared, "the shared parts are counted more than once: \(c.usage()) of \(whole)")
        #expect(c.usage() > shared, "the shared parts are not counted at all")
        let objects = try FileManager.default.subpathsOfDirectory(atPath: dir + "/kept/objects").filter { $0.count > 3 }
        #expect(objects.count == 5 + 2, "\(objects.count) objects for 5 pages sharing 2 parts")
    }

    /// A damaged shared part is never shown: the pages that name it are dropped; pages that do
    /// not are untouched. A dropped page's shared part stays while another page names it.
    @Test func aDamagedSharedPartDropsItsPagesAndALivePartIsKept() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let figure = "data:image/svg+xml;base64," + String(repeating: "PHN2", count: 1000)
        let a = Self.sharedPage("A", figure: figure, style: "p{}"), b = Self.sharedPage("B", figure: figure, style: "p{}")
        let plain = Array("<p>no parts</p>".utf8)
        try c.keep(url: "http://x/a", title: nil, document: a)
        try c.keep(url: "http://x/b", title: nil, document: b)
        try c.keep(url: "http://x/plain", title: nil, document: plain)
        let part = Self.digest(Array(figure.utf8))
        let path = "\(dir)/kept/objects/\(part.prefix(2))/\(part)"
        #expect(FileManager.default.fileExists(atPath: path), "the figure is not an object of its own")
        try Data("torn".utf8).write(to: URL(fileURLWithPath: path))
        #expect(c.page(for: "http://x/a") == nil && c.page(for: "http://x/b") == nil)
        #expect(c.page(for: "http://x/plain")?.document.elementsEqual(plain) == true)

        // Budget: dropping the older of two pages sharing a part keeps the part for the other.
        let (d, dir2) = try cache(budget: Int64(figure.utf8.count + 700))
        defer { try? FileManager.default.removeItem(atPath: dir2) }
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        try d.keep(url: "http://x/a", title: nil, document: a, now: t0)
        try d.keep(url: "http://x/b", title: nil, document: b, now: t0.addingTimeInterval(1))
        try d.keep(url: "http://x/c", title: nil, document: Array(repeating: 0x41, count: 400), now: t0.addingTimeInterval(2))
        #expect(!d.contains(url: "http://x/a"), "the least recently used page was not dropped")
        #expect(d.page(for: "http://x/b")?.document.elementsEqual(b) == true, "the part the remaining page shares was dropped with the other")
    }

    /// A page whose own text holds the marker is kept whole: nothing in a page can name a part.
    /// And split/join give back any document byte for byte, whatever its quotes and tags.
    @Test func theMarkerInAPageNamesNothingAndSplittingIsExact() throws {
        let (c, dir) = try cache()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let figure = "data:image/png;base64," + String(repeating: "QUJD", count: 1000)
        try c.keep(url: "http://x/a", title: nil, document: Self.sharedPage("A", figure: figure, style: ""))
        let sneaky = Array("<p>\(KeptPageCache.partMarker)\(Self.digest(Array(figure.utf8)))</p><img src=\"\(figure)\">".utf8)
        try c.keep(url: "http://x/s", title: nil, document: sneaky)
        #expect(c.page(for: "http://x/s")?.document.elementsEqual(sneaky) == true, "a page holding the marker text did not come back whole")

        var g = SystemRandomNumberGenerator()
        let pieces = ["\"data:", "\"", "<style", ">", "</style>", "<style media=x>", "a", String(repeating: "z", count: 3000), "'"]
        for _ in 0..<300 {
            let doc = Array((0..<Int.random(in: 0..<12, using: &g)).map { _ in pieces.randomElement(using: &g)! }.joined().utf8)
            let (stored, parts) = c.split(doc)
            #expect(KeptPageCache.join(stored, parts: parts)?.elementsEqual(doc) == true, "split/join changed \(String(decoding: doc.prefix(80), as: UTF8.self))")
        }
    }
}
