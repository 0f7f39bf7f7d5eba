import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON

/// Inbox and workflow state is per site and vault: two scopes never share a file, and the
/// store-wide files of before are read (read marks) or ignored (runs, last looks), never written.
@Suite struct CoreScopeTests {
    static func home() throws -> (CoreStateDirectory, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-scope-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return (CoreStateDirectory(home: dir.path), dir)
    }
    static let a = CoreScope(site: "1dd2bdf0-909a-4dd5-845d-6dbc7784be86", vault: "notes")
    static let b = CoreScope(site: "c9fbb8fb-1a2d-43ab-b805-fb8948e54018", vault: "notes")
    static func e(_ p: String, _ v: String) -> VaultListingEntry { VaultListingEntry(path: p, version: v, size: 1) }

    @Test func twoSitesKeepTheirOwnRunsLooksAndMarks() throws {
        let (state, dir) = try Self.home()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try state.folder(Self.a) == dir.path + "/core/sites/\(Self.a.site!)/vaults/notes")
        #expect(try state.folder(CoreScope(site: nil, vault: "notes")) == dir.path + "/core/store/vaults/notes")
        #expect(try state.folder(CoreScope(site: Self.a.site, vault: nil)) == dir.path + "/core/sites/\(Self.a.site!)")
        #expect(throws: CoreFileError.self) { try state.folder(CoreScope(site: "../x", vault: nil)) }
        #expect(throws: CoreFileError.self) { try state.folder(CoreScope(site: nil, vault: "../x")) }
        #expect(throws: CoreFileError.self) { try state.folder(CoreScope(site: nil, vault: ".hidden")) }

        try state.setWorkflowPosition(2, name: "morning", scope: Self.a)
        #expect(try state.workflowPositions(Self.a) == ["morning": 2])
        #expect(try state.workflowPositions(Self.b) == [:], "site B's run of the same name is its own")

        let listing = [Self.e("inbox/briefs/a.md", "v1")]
        let marksA = FileInboxMarksStore(state: state, scope: Self.a), marksB = FileInboxMarksStore(state: state, scope: Self.b)
        let first = try state.lookAtInbox(listing: listing, scope: Self.a, marks: marksA, now: Instant(milliseconds: 5)!) { $0 }
        #expect(first.map(\.unread) == [true], "the items are as they were before this look marked them")
        let again = try state.lookAtInbox(listing: listing, scope: Self.a, marks: marksA, now: Instant(milliseconds: 6)!)
        #expect(again.map(\.unread) == [false] && again.map(\.isNewSinceLastLook) == [false])
        let other = try state.lookAtInbox(listing: listing, scope: Self.b, marks: marksB, now: Instant(milliseconds: 7)!)
        #expect(other.map(\.unread) == [true] && other.map(\.isNewSinceLastLook) == [true], "site A's look and mark are not site B's")
        for f in ["workflow-runs.json", "inbox-seen.json", "inbox-read.json"] {
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/core/" + f), "nothing store-wide is written (\(f))")
        }
    }

    @Test func theStoreWideMarksOfBeforeSeedAScopeAndTheOldRunsAndLooksAreIgnored() throws {
        let (state, dir) = try Self.home()
        defer { try? FileManager.default.removeItem(at: dir) }
        var old = InboxReadMarks()
        old.markRead(path: "inbox/briefs/a.md", version: "v1", at: Instant(milliseconds: 1)!)
        try state.writeJSON(old.json, to: state.legacyInboxMarks)
        try state.writeJSON(["format": "sitekeep.workflow-runs.v1", "runs": ["morning": 2]], to: state.legacyWorkflowRuns)
        try state.writeJSON(["format": "sitekeep.inbox-seen.v1", "entries": [["path": "inbox/briefs/a.md", "version": "v1", "size": 1]]],
                            to: state.legacyInboxSeen)
        let before = try Data(contentsOf: URL(fileURLWithPath: state.legacyInboxMarks))

        #expect(try state.workflowPositions(Self.a) == [:])
        #expect(try state.inboxLastLooked(Self.a) == nil)
        let items = try state.lookAtInbox(listing: [Self.e("inbox/briefs/a.md", "v1"), Self.e("inbox/briefs/b.md", "w1")], scope: Self.a,
                                          marks: FileInboxMarksStore(state: state, scope: Self.a), now: Instant(milliseconds: 9)!)
        #expect(items.map(\.path) == ["inbox/briefs/b.md", "inbox/briefs/a.md"])
        #expect(items.map(\.unread) == [true, false], "the old mark of that very version counts")
        // A changed version is unread whatever the old file said.
        let changed = try state.lookAtInbox(listing: [Self.e("inbox/briefs/a.md", "v2")], scope: Self.b,
                                            marks: FileInboxMarksStore(state: state, scope: Self.b), now: Instant(milliseconds: 9)!)
        #expect(changed.map(\.unread) == [true])
        #expect(try Data(contentsOf: URL(fileURLWithPath: state.legacyInboxMarks)) == before, "the old file is never written")
        // Once the scope has marks of its own, the old file no longer speaks for it.
        try FileInboxMarksStore(state: state, scope: Self.a).save(InboxReadMarks())
        #expect(try FileInboxMarksStore(state: state, scope: Self.a).load().marks.isEmpty)
    }
}
