import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
@testable import SiteKeepCustody

@Suite struct SlotTests {
    /// The same master key behind every slot, observed through a team-key signature and a
    /// when-unlocked storage-key round trip, never through key bytes.
    @Test(arguments: Backend.allCases) func passphrasePRFAndRecoveryCodeOpenTheSameMasterKey(backend: Backend) throws {
        let f = try Fixture(backend)
        let created = try f.initialize()
        let code = try #require(created.recoveryCode)
        _ = try f.custodian.addPRFSlot(prfOutput: prfBytes(7), relyingPartyID: "promptugal.news",
                                       credentialID: "Y3JlZC0x", prfEvalInput: "c2l0ZWtlZXA", current: f.current())
        let team = try f.custodian.generateTeamKey(id: "team1", name: "Team", algorithm: .ed25519)
        let sealed = try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked)
            .seal(Array("hello".utf8), authenticating: [1])
        let message = Array("commit".utf8)

        func check() throws {
            // Deterministic Ed25519: the same key gives the same signature.
            let sig = try f.custodian.sign(keyID: "team1", message: message, context: f.approved("team1"))
            #expect(try f.custodian.verify(keyID: "team1", signature: sig, message: message))
            #expect(SignatureVerifier.isValid(sig, for: message, publicKey: try Base64.decode(team.publicKey), algorithm: .ed25519))
            let key = try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked)
            #expect(try key.open(sealed, authenticating: [1]) == Array("hello".utf8))
        }
        try check()
        for unlock in 0..<3 {
            f.custodian.lock()
            #expect(!f.custodian.isUnlocked)
            switch unlock {
            case 0: try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
            case 1: try f.custodian.unlock(.prf(prfBytes(7)))
            default: try f.custodian.unlock(UnlockSecret.recoveryCode(code.formatted.lowercased()))
            }
            #expect(f.custodian.isUnlocked)
            try check()
        }
    }

    @Test(arguments: Backend.allCases) func wrongSecretsAndDamagedSlotsGiveTheSameOpaqueError(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        f.custodian.lock()
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret("wrong"))) }
        // Damage the slot's wrapped bytes: the same error.
        let slotItem = try #require(try f.keyring.list(store: f.custodian.storeID, kind: "slot").first)
        var blob = try f.keyring.load(slotItem)
        blob[blob.count - 1] ^= 1
        try f.keyring.store(blob, for: slotItem, label: "")
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        // Garbage in place of the slot: still the same error.
        try f.keyring.store([1, 2, 3], for: slotItem, label: "")
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        #expect(CustodyError.unlockFailed.description.contains("wrong passphrase"))
    }

    /// Rewrites a field of a stored slot's header (keeping it parseable) and expects unlock to fail.
    func tamper(_ f: Fixture, _ edit: (inout SlotHeader) throws -> Void) throws {
        let item = try #require(try f.keyring.list(store: f.custodian.storeID, kind: "slot").first)
        let blob = try SlotBlob.parse(try f.keyring.load(item))
        var header = try SlotHeader.parse(blob.headerBytes)
        try edit(&header)
        try f.keyring.store(SlotBlob(headerBytes: header.encoded(), wrappedMaster: blob.wrappedMaster).encoded(), for: item, label: "")
    }

    @Test(arguments: Backend.allCases) func weakenedParametersFailToUnlock(backend: Backend) throws {
        let f = try Fixture(backend)
        _ = try f.custodian.initialize(passphrase: secret("pw"), parameters: try Argon2id.Parameters(iterations: 3, memoryKiB: 19 * 1024), withRecoveryCode: false)
        f.custodian.lock()
        try tamper(f) { $0.argon2 = .minimum }
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret("pw"))) }
    }

    @Test(arguments: Backend.allCases) func swappedSaltFailsToUnlock(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.addPRFSlot(prfOutput: prfBytes(1), relyingPartyID: "example.org", credentialID: "AA", prfEvalInput: "AA", current: f.current())
        f.custodian.lock()
        // Give the passphrase slot the PRF slot's salt.
        let items = try f.keyring.list(store: f.custodian.storeID, kind: "slot")
        let headers = try items.map { try SlotHeader.parse(SlotBlob.parse(f.keyring.load($0)).headerBytes) }
        let prfSalt = try #require(headers.first { $0.kind == .prf }?.salt)
        for item in items {
            let blob = try SlotBlob.parse(try f.keyring.load(item))
            var h = try SlotHeader.parse(blob.headerBytes)
            if h.kind == .passphrase { h.salt = prfSalt }
            if h.kind == .prf { h.salt = SecureRandom.bytes(count: 16) }
            try f.keyring.store(SlotBlob(headerBytes: h.encoded(), wrappedMaster: blob.wrappedMaster).encoded(), for: item, label: "")
        }
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.prf(prfBytes(1))) }
    }

    @Test(arguments: Backend.allCases) func slotMovedToAnotherStoreFails(backend: Backend) throws {
        let shared = try TestKeyring(backend)
        let a = try Fixture(backend, keyring: shared)
        try a.initialize(recovery: false)
        let b = try Fixture(backend, keyring: shared)
        _ = try b.custodian.initialize(passphrase: secret("other"), parameters: .minimum, withRecoveryCode: false)
        b.custodian.lock()
        // Copy A's slot into B's store, as is and with its store id rewritten.
        let aItem = try #require(try shared.list(store: a.custodian.storeID, kind: "slot").first)
        let aBlob = try shared.load(aItem)
        try shared.store(aBlob, for: KeyringItemID(store: b.custodian.storeID, kind: "slot", id: aItem.id), label: "")
        #expect(throws: CustodyError.unlockFailed) { try b.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        let parsed = try SlotBlob.parse(aBlob)
        var h = try SlotHeader.parse(parsed.headerBytes)
        h.storeID = b.custodian.storeID
        try shared.store(SlotBlob(headerBytes: h.encoded(), wrappedMaster: parsed.wrappedMaster).encoded(),
                         for: KeyringItemID(store: b.custodian.storeID, kind: "slot", id: aItem.id), label: "")
        #expect(throws: CustodyError.unlockFailed) { try b.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        // B's own passphrase still works.
        try b.custodian.unlock(.passphrase(secret("other")))
        #expect(b.custodian.isUnlocked)
    }

    @Test func headerParserIsStrict() throws {
        let good = SlotHeader(kind: .passphrase, slotID: "0011223344556677", storeID: String(repeating: "a", count: 32),
                              created: 1, label: "x", argon2: .minimum, salt: [UInt8](repeating: 9, count: 16),
                              relyingPartyID: nil, credentialID: nil, prfEvalInput: nil)
        let bytes = good.encoded()
        #expect(try SlotHeader.parse(bytes) == good)
        // Unknown version.
        var v2 = bytes; v2[7] = 2
        #expect(throws: CustodyError.self) { try SlotHeader.parse(v2) }
        // Unknown kind.
        var k = bytes; k[11] = 9
        #expect(throws: CustodyError.self) { try SlotHeader.parse(k) }
        // Oversize, truncated, trailing field, wrong magic.
        #expect(throws: CustodyError.self) { try SlotHeader.parse(bytes + [UInt8](repeating: 0, count: 5000)) }
        #expect(throws: CustodyError.self) { try SlotHeader.parse(Array(bytes.dropLast(3))) }
        #expect(throws: CustodyError.self) { try SlotHeader.parse(bytes + [20, 0, 0]) }
        #expect(throws: CustodyError.self) { try SlotHeader.parse([0] + bytes.dropFirst()) }
        // Argon2id parameters above the ceiling are refused before any derivation.
        var hugeBytes = good.encoded()
        let tIndex = try #require(findField(hugeBytes, tag: 8))
        hugeBytes[tIndex + 4] = 0x03; hugeBytes[tIndex + 5] = 0xe8 // t = 1000 (the 4-byte BE value follows the 2-byte length)
        #expect {
            try SlotHeader.parse(hugeBytes)
        } throws: { ($0 as? CustodyError).map { "\($0)".contains("ceiling") } ?? false }
    }

    func findField(_ bytes: [UInt8], tag: UInt8) -> Int? {
        var i = 4
        while i + 3 <= bytes.count {
            let len = Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            if bytes[i] == tag { return i + 1 }
            i += 3 + len
        }
        return nil
    }

    @Test(arguments: Backend.allCases) func lastSlotCannotBeRemoved(backend: Backend) throws {
        let f = try Fixture(backend)
        let created = try f.initialize(recovery: true)
        try f.custodian.removeSlot(id: try #require(created.recoverySlot?.id), current: f.current())
        #expect(throws: CustodyError.lastSlot) { try f.custodian.removeSlot(id: created.passphraseSlot.id, current: f.current()) }
        #expect(try f.custodian.listSlots().map(\.id) == [created.passphraseSlot.id])
        #expect(throws: CustodyError.slotNotFound("nope")) { try f.custodian.removeSlot(id: "nope", current: f.current()) }
    }

    /// Who can unlock changes only with a secret that opens a slot now, given for the change:
    /// an unlocked custodian is not enough (issue 32: any process reaching an unlocked daemon
    /// minted recovery codes and replaced the passphrase), and a locked one with the secret is.
    @Test(arguments: Backend.allCases) func slotChangesNeedTheCurrentSecretUnlockedOrNot(backend: Backend) throws {
        let f = try Fixture(backend)
        let created = try f.initialize(recovery: true)
        #expect(f.custodian.isUnlocked)
        let before = try f.custodian.listSlots()
        let wrong: () throws -> UnlockSecret = { .passphrase(try secret("not the passphrase")) }
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.addRecoverySlot(current: wrong()) }
        #expect(throws: CustodyError.unlockFailed) {
            try f.custodian.changePassphrase(slotID: created.passphraseSlot.id, to: secret("taken over"), parameters: .minimum, current: wrong())
        }
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.removeSlot(id: try #require(created.recoverySlot?.id), current: wrong()) }
        #expect(throws: CustodyError.unlockFailed) {
            try f.custodian.addPassphraseSlot(secret("second"), parameters: .minimum, current: wrong())
        }
        #expect(try f.custodian.listSlots() == before)
        // The failures count in the unlock back-off like failed unlocks: after four, even the
        // right secret waits.
        #expect(throws: CustodyError.backingOff(secondsRemaining: 1)) { try f.custodian.addRecoverySlot(current: f.current()) }
        let failed = try f.custodian.auditLog.entries().filter { $0.op.hasPrefix("slot.") && $0.result == "failed" }
        #expect(failed.map(\.op) == ["slot.add", "slot.passphrase-change", "slot.remove", "slot.add"])
        // Locked, the current secret is enough: the change is made with the master key it opens.
        f.clock.advance(seconds: 2)
        f.custodian.lock()
        let added = try f.custodian.addRecoverySlot(current: f.current())
        #expect(!f.custodian.isUnlocked)
        try f.custodian.unlock(.recoveryCode(try SecretBytes(copying: Array(added.code.formatted.utf8))))
        #expect(f.custodian.isUnlocked)
    }

    @Test(arguments: Backend.allCases) func passphraseChangeReplacesTheSlotAndACrashInBetweenLeavesAUsableStore(backend: Backend) throws {
        let f = try Fixture(backend)
        let created = try f.initialize(recovery: false)
        let changed = try f.custodian.changePassphrase(slotID: created.passphraseSlot.id, to: secret("new one"), current: f.current())
        #expect(try f.custodian.listSlots().map(\.id) == [changed.id])
        #expect(changed.argon2Parameters == .minimum)
        f.custodian.lock()
        #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
        try f.custodian.unlock(.passphrase(secret("new one")))

        // Crash after the new slot is written, before the old one is deleted.
        f.keyring.failDeletes.withLock { $0 = true }
        #expect(throws: CustodyError.self) { try f.custodian.changePassphrase(slotID: changed.id, to: secret("newer"), current: .passphrase(secret("new one"))) }
        f.keyring.failDeletes.withLock { $0 = false }
        #expect(try f.custodian.listSlots().count == 2)
        for pw in ["new one", "newer"] {
            f.custodian.lock()
            try f.custodian.unlock(.passphrase(secret(pw)))
            #expect(f.custodian.isUnlocked)
        }
    }

    @Test(arguments: Backend.allCases) func recoveryCodeFormatAndTypoDetection(backend: Backend) throws {
        let f = try Fixture(backend)
        let code = try #require(try f.initialize().recoveryCode)
        let groups = code.formatted.split(separator: "-")
        #expect(groups.count == 8 && groups.allSatisfy { $0.count == 4 })
        #expect(!"\(code)".contains(String(groups[0])))
        f.custodian.lock()
        // One changed character: caught by the checksum, before any KDF, without counting as a failure.
        var chars = Array(code.formatted)
        chars[0] = chars[0] == "A" ? "B" : "A"
        #expect(throws: CustodyError.recoveryCodeMistyped("its checksum does not match")) {
            try f.custodian.unlock(UnlockSecret.recoveryCode(String(chars)))
        }
        #expect {
            try f.custodian.unlock(UnlockSecret.recoveryCode(String(code.formatted.dropLast())))
        } throws: { if case .recoveryCodeMistyped = $0 as? CustodyError { true } else { false } }
        #expect {
            try f.custodian.unlock(UnlockSecret.recoveryCode(code.formatted.replacingOccurrences(of: "-", with: "U")))
        } throws: { if case .recoveryCodeMistyped = $0 as? CustodyError { true } else { false } }
        // Spaces instead of dashes, lower case, O for 0: accepted.
        let typed = code.formatted.replacingOccurrences(of: "-", with: " ").lowercased().replacingOccurrences(of: "0", with: "o")
        try f.custodian.unlock(UnlockSecret.recoveryCode(typed))
        #expect(f.custodian.isUnlocked)
    }

    @Test(arguments: Backend.allCases) func slotListShowsPublicFactsAndPRFSalt(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        let prf = try f.custodian.addPRFSlot(prfOutput: prfBytes(3), relyingPartyID: "newsroom.sgit.ai",
                                             credentialID: "Y3JlZA", prfEvalInput: Base64.encode(Array("eval".utf8), variant: .urlSafeNoPadding), current: f.current())
        f.custodian.lock()
        let listed = try f.custodian.listSlots()
        #expect(Set(listed.map(\.kind)) == [.passphrase, .prf])
        let listedPRF = try #require(listed.first { $0.kind == .prf })
        #expect(listedPRF == prf)
        #expect(listedPRF.relyingPartyID == "newsroom.sgit.ai")
        #expect(listedPRF.credentialID == "Y3JlZA")
        let salt = try f.custodian.hmacSecretSalt(slotID: prf.id)
        #expect(salt == WebAuthnPRF.hmacSecretSalt(forEvalInput: Array("eval".utf8)))
        #expect(listedPRF.hmacSecretSalt == Hex.encode(salt))
        let validElsewhere = try RecoveryCode.generate().code.formatted
        #expect(throws: CustodyError.noSlotOfKind(.recovery)) { try f.custodian.unlock(UnlockSecret.recoveryCode(validElsewhere)) }
        #expect(throws: CustodyError.invalidArgument("PRF output must be 32 bytes, got 3")) { try f.custodian.unlock(.prf(secret("abc"))) }
    }

    @Test(arguments: Backend.allCases) func initializeTwiceIsRefusedAndUnlockBeforeInitSaysSo(backend: Backend) throws {
        let f = try Fixture(backend)
        #expect(throws: CustodyError.notInitialized) { try f.custodian.unlock(.passphrase(secret("x"))) }
        try f.initialize(recovery: false)
        #expect(throws: CustodyError.alreadyInitialized) { try f.initialize() }
        let status = try f.custodian.status()
        #expect(status.initialized && status.unlocked && status.slotCount == 1)
        #expect(status.secondsUntilAutoLock == 900)
    }
}
