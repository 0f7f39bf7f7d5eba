import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport

@Suite struct NextSnapshotTests {
    @Test func theSnapshotHoldsOnlyWhatAWidgetShowsAndIsWrittenAtomically() throws {
        let agenda = try CoreFixtures.agenda()
        let s = try CoreFixtures.schedule(["ps26-night-across", "ps26-cs-23-1000", "gone-2025-talk"])
        let now = try Instant(rfc3339: "2026-10-23T07:00:00Z")
        let snap = NextSnapshot.build([.init(siteName: "Promptugal", schedule: s, agenda: agenda)], now: now, lastSync: now, extraBadges: ["inbox": 2])
        #expect(snap.items.first?.title.hasPrefix("Newsroom stand-up") == true)   // the 09:00 stand-up comes first
        #expect(snap.items.count == 5)
        #expect(snap.badges["today"] == 1)
        #expect(snap.badges["inbox"] == 2)
        let dir = try Fixtures.temporaryDirectory("sitekeep-next")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = NextSnapshotStore(path: dir.appendingPathComponent("next.json").path)
        try store.write(snap)
        #expect(try store.read() == snap)
        let text = try String(contentsOfFile: store.path, encoding: .utf8)
        // No ids, no URLs, nothing but the widget's words.
        #expect(!text.contains("ps26-"))
        #expect(!text.contains("https://"))
        #expect(!text.contains("gone-2025-talk"))
        // Only the final file is left: no temporary files.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["next.json"])
        #expect(try NextSnapshotStore(path: dir.appendingPathComponent("none.json").path).read() == nil)
    }
}

@Suite struct WorkflowTests {
    static let morning: JSONValue = [
        "format": "sitekeep.workflow.v1", "name": "morning", "title": "Morning run",
        "steps": [["page": "https://newsroom.sgit.ai/wires/", "title": "The wires"], ["query": "articles.unread", "site": "https://newsroom.sgit.ai"],
                  ["page": "https://newsroom.sgit.ai/briefs/"]],
    ]

    @Test func aValidWorkflowStepsThroughWithNext() throws {
        let w = try Workflow(json: Self.morning)
        var run = WorkflowRun(w)
        #expect(run.current == .page(url: "https://newsroom.sgit.ai/wires/", title: "The wires"))
        let moved1 = run.next()
        #expect(moved1 && run.current == .query(.unreadArticles, site: "https://newsroom.sgit.ai", title: nil))
        let moved2 = run.next()
        #expect(moved2 && run.isLast)
        let moved3 = run.next()
        #expect(!moved3)
        #expect(run.position == 2)
        run.restart()
        #expect(run.position == 0)
        #expect(try Workflow(json: w.json) == w)
    }

    @Test func badWorkflowsAreRefusedWithThePath() {
        func refusal(_ edit: (inout [JSONMember]) -> Void) -> String? {
            guard case .object(var m) = Self.morning else { return "?" }
            edit(&m)
            do { _ = try Workflow(json: .object(m)); return nil } catch { return error.path }
        }
        func set(_ key: String, _ v: JSONValue) -> (inout [JSONMember]) -> Void {
            { m in if let i = m.firstIndex(where: { $0.key == key }) { m[i].value = v } else { m.append(JSONMember(key: key, value: v)) } }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal(set("format", "sitekeep.workflow.v2")) == "workflow.format")
        #expect(refusal(set("name", "Morning Run")) == "workflow.name")
        #expect(refusal(set("steps", [])) == "workflow.steps")
        #expect(refusal(set("steps", [["page": "file:///etc/passwd"]])) == "workflow.steps[0].page")
        #expect(refusal(set("steps", [["page": "https://a.test/", "query": "articles.unread"]])) == "workflow.steps[0].query")
        #expect(refusal(set("steps", [["query": "rm -rf"]])) == "workflow.steps[0].query")
        #expect(refusal(set("steps", [["page": "https://a.test/", "run": "x"]])) == "workflow.steps[0].run")
        #expect(refusal(set("owner", "agent")) == "workflow.owner")
        #expect(refusal(set("steps", .array(Array(repeating: ["page": "https://a.test/"], count: 51)))) == "workflow.steps")
    }

    struct Folder: WorkflowSource {
        let contents: [(String, String)]
        func files() throws(CoreFileError) -> [(name: String, bytes: [UInt8])] { contents.map { ($0.0, Array($0.1.utf8)) } }
    }

