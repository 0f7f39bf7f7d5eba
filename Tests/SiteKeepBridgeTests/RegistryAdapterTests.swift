import Testing
import SiteKeepCustody
import Foundation
import Glibc
import SiteKeepJSON
import SiteKeepPartitions
@testable import SiteKeepBridge
import SiteKeepTesting

/// The bridge on a real registry that another registry (another process, in the daemon's case)
/// changes underneath it (issue 12, defect 4). The real-process proof is in
/// `SiteKeepAdversarialTests/RegistryProcessTests`.
@Suite struct RegistryAdapterTests {
    struct Setup {
        let dir: String
        let registry: SiteRegistry
        let other: SiteRegistry
        let access: PartitionAccess
        let dispatcher: BridgeDispatcher
        let site: Site

        init() throws {
            dir = try tempDir()
            let home = URL(fileURLWithPath: dir + "/home")
            let keys = EphemeralKeyProvider()
            registry = try SiteRegistry(home: home, keys: keys)
            other = try SiteRegistry(home: home, keys: keys)
            site = try registry.add(displayName: "News", origins: ["https://news.example"], appBound: true)
            access = PartitionAccess(registry: registry, lockScope: LockScope())
            access.followRegistryChanges()
            dispatcher = try BridgeDispatcher(catalogue: .bundled(), sites: RegistrySiteResolver(registry: registry),
                                              modules: [StorageModule(PartitionStorageService(access: access))])
        }

        func send(_ c: BridgeConnection, _ op: String, _ args: JSONValue = .object([])) async -> BridgeMessage {
            let bytes = await dispatcher.handle(JSONSerializer.bytes(BridgeRequest(id: "r", op: op, args: args).json), connection: c)
            return (try? BridgeMessage.parse(bytes)) ?? .failure(id: .null, BridgeFailure(.internal, "unparseable reply"))
        }

        /// Rewrites the site's entry in sites.json as another tool would.
        func edit(_ change: (inout [String: Any]) -> Void) throws {
            let url = URL(fileURLWithPath: dir + "/home/sites.json")
            var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
            var sites = try #require(doc["sites"] as? [[String: Any]])
            for i in sites.indices { change(&sites[i]) }
            doc["sites"] = sites
            try JSONSerialization.data(withJSONObject: doc).write(to: URL(fileURLWithPath: url.path + ".edit"))
            _ = rename(url.path + ".edit", url.path)
        }
    }

    @Test func aConnectionOfARemovedSiteIsRefusedFromItsNextMessage() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let c = BridgeConnection()
        #expect(result(await s.send(c, "hello", ["origin": "https://news.example"])) != nil)
        #expect(result(await s.send(c, "storage.set", ["key": "k", "value": "v"])) != nil)
        try s.other.remove(forIdentifier: s.site.id, force: true)
        let refused = await s.send(c, "storage.get", ["key": "k"])
        #expect(code(refused) == .forbiddenOrigin)
        if case .failure(_, let f) = refused { #expect(f.message.contains("News was removed")) }
        #expect(c.isRevoked)
        // Revoked for good: neither another op nor a new hello on it is served.
        #expect(code(await s.send(c, "storage.keys")) == .forbiddenOrigin)
        #expect(code(await s.send(c, "hello", ["origin": "https://news.example"])) == .forbiddenOrigin)
        #expect(code(await s.send(BridgeConnection(), "hello", ["origin": "https://news.example"])) == .forbiddenOrigin)
    }

    @Test func aConnectionOfASiteNoLongerAppBoundOrWithOtherOriginsIsRefused() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let c = BridgeConnection()
        _ = await s.send(c, "hello", ["origin": "https://news.example"])
        try s.edit { $0["displayName"] = "Renamed" }
        #expect(result(await s.send(c, "storage.keys")) != nil, "a new name alone revoked the connection")
        try s.edit { $0["origins"] = ["https://news.example:443", "https://www.news.example:443"] }
        #expect(code(await s.send(c, "storage.keys")) == .forbiddenOrigin)
        let d = BridgeConnection()
        _ = await s.send(d, "hello", ["origin": "https://www.news.example"])
        #expect(result(await s.send(d, "storage.keys")) != nil)
        try s.edit { $0["isAppBound"] = false }
        #expect(code(await s.send(d, "storage.keys")) == .forbiddenOrigin)
    }

    /// Issue 18, item 2: a registered site that is not app-bound is told so, and how to make it
    /// so, not "no site has the origin"; an origin without a scheme is named as typed.
    @Test func helloNamesTheRealCauseOfARefusal() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        _ = try s.registry.add(displayName: "Local", origins: ["https://local.example"], appBound: false)
        let local = await s.send(BridgeConnection(), "hello", ["origin": "https://local.example"])
        #expect(code(local) == .forbiddenOrigin)
        if case .failure(_, let f) = local {
            #expect(f.message.contains("Local is registered but not app-bound") && f.message.contains("--app-bound"), "\(f.message)")
        }
        let unknown = await s.send(BridgeConnection(), "hello", ["origin": "https://nobody.example"])
        if case .failure(_, let f) = unknown { #expect(f.message.contains("no site has the origin")) } else { Issue.record("served") }
        let bare = await s.send(BridgeConnection(), "hello", ["origin": "news.example"])
        #expect(code(bare) == .forbiddenOrigin)
        if case .failure(_, let f) = bare {
            #expect(f.message.contains("'news.example' is not a web origin") && f.message.contains("did you mean https://news.example?")
                    && !f.message.contains("args.origin"), "\(f.message)")
        }
    }

    /// A partition the registry closed because its site changed is not served from the daemon's
    /// partition cache: the next request opens it afresh instead of failing.
    @Test func aChangedSitesNextRequestOpensItsPartitionAfresh() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let bound = RegistrySiteResolver.bridgeSite(s.site)
        try s.access.with(bound) { p throws(PartitionError) in try p.storage.setItem("k", "v") }
        try s.edit { $0["protection"] = "when-unlocked" }
        s.registry.refresh()   // sees the change and closes the partition
        let value = try s.access.with(bound) { p throws(PartitionError) in try p.storage.getItem("k") }
        #expect(value == "v")
    }
}
