import Foundation
import Testing
import SiteKeepCore
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepTestSupport

/// The `sitekeep_partition_v1` document of `site export` and `site rebuild`, owned by the core.
@Suite struct PartitionDocumentTests {
    func decode(_ text: String) throws -> PartitionDocument { try PartitionDocument(bytes: Array(text.utf8)) }

    @Test func documentsAreParsedStrictly() throws {
        #expect(throws: (any Error).self) { try decode(#"{"schema":"sitekeep_partition_v1","extra":1}"#) }
        #expect(throws: (any Error).self) { try decode(#"{"schema":"sitekeep_partition_v1","storage":{"k":1}}"#) }
        #expect(throws: (any Error).self) { try decode(#"{"schema":"sitekeep_partition_v1","reading":{"a":{"partRead":2}}}"#) }
        let ok = try decode(#"{"schema":"sitekeep_partition_v1","reading":{"a":"read","b":{"partRead":0.5}}}"#)
        #expect(ok.reading.count == 2)
        // A key twice with the same bytes is refused (the parser's duplicate rule).
        #expect(throws: (any Error).self) { try decode(#"{"schema":"sitekeep_partition_v1","storage":{"k":"1","k":"2"}}"#) }
    }

    /// What the stores refuse, a document cannot smuggle into a rebuild: each is refused, naming the field.
    @Test func aDocumentBreakingTheRulesOfTabsOrReadingIsRefusedNamingTheField() throws {
        let cases: [(String, String)] = [
            (#"{"schema":"sitekeep_partition_v1","reading":{"":"read"}}"#, "partition.reading has a member with an empty article id"),
            (#"{"schema":"sitekeep_partition_v1","tabs":{"tabs":[{"id":"t","url":"u","title":""}],"lastTabID":"gone"}}"#,
             "partition.tabs.lastTabID (\"gone\") is not one of the session's tabs"),
            (#"{"schema":"sitekeep_partition_v1","tabs":{"tabs":[{"id":"t","url":"u","title":""},{"id":"t","url":"v","title":""}]}}"#,
             "partition.tabs.tabs[1].id duplicates partition.tabs.tabs[0].id (\"t\"); tab identifiers must be unique"),
        ]
        for (text, message) in cases {
            do {
                _ = try decode(text)
                Issue.record("accepted \(text)")
            } catch let e as CoreFieldError {
                #expect(e.description == message)
            }
        }
    }

    /// A document keeps keys that differ only in Unicode normal form apart, both ways.
    @Test func documentsKeepNormalFormsApart() throws {
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        let doc = PartitionDocument(storage: [StorageItem(key: composed, value: "NFC"), StorageItem(key: decomposed, value: "NFD")],
                                    reading: [ReadingEntry(id: composed, state: .read), ReadingEntry(id: decomposed, state: .unread)])
        let back = try PartitionDocument(bytes: JSONSerializer.bytes(doc.json))
        #expect(back.storage.count == 2 && back.reading.count == 2)
        for item in doc.storage { #expect(back.storage.contains(item)) }
        for entry in doc.reading { #expect(back.reading.contains(entry)) }
    }

    /// The document the old code rebuilt from, read and written by this build, prints what the
    /// old `site export` printed (`Fixtures/stores/before-domain-move`), byte for byte.
    @Test func theOldCodesDocumentRoundTripsToItsExport() throws {
        let fixture = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/before-domain-move")
        let doc = try PartitionDocument(bytes: Array(try Data(contentsOf: fixture.appendingPathComponent("document.json"))))
        let export = try String(contentsOf: fixture.appendingPathComponent("export.json"), encoding: .utf8)
        // The old export left out the unread article (no row is kept for it).
        let stored = PartitionDocument(storage: doc.storage, session: doc.session, reading: doc.reading.filter { $0.state != .unread })
        #expect(JSONSerializer.string(stored.json, style: .pretty) + "\n" == export)
        #expect(try PartitionDocument(bytes: Array(export.utf8)).json == stored.json)
    }

    /// A rebuild writes the rows the stores write: the session in `tabs`, the articles not
    /// unread in `reading`, nothing of the unread ones.
    @Test func theRebuildsRowsAreTheStoresRows() throws {
        let doc = try decode(#"{"schema":"sitekeep_partition_v1","storage":{"k":"v"},"reading":{"a":"read","u":"unread"},"tabs":{"tabs":[{"id":"t","url":"u","title":"T"}],"lastTabID":"t"}}"#)
        let contents = try doc.contents()
        #expect(contents.storage == [StorageItem(key: "k", value: "v")])
        #expect(contents.namespaces.map(\.namespace) == [.tabs, .reading])
        #expect(contents.namespaces[1].rows.map(\.name) == ["a"])
        // Read back through the stores, the rows are the document's (Foundation orders a
        // struct's keys as it likes, so the session's bytes are compared decoded).
        let s = try ScratchPartition()
        try s.partition.rows(.tabs).update(contents.namespaces[0].rows.map { ($0.name, $0.value) })
        try s.partition.rows(.reading).update(contents.namespaces[1].rows.map { ($0.name, $0.value) })
        #expect(try s.partition.tabs.session() == doc.session)
        #expect(try s.partition.reading.entries() == [ReadingEntry(id: "a", state: .read)])
        #expect(contents.namespaces[1].rows == [SealedRow(name: "a", value: Array(#"{"read":{}}"#.utf8))])
    }
}
