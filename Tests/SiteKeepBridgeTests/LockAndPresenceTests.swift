import Testing
import Foundation
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody
import SiteKeepPartitions
@testable import SiteKeepBridge
import SiteKeepTesting
import SiteKeepVocabulary

/// A real custodian behind the dispatcher, with custody's presence window over a counting
/// verifier (issue 12): what prompts, what a proof serves, and what lock clears.
struct CustodyBed {
    let custodian: Custodian
    let verifier: CountingVerifier
    let dispatcher: BridgeDispatcher
    static let passphrase = "bridge lock pass"

    init(sealed: Bool = false) throws {
        let home = try tempDir()
        custodian = try Custodian(home: StoreHome(path: home + "/store"), keyring: MemoryKeyring())
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array(Self.passphrase.utf8)), parameters: .minimum, withRecoveryCode: false)
        for id in ["summit", "other"] { _ = try custodian.generateTeamKey(id: id, name: id, algorithm: .ed25519) }
        verifier = CountingVerifier(approve: true)
        dispatcher = try InMemoryBridge.dispatcher(presence: CustodyPresenceService(window: PresenceWindow(verifier: verifier, lockScope: custodian.lockScope)),
                                                   signing: CustodySigningService(custodian: custodian),
                                                   sealed: sealed ? TeamSealedContent(teamID: "team-nr", key: try TestKeys.sealKey()) : nil)
    }

    var prompts: Int { verifier.asked.load(ordering: .relaxed) }

    func connect(_ site: BridgeSite) async throws -> BridgeConnection {
        let c = BridgeConnection()
        guard result(try await send(c, "hello", ["origin": .string(site.origins[0])])) != nil else { throw BridgeError.protocolViolation("hello failed") }
        return c
    }

    func send(_ c: BridgeConnection, _ op: String, _ args: JSONValue = .object([])) async throws -> BridgeMessage {
        let bytes = await dispatcher.handle(JSONSerializer.bytes(BridgeRequest(id: 1, op: op, args: args).json), connection: c)
        ReplyScan.check(bytes)
        return try BridgeMessage.parse(bytes)
    }

    func sign(_ c: BridgeConnection, _ key: String) async throws -> BridgeMessage {
        try await send(c, "key.sign", ["key": .string(key), "data": "AA=="])
    }

    func unlock() throws { try custodian.unlock(.passphrase(SecretBytes(copying: Array(Self.passphrase.utf8)))) }
}

@Suite struct PresenceBindingTests {
    /// A request that cannot run is refused before anyone is asked: an op with no service (the
    /// daemon has no sealed.open), a site not allowed, bad args, a malformed or unknown key, and
    /// custody locked.
    @Test func anOpThatCannotRunNeverPrompts() async throws {
        let bed = try CustodyBed()
        let summit = try await bed.connect(InMemoryBridge.webSummit)
        #expect(code(try await bed.send(summit, "sealed.open", ["envelope": "sitekeep.sealed.v1.team-nr.AAAA"])) == .notConfigured)
        let promptugal = try await bed.connect(InMemoryBridge.promptugal)
        #expect(code(try await bed.sign(promptugal, "summit")) == .notAllowed)
        #expect(code(try await bed.send(summit, "key.sign", ["key": "summit", "data": "not base64!"])) == .badRequest)
        #expect(code(try await bed.send(summit, "key.sign", ["key": "summit"])) == .badRequest)
        #expect(code(try await bed.sign(summit, "Team Summit")) == .badRequest)
        #expect(code(try await bed.sign(summit, "nope")) == .notFound)
        bed.custodian.lock()
        #expect(code(try await bed.sign(summit, "summit")) == .locked)
        #expect(bed.prompts == 0, "nothing that cannot run asked the user")
        try bed.unlock()
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        #expect(bed.prompts == 1)
    }

