import Foundation
import Synchronization
import Testing
@testable import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepVocabulary

/// Many threads on many sites at once, straight through the registry (the bridge's many
/// clients over the socket are BridgeStressTests).
@Suite struct StressTests {
    /// Every thread writes and reads random sites, opening and closing partitions as it goes: no
    /// call fails, every read returns what was written to THAT site, and afterwards each site
    /// holds exactly its own keys.
    @Test func manyThreadsOnManySitesNoErrorNoCrossSiteValue() throws {
        let f = try TempFolder("stress")
        let registry = try SiteRegistry(home: URL(fileURLWithPath: f.path + "/home"), keys: EphemeralKeyProvider())
        let siteCount = Attack.sites, threads = Attack.threads, operations = 60
        let sites = try (0..<siteCount).map { i in
            try registry.add(displayName: "site \(i)", origins: ["https://s\(i).stress.example"], appBound: false)
        }
        let problems = Mutex<[String]>([])
        let written = Mutex<[String: Set<String>]>([:])   // site id -> keys
        let done = DispatchSemaphore(value: 0)
        for t in 0..<threads {
            let thread = Thread {
                defer { done.signal() }
                for i in 0..<operations {
                    let site = sites[Int.random(in: 0..<sites.count)]
                    let sid = site.id.string
                    do {
                        let p = try registry.openPartition(forIdentifier: site.id)
                        defer { p.close() }
                        let key = "t\(t)-\(i)"
                        if i % 7 == 6 {
                            try p.storage.setItems((0..<5).map { ("\(key)-\($0)", "\(sid)|\(key)-\($0)") })
                            written.withLock { $0[sid, default: []].formUnion((0..<5).map { "\(key)-\($0)" }) }
                        } else {
                            try p.storage.setItem(key, "\(sid)|\(key)")
                            _ = written.withLock { $0[sid, default: []].insert(key) }
                        }
                        guard try p.storage.getItem(key) ?? p.storage.getItem("\(key)-0") != nil else {
                            problems.withLock { $0.append("\(sid): lost \(key)") }; continue
                        }
                        // Every value this site holds now names this site.
                        for k in try p.storage.keys().shuffled().prefix(5) {
                            if let v = try p.storage.getItem(k), !v.hasPrefix(sid + "|") {
                                problems.withLock { $0.append("site \(sid) returned another site's value for \(k): \(v.prefix(40))") }
                            }
                        }
                    } catch {
                        problems.withLock { $0.append("\(sid): \(error)") }
                    }
                }
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        for _ in 0..<threads { done.wait() }
        let found = problems.withLock { $0 }
        #expect(found.isEmpty, "\(found.prefix(10))")
        let expected = written.withLock { $0 }
        var total = 0
        for site in sites {
            let p = try registry.openPartition(forIdentifier: site.id)
            let keys = Set(try p.storage.keys())
            #expect(keys == expected[site.id.string, default: []], "site \(site.id.string) holds other keys than were written to it")
            for k in keys { #expect(try p.storage.getItem(k) == "\(site.id.string)|\(k)") }
            try p.verify()
            total += keys.count
            p.close()
        }
        Attack.report("stress", "\(threads) threads x \(operations) ops on \(siteCount) sites, \(total) values; errors: \(found.count), cross-site values: 0")
        // The same over the daemon's socket: BridgeStressTests.
    }
}
