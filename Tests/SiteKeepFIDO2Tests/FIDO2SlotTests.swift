import Testing
import Foundation
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepKeyring

/// `slot add fido2` and `unlock --fido2` in custody (issue 36, item 1), against the software
/// authenticator through libfido2's transport hooks: the slot opens with the key, and with
/// `--prf-file` bytes the authenticator gives for the same credential and eval input; a key
/// that holds none of the store's credentials is found out without a touch; nothing is written
/// when the key is not touched.
@Suite(.serialized)
struct FIDO2SlotTests {
    static let passphrase = "correct horse battery staple"

    /// A store with a passphrase slot whose custodian reaches `key`.
    static func store(_ folder: String, key: FIDO2Key) throws -> Custodian {
        let home = folder + "/home-" + String(UUID().uuidString.prefix(6))
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.fido2Key = key
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(folder: home), configuration: configuration)
        _ = try custodian.initialize(passphrase: try secret(passphrase), parameters: .minimum, withRecoveryCode: false)
        return custodian
    }

    static func secret(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

    @Test(arguments: [false, true])
    func aFIDO2SlotOpensWithTheKeyAndWithThePRFBytesOfTheSameCredential(withPIN: Bool) throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        if withPIN { try soft.key.setPIN(try Self.secret("4821")) }
        let custodian = try Self.store(soft.folder, key: soft.key)
        let before = try soft.control.counts()
        let slot = try custodian.addFIDO2Slot(pin: withPIN ? try Self.secret("4821") : nil, withoutPIN: !withPIN,
                                              current: .passphrase(try Self.secret(Self.passphrase)))
        #expect(slot.kind == .prf && slot.label == "fido2" && slot.relyingPartyID == Custodian.fido2RelyingPartyID)
        #expect(slot.fido2PIN == withPIN, "the header says which kind the slot is")
        let enrolled = try soft.control.counts()
        #expect(enrolled.touched - before.touched == 2, "a credential, then the slot's bytes: two touches")
        custodian.lock()

        try custodian.unlock(.fido2(pin: withPIN ? try Self.secret("4821") : nil))
        #expect(custodian.isUnlocked)
        #expect(try soft.control.counts().touched - enrolled.touched == 1, "one touch to unlock")
        custodian.lock()

        // The bytes a browser's PRF would give for this credential and eval input open it as
        // `--prf-file` does.
        let credentialID = try Base64.decode(try #require(slot.credentialID), variant: .urlSafeNoPadding)
        let evalInput = try Base64.decode(try #require(slot.prfEvalInput), variant: .urlSafeNoPadding)
        let browserPRF = try soft.control.prfOutput(credentialID: credentialID, evalInput: evalInput, userVerified: withPIN)
        try custodian.unlock(.prf(try SecretBytes(copying: browserPRF)), slotID: slot.id)
        #expect(custodian.isUnlocked)
        custodian.lock()

        if withPIN {
            // A key with a PIN is not asked without it (nothing is touched), nor with a wrong one.
            let asked = try soft.control.counts().asked
            #expect(throws: CustodyError.fido2(.pinRequired)) { try custodian.unlock(.fido2(pin: nil)) }
            var wrong: CustodyError?
            let wrongPIN = try Self.secret("0000")
            do { try custodian.unlock(.fido2(pin: wrongPIN)) } catch { wrong = error }
            guard case .fido2(.pinWrong)? = wrong else { Issue.record("a wrong PIN gave \(String(describing: wrong))"); return }
            #expect(try soft.control.counts().asked == asked, "no touch was asked for without the right PIN")
            #expect(!custodian.isUnlocked)
        }
    }

    @Test func aKeyThatHoldsNoneOfTheStoresCredentialsIsToldSoWithoutATouch() throws {
        let enrolled = try SoftKey()
        defer { enrolled.stop() }
        let custodian = try Self.store(enrolled.folder, key: enrolled.key)
        _ = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret(Self.passphrase)))
        custodian.lock()

        let other = try SoftKey()
        defer { other.stop() }
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.fido2Key = other.key
        let sameStore = try Custodian(home: custodian.home, keyring: try FileKeyring(folder: custodian.home.path), configuration: configuration)
        #expect(throws: CustodyError.fido2(.credentialNotOnKey)) { try sameStore.unlock(.fido2(pin: nil)) }
        #expect(try other.control.counts().asked == 0, "the other key was not asked for a touch")
        #expect(CustodyError.fido2(.credentialNotOnKey).description.contains("slot list"))
    }

    @Test func nothingIsWrittenWhenTheKeyIsNotTouched() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let custodian = try Self.store(soft.folder, key: soft.key)
        try soft.control.setTouch(false)
        #expect(throws: CustodyError.fido2(.noTouch)) {
            _ = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret(Self.passphrase)))
        }
        #expect(try custodian.listSlots().count == 1, "only the passphrase slot")
        // A wrong current secret is refused before the key is asked.
        try soft.control.setTouch(true)
        let asked = try soft.control.counts().asked
        #expect(throws: CustodyError.unlockFailed) {
            _ = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret("wrong")))
        }
        #expect(try soft.control.counts().asked == asked)
    }

    @Test func aStoreWithoutPRFSlotsSaysSo() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let custodian = try Self.store(soft.folder, key: soft.key)
        custodian.lock()
        #expect(throws: CustodyError.noSlotOfKind(.prf)) { try custodian.unlock(.fido2(pin: nil)) }
    }
}
