#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepTestSupport
import SiteKeepTPM
@testable import SiteKeepCustody

/// The TPM reached by `SITEKEEP_TPM_TCTI` (tools/test starts a swtpm on loopback and names it
/// there); nil when unset, and the suite is skipped saying so.
let sharedTPM: TPMConnection? = ProcessInfo.processInfo.environment[TPMConnection.environmentVariable].map(TPMConnection.init(tcti:))

/// Makes the shared software TPM forgiving (100 failures before a lock-out, one forgotten a
/// second), so the wrong PINs these tests try never lock out another suite's TPM slot. The
/// lock-out itself is shown on a private swtpm.
func forgivingSharedTPM() throws -> TPMConnection {
    let tpm = try #require(sharedTPM)
    try TPM2.setDictionaryAttackParameters(maxTries: 100, recoverySeconds: 1, lockoutRecoverySeconds: 1, connection: tpm)
    return tpm
}

/// TPM 2.0 slots against a real TPM stack: tpm2-tss's ESAPI (loaded with dlopen) talking to
/// swtpm over its TCP TCTI, the same code a machine's /dev/tpmrm0 takes.
@Suite(.serialized, .enabled(if: sharedTPM != nil, "SITEKEEP_TPM_TCTI is not set: run under tools/test, which starts swtpm on loopback"))
struct TPMSlotTests {
    @Test func sealAndUnsealRoundTrip() throws {
        let tpm = try forgivingSharedTPM()
        let key = try SecretBytes(randomCount: 32)
        for withPIN in [false, true] {
            let auth: TPMAuthValue = withPIN ? .value(try secret("pin-1234")) : .empty
            let object = try TPM2.seal(key, auth: auth, pcrs: .none, connection: tpm)
            #expect(object.publicBlob.count > 40 && object.privateBlob.count > 40)
            let back = try TPM2.unseal(object, auth: auth, pcrs: .none, connection: tpm)
            let same = back.constantTimeEquals(key)
            #expect(same)
            // Sealing again gives another object (fresh seed), the same bytes inside.
            let again = try TPM2.seal(key, auth: auth, pcrs: .none, connection: tpm)
            #expect(again.privateBlob != object.privateBlob)
        }
    }