    @Test func aCatalogueReportsFilesThatDoNotValidate() throws {
        let good = JSONSerializer.string(Self.morning)
        let c = try WorkflowCatalogue(source: Folder(contents: [("morning", good), ("review", "{"), ("other", good)]))
        #expect(c.workflows.map(\.name) == ["morning"])
        #expect(c.refused.map(\.path) == ["workflows/other.json.name", "workflows/review.json"])
    }
}

@Suite struct InboxTests {
    static func e(_ p: String, _ v: String) -> VaultListingEntry { VaultListingEntry(path: p, version: v, size: 10) }

    @Test func whatAgentsWroteSinceTheLastLookIsNewAndUnreadUntilMarked() throws {
        let before = [Self.e("inbox/briefs/2026-10-23.md", "b1"), Self.e("notes/mine.md", "n1")]
        let after = [Self.e("inbox/briefs/2026-10-23.md", "b1"), Self.e("inbox/briefs/2026-10-24.md", "b2"),
                     Self.e("inbox/reviews/article-7.md", "r1"), Self.e("notes/mine.md", "n2"), Self.e(InboxReadMarks.path, "m1")]
        var marks = InboxReadMarks()
        marks.markRead(path: "inbox/briefs/2026-10-23.md", version: "b1", at: Instant(milliseconds: 1)!)
        let items = Inbox.items(current: after, lastLooked: before, marks: marks)
        #expect(items.map(\.path) == ["inbox/briefs/2026-10-24.md", "inbox/reviews/article-7.md", "inbox/briefs/2026-10-23.md"])
        #expect(items.map(\.unread) == [true, true, false])
        #expect(items.map(\.isNewSinceLastLook) == [true, true, false])
        #expect(items.map(\.kind) == [.brief, .review, .brief])
        // A new version of a read file is unread again.
        let changed = Inbox.items(current: [Self.e("inbox/briefs/2026-10-23.md", "b1-v2")], lastLooked: after, marks: marks)
        #expect(changed.first?.unread == true)
        #expect(Inbox.diff(from: before, to: after) == Inbox.Changes(added: ["inbox/briefs/2026-10-24.md", "inbox/reviews/article-7.md", InboxReadMarks.path], changed: ["notes/mine.md"], removed: []))
    }

    @Test func readMarksTravelAndMergeByTheLaterRead() throws {
        var phone = InboxReadMarks(), laptop = InboxReadMarks()
        phone.markRead(path: "inbox/a.md", version: "v1", at: Instant(milliseconds: 100)!)
        laptop.markRead(path: "inbox/a.md", version: "v2", at: Instant(milliseconds: 200)!)
        laptop.markRead(path: "inbox/b.md", version: "w1", at: Instant(milliseconds: 50)!)
        let m1 = phone.merged(with: laptop), m2 = laptop.merged(with: phone)
        #expect(m1 == m2)
        #expect(m1.marks["inbox/a.md"]?.version == "v2")
        #expect(m1.marks.count == 2)
        #expect(try InboxReadMarks(json: JSONParser.parse(JSONSerializer.string(m1.json))) == m1)
        #expect(throws: CoreFieldError.self) { try InboxReadMarks(json: ["format": "sitekeep.inbox-read.v1", "read": [["path": "x", "version": "", "readAt": 1]]]) }
    }
}

@Suite struct IdentityTests {
    @Test func aSiteSeesItsOwnIdentityElseTheStores() throws {
        let store = try IdentityProfile(teamID: "summit", displayName: "Dinis")
        let s = IdentitySettings(store: store, sites: ["site-b": try IdentityProfile(teamID: "newsroom", displayName: "Dinis (newsroom)")])
        #expect(s.identity(forSite: "site-a") == store)
        #expect(s.identity(forSite: "site-b")?.teamID == "newsroom")
        #expect(try IdentitySettings(json: s.json) == s)
        #expect(throws: CoreFieldError("identity.team", "(\"Team One\") must be 1 to 128 of a-z, 0-9, ., _ and -")) {
            try IdentityProfile(teamID: "Team One", displayName: "x")
        }
        #expect(throws: CoreFieldError.self) { try IdentityProfile(teamID: "t", displayName: "a\nb") }
    }
}
