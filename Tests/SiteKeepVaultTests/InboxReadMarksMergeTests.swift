import Testing
import SiteKeepVault
import SiteKeepJSON

/// Two devices' read marks merge by their union (per path, the later read), so neither loses one.
@Suite struct InboxReadMarksMergeTests {
    static func doc(_ marks: [(String, String, Int64)]) -> [UInt8] {
        JSONSerializer.bytes(["format": "sitekeep.inbox-read.v1",
                              "read": .array(marks.map { ["path": .string($0.0), "version": .string($0.1), "readAt": .int($0.2)] })])
    }

    @Test func theUnionOfBothSidesWithTheLaterReadPerPath() throws {
        let phone = Self.doc([("inbox/a.md", "v1", 100), ("inbox/c.md", "c1", 10)])
        let laptop = Self.doc([("inbox/a.md", "v2", 200), ("inbox/b.md", "w1", 50)])
        let merged = try #require(InboxReadMarksMerge.merge(ours: phone, theirs: laptop))
        let read = try JSONParser.parse(merged)["read"]?.arrayValue ?? []
        #expect(read.compactMap { $0["path"]?.stringValue } == ["inbox/a.md", "inbox/b.md", "inbox/c.md"])
        #expect(read.first?["version"] == "v2" && read.first?["readAt"] == .int(200))
        #expect(InboxReadMarksMerge.merge(ours: laptop, theirs: phone) == merged, "both sides agree")
        #expect(InboxReadMarksMerge.merge(ours: Array("{".utf8), theirs: laptop) == nil, "not a marks file: the ordinary conflict")
        #expect(InboxReadMarksMerge.merge(ours: Array(#"{"format":"other","read":[]}"#.utf8), theirs: laptop) == nil)
    }
}