    @Test func aTPMSlotOpensTheSameStoreAsThePassphrase() throws {
        let tpm = try forgivingSharedTPM()
        let f = try Fixture(tpm: tpm)
        try f.initialize(recovery: false)
        let slot = try f.custodian.addTPM2Slot(pin: try secret("2468"), label: "laptop", current: f.current())
        #expect(slot.kind == .tpm2 && slot.tpmPIN == true && slot.tpmPCRs == [] && slot.kdf == "HKDF-SHA256")
        let bare = try f.custodian.addTPM2Slot(pin: nil, current: .tpm2(pin: try secret("2468")))
        #expect(bare.tpmPIN == false)
        let sealed = try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked).seal(Array("hello".utf8), authenticating: [1])
        func check() throws {
            let key = try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked)
            #expect(try key.open(sealed, authenticating: [1]) == Array("hello".utf8))
        }
        for way in 0..<3 {
            f.custodian.lock()
            switch way {
            case 0: try f.custodian.unlock(.tpm2(pin: try secret("2468")), slotID: slot.id)
            case 1: try f.custodian.unlock(.tpm2(pin: nil), slotID: bare.id)
            default: try f.custodian.unlock(.passphrase(try secret(Fixture.passphrase)))
            }
            #expect(f.custodian.isUnlocked)
            try check()
        }
        // A reopened custodian (a restart) recreates the primary and opens it too.
        let reopened = try Custodian(home: f.home, keyring: f.keyring,
                                     configuration: { var c = CustodianConfiguration(autoLockTimer: false); c.tpmConnection = tpm; return c }())
        try reopened.unlock(.tpm2(pin: try secret("2468")), slotID: slot.id)
        #expect(reopened.isUnlocked)
    }

    @Test func aWrongPINIsRefusedByTheTPMAndAMissingOneIsAskedFor() throws {
        let tpm = try forgivingSharedTPM()
        let f = try Fixture(tpm: tpm)
        try f.initialize(recovery: false)
        let slot = try f.custodian.addTPM2Slot(pin: try secret("right"), current: f.current())
        f.custodian.lock()
        do {
            try f.custodian.unlock(.tpm2(pin: try secret("wrong")), slotID: slot.id)
            Issue.record("a wrong PIN unlocked")
        } catch let error as CustodyError {
            guard case .tpm(.wrongPIN(let status)) = error else { Issue.record("expected wrongPIN, got \(error)"); return }
            #expect(status?.maxTries == 100)
            #expect(error.description.contains("refused the PIN") && !error.description.contains("wrong\""))
        }
        #expect(throws: CustodyError.tpm(.pinRequired)) { try f.custodian.unlock(.tpm2(pin: nil), slotID: slot.id) }
        #expect(!f.custodian.isUnlocked)
        // The TPM's refusals do not feed SiteKeep's own back-off: the TPM rate-limits PINs.
        #expect(try f.custodian.status().unlockBackoffSeconds == 0)
        try f.custodian.unlock(.tpm2(pin: try secret("right")), slotID: slot.id)
        #expect(f.custodian.isUnlocked)
    }

    @Test func aPCRBoundSlotRefusesOnceThePCRChanges() throws {
        let tpm = try forgivingSharedTPM()
        let f = try Fixture(tpm: tpm)
        try f.initialize(recovery: false)
        let slot = try f.custodian.addTPM2Slot(pin: try secret("pin"), pcrs: [16], current: f.current())
        #expect(slot.tpmPCRs == [16])
        f.custodian.lock()
        try f.custodian.unlock(.tpm2(pin: try secret("pin")), slotID: slot.id)
        f.custodian.lock()
        // A measurement lands in PCR 16 (the debug PCR): the machine's state is no longer the sealed one.
        try TPM2.extendPCR(16, with: Array(repeating: 0x5a, count: 32), connection: tpm)
        do {
            try f.custodian.unlock(.tpm2(pin: try secret("pin")), slotID: slot.id)
            Issue.record("a PCR-bound slot opened after the PCR changed")
        } catch let error as CustodyError {
            #expect(error == .tpm(.pcrsChanged(try PCRSelection(indices: [16]))))
            #expect(error.description.contains("measured boot state") && error.description.contains("another slot"))
        }
        // The passphrase still opens the store.
        try f.custodian.unlock(.passphrase(try secret(Fixture.passphrase)))
        #expect(f.custodian.isUnlocked)
    }

    /// Rewrites the TPM slot's stored header with `edit` (keeping it parseable).
    func tamper(_ f: Fixture, slotID: String, _ edit: (inout SlotHeader) -> Void) throws {
        let item = try #require(try f.keyring.list(store: f.custodian.storeID, kind: "slot").first { $0.id == slotID })
        let blob = try SlotBlob.parse(try f.keyring.load(item))
        var header = try SlotHeader.parse(blob.headerBytes)
        edit(&header)
        try f.keyring.store(SlotBlob(headerBytes: header.encoded(), wrappedMaster: blob.wrappedMaster).encoded(), for: item, label: "")
    }

    @Test func anEditedSealedObjectIsRefused() throws {
        let tpm = try forgivingSharedTPM()
        for part in ["private", "public", "pcrs"] {
            let f = try Fixture(tpm: tpm)
            try f.initialize(recovery: false)
            let slot = try f.custodian.addTPM2Slot(pin: nil, current: f.current())
            f.custodian.lock()
            try tamper(f, slotID: slot.id) { header in
                switch part {
                case "private": header.tpmObject?.privateBlob[20] ^= 1
                case "public": header.tpmObject?.publicBlob[10] ^= 1
                default: header.tpmPCRs = try! PCRSelection(indices: [23])
                }
            }
            do {
                try f.custodian.unlock(.tpm2(pin: nil), slotID: slot.id)
                Issue.record("an edited \(part) part unlocked")
            } catch {
                // The TPM refuses an edited object (integrity), and a policy it was not sealed under.
                let policy = CustodyError.tpm(.pcrsChanged(try PCRSelection(indices: [23])))
                #expect(error == .unlockFailed || error == policy, "\(part): \(error)")
            }
            #expect(!f.custodian.isUnlocked)
        }
    }

    /// The lock-out on a TPM of its own: after maxTries wrong PINs the TPM refuses even the
    /// right one, and takes it again once it has forgotten a failure (recoveryTime).
    @Test func theTPMLocksOutAfterWrongPINsAndRecovers() throws {
        let own = try #require(SoftwareTPM.start(), "swtpm did not start")
        defer { own.stop() }
        let tpm = TPMConnection(tcti: own.tcti)
        try TPM2.setDictionaryAttackParameters(maxTries: 3, recoverySeconds: 3, lockoutRecoverySeconds: 3, connection: tpm)
        let f = try Fixture(tpm: tpm)
        try f.initialize(recovery: false)
        let slot = try f.custodian.addTPM2Slot(pin: try secret("right"), current: f.current())
        f.custodian.lock()
        var wrongUntilLocked = 0
        var lockedError: CustodyError? = nil
        for _ in 0..<10 {
            wrongUntilLocked += 1
            do {
                try f.custodian.unlock(.tpm2(pin: try secret("wrong")), slotID: slot.id)
            } catch let e as CustodyError {
                if case .tpm(.lockedOut) = e { lockedError = e; break }
                guard case .tpm(.wrongPIN) = e else { Issue.record("unexpected \(e)"); return }
            }
        }
        let locked = try #require(lockedError)
        // Three failures are counted; the fourth attempt finds the TPM locked out.
        #expect(wrongUntilLocked == 4)
        #expect(locked.description.contains("locked out") && locked.description.contains("3 s"))
        let lockedAt = Date()
        #expect(throws: CustodyError.self) { try f.custodian.unlock(.tpm2(pin: try secret("right")), slotID: slot.id) }
        do {
            try f.custodian.unlock(.tpm2(pin: try secret("right")), slotID: slot.id)
        } catch let e as CustodyError {
            guard case .tpm(.lockedOut(let status)) = e else { Issue.record("the right PIN during the lock-out: \(e)"); return }
            #expect(status?.inLockout == true && status?.maxTries == 3 && status?.recoverySeconds == 3)
        }
        #expect(!f.custodian.isUnlocked)
        // The right PIN is taken again once the TPM has forgotten one failure.
        var recovered: Double? = nil
        while Date().timeIntervalSince(lockedAt) < 15 {
            usleep(250_000)
            if (try? TPM2.lockoutStatus(connection: tpm).inLockout) == false {
                try f.custodian.unlock(.tpm2(pin: try secret("right")), slotID: slot.id)
                recovered = Date().timeIntervalSince(lockedAt)
                break
            }
        }
        let seconds = try #require(recovered, "the TPM did not leave the lock-out within 15 s")
        #expect(f.custodian.isUnlocked)
        #expect(seconds >= 1 && seconds < 8)
        print("tpm lock-out: \(wrongUntilLocked - 1) wrong PINs counted, locked at attempt \(wrongUntilLocked); right PIN accepted again after \(String(format: "%.1f", seconds)) s (recoveryTime 3 s)")
    }
}

