import Testing
import SiteKeepCustody
import Foundation
import Glibc
import SiteKeepJSON
import SiteKeepPartitions
@testable import SiteKeepBridge
@testable import SiteKeepWiring
import SiteKeepTestSupport
import SiteKeepVocabulary

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

    /// Issue 33, point 5: a grant in the registry opens a grantable op to its own site, on an
    /// open connection's next message, and to no other site; a revoke closes it as fast. The
    /// catalogue is the ceiling: a grant of hello, an event or an op not marked grantable, written
    /// into sites.json by hand, opens nothing.
    @Test func aGrantOpensAnOpForItsSiteAloneAndARevokeClosesIt() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let neighbour = try s.registry.add(displayName: "Neighbour", origins: ["https://neighbour.example"], appBound: true)
        let c = BridgeConnection(), n = BridgeConnection()
        let hello = await s.send(c, "hello", ["origin": "https://news.example"])
        #expect(result(hello)?["ops"]?.arrayValue?.contains("notify.plan") == false)
        _ = await s.send(n, "hello", ["origin": "https://neighbour.example"])
        let refused = await s.send(c, "notify.plan")
        #expect(code(refused) == .notAllowed)
        if case .failure(_, let f) = refused { #expect(f.message.contains("sitekeep site grant https://news.example notify.plan"), "\(f.message)") }

        try s.other.setGrants(["notify.plan"], forIdentifier: s.site.id)
        // Allowed now (no notify module here: the next check answers, not the allow-list).
        #expect(code(await s.send(c, "notify.plan")) == .notConfigured)
        #expect(s.dispatcher.isAllowed("notify.plan", site: Self.bridge(s.site)) && !s.dispatcher.isAllowed("notify.plan", site: Self.bridge(neighbour)))
        #expect(result(await s.send(BridgeConnection(), "hello", ["origin": "https://news.example"]))?["ops"]?.arrayValue?.contains("notify.plan") == true)
        #expect(code(await s.send(n, "notify.plan")) == .notAllowed, "the grant reached another site")
        #expect(result(await s.send(BridgeConnection(), "hello", ["origin": "https://neighbour.example"]))?["ops"]?.arrayValue?.contains("notify.plan") == false)

        try s.other.setGrants([], forIdentifier: s.site.id)
        #expect(code(await s.send(c, "notify.plan")) == .notAllowed)

        // Beyond the ceiling: names the catalogue does not open to grants are ignored.
        try s.edit { $0["grants"] = ["hello", "schedule.changed", "no.such.op", "notify.plan"] }
        #expect(code(await s.send(c, "schedule.changed")) == .notAllowed)
        #expect(code(await s.send(c, "notify.plan")) == .notConfigured)
        let listed = result(await s.send(BridgeConnection(), "hello", ["origin": "https://news.example"]))?["ops"]?.arrayValue ?? []
        #expect(!listed.contains("schedule.changed") && !listed.contains("no.such.op") && listed.contains("notify.plan"))
        let bundled = try OpCatalogue.bundled()
        #expect(bundled["hello"]?.grantable == false && bundled.ops.filter { $0.direction == .event }.allSatisfy { !$0.grantable })
    }

    /// The catalogue is the ceiling: a grant in the registry opens an op marked grantable and
    /// nothing else, whatever the registry holds.
    @Test func onlyOpsTheCatalogueMarksGrantableAreOpenedByAGrant() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let hello = #"{"name":"hello","version":1,"direction":"request","summary":"s","sites":["*app-bound*"],"presence":false,"maxRequestBytes":4096,"rateLimit":{"burst":50,"perSecond":50},"args":{"origin":{"type":"string","maxLength":512}},"result":{"version":{"type":"integer"},"ops":{"type":"array","maxItems":64,"items":{"type":"string","maxLength":64}}}}"#
        func op(_ name: String, grantable: Bool) -> String {
            #"{"name":"NAME","version":1,"direction":"request","summary":"s","sites":["https://elsewhere.example"],"grantable":G,"presence":false,"maxRequestBytes":100,"rateLimit":{"burst":50,"perSecond":50},"unsupported":"not here","args":{},"result":{}}"#
                .replacingOccurrences(of: "NAME", with: name).replacingOccurrences(of: "G", with: grantable ? "true" : "false")
        }
        let text = #"{"format":"sitekeep.ops.v1","protocolVersion":1,"ops":["# + [hello, op("a.open", grantable: true), op("a.shut", grantable: false)].joined(separator: ",") + "]}"
        let d = try BridgeDispatcher(catalogue: try OpCatalogue.load(Array(text.utf8)), sites: RegistrySiteResolver(registry: s.registry),
                                     modules: [], knownModules: [])
        func send(_ c: BridgeConnection, _ op: String, _ args: JSONValue = .object([])) async -> BridgeMessage {
            let bytes = await d.handle(JSONSerializer.bytes(BridgeRequest(id: "r", op: op, args: args).json), connection: c)
            return (try? BridgeMessage.parse(bytes)) ?? .failure(id: .null, BridgeFailure(.internal, "unparseable reply"))
        }
        try s.registry.setGrants(["a.open", "a.shut"], forIdentifier: s.site.id)
        let c = BridgeConnection()
        #expect(result(await send(c, "hello", ["origin": "https://news.example"]))?["ops"] == .array(["hello", "a.open"]))
        #expect(code(await send(c, "a.open")) == .unsupported, "the grantable op is open (and answers from its next check)")
        let shut = await send(c, "a.shut")
        #expect(code(shut) == .notAllowed)
        if case .failure(_, let f) = shut { #expect(!f.message.contains("site grant"), "an op that cannot be granted is not offered: \(f.message)") }
    }

    /// The isolation audit's bridge probe works out what is allowed from the catalogue and the
    /// registry's grants, not from the dispatcher it audits: a dispatcher that lets a grant reach
    /// every site is reported, one that keeps it to its site passes.
    @Test func theAuditProbeCatchesAGrantThatReachesAnotherSite() async throws {
        let s = try Setup()
        defer { try? FileManager.default.removeItem(atPath: s.dir) }
        let neighbour = try s.registry.add(displayName: "Neighbour", origins: ["https://neighbour.example"], appBound: true)
        try s.registry.setGrants(["key.sign", "schedule.get"], forIdentifier: s.site.id)
        let truth = [s.site.id.string: Set(["key.sign", "schedule.get"])]
        let sites = [Self.bridge(s.site), Self.bridge(neighbour)]
        let honest = await BridgeProbes.run(dispatcher: s.dispatcher, sites: sites, grants: truth)
        #expect(!honest.isEmpty && honest.allSatisfy(\.passed), "\(honest.filter { !$0.passed })")
        let leaky = try BridgeDispatcher(catalogue: .bundled(), sites: GrantsEverySite(RegistrySiteResolver(registry: s.registry)), modules: [])
        let caught = await BridgeProbes.run(dispatcher: leaky, sites: sites, grants: truth).filter { !$0.passed }
        #expect(Set(caught.map(\.op)) == ["key.sign", "schedule.get"] && caught.allSatisfy { $0.site == "Neighbour" && $0.probe == BridgeProbes.foreignSite },
                "\(caught)")
    }

    /// A resolver that hands every site the grants of all sites: the leak the audit must see.
    struct GrantsEverySite: SiteResolver {
        let base: RegistrySiteResolver
        init(_ base: RegistrySiteResolver) { self.base = base }
        func site(forOrigin origin: Origin) async -> BridgeSite? { await base.site(forOrigin: origin) }
        func isCurrent(_ site: BridgeSite) -> Bool { base.isCurrent(site) }
        func grantedOps(_ site: BridgeSite) -> Set<String> { Set(base.registry.sites().flatMap(\.grants)) }
    }

    static func bridge(_ s: Site) -> BridgeSite {
        BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound)
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
