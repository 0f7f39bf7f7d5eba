import Foundation
import Testing
import SiteKeepCustody
@testable import SiteKeepPartitions
import SiteKeepVocabulary

struct FixedSource: PartitionRebuildSource {
    let contents: PartitionContents
    func contents(forSite site: SiteID) throws -> PartitionContents { contents }
}

@Suite struct PartitionTests {
    func open(_ dir: TempDir, limits: PartitionLimits = PartitionLimits()) throws -> (SiteRegistry, Site, Partition) {
        let reg = try makeRegistry(dir, limits: limits)
        let site = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        return (reg, site, try reg.openPartition(forIdentifier: site.id))
    }

    @Test func storageHasLocalStorageSemantics() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir)
        #expect(try p.storage.getItem("missing") == nil)
        try p.storage.setItem("b", "2")
        try p.storage.setItem("a", "1")
        try p.storage.setItem("a", "one")
        try p.storage.setItem("'; DROP TABLE kv; --", "sql")
        try p.storage.setItem("", "empty key")
        try p.storage.setItem("nul\u{0}key", "ünïcødé \u{0} value")
        #expect(try p.storage.getItem("a") == "one")
        #expect(try p.storage.getItems(["a", "b", "missing"]) == ["a": "one", "b": "2"])
        #expect(try p.storage.getItem("nul\u{0}key") == "ünïcødé \u{0} value")
        #expect(try p.storage.getItem("'; DROP TABLE kv; --") == "sql")
        #expect(try p.storage.keys() == ["", "'; DROP TABLE kv; --", "a", "b", "nul\u{0}key"].sorted())
        try p.storage.removeItem("b")
        try p.storage.removeItem("never-there")
        #expect(try p.storage.getItem("b") == nil)
        try p.storage.clear()
        #expect(try p.storage.keys().isEmpty)
        #expect(try p.storage.usage() == 0)
    }

    @Test func quotaExceededChangesNothing() throws {
        let dir = TempDir()
        let (reg, site, p) = try open(dir, limits: PartitionLimits(storageQuota: 100))
        try p.storage.setItem("k", String(repeating: "x", count: 60))
        #expect(try p.storage.usage() == 61)
        p.close()
        let q = try reg.openPartition(forIdentifier: site.id)
        #expect(throws: PartitionError.quotaExceeded(namespace: "storage", limit: 100, wouldUse: 111)) {
            try q.storage.setItem("j", String(repeating: "y", count: 49))
        }
        // A batch fails as a whole.
        #expect(throws: PartitionError.quotaExceeded(namespace: "storage", limit: 100, wouldUse: 103)) {
            try q.storage.setItems([("a", String(repeating: "a", count: 20)), ("b", String(repeating: "b", count: 20))])
        }
        #expect(throws: PartitionError.valueTooLarge(limit: 100, actual: 101)) {
            try q.storage.setItem("big", String(repeating: "z", count: 101))
        }
        #expect(throws: PartitionError.keyTooLong(limit: 1024, actual: 2000)) {
            try q.storage.setItem(String(repeating: "k", count: 2000), "v")
        }
        #expect(try q.storage.keys() == ["k"])
        #expect(try q.storage.usage() == 61)
        // Replacing a value counts the old one out.
        try q.storage.setItem("k", String(repeating: "w", count: 99))
        #expect(try q.storage.getItem("k")?.count == 99)
        q.close()
    }

    @Test func largeBatchesKeepTheQuota() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir, limits: PartitionLimits(storageQuota: 1000))
        try p.storage.setItem("keep", "v")
        let items = (0..<100).map { ("k\($0)", String(repeating: "x", count: 10)) }  // 100 × 12-13 bytes
        #expect {
            try p.storage.setItems(items)
        } throws: { error in
            guard case .quotaExceeded(namespace: "storage", limit: 1000, let would) = error as? PartitionError else { return false }
            return would > 1000
        }
        #expect(try p.storage.keys() == ["keep"])
        #expect(try p.storage.usage() == 5)
        let fitting = (0..<50).map { ("k\($0)", String(repeating: "x", count: 10)) }
        try p.storage.setItems(fitting)
        try p.storage.setItems(fitting)  // replacing counts the old values out
        #expect(try p.storage.usage() == 5 + fitting.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count })
    }

    @Test func aNameGivenTwiceInABatchKeepsItsLastValue() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir)
        // Small batches (a size lookup per row) and bulk ones (sorted by stored key, written blind).
        for count in [3, 100] {
            var items = (0..<count).map { ("k\($0)", "v\($0)") }
            items.insert(("dup", "first"), at: 1)
            items.append(("dup", "second"))
            items.insert(("dup", "third"), at: count / 2)
            items.append(("dup", "last"))
            try p.storage.setItems(items)
            #expect(try p.storage.getItem("dup") == "last")
            #expect(try p.storage.usage() == (0..<count).reduce(3 + 4) { $0 + "k\($1)".utf8.count + "v\($1)".utf8.count })
            try p.storage.clear()
        }
    }

    @Test func badWritesLeaveFilesUnchanged() throws {
        let dir = TempDir()
        let (reg, site, p) = try open(dir, limits: PartitionLimits(storageQuota: 50))
        try p.storage.setItem("k", "v")
        p.close()
        let before = snapshot(dir.url)
        let q = try reg.openPartition(forIdentifier: site.id)
        #expect(throws: PartitionError.self) { try q.storage.setItem("x", String(repeating: "x", count: 60)) }
        #expect(throws: PartitionError.self) { try q.rows(Self.notes).update([("n", [UInt8](repeating: 1, count: PartitionLimits().maximumRecordBytes + 1))]) }
        #expect(throws: PartitionError.self) { try q.rows(Self.notes).update([("n", [1])], removing: [String(repeating: "k", count: 2000)]) }
        #expect(throws: PartitionError.self) { try q.rows(.storage).update([("x", [1])]) }
        q.close()
        #expect(snapshot(dir.url) == before)
    }

    /// A caller's namespace for these tests (the core's tabs and reading state are tested in SiteKeepCoreTests).
    static let notes = PartitionNamespace("notes", code: 9)

    @Test func callersNamespacesHoldSealedRows() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir)
        let rows = p.rows(Self.notes)
        #expect(try rows.value("a") == nil)
        try rows.update([("a", [1, 2]), ("b", []), ("c", [3])])
        #expect(try rows.value("a") == [1, 2] && rows.value("b") == [])
        try rows.update([("d", [4])], removing: ["a", "absent"])
        #expect(try rows.all() == [SealedRow(name: "b", value: []), SealedRow(name: "c", value: [3]), SealedRow(name: "d", value: [4])])
        // Another namespace with the same names sees none of them.
        #expect(try p.rows(PartitionNamespace("drafts", code: 10)).all().isEmpty)
        try p.verify(namespaces: [Self.notes])
        try rows.clear()
        #expect(try rows.all().isEmpty)
        #expect(try p.storage.keys().isEmpty)
    }

    @Test func aNamespaceIsRefusedWhenItWouldShareAnotherOnesRows() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir)
        try p.rows(Self.notes).update([("a", [1])])
        #expect(throws: PartitionError.invalidValue("namespace code 9 is already notes's")) { try p.rows(PartitionNamespace("other", code: 9)).all() }
        #expect(throws: PartitionError.invalidValue("namespace notes already has code 9")) { try p.rows(PartitionNamespace("notes", code: 11)).all() }
        #expect(throws: PartitionError.invalidValue("namespace storage (code 1) is the partition's own; use its storage or cache")) {
            try p.rows(.storage).clear()
        }
        #expect(throws: PartitionError.self) { try p.rows(PartitionNamespace("x", code: 1)).clear() }
        #expect(throws: PartitionError.self) { try p.rows(PartitionNamespace("cache", code: 12)).clear() }
        #expect(throws: PartitionError.invalidValue("the namespace name \"meta\" is the partition header's")) { try p.rows(PartitionNamespace("meta", code: 13)).all() }
        #expect(throws: PartitionError.self) { try p.rows(PartitionNamespace("", code: 14)).all() }
        #expect(throws: PartitionError.self) { try p.rows(PartitionNamespace("zero", code: 0)).all() }
        #expect(throws: PartitionError.self) { try p.rows(PartitionNamespace("a\nb", code: 15)).all() }
        // The refused ones changed nothing.
        #expect(try p.rows(Self.notes).value("a") == [1])
    }

    @Test func cacheIsContentAddressedWithLRUEviction() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir, limits: PartitionLimits(cacheBudget: 3000))
        let body = [UInt8](repeating: 7, count: 800)
        let headers = [HeaderField(name: "Content-Type", value: "text/html")]
        try p.cache.store(CachedResource(url: "https://a.example/1", headers: headers, body: body))
        let afterOne = try p.cache.usage()
        // The same body under a second URL is stored once.
        try p.cache.store(CachedResource(url: "https://a.example/2", headers: headers, body: body))
        #expect(try p.cache.usage() < afterOne * 2 - 700)
        #expect(try p.cache.resource(for: "https://a.example/1")?.body == body)
        #expect(try p.cache.resource(for: "https://a.example/1")?.headers == headers)
        // Fill beyond the budget: /2 is least recently used (we just read /1), so it goes first.
        try p.cache.store(CachedResource(url: "https://a.example/3", body: [UInt8](repeating: 3, count: 900)))
        try p.cache.store(CachedResource(url: "https://a.example/4", body: [UInt8](repeating: 4, count: 900)))
        let urls = try p.cache.urls()
        #expect(!urls.contains("https://a.example/2"))
        #expect(urls.contains("https://a.example/4"))
        #expect(try p.cache.usage() <= 3000)
        #expect(throws: PartitionError.self) {
            try p.cache.store(CachedResource(url: "https://a.example/huge", body: [UInt8](repeating: 1, count: 5000)))
        }
        try p.cache.remove("https://a.example/4")
        #expect(try p.cache.resource(for: "https://a.example/4") == nil)
        try p.cache.clear()
        #expect(try p.cache.usage() == 0)
    }

    @Test func rowsMovedWithinAPartitionFailToOpen() throws {
        let dir = TempDir()
        let (_, _, p) = try open(dir)
        try p.storage.setItem("a", "value-a")
        try p.storage.setItem("b", "value-b")
        let rowA = try #require(try p.rawRow(namespace: .storage, name: "a"))
        try p.writeRawRow(namespace: .storage, name: "b", sealedValue: rowA.sealedValue)
        #expect(throws: PartitionError.damaged(site: p.site.string, reason: .authenticationFailed(namespace: "storage"))) {
            try p.storage.getItem("b")
        }
        #expect(throws: PartitionError.self) { try p.storage.keys() }
        #expect(throws: PartitionError.self) { try p.verify() }
        // A flipped byte is damage too.
        var flipped = rowA.sealedValue
        flipped[flipped.count - 1] ^= 1
        try p.writeRawRow(namespace: .storage, name: "a", sealedValue: flipped)
        #expect(throws: PartitionError.self) { try p.storage.getItem("a") }
    }

    @Test func damageIsDetectedAndRebuildTouchesNothingElse() throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let b = try reg.add(displayName: "B", origins: ["https://b.example"], appBound: true)
        let pb = try reg.openPartition(forIdentifier: b.id)
        try pb.storage.setItem("kb", "vb")
        pb.close()
        let bFolder = snapshot(URL(fileURLWithPath: reg.folder(b.id)))

        // Garbage file.
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: reg.databasePath(a.id)))
        #expect {
            try reg.openPartition(forIdentifier: a.id)
        } throws: { error in
            guard case .damaged(let site, .notADatabase) = error as? PartitionError else { return false }
            return site == a.id.string
        }
        // Missing file.
        try FileManager.default.removeItem(atPath: reg.databasePath(a.id))
        #expect(throws: PartitionError.damaged(site: a.id.string, reason: .missing)) { try reg.openPartition(forIdentifier: a.id) }

        // Keys and article ids that differ only in Unicode normal form are two entries: both
        // survive a rebuild (a Dictionary<String, _> would have merged them).
        let composed = "caf\u{E9}", decomposed = "cafe\u{301}"
        #expect(composed == decomposed && !composed.utf8.elementsEqual(decomposed.utf8))
        let contents = PartitionContents(
            storage: [StorageItem(key: "k", value: "v"), StorageItem(key: composed, value: "NFC"), StorageItem(key: decomposed, value: "NFD")],
            namespaces: [NamespaceRows(namespace: Self.notes, rows: [SealedRow(name: "r", value: [1]), SealedRow(name: composed, value: [2]), SealedRow(name: decomposed, value: [3])])],
            cache: [CachedResource(url: "https://a.example/c", body: [1, 2, 3])])
        try reg.rebuildPartition(forIdentifier: a.id, from: FixedSource(contents: contents))
        let pa = try reg.openPartition(forIdentifier: a.id)
        #expect(try pa.storage.getItem("k") == "v")
        #expect(try pa.storage.getItem(composed) == "NFC")
        #expect(try pa.storage.getItem(decomposed) == "NFD")
        let items = try pa.storage.items()
        #expect(items.count == 3)
        #expect(Set(items.map { Array($0.key.utf8) }) == Set([Array("k".utf8), Array(composed.utf8), Array(decomposed.utf8)]))
        #expect(try pa.rows(Self.notes).all().count == 3)
        #expect(try pa.rows(Self.notes).value(decomposed) == [3])
        #expect(try pa.rows(Self.notes).value("r") == [1])
        #expect(try pa.cache.resource(for: "https://a.example/c")?.body == [1, 2, 3])
        try pa.verify(namespaces: [Self.notes])
        #expect(throws: PartitionError.siteInUse(site: a.id.string, openHandles: 1)) {
            try reg.rebuildPartition(forIdentifier: a.id, from: FixedSource(contents: contents))
        }
        pa.close()
        #expect(snapshot(URL(fileURLWithPath: reg.folder(b.id))) == bFolder)
    }

    @Test func corruptedPagesAreDetected() throws {
        let dir = TempDir()
        let (reg, site, p) = try open(dir)
        try p.storage.setItems((0..<400).map { ("key\($0)", String(repeating: "v", count: 100)) })
        p.close()
        // Overwrite two whole pages in the middle of the file.
        let fh = try FileHandle(forWritingTo: URL(fileURLWithPath: reg.databasePath(site.id)))
        try fh.seek(toOffset: 4096 * 3)
        try fh.write(contentsOf: Data(repeating: 0xFF, count: 8192))
        try fh.close()
        #expect(throws: PartitionError.self) {
            let q = try reg.openPartition(forIdentifier: site.id)
            defer { q.close() }
            try q.verify()
        }
    }

    @Test func fileShowsNoNamesOrValues() throws {
        let dir = TempDir()
        let (reg, site, p) = try open(dir)
        try p.storage.setItem("NAME-storage-key", "VALUE-storage")
        try p.rows(Self.notes).update([("NAME-note", Array("VALUE-note https://a.example/VALUE-url".utf8))])
        try p.cache.store(CachedResource(url: "https://a.example/NAME-cached", headers: [HeaderField(name: "NAME-header", value: "VALUE-header")], body: Array("VALUE-body".utf8)))
        p.close()
        var bytes = Data()
        for suffix in ["", "-wal"] {
            bytes += FileManager.default.contents(atPath: reg.databasePath(site.id) + suffix) ?? Data()
        }
        #expect(bytes.count > 0)
        for needle in ["NAME-", "VALUE-", "a.example"] {
            #expect(bytes.range(of: Data(needle.utf8)) == nil, "found \(needle) in the file")
        }
    }

    @Test func databaseUsesWALAndPrivateModes() throws {
        let dir = TempDir()
        let (reg, site, p) = try open(dir)
        try p.storage.setItem("k", "v")
        #expect(FileManager.default.fileExists(atPath: reg.databasePath(site.id) + "-wal"))
        #expect(permissions(reg.databasePath(site.id) + "-wal") == 0o600)
        p.close()
    }

    @Test func concurrentWritersOnTwoSitesDoNotMix() async throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let b = try reg.add(displayName: "B", origins: ["https://b.example"], appBound: true)
        let pa = try reg.openPartition(forIdentifier: a.id)
        let pb = try reg.openPartition(forIdentifier: b.id)
        await withTaskGroup(of: Void.self) { g in
            for (p, tag) in [(pa, "A"), (pb, "B")] {
                g.addTask {
                    for i in 0..<50 { try? p.storage.setItems([("k\(i)", "\(tag)-\(i)")]) }
                }
            }
        }
        for i in 0..<50 {
            #expect(try pa.storage.getItem("k\(i)") == "A-\(i)")
            #expect(try pb.storage.getItem("k\(i)") == "B-\(i)")
        }
    }
}