    /// An approval serves its own site, op and key only: another key asks again, and so does
    /// another op; the same use within 60 s does not (so a burst of signatures asks once).
    @Test func aProofServesOnlyItsOwnSiteOpAndKey() async throws {
        let bed = try CustodyBed(sealed: true)
        let summit = try await bed.connect(InMemoryBridge.webSummit)
        let envelope = try TeamSealedContent(teamID: "team-nr", key: try TestKeys.sealKey()).seal(Array("note".utf8))
        #expect(result(try await bed.send(summit, "sealed.open", ["envelope": .string(envelope)])) != nil)
        #expect(bed.prompts == 1)
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        #expect(bed.prompts == 2, "a sealed.open approval does not sign")
        for _ in 0..<5 { #expect(result(try await bed.sign(summit, "summit")) != nil) }
        #expect(bed.prompts == 2, "the same site, op and key reuse the window")
        let second = try await bed.connect(InMemoryBridge.webSummit)
        #expect(result(try await bed.sign(second, "other")) != nil)
        #expect(bed.prompts == 3, "an approval for key summit does not sign with key other")
        #expect(bed.verifier.shown.withLock { $0.map(\.keyID) } == [nil, "summit", "other"])

        // Custody's audit line names the prompt behind each signature.
        let uses = try bed.custodian.auditLog.entries().filter { $0.op == "key.sign" }
        try #require(uses.count == 7)
        #expect(uses.allSatisfy { $0.result == "ok" && $0.prompt != nil })
        #expect(Set(uses.prefix(6).map(\.prompt)).count == 1 && uses[6].prompt != uses[0].prompt)
    }

    /// The window lives in custody's lock scope: lock and unlock both forget every approval.
    @Test func lockAndUnlockForgetEveryApproval() async throws {
        let bed = try CustodyBed()
        let summit = try await bed.connect(InMemoryBridge.webSummit)
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        bed.custodian.lock()
        try bed.unlock()
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        #expect(bed.prompts == 2, "the approval from before the lock did not survive it")
    }

    /// Custody refuses a proof for another key or op even when a presence service hands one out.
    @Test func custodyRefusesAProofForAnotherKey() async throws {
        struct StaleKeyPresence: PresenceService {
            func proof(for site: BridgeSite, op: String, keyID: String?,
                       beforeAsking: @Sendable () async throws(BridgeFailure) -> Void) async throws(BridgeFailure) -> PresenceProof {
                PresenceProof(site: site.id, op: op, keyID: "summit", method: .askpass, issuedAtNanoseconds: BootClock.system.nanoseconds())
            }
        }
        let bed = try CustodyBed()
        let signing = CustodySigningService(custodian: bed.custodian)
        let proof = PresenceProof(site: InMemoryBridge.webSummit.id, op: "key.sign", keyID: "summit", method: .askpass,
                                  issuedAtNanoseconds: BootClock.system.nanoseconds())
        await #expect(throws: BridgeFailure.self) { try await signing.sign([1], keyID: "other", site: InMemoryBridge.webSummit, presence: proof) }
        _ = try await signing.sign([1], keyID: "summit", site: InMemoryBridge.webSummit, presence: proof)
        // And the dispatcher refuses a service's proof for another key before any handler runs.
        let d = try InMemoryBridge.dispatcher(presence: StaleKeyPresence(), signing: signing)
        let c = BridgeConnection()
        _ = await d.handle(Array(#"{"v":1,"id":1,"op":"hello","args":{"origin":"https://web-summit.sgit.ai"}}"#.utf8), connection: c)
        let reply = try BridgeMessage.parse(await d.handle(Array(#"{"v":1,"id":2,"op":"key.sign","args":{"key":"other","data":"AA=="}}"#.utf8), connection: c))
        #expect(code(reply) == .presenceRequired)
        #expect(try bed.custodian.auditLog.entries().filter { $0.op == "key.sign" }.map(\.result) == ["presence-refused", "ok"])
    }
}

@Suite struct PartitionLockTests {
    /// The bridge's open partitions are in custody's lock scope: lock closes them, so a
    /// when-unlocked site's data is not served from a partition left open.
    @Test func lockClosesTheOpenPartitions() async throws {
        let home = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let custodian = try Custodian(home: StoreHome(path: home + "/store"), keyring: MemoryKeyring())
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("pw".utf8)), parameters: .minimum, withRecoveryCode: false)
        let registry = try SiteRegistry(home: URL(fileURLWithPath: home + "/store"), keys: custodian)
        let site = try registry.add(displayName: "Drafts", origins: ["http://localhost:8080"], appBound: true, protection: .whenUnlocked)
        let access = PartitionAccess(registry: registry, lockScope: custodian.lockScope)
        let storage = PartitionStorageService(access: access)
        let bridgeSite = BridgeSite(id: site.id.string, name: "Drafts", origins: ["http://localhost:8080"], isAppBound: true)
        try await storage.setValue("secret plan", forKey: "draft", site: bridgeSite)
        #expect(try await storage.value(forKey: "draft", site: bridgeSite) == "secret plan")
        #expect(access.openCount == 1)
        custodian.lock()
        #expect(access.openCount == 0)
        await #expect { try await storage.value(forKey: "draft", site: bridgeSite) } throws: { ($0 as? BridgeFailure)?.code == .locked }
        try custodian.unlock(.passphrase(SecretBytes(copying: Array("pw".utf8))))
        #expect(try await storage.value(forKey: "draft", site: bridgeSite) == "secret plan")
    }
}
