import Testing
import Foundation
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepJSON
import SiteKeepPartitions
@testable import SiteKeepWiring
import SiteKeepVocabulary
import Synchronization

/// A site's entry in `sites.json` binds only with its tag (threat T135): what the bridge's
/// resolver serves, on a real registry and custodian, when the file is edited underneath it,
/// read while locked, and approved. The same attacks against the real daemon, as another
/// process: `SiteKeepDaemonTests/RecordTagAttackTests`.
@Suite struct SiteRecordTagTests {
    static let summit = "https://web-summit.sgit.ai", planted = "http://localhost:8719"

    /// Rewrites sites.json's entry of `id` as a process without the master key would.
    static func edit(_ home: String, _ id: SiteID, _ change: (inout [String: Any]) -> Void) throws {
        let url = URL(fileURLWithPath: home + "/sites.json")
        var file = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        var sites = file["sites"] as? [[String: Any]] ?? []
        for i in sites.indices where sites[i]["id"] as? String == id.string { change(&sites[i]) }
        file["sites"] = sites
        try JSONSerialization.data(withJSONObject: file).write(to: url, options: .atomic)
    }

    @Test func anEntryBindsOnlyWithItsTagCheckedWhileUnlocked() async throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let home = dir + "/store"
        let custodian = try Custodian(home: StoreHome(path: home), keyring: MemoryKeyring())
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("pw".utf8)), parameters: .minimum, withRecoveryCode: false)
        let registry = try SiteRegistry(home: URL(fileURLWithPath: home), keys: custodian)
        let site = try registry.add(displayName: "Summit", origins: [Self.summit], appBound: true, hosts: [SiteHost(path: "/usr/bin/true", sha256: nil)])
        #expect(site.tag?.count == 32)
        let notes = CollectedNotes()
        let resolver = RegistrySiteResolver(registry: registry, note: { notes.add($0) })
        func resolves(_ origin: String) async throws -> Bool { await resolver.site(forOrigin: try Origin(parsing: origin)) != nil }
        #expect(try await resolves(Self.summit))
        let summit = try Origin(parsing: Self.summit)
        let bridgeSite = try #require(await resolver.site(forOrigin: summit))
        #expect(resolver.hosts(bridgeSite).map(\.path) == ["/usr/bin/true"])

        // Another origin, a grant and a host written by hand: the entry binds nothing, is named
        // with its fix, and no approved change is made on top of it.
        try Self.edit(home, site.id) { s in
            s["origins"] = [Self.summit, Self.planted]
            s["grants"] = ["vault.list"]
        }
        #expect(try await !resolves(Self.planted))
        #expect(try await !resolves(Self.summit))
        #expect(resolver.grantedOps(bridgeSite).isEmpty && resolver.hosts(bridgeSite).isEmpty)
        #expect(registry.standing(of: site.id) == .tagMismatch)
        #expect(notes.all.contains { $0.contains("the entry of Summit") && $0.contains("sitekeep site approve \(site.id.string)") }, "\(notes.all)")
        #expect(throws: PartitionError.self) { try registry.updateGrants(forIdentifier: site.id, adding: ["key.sign"]) }

        // Read afresh while locked: nothing can be checked, so nothing binds until the unlock.
        custodian.lock()
        let restarted = try SiteRegistry(home: URL(fileURLWithPath: home), keys: custodian)
        let approved = try #require(restarted.site(forIdentifier: site.id))
        #expect(restarted.standing(of: site.id) == .unchecked)
        #expect(throws: PartitionError.self) { try restarted.approve(approved) }
        try custodian.unlock(.passphrase(SecretBytes(copying: Array("pw".utf8))))
        #expect(restarted.standing(of: site.id) == .tagMismatch)

        // The user approves the entry as shown: it applies, grant and planted origin included.
        try restarted.approve(approved)
        let later = RegistrySiteResolver(registry: restarted)
        #expect(await later.site(forOrigin: try Origin(parsing: Self.planted)) != nil)
        #expect(registry.standing(of: site.id) == .authentic)
        #expect(try await resolves(Self.planted))

        // Stripped of its tag, an entry is not taken for one from before tags: it binds nothing.
        try Self.edit(home, site.id) { $0["tag"] = nil }
        #expect(registry.standing(of: site.id) == .untagged)
        #expect(try await !resolves(Self.summit))

        // Locked again after a check, the entries verified stay served (plain data, no key).
        try restarted.approve(try #require(restarted.site(forIdentifier: site.id)))
        #expect(try await resolves(Self.summit))
        custodian.lock()
        #expect(try await resolves(Self.summit))
    }
}

/// The notes a resolver writes (the daemon's log), collected.
final class CollectedNotes: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func add(_ line: String) { lines.withLock { $0.append(line) } }
}
