import Foundation
import Testing
import Synchronization
import SiteKeepCustody
import SiteKeepTestSupport
@testable import SiteKeepPartitions
import SiteKeepVocabulary

/// Several registries on one home, as the daemon and CLI commands are (issue 12, defect 4):
/// each sees the others' changes, none writes back a stale view, and a removed or changed site's
/// open partition is closed.
@Suite struct RegistrySharingTests {
    /// Two registries on one home with one key provider (as two processes share the keyring).
    func pair() throws -> (TempDir, SiteRegistry, SiteRegistry) {
        let dir = TempDir()
        let keys = MemoryKeyProvider()
        let home = dir.url.appendingPathComponent("home")
        return (dir, try SiteRegistry(home: home, keys: keys), try SiteRegistry(home: home, keys: keys))
    }

    /// The partitions a registry reports closed (``SiteRegistry/onPartitionClosed(_:)``).
    final class ClosedLog: Sendable {
        let ids = Mutex<[SiteID]>([])
        var all: [SiteID] { ids.withLock { $0 } }
    }

    /// A site added through `a` whose partition `b` holds open with one value, and what `b` closes.
    func siteOpen(addedBy a: SiteRegistry, openIn b: SiteRegistry) throws -> (Site, Partition, ClosedLog) {
        let s = try a.add(displayName: "News", origins: ["https://news.example"], appBound: true)
        let p = try b.openPartition(forIdentifier: s.id)
        try p.storage.setItem("k", "v")
        let log = ClosedLog()
        b.onPartitionClosed { id in log.ids.withLock { $0.append(id) } }
        return (s, p, log)
    }

    /// Rewrites sites.json by hand (as an editor, or another tool, would), changing `site`.
    func edit(_ home: URL, _ change: (inout [String: Any]) -> Void) throws {
        let url = home.appendingPathComponent("sites.json")
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var sites = try #require(doc["sites"] as? [[String: Any]])
        for i in sites.indices { change(&sites[i]) }
        doc["sites"] = sites
        let tmp = url.appendingPathExtension("edit")
        try JSONSerialization.data(withJSONObject: doc).write(to: tmp)
        _ = rename(tmp.path, url.path)
    }

    @Test func aSiteAddedInOneRegistryIsSeenByTheOther() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        #expect(b.sites().isEmpty)
        let s = try a.add(displayName: "News", origins: ["https://news.example"], appBound: true)
        #expect(b.site(forIdentifier: s.id)?.displayName == "News")
        #expect(try b.site(forOrigin: "https://news.example")?.id == s.id)
        let p = try b.openPartition(forIdentifier: s.id)
        defer { p.close() }
        try p.storage.setItem("k", "from b")
        // The origin is taken: b's add checks a's sites too.
        #expect(throws: PartitionError.originInUse(origin: "https://news.example:443", site: s.id.string)) {
            try b.add(displayName: "Copy", origins: ["https://news.example"], appBound: false)
        }
    }

    @Test func aSiteRemovedInOneRegistryIsRefusedByTheOther() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        let (s, p, closed) = try siteOpen(addedBy: a, openIn: b)
        defer { p.close() }
        // a has no handle open, so it removes without force (it cannot see b's handles).
        try a.remove(forIdentifier: s.id)
        #expect(b.site(forIdentifier: s.id) == nil)
        #expect(throws: PartitionError.siteRemoved(s.id.string)) { try p.storage.getItem("k") }
        #expect(throws: PartitionError.siteRemoved(s.id.string)) { try p.storage.setItem("k", "again") }
        #expect(throws: PartitionError.unknownSite(s.id.string)) { try b.openPartition(forIdentifier: s.id) }
        #expect(b.openHandles(forIdentifier: s.id) == 0)
        #expect(closed.all == [s.id])
    }

    /// With a watch (as the daemon has), the partition closes without anyone asking the registry.
    @Test func aWatchingRegistryClosesARemovedSitesPartitionUnasked() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        b.watchForChanges()
        let (s, p, closed) = try siteOpen(addedBy: a, openIn: b)
        defer { p.close() }
        try a.remove(forIdentifier: s.id)
        for _ in 0..<200 where closed.all.isEmpty { usleep(10_000) }
        #expect(closed.all == [s.id], "the watch did not close the partition")
        #expect(throws: PartitionError.siteRemoved(s.id.string)) { try p.storage.getItem("k") }
    }

    /// A site that is no longer app-bound, or whose origins changed, has its partition closed (and
    /// opened afresh on request); a change of name alone leaves it open.
    @Test func aChangedSitesPartitionIsClosed() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        let home = dir.url.appendingPathComponent("home")
        let (s, p, _) = try siteOpen(addedBy: a, openIn: b)
        defer { p.close() }
        let g = b.generation
        try edit(home) { $0["displayName"] = "Renamed" }
        #expect(b.site(forIdentifier: s.id)?.displayName == "Renamed")
        #expect(b.generation != g)
        #expect(try p.storage.getItem("k") == "v", "a new name closed the partition")
        try edit(home) { $0["isAppBound"] = false }
        #expect(b.site(forIdentifier: s.id)?.isAppBound == false)
        #expect(throws: PartitionError.partitionClosed) { try p.storage.getItem("k") }
        let q = try b.openPartition(forIdentifier: s.id)
        defer { q.close() }
        #expect(try q.storage.getItem("k") == "v")
        try edit(home) { $0["origins"] = ["https://other.example:443"] }
        #expect(try b.site(forOrigin: "https://other.example")?.id == s.id)
        #expect(throws: PartitionError.partitionClosed) { try q.storage.getItem("k") }
    }

    /// Two registries adding at once (each a thread, as two processes would) lose no site: every
    /// read-modify-write holds the file lock on a fresh read.
    @Test func concurrentAddsLoseNothing() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        let failures = Mutex<[String]>([])
        let registries = [("a", a), ("b", b)]
        DispatchQueue.concurrentPerform(iterations: 2) { k in
            let (name, reg) = registries[k]
            for i in 0..<12 {
                do { try reg.add(displayName: "\(name)\(i)", origins: ["https://\(name)\(i).example"], appBound: false) } catch {
                    failures.withLock { $0.append("\(name)\(i): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        let fresh = try SiteRegistry(home: dir.url.appendingPathComponent("home"), keys: MemoryKeyProvider())
        #expect(fresh.sites().count == 24)
        #expect(a.sites().count == 24 && b.sites().count == 24)
    }

    /// The `lastUsedAt` update of one registry keeps a site the other added meanwhile, and a
    /// site the other removed stays removed.
    @Test func lastUsedAtKeepsOthersChanges() throws {
        let (dir, a, b) = try pair()
        defer { withExtendedLifetime(dir) {} }
        let home = dir.url.appendingPathComponent("home")
        let old = try a.add(displayName: "Old", origins: ["https://old.example"], appBound: false)
        let gone = try a.add(displayName: "Gone", origins: ["https://gone.example"], appBound: false)
        try edit(home) { $0["lastUsedAt"] = "2020-01-01T00:00:00Z" }
        #expect(a.sites().count == 2)
        let added = try b.add(displayName: "New", origins: ["https://new.example"], appBound: false)
        try b.remove(forIdentifier: gone.id)
        let p = try a.openPartition(forIdentifier: old.id)   // stale lastUsedAt: a writes it
        p.close()
        let fresh = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        #expect(Set(fresh.identifiers()) == [old.id, added.id])
        let used = try #require(fresh.site(forIdentifier: old.id)?.lastUsedAt)
        #expect(Date().timeIntervalSince(used) < 60, "lastUsedAt was not written")
    }

    /// A sites.json written by the code before registries shared a home (no lock file beside it)
    /// is read as it is and stays in the same format.
    @Test func aStoreMadeBeforeStillReads() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home.appendingPathComponent("sites"), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        chmod(home.path, 0o700)
        // Written by the sitekeep of 030769c (`site add Promptugal --origin https://promptugal.news --app-bound`).
        let old = try Fixtures.data("stores/sites-json-v1.json")
        try old.write(to: home.appendingPathComponent("sites.json"))
        let reg = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        #expect(reg.sites().map(\.displayName) == ["Promptugal"])
        #expect(try reg.site(forOrigin: "https://promptugal.news")?.isAppBound == true)
        try reg.add(displayName: "Summit", origins: ["https://web-summit.sgit.ai"], appBound: true)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: home.appendingPathComponent("sites.json"))) as? [String: Any])
        #expect(doc["version"] as? Int == 1)
        #expect((doc["sites"] as? [Any])?.count == 2)
        #expect(permissions(home.appendingPathComponent("sites.json.lock").path) == 0o600)
    }
}

