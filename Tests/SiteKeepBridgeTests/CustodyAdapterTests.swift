import Testing
import Foundation
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody
@testable import SiteKeepBridge
@testable import SiteKeepWiring
import SiteKeepTestSupport

/// A keyring in memory (the bridge's own copy of the contract, for adapter tests).
final class MemoryKeyring: KeyringBackend {
    let items = Mutex<[KeyringItemID: [UInt8]]>([:])
    var kind: KeyringKind { .file }
    var location: String { "memory" }
    func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) { items.withLock { $0[item] = blob } }
    func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        guard let b = items.withLock({ $0[item] }) else { throw .itemMissing(item) }
        return b
    }
    func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool { items.withLock { $0.removeValue(forKey: item) != nil } }
    func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        items.withLock { $0.keys.filter { $0.store == store && (kind == nil || $0.kind == kind) } }
    }
}

/// A verifier that approves (counting, and keeping what the user would have been shown) or refuses.
final class CountingVerifier: PresenceVerifier {
    let approve: Bool
    let asked = Atomic<Int>(0)
    let shown = Mutex<[(siteLabel: String, keyID: String?)]>([])
    init(approve: Bool) { self.approve = approve }
    func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }
    func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        asked.add(1, ordering: .relaxed)
        shown.withLock { $0.append((siteLabel, keyID?.string)) }
        guard approve else { throw .presenceDenied }
        return PresenceProof(client: client, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: BootClock.system.nanoseconds())
    }
}

@Suite struct CustodyAdapterTests {
    @Test func keySignThroughTheRealCustodian() async throws {
        let home = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let custodian = try Custodian(home: StoreHome(path: home + "/store"), keyring: MemoryKeyring())
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("pw".utf8)), parameters: .minimum, withRecoveryCode: false)
        let info = try custodian.generateTeamKey(id: "summit", name: "Web Summit Team", algorithm: .ed25519)
        let verifier = CountingVerifier(approve: true)
        let bed = try InMemoryBridge.dispatcher(signing: CustodySigningService(custodian: custodian,
                                                                               presence: PresenceWindow(verifier: verifier, lockScope: custodian.lockScope)),
                                                identity: CustodyIdentityService(custodian: custodian, teamKeyID: "summit"))
        let c = BridgeConnection()
        func send(_ op: String, _ args: JSONValue = .object([])) async throws -> BridgeMessage {
            let bytes = await bed.handle(JSONSerializer.bytes(BridgeRequest(id: 1, op: op, args: args).json), connection: c)
            ReplyScan.check(bytes)
            return try BridgeMessage.parse(bytes)
        }
        #expect(result(try await send("hello", ["origin": "https://web-summit.sgit.ai"])) != nil)
        let data = Array("commit bytes".utf8)
        let r = try #require(result(try await send("key.sign", ["key": "summit", "data": .string(Base64.encode(data))])))
        let sig = try Base64.decode(r["signature"]?.stringValue ?? "")
        #expect(try custodian.verify(keyID: "summit", signature: sig, message: data))
        _ = try await send("key.sign", ["key": "summit", "data": "AA=="])
        #expect(verifier.asked.load(ordering: .relaxed) == 1, "the window serves the second sign")
        // The user was shown the site's quoted name and origin and the key, not the site's UUID.
        let shown = verifier.shown.withLock { $0 }
        #expect(shown.count == 1 && shown[0].siteLabel == "site \"\(InMemoryBridge.webSummit.name)\" (\(InMemoryBridge.webSummit.origins[0]))" && shown[0].keyID == "summit")
        #expect(code(try await send("key.sign", ["key": "nope", "data": "AA=="])) == .notFound)
        #expect(result(try await send("identity.get")) == ["team": "summit", "name": .string(info.name)])
        // Custody's own audit log holds the site and op of each use.
        let entries = try custodian.auditLog.entries()
        #expect(entries.filter { $0.op == "key.sign" && $0.site == InMemoryBridge.webSummit.id }.count >= 2)
        custodian.lock()
        #expect(code(try await send("key.sign", ["key": "summit", "data": "AA=="])) == .locked)
    }

    @Test func refusedPresenceIsPresenceDenied() async throws {
        let bed = try CustodyBed(verifier: CountingVerifier(approve: false))
        let c = try await bed.connect(InMemoryBridge.webSummit)
        #expect(code(try await bed.sign(c, "summit")) == .presenceDenied)
        #expect(try bed.custodian.auditLog.entries().filter { $0.op == "key.sign" }.map(\.result) == ["presence-refused"])
    }
}
