import Foundation
import Testing
import SiteKeepCore
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepTestSupport

/// A real partition (SQLite file, sealed rows) in a scratch folder, for the core's stores.
final class ScratchPartition: @unchecked Sendable {
    let dir: URL
    let registry: SiteRegistry
    let partition: Partition

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-core-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        registry = try SiteRegistry(home: dir.appendingPathComponent("home"), keys: EphemeralKeyProvider(), limits: PartitionLimits())
        let site = try registry.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        partition = try registry.openPartition(forIdentifier: site.id)
    }

    deinit {
        partition.close()
        try? FileManager.default.removeItem(at: dir)
    }
}

/// Issue 13 item 4: the session (tabs) kept by the core in the partition's `tabs` namespace.
@Suite struct TabsStoreTests {
    @Test func aSessionIsSavedAndCleared() throws {
        let s = try ScratchPartition()
        let p = s.partition
        #expect(try p.tabs.session() == nil)
        let session = SessionState(tabs: [
            TabState(id: "t1", url: "https://a.example/1", title: "One", scrollX: 0, scrollY: 1200.5),
            TabState(id: "t2", url: "https://a.example/2", title: "Two"),
        ], lastTabID: "t2")
        try p.tabs.setSession(session)
        #expect(try p.tabs.session() == session)
        try p.verify(namespaces: PartitionNamespace.core)
        try p.tabs.clear()
        #expect(try p.tabs.session() == nil)
    }

