import Foundation
import Testing
import SiteKeepCustody
import Synchronization
@testable import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepVocabulary

@Suite struct RegistryTests {
    @Test func addListLookupAndPersist() throws {
        let dir = TempDir()
        let keys = MemoryKeyProvider()
        let reg = try makeRegistry(dir, keys: keys)
        let a = try reg.add(displayName: "Newsroom", origins: ["https://newsroom.sgit.ai", "HTTPS://NEWSROOM.SGIT.AI:443"], appBound: true)
        let b = try reg.add(displayName: "Web Summit", origins: ["https://web-summit.sgit.ai"], appBound: false, protection: .whenUnlocked)
        #expect(a.origins.count == 1)
        #expect(reg.identifiers() == [a.id, b.id].sorted())
        #expect(try reg.site(forOrigin: "https://newsroom.sgit.ai.")?.id == a.id)
        #expect(try reg.site(forOrigin: "https://www.newsroom.sgit.ai") == nil)
        #expect(try reg.site(forOrigin: "https://newsroom.sgit.ai:8443") == nil)

        let home = dir.url.appendingPathComponent("home")
        #expect(permissions(home.path) == 0o700)
        #expect(permissions(home.appendingPathComponent("sites.json").path) == 0o600)
        #expect(permissions(reg.folder(a.id)) == 0o700)
        #expect(permissions(reg.databasePath(a.id)) == 0o600)

        // A second registry on the same home sees the same sites.
        let again = try SiteRegistry(home: home, keys: keys)
        #expect(again.sites().map(\.id) == reg.sites().map(\.id))
        #expect(again.site(forIdentifier: b.id)?.protection == .whenUnlocked)
        #expect(again.site(forIdentifier: a.id)?.isAppBound == true)
    }

    @Test func tenAppBoundSitesAtMost() throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        for i in 0..<10 { try reg.add(displayName: "S\(i)", origins: ["https://s\(i).example"], appBound: true) }
        let before = snapshot(dir.url)
        #expect(throws: PartitionError.appBoundLimitReached(limit: 10)) {
            try reg.add(displayName: "S10", origins: ["https://s10.example"], appBound: true)
        }
        #expect(snapshot(dir.url) == before)
        // Not app-bound is still fine.
        try reg.add(displayName: "S10", origins: ["https://s10.example"], appBound: false)
        #expect(reg.sites().filter(\.isAppBound).count == 10)
    }

    @Test func badInputLeavesTheStoreUnchanged() throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let before = snapshot(dir.url)
        #expect(throws: PartitionError.invalidOrigin(.insecureScheme(host: "b.example"))) {
            try reg.add(displayName: "B", origins: ["http://b.example"], appBound: false)
        }
        #expect(throws: PartitionError.originInUse(origin: "https://a.example:443", site: a.id.string)) {
            try reg.add(displayName: "B", origins: ["https://A.example."], appBound: false)
        }
        #expect(throws: PartitionError.noOrigins) { try reg.add(displayName: "B", origins: [], appBound: false) }
        #expect(throws: PartitionError.invalidDisplayName("it must be 1 to 100 characters")) {
            try reg.add(displayName: "  ", origins: ["https://b.example"], appBound: false)
        }
        let unknown = SiteID.random()
        #expect(throws: PartitionError.unknownSite(unknown.string)) { try reg.openPartition(forIdentifier: unknown) }
        #expect(throws: PartitionError.unknownSite(unknown.string)) { try reg.remove(forIdentifier: unknown) }
        #expect(throws: PartitionError.invalidOrigin(.userinfoNotAllowed)) { try reg.site(forOrigin: "https://x@a.example") }
        #expect(snapshot(dir.url) == before)
        #expect(reg.identifiers() == [a.id])
    }

    @Test(arguments: ["../x", "/etc/passwd", "", "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a1\u{0}", "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13/..", "{6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13}"])
    func siteIdentifiersCarryNoPaths(_ text: String) {
        #expect(throws: VocabularyError.self) { try SiteID(parsing: text) }
        #expect(throws: PartitionError.self) { try SiteID.parse(text) }
    }

    /// SiteID's parse error is the vocabulary's now; the partitions' error for it, and so its
    /// message, is the one it always was (escaped, cut at 64 scalars).
    @Test func aSiteIdentifiersParseErrorKeepsThePartitionsMessage() {
        #expect(throws: PartitionError.invalidSiteIdentifier("a\\u{A}\\u{22}")) { try SiteID.parse("a\n\"") }
        #expect(PartitionError.invalidSiteIdentifier("../x").description
                == "\"../x\" is not a site identifier (a UUID such as 6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13)")
        let long = String(repeating: "z", count: 200)
        #expect(throws: PartitionError.invalidSiteIdentifier(String(repeating: "z", count: 64) + "…")) { try SiteID.parse(long) }
    }

    @Test func siteIdentifierIsLowerCase() throws {
        let id = try SiteID(parsing: "6F1C3A52-0D7E-4B8A-9F57-2C1E0B4D9A13")
        #expect(id.string == "6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13")
    }

    @Test func removeRefusesWhileInUseUnlessForced() throws {
        let dir = TempDir()
        let keys = MemoryKeyProvider()
        let reg = try makeRegistry(dir, keys: keys)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: false)
        let p = try reg.openPartition(forIdentifier: a.id)
        let q = try reg.openPartition(forIdentifier: a.id)
        try p.storage.setItem("k", "v")
        #expect(reg.openHandles(forIdentifier: a.id) == 2)
        #expect(throws: PartitionError.siteInUse(site: a.id.string, openHandles: 2)) { try reg.remove(forIdentifier: a.id) }
        q.close()
        q.close()
        #expect(reg.openHandles(forIdentifier: a.id) == 1)
        #expect(throws: PartitionError.partitionClosed) { try q.storage.getItem("k") }
        #expect(try p.storage.getItem("k") == "v")
        try reg.remove(forIdentifier: a.id, force: true)
        #expect(throws: PartitionError.siteRemoved(a.id.string)) { try p.storage.getItem("k") }
        #expect(!FileManager.default.fileExists(atPath: reg.folder(a.id)))
        #expect(reg.identifiers().isEmpty)
        #expect(keys.keyCount == 0)
    }

    @Test func removeDestroysTheKeyBeforeTheFiles() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        let filesAtDestroy = Mutex<Bool?>(nil)
        let keys = MemoryKeyProvider(onDestroy: { site in
            // At the moment the key is destroyed, the files must still be there.
            let exists = FileManager.default.fileExists(atPath: home.appendingPathComponent("sites/\(site)/partition.sqlite").path)
            filesAtDestroy.withLock { $0 = exists }
        })
        let reg = try SiteRegistry(home: home, keys: keys)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: false)
        try reg.remove(forIdentifier: a.id)
        #expect(keys.events.withLock { $0 } == ["destroy:\(a.id.string)"])
        #expect(filesAtDestroy.withLock { $0 } == true)
        #expect(!FileManager.default.fileExists(atPath: reg.folder(a.id)))
    }

    @Test func cryptoShreddingMakesOldCopiesUnreadable() throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: false)
        let p = try reg.openPartition(forIdentifier: a.id)
        try p.storage.setItem("secret", "canary-A")
        p.close()
        // An attacker keeps a copy of the database.
        let copy = dir.url.appendingPathComponent("copy.sqlite")
        try FileManager.default.copyItem(atPath: reg.databasePath(a.id), toPath: copy.path)
        try reg.remove(forIdentifier: a.id)
        // Re-create a site with the same identifier; it gets a fresh key.
        _ = try reg.add(displayName: "A again", origins: ["https://a.example"], appBound: false, protection: .afterLogin, identifier: a.id)
        try FileManager.default.removeItem(atPath: reg.databasePath(a.id))
        try FileManager.default.copyItem(atPath: copy.path, toPath: reg.databasePath(a.id))
        #expect(throws: PartitionError.damaged(site: a.id.string, reason: .authenticationFailed(namespace: "header"))) {
            try reg.openPartition(forIdentifier: a.id)
        }
        // The raw file does not contain the value or the key name in clear.
        let bytes = try Data(contentsOf: copy)
        #expect(bytes.range(of: Data("canary-A".utf8)) == nil)
        #expect(bytes.range(of: Data("secret".utf8)) == nil)
    }

    @Test func purgeRemovesLeastRecentlyUsedNonAppBoundSites() throws {
        let dir = TempDir()
        let reg = try makeRegistry(dir)
        let bound = try reg.add(displayName: "Bound", origins: ["https://bound.example"], appBound: true)
        var others: [SiteID] = []
        for i in 0..<3 {
            let s = try reg.add(displayName: "O\(i)", origins: ["https://o\(i).example"], appBound: false)
            others.append(s.id)
            Thread.sleep(forTimeInterval: 0.01)
        }
        let inUse = try reg.openPartition(forIdentifier: others[0])
        let removed = try reg.purge(toBudget: 0)
        #expect(removed == [others[1], others[2]])
        #expect(reg.identifiers().contains(bound.id))
        #expect(reg.identifiers().contains(others[0]))
        inUse.close()
        #expect(try reg.purge(toBudget: 0) == [others[0]])
        #expect(reg.identifiers() == [bound.id])
    }

    @Test func damagedRegistryIsReported() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        _ = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        try Data("{not json".utf8).write(to: home.appendingPathComponent("sites.json"))
        #expect(throws: PartitionError.registryDamaged("sites.json is not valid JSON (invalid JSON at byte 1: unexpected character 'n')")) {
            try SiteRegistry(home: home, keys: MemoryKeyProvider())
        }
    }
}

