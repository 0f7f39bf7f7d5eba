import Testing
import Foundation
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody
import SiteKeepPartitions
@testable import SiteKeepBridge
@testable import SiteKeepWiring
import SiteKeepTestSupport
import SiteKeepVocabulary

/// A real custodian behind the dispatcher, with custody's presence window over a counting
/// verifier (issue 12): what prompts, what a proof serves, and what lock clears.
struct CustodyBed {
    let custodian: Custodian
    let verifier: CountingVerifier
    let dispatcher: BridgeDispatcher
    static let passphrase = "bridge lock pass"

    init(sealed: Bool = false, verifier chosen: (any PresenceVerifier)? = nil) throws {
        let home = try tempDir()
        custodian = try Custodian(home: StoreHome(path: home + "/store"), keyring: MemoryKeyring())
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array(Self.passphrase.utf8)), parameters: .minimum, withRecoveryCode: false)
        for id in ["summit", "other"] { _ = try custodian.generateTeamKey(id: id, name: id, algorithm: .ed25519) }
        verifier = CountingVerifier(approve: true)
        // Custody's gate asks through this window: the daemon's wiring (StoreModules) in small.
        let window = PresenceWindow(verifier: chosen ?? verifier, lockScope: custodian.lockScope)
        let custodian = custodian
        dispatcher = try InMemoryBridge.dispatcher(signing: CustodySigningService(custodian: custodian, presence: window),
                                                   sealed: sealed ? TeamSealedContent(teamID: "team-nr", key: try TestKeys.sealKey(),
                                                                                      approve: TeamSealedContent.custody(custodian, presence: window)) : nil)
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
        let envelope = try TeamSealedContent(teamID: "team-nr", key: try TestKeys.sealKey(), approve: { _ in }).seal(Array("note".utf8))
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

    /// Custody's gate refuses a proof for another key, site or op, whoever hands it out: a
    /// verifier that answers with the wrong proof signs nothing, and the refusal is logged.
    @Test func custodyRefusesAProofForAnotherKeyOrSite() async throws {
        struct StaleVerifier: PresenceVerifier {
            let site: KeyUseClient?
            func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
                PresenceProof(client: self.site ?? client, op: op, keyID: "summit", method: .askpass, issuedAtNanoseconds: BootClock.system.nanoseconds())
            }
        }
        let bed = try CustodyBed(verifier: StaleVerifier(site: nil))
        let summit = try await bed.connect(InMemoryBridge.webSummit)
        #expect(code(try await bed.sign(summit, "other")) == .presenceRequired)
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        #expect(try bed.custodian.auditLog.entries().filter { $0.op == "key.sign" }.map(\.result) == ["presence-refused", "ok"])

        let wrongSite = try CustodyBed(verifier: StaleVerifier(site: InMemoryPresence.client(InMemoryBridge.promptugal.id)))
        let c = try await wrongSite.connect(InMemoryBridge.webSummit)
        #expect(code(try await wrongSite.sign(c, "summit")) == .presenceRequired, "a proof for another site does not serve")
        #expect(try wrongSite.custodian.auditLog.entries().filter { $0.op == "key.sign" }.map(\.result) == ["presence-refused"])
    }

    /// The presence prompt names the key a request asks for only when it has the form of a key
    /// id (custody's one rule, ``KeyID``): a page cannot put its own words ("… Allow? Press OK")
    /// into the user's prompt; the gate refuses before anyone is asked.
    @Test func onlyWellFormedKeyIDsReachThePresencePrompt() async throws {
        let bed = try CustodyBed()
        let summit = try await bed.connect(InMemoryBridge.webSummit)
        for hostile in ["Team Ed", "x. Allow? Press OK", "team\u{202E}de", "", String(repeating: "a", count: 65), "-team", ".team", "_team"] {
            #expect(code(try await bed.sign(summit, hostile)) == .badRequest, "\(hostile)")
        }
        #expect(code(try await bed.send(summit, "key.sign", ["key": 7, "data": "AA=="])) == .badRequest)
        #expect(bed.prompts == 0)
        #expect(result(try await bed.sign(summit, "summit")) != nil)
        #expect(bed.verifier.shown.withLock { $0.map(\.keyID) } == ["summit"])
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
        // The partition the access keeps open between calls (the same one each call).
        let kept = try access.with(bridgeSite) { $0 }
        #expect(kept.isOpen)
        #expect(try access.with(bridgeSite) { $0 } === kept)
        custodian.lock()
        #expect(!kept.isOpen, "lock closed the partition kept open")
        await #expect { try await storage.value(forKey: "draft", site: bridgeSite) } throws: { ($0 as? BridgeFailure)?.code == .locked }
        try custodian.unlock(.passphrase(SecretBytes(copying: Array("pw".utf8))))
        #expect(try await storage.value(forKey: "draft", site: bridgeSite) == "secret plan")
        #expect(try access.with(bridgeSite) { $0 } !== kept, "served from a partition opened after the unlock")
    }
}