/// Issue 33, point 5: the site registry keeps each site's granted ops.
@Suite struct SiteGrantRegistryTests {
    @Test func grantsAreKeptPerSiteAndAStoreWithoutThemReadsAsBefore() throws {
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        let reg = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        let a = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let b = try reg.add(displayName: "B", origins: ["https://b.example"], appBound: true)
        let plain = try reg.add(displayName: "P", origins: ["https://p.example"], appBound: false)
        func raw() throws -> [[String: Any]] {
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: home.appendingPathComponent("sites.json"))) as? [String: Any])
            return try #require(doc["sites"] as? [[String: Any]])
        }
        // No grants: none written, so the file reads as it did before grants existed.
        #expect(try raw().allSatisfy { $0["grants"] == nil })
        let written = try reg.setGrants(["vault.list", "schedule.get", "vault.list"], forIdentifier: a.id)
        #expect(written.grants == ["schedule.get", "vault.list"])
        // Another registry on the same home (another process) sees them; the other site has none.
        let other = try SiteRegistry(home: home, keys: MemoryKeyProvider())
        #expect(other.site(forIdentifier: a.id)?.grants == ["schedule.get", "vault.list"])
        #expect(other.site(forIdentifier: b.id)?.grants == [])
        #expect(try SiteRegistry.sites(inHome: home).first { $0.id == a.id }?.grants == ["schedule.get", "vault.list"])
        // Refused with a reason, leaving the file as it was.
        let before = try Data(contentsOf: home.appendingPathComponent("sites.json"))
        #expect(throws: PartitionError.self) { try reg.setGrants(["schedule.get"], forIdentifier: plain.id) }
        #expect(throws: PartitionError.self) { try reg.setGrants(["Schedule.Get"], forIdentifier: b.id) }
        #expect(throws: PartitionError.self) { try reg.setGrants(["../x"], forIdentifier: b.id) }
        #expect(throws: PartitionError.self) { try reg.setGrants((0...Site.maximumGrants).map { "op.n\($0)" }, forIdentifier: b.id) }
        #expect(throws: PartitionError.self) { try reg.setGrants(["schedule.get"], forIdentifier: SiteID.random()) }
        #expect(try Data(contentsOf: home.appendingPathComponent("sites.json")) == before)
        // Revoking everything leaves no grants member.
        try reg.setGrants([], forIdentifier: a.id)
        #expect(try raw().allSatisfy { $0["grants"] == nil })
    }
}