/// A provider standing in for custody while SiteKeep is locked (`whenUnlocked` keys unavailable).
struct LockedKeyProvider: SiteStorageKeyProvider {
    struct Locked: Error, CustomStringConvertible { var description: String { "SiteKeep is locked; unlock it first" } }
    func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle { throw Locked() }
    func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws { throw Locked() }
}

@Suite struct LockedKeyTests {
    @Test func unavailableKeysAreReportedAndChangeNothing() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        let keys = MemoryKeyProvider()
        let reg = try SiteRegistry(home: home, keys: keys)
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true, protection: .whenUnlocked)
        let before = snapshot(dir.url)

        let locked = try SiteRegistry(home: home, keys: LockedKeyProvider())
        #expect(throws: PartitionError.keyUnavailable("SiteKeep is locked; unlock it first")) {
            try locked.openPartition(forIdentifier: a.id)
        }
        #expect(throws: PartitionError.keyUnavailable("SiteKeep is locked; unlock it first")) {
            try locked.add(displayName: "B", origins: ["https://b.example"], appBound: false)
        }
        // Removal cannot crypto-shred, so it deletes nothing.
        #expect(throws: PartitionError.keyUnavailable("SiteKeep is locked; unlock it first")) {
            try locked.remove(forIdentifier: a.id)
        }
        #expect(snapshot(dir.url) == before)
        #expect(locked.identifiers() == [a.id])
    }
}

@Suite struct RegistryHomeTests {
    @Test func aHomeOpenToOthersIsRefusedNotChanged() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-openhome-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: PartitionError.self) { try SiteRegistry(home: dir, keys: EphemeralKeyProvider()) }
        #expect(try FileManager.default.attributesOfItem(atPath: dir.path)[.posixPermissions] as? Int == 0o755)
    }
}