    /// A session row as Foundation's `JSONEncoder` wrote it before the stored form moved to
    /// SiteKeepJSON (members in declaration order, `\/` escapes, whole numbers bare, no
    /// `lastTabID` when there was none) is read; the new form is SiteKeepJSON's canonical one,
    /// and `JSONDecoder` (an older SiteKeep) reads it too.
    @Test func aSessionRowWrittenByJSONEncoderIsReadAndTheNewFormIsCanonical() throws {
        let s = try ScratchPartition()
        let p = s.partition
        let old = #"{"tabs":[{"id":"t1","url":"https:\/\/a.example\/1","title":"One","scrollX":0,"scrollY":1200.5},"# +
                  #"{"id":"t2","url":"https:\/\/a.example\/2?q=\"x\"","title":"Two \u00e9","scrollX":3,"scrollY":0}],"lastTabID":"t2"}"#
        try p.tabs.rows.update([("session", Array(old.utf8))])
        let expected = SessionState(tabs: [
            TabState(id: "t1", url: "https://a.example/1", title: "One", scrollX: 0, scrollY: 1200.5),
            TabState(id: "t2", url: "https://a.example/2?q=\"x\"", title: "Two \u{e9}", scrollX: 3),
        ], lastTabID: "t2")
        #expect(try p.tabs.session() == expected)
        try p.tabs.rows.update([("session", Array(#"{"tabs":[],"lastTabID":null}"#.utf8))])
        #expect(try p.tabs.session() == SessionState())
        // What this build's JSONEncoder writes (of the type as it was declared), whatever its key order, is read as well.
        let encoded = try JSONEncoder().encode(OldSessionState(expected))
        try p.tabs.rows.update([("session", Array(encoded))])
        #expect(try p.tabs.session() == expected)

        try p.tabs.setSession(expected)
        let written = try #require(try p.tabs.rows.value("session"))
        #expect(String(decoding: written, as: UTF8.self) ==
                #"{"lastTabID":"t2","tabs":[{"id":"t1","scrollX":0.0,"scrollY":1200.5,"title":"One","url":"https://a.example/1"},"# +
                #"{"id":"t2","scrollX":3.0,"scrollY":0.0,"title":"Two \#u{e9}","url":"https://a.example/2?q=\"x\""}]}"#)
        #expect(try JSONDecoder().decode(OldSessionState.self, from: Data(written)).state == expected)
        try p.tabs.setSession(SessionState(tabs: [TabState(id: "k", url: "u", title: "")]))
        #expect(!String(decoding: try #require(try p.tabs.rows.value("session")), as: UTF8.self).contains("lastTabID"))
    }

    @Test func aSessionBreakingARuleIsRefusedNamingTheFieldAndNothingIsWritten() throws {
        let s = try ScratchPartition()
        let p = s.partition
        let kept = SessionState(tabs: [TabState(id: "k", url: "u", title: "")])
        try p.tabs.setSession(kept)
        #expect(throws: PartitionError.invalidValue("session.lastTabID (\"nope\") is not one of the session's tabs")) {
            try p.tabs.setSession(SessionState(tabs: [], lastTabID: "nope"))
        }
        #expect(throws: PartitionError.invalidValue("session.tabs[1].id duplicates session.tabs[0].id (\"x\"); tab identifiers must be unique")) {
            try p.tabs.setSession(SessionState(tabs: [TabState(id: "x", url: "u", title: ""), TabState(id: "x", url: "u", title: "")]))
        }
        #expect(throws: PartitionError.invalidValue("session.tabs[0].scrollY is not a finite number")) {
            try p.tabs.setSession(SessionState(tabs: [TabState(id: "x", url: "u", title: "", scrollY: .infinity)]))
        }
        #expect(try p.tabs.session() == kept)
    }

    @Test func theBridgesFormIsReadStrictly() throws {
        let ok = try TabSession(json: try JSONParser.parse(#"{"tabs":[{"url":"https://a/1","title":"A","scroll":0.5},{"url":"https://a/2"}],"active":1}"#), path: "args")
        #expect(ok == TabSession(tabs: [SessionTab(url: "https://a/1", title: "A", scroll: 0.5), SessionTab(url: "https://a/2")], active: 1))
        // Stored and read back, a tab without a scroll is at the top.
        #expect(TabSession(ok.state) == TabSession(tabs: [SessionTab(url: "https://a/1", title: "A", scroll: 0.5), SessionTab(url: "https://a/2", scroll: 0)], active: 1))
        let cases: [(String, String)] = [
            (#"{"tabs":[{"url":"u"}],"active":1}"#, "args.active must index one of the 1 tabs"),
            (#"{"tabs":[{"url":"u"},{"url":"u","scroll":"top"}]}"#, "args.tabs[1].scroll must be a finite number, found string"),
            (#"{"tabs":[{"title":"no url"}]}"#, "args.tabs[0].url must be a string"),
            (#"{"tabs":[{"url":"u","title":7}]}"#, "args.tabs[0].title must be a string, found integer"),
            (#"{"tabs":{}}"#, "args.tabs must be an array, found object"),
            (#"{}"#, "args.tabs is missing; give an array, [] for none"),
        ]
        for (text, message) in cases {
            #expect(throws: CoreFieldError.self, "\(text)") { try TabSession(json: try JSONParser.parse(text), path: "args") }
            do { _ = try TabSession(json: try JSONParser.parse(text), path: "args") } catch let e as CoreFieldError { #expect(e.description == message) }
        }
    }
}

/// Issue 13 item 4: reading state kept by the core in the partition's `reading` namespace.
@Suite struct ReadingStoreTests {
    @Test func statesAreSetMergedAndUnreadRemovesTheRow() throws {
        let s = try ScratchPartition()
        let p = s.partition
        #expect(try p.reading.state(for: "a1") == .unread)
        try p.reading.setState(.read, for: "a1")
        try p.reading.setState(.partRead(progress: 0.25), for: "a2")
        #expect(try p.reading.state(for: "a1") == .read)
        #expect(try p.reading.all() == ["a1": .read, "a2": .partRead(progress: 0.25)])
        try p.reading.setState(.unread, for: "a1")
        #expect(try p.reading.all() == ["a2": .partRead(progress: 0.25)])
        #expect(try p.rows(.reading).all().map(\.name) == ["a2"])
    }

    /// Rows as Foundation's `JSONEncoder` wrote them before the stored form moved to SiteKeepJSON
    /// are read; the new form is SiteKeepJSON's canonical one, and `JSONDecoder` (an older
    /// SiteKeep) reads it too; a row that is not one state is damage.
    @Test func stateRowsWrittenByJSONEncoderAreReadAndTheNewFormIsCanonical() throws {
        let s = try ScratchPartition()
        let p = s.partition
        try p.reading.rows.update([("a1", Array(#"{"read":{}}"#.utf8)), ("a2", Array(#"{"partRead":{"progress":0.25}}"#.utf8)),
                                   ("a3", Array(#"{"partRead":{"progress":1}}"#.utf8))])
        #expect(try p.reading.all() == ["a1": .read, "a2": .partRead(progress: 0.25), "a3": .partRead(progress: 1)])
        for state in [ReadingState.read, .partRead(progress: 0.5), .partRead(progress: 1)] {
            try p.reading.rows.update([("b", Array(try JSONEncoder().encode(OldReadingState(state))))])
            #expect(try p.reading.state(for: "b") == state, "what this build's JSONEncoder writes is read")
            try p.reading.setState(state, for: "b")
            let written = try #require(try p.reading.rows.value("b"))
            #expect(try JSONDecoder().decode(OldReadingState.self, from: Data(written)).state == state)
        }
        #expect(String(decoding: try #require(try p.reading.rows.value("b")), as: UTF8.self) == #"{"partRead":{"progress":1.0}}"#)
        try p.reading.setState(.read, for: "b")
        #expect(String(decoding: try #require(try p.reading.rows.value("b")), as: UTF8.self) == #"{"read":{}}"#)
        try p.reading.rows.update([("c", Array(#"{"read":{},"unread":{}}"#.utf8))])
        #expect(throws: PartitionError.self) { try p.reading.state(for: "c") }
    }

    @Test func aStateBreakingARuleIsRefusedNamingTheEntryAndNothingIsWritten() throws {
        let s = try ScratchPartition()
        let p = s.partition
        try p.reading.setState(.read, for: "kept")
        #expect(throws: PartitionError.invalidValue("reading[\"a3\"].progress is nan; part-read progress must be between 0 and 1")) {
            try p.reading.setStates(["a3": .partRead(progress: .nan), "a4": .read])
        }
        #expect(throws: PartitionError.invalidValue("reading[\"\"].id is empty; an article needs an identifier")) {
            try p.reading.setStates(["": .unread, "a5": .read])
        }
        #expect(try p.reading.all() == ["kept": .read])
    }

    @Test func theBridgesFormIsReadStrictly() throws {
        let ok = try ArticleReading.list(json: try JSONParser.parse(#"[{"id":"a","state":"read"},{"id":"b","state":"partial","progress":0.5}]"#), path: "args.articles")
        #expect(ok.map(\.readingState) == [.read, .partRead(progress: 0.5)])
        let cases: [(String, String)] = [
            (#"[{"id":"","state":"read"}]"#, "args.articles[0].id is empty; an article needs an identifier"),
            (#"[{"id":"a","state":"read"},{"id":"b","state":"skimmed"}]"#, "args.articles[1].state must be one of unread, partial, read"),
            (#"[{"id":"a","state":"partial","progress":2}]"#, "args.articles[0].progress is 2.0; part-read progress must be between 0 and 1"),
            (#"[{"state":"read"}]"#, "args.articles[0].id must be a string; each article needs an id"),
            (#"{"a":"read"}"#, "args.articles must be an array, found object"),
        ]
        for (text, message) in cases {
            #expect(throws: CoreFieldError.self, "\(text)") { try ArticleReading.list(json: try JSONParser.parse(text), path: "args.articles") }
            do { _ = try ArticleReading.list(json: try JSONParser.parse(text), path: "args.articles") } catch let e as CoreFieldError { #expect(e.description == message) }
        }
    }
}

// The session and reading-state types as they were declared when Foundation's `Codable` wrote
// their rows (synthesized conformances, same members in the same order): what an older SiteKeep
// wrote and reads. The types themselves are no longer `Codable` (issue 35, item 4).

/// `TabState` and `SessionState` as an older SiteKeep declared them.
struct OldSessionState: Codable, Equatable {
    struct OldTabState: Codable, Equatable {
        var id: String
        var url: String
        var title: String
        var scrollX: Double
        var scrollY: Double
    }
    var tabs: [OldTabState]
    var lastTabID: String?

    init(_ s: SessionState) {
        tabs = s.tabs.map { OldTabState(id: $0.id, url: $0.url, title: $0.title, scrollX: $0.scrollX, scrollY: $0.scrollY) }
        lastTabID = s.lastTabID
    }
    var state: SessionState {
        SessionState(tabs: tabs.map { TabState(id: $0.id, url: $0.url, title: $0.title, scrollX: $0.scrollX, scrollY: $0.scrollY) }, lastTabID: lastTabID)
    }
}

/// `ReadingState` as an older SiteKeep declared it.
enum OldReadingState: Codable, Equatable {
    case unread
    case partRead(progress: Double)
    case read

    init(_ s: ReadingState) {
        switch s {
        case .unread: self = .unread
        case .partRead(let p): self = .partRead(progress: p)
        case .read: self = .read
        }
    }
    var state: ReadingState {
        switch self {
        case .unread: .unread
        case .partRead(let p): .partRead(progress: p)
        case .read: .read
        }
    }
}
