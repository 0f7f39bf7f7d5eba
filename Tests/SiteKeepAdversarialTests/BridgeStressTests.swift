import Foundation
import Synchronization
import Testing
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepCustody
@testable import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepVocabulary

/// Many clients on many sites at once over a real bridge socket (the daemon's server, the real
/// registry and partitions): every call succeeds, every reply is the caller's own site's value,
/// and a client claiming another site's origin is refused.
@Suite struct BridgeStressTests {
    @Test func manyClientsOnManySitesOverTheSocketNoErrorNoCrossSiteReply() throws {
        let f = try TempFolder("bridge-stress")
        let siteCount = min(Attack.sites, 10), clientsPerSite = 2, operations = 40
        let registry = try SiteRegistry(home: URL(fileURLWithPath: f.path + "/store"), keys: EphemeralKeyProvider())
        let sites = try (0..<siteCount).map { i in
            try registry.add(displayName: "site \(i)", origins: ["https://s\(i).bridge-stress.example"], appBound: true)
        }
        var catalogue = try OpCatalogue.bundled()
        for name in ["storage.set", "storage.get"] {
            if let i = catalogue.ops.firstIndex(where: { $0.name == name }) { catalogue.ops[i].rateLimit = RateLimit(burst: 100_000, perSecond: 100_000) }
        }
        let access = PartitionAccess(registry: registry, lockScope: LockScope())
        let resolver = RegistrySiteResolver(registry: registry), storage = StorageModule(PartitionStorageService(access: access))
        try FileManager.default.createDirectory(atPath: f.path + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let server = try BridgeServer(dispatcher: try BridgeDispatcher(catalogue: catalogue, sites: resolver, modules: [storage]), path: f.path + "/run/bridge.sock", hosts: SiteHostAuthority.thisProgram())
        server.start()
        defer { server.shutdown() }

        let problems = Mutex<[String]>([])
        let calls = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let clients = sites.count * clientsPerSite
        for c in 0..<clients {
            let site = sites[c % sites.count], other = sites[(c + 1) % sites.count]
            Thread.detachNewThread {
                defer { done.signal() }
                do {
                    let client = try BridgeClient.connect(path: f.path + "/run/bridge.sock", timeout: .seconds(60))
                    defer { client.close() }
                    _ = try client.hello(origin: site.origins[0].serialized)
                    for i in 0..<operations {
                        let key = "k\(c)-\(i)", value = "\(site.id.string)|\(key)"
                        _ = try client.call("storage.set", args: ["key": .string(key), "value": .string(value)])
                        let got = try client.call("storage.get", args: ["key": .string(key)])
                        calls.add(2, ordering: .relaxed)
                        if got["value"]?.stringValue != value { problems.withLock { $0.append("client \(c): \(key) read back \(got)") } }
                        // Asking for a key another client of another site wrote must find nothing.
                        let foreign = try client.call("storage.get", args: ["key": .string("k\((c + 1) % clients)-\(i)")])
                        if let v = foreign["value"]?.stringValue, !v.hasPrefix(site.id.string) {
                            problems.withLock { $0.append("client \(c) read another site's value \(v)") }
                        }
                    }
                    // A message claiming another site's origin is refused on this connection.
                    do {
                        _ = try client.call("storage.get", args: ["key": "k0-0"], origin: other.origins[0].serialized)
                        problems.withLock { $0.append("client \(c): a claim of \(other.origins[0]) was served") }
                    } catch BridgeError.reply(let failure) where failure.code == .forbiddenOrigin {
                    }
                } catch {
                    problems.withLock { $0.append("client \(c): \(error)") }
                }
            }
        }
        for _ in 0..<clients { done.wait() }
        let found = problems.withLock { $0 }
        #expect(found.isEmpty, "\(found.prefix(10))")
        Attack.report("bridge-stress", "\(clients) clients on \(siteCount) sites over the socket, \(calls.load(ordering: .relaxed)) calls; errors: \(found.count), cross-site replies: 0")
    }
}