/// What needs no TPM: the messages for a missing or forbidden device, the header format.
@Suite struct TPMSlotFormatTests {
    @Test func aMissingDeviceIsNamed() throws {
        let connection = TPMConnection(tcti: "device:/nonexistent/tpmrm9")
        #expect(throws: TPMError.noDevice(path: "/nonexistent/tpmrm9")) {
            _ = try TPM2.lockoutStatus(connection: connection)
        }
        #expect(TPMError.noDevice(path: "/dev/tpmrm0").description.contains("no TPM"))
        let access = TPMError.noAccess(path: "/dev/tpmrm0").description
        #expect(access.contains("'tss'") && access.contains("sudo usermod -aG tss $USER"))
    }

    @Test(.enabled(if: getuid() != 0, "root opens any file: EACCES is seen only as a user"))
    func aForbiddenDeviceIsToldApartFromAMissingOne() throws {
        let path = try temporaryFolder() + "-tpm"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(), attributes: [.posixPermissions: 0]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: TPMError.noAccess(path: path)) { _ = try TPM2.lockoutStatus(connection: TPMConnection(tcti: "device:" + path)) }
    }

    @Test func theConnectionComesFromTheEnvironment() {
        #expect(TPMConnection.configured(environment: [:]).tcti == "device:/dev/tpmrm0")
        #expect(TPMConnection.configured(environment: ["SITEKEEP_TPM_TCTI": "swtpm:port=1"]).tcti == "swtpm:port=1")
    }

    @Test func pcrListsParse() throws {
        #expect(try PCRSelection(parsing: "0,7").indices == [0, 7])
        #expect(try PCRSelection(parsing: "7").mask == 0x80)
        #expect(throws: TPMError.self) { try PCRSelection(parsing: "24") }
        #expect(throws: TPMError.self) { try PCRSelection(parsing: "a") }
    }

    /// A TPM header round-trips, its fields come after the older kinds' tags, and an older
    /// kind's header has none of them (so old headers keep their bytes).
    @Test func theTPMHeaderFieldsAreCanonicalAndOnlyInTPMSlots() throws {
        var header = SlotHeader(kind: .tpm2, slotID: "0011223344556677", storeID: "store", created: 1, label: "t", argon2: nil,
                                salt: Array(repeating: 7, count: 16), relyingPartyID: nil, credentialID: nil, prfEvalInput: nil,
                                tpmObject: SealedObject(publicBlob: [1, 2, 3], privateBlob: [4, 5]), tpmPIN: true,
                                tpmPCRs: try PCRSelection(indices: [0, 7]))
        let bytes = header.encoded()
        #expect(try SlotHeader.parse(bytes) == header)
        #expect(Array(bytes.suffix(6)) == [17, 0, 3, 0, 0, 0x81])
        header.tpmObject = nil
        #expect(throws: CustodyError.self) { try SlotHeader.parse(header.encoded()) }
        let recovery = SlotHeader(kind: .recovery, slotID: "0011223344556677", storeID: "store", created: 1, label: "r", argon2: nil,
                                  salt: Array(repeating: 7, count: 16), relyingPartyID: nil, credentialID: nil, prfEvalInput: nil)
        // The bytes an older SiteKeep wrote for this recovery header (fields 1-10 only).
        let expected: [UInt8] = Array("SKSH".utf8) + [1, 0, 1, 1, 2, 0, 1, 3, 3, 0, 16] + Array("0011223344556677".utf8)
            + [4, 0, 5] + Array("store".utf8) + [5, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1] + [6, 0, 1] + Array("r".utf8)
            + [7, 0, 1, 2] + [10, 0, 16] + Array(repeating: 7, count: 16)
        #expect(recovery.encoded() == expected)
    }
}
