import Testing
import Foundation
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepKeyring

/// A FIDO2 slot needs the key's PIN (issue 45, defect 8). A key answers an assertion with user
/// presence off and no PIN with its hmac-secret output without verification, and a slot's
/// credential id and salt are readable by every program of the user: so a PIN-less slot opens
/// for any of them, with no touch, while the key is plugged in. The output with the PIN (the
/// credential's CredRandomWithUV) is another, so a PIN slot does not.
@Suite(.serialized)
struct FIDO2SlotPINTests {
    static let passphrase = FIDO2SlotTests.passphrase
    static func secret(_ text: String) throws -> SecretBytes { try FIDO2SlotTests.secret(text) }

    /// The attacker: another process of the user, with its own custodian on the same store (no
    /// security key configured, no secret), the slot's public header from the keyring, and the
    /// plugged key, asked silently. Returns its custodian, unlocked when the stolen bytes opened
    /// the slot, and the touches the key asked for meanwhile.
    static func attack(_ soft: SoftKey, store home: StoreHome, slotID: String, pinProtocol: Int) throws -> (Custodian, Bool, touchesAsked: Int) {
        let attacker = try Custodian(home: home, keyring: try FileKeyring(folder: home.path),
                                     configuration: CustodianConfiguration(autoLockTimer: false))
        let header = try #require(try attacker.listSlots().first { $0.id == slotID })
        let credentialID = try Base64.decode(try #require(header.credentialID), variant: .urlSafeNoPadding)
        let salt = try Hex.decode(try #require(header.hmacSecretSalt))
        let asked = try soft.control.counts().asked
        let stolen = try soft.control.silentHMACSecret(rpID: try #require(header.relyingPartyID), credentialID: credentialID, salt: salt,
                                                       pinProtocol: pinProtocol)
        let touchesAsked = try soft.control.counts().asked - asked
        do { try attacker.unlock(.prf(try SecretBytes(copying: stolen)), slotID: slotID) } catch CustodyError.unlockFailed {}
        return (attacker, attacker.isUnlocked, touchesAsked)
    }

    @Test func aKeyWithoutAPINIsRefusedBeforeAnyTouchUnlessAPINLessSlotIsAskedFor() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let custodian = try FIDO2SlotTests.store(soft.folder, key: soft.key)
        #expect(throws: CustodyError.fido2KeyHasNoPIN) {
            _ = try custodian.addFIDO2Slot(pin: nil, current: .passphrase(try Self.secret(Self.passphrase)))
        }
        #expect(try soft.control.counts().asked == 0, "refused before the key was asked for a touch")
        #expect(try custodian.listSlots().count == 1, "only the passphrase slot")
        let message = CustodyError.fido2KeyHasNoPIN.description
        #expect(message.contains("fido2-token -S") && message.contains("--no-pin") && message.contains("no touch"), "\(message)")

        // Asked for knowingly, the PIN-less slot is made, and says so.
        let pinless = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret(Self.passphrase)))
        #expect(pinless.fido2PIN == false)

        // A key with a PIN makes a PIN slot: no PIN-less one, and not without its PIN.
        try soft.key.setPIN(try Self.secret("4821"))
        let asked = try soft.control.counts().asked
        #expect(throws: CustodyError.self) {
            _ = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret(Self.passphrase)))
        }
        #expect(throws: CustodyError.fido2(.pinRequired)) {
            _ = try custodian.addFIDO2Slot(pin: nil, current: .passphrase(try Self.secret(Self.passphrase)))
        }
        #expect(try soft.control.counts().asked == asked)
        #expect(try custodian.listSlots().count == 2)
    }

    @Test(arguments: [2, 1])
    func aSilentAssertionOpensAPINLessSlotButNotAPINSlot(pinProtocol: Int) throws {
        let soft = try SoftKey(["--pin-protocols", pinProtocol == 1 ? "1" : "2,1"])
        defer { soft.stop() }
        let custodian = try FIDO2SlotTests.store(soft.folder, key: soft.key)
        let pinless = try custodian.addFIDO2Slot(pin: nil, withoutPIN: true, current: .passphrase(try Self.secret(Self.passphrase)))
        custodian.lock()

        // The PIN-less slot: the silent assertion's bytes unwrap the master key, no touch asked.
        let (thief, opened, touches) = try Self.attack(soft, store: custodian.home, slotID: pinless.id, pinProtocol: pinProtocol)
        #expect(opened, "the key's output without verification opens a PIN-less slot")
        #expect(touches == 0, "and the key asked for no touch")
        thief.lock()

        // The same key with a PIN, and a slot made with it (the default).
        try soft.key.setPIN(try Self.secret("4821"))
        let withPIN = try custodian.addFIDO2Slot(pin: try Self.secret("4821"), current: .passphrase(try Self.secret(Self.passphrase)))
        #expect(withPIN.fido2PIN == true)
        custodian.lock()
        // SiteKeep's unlock opens it with the PIN and a touch; the PIN-less slot still opens as
        // it was made, without the PIN, though the key has one now.
        try custodian.unlock(.fido2(pin: try Self.secret("4821")), slotID: withPIN.id)
        #expect(custodian.isUnlocked)
        custodian.lock()
        try custodian.unlock(.fido2(pin: nil), slotID: pinless.id)
        #expect(custodian.isUnlocked)
        custodian.lock()
        #expect(throws: CustodyError.fido2(.pinRequired)) { try custodian.unlock(.fido2(pin: nil), slotID: withPIN.id) }

        // The PIN slot: the silent assertion gives the output without verification, which
        // unwraps nothing.
        let (_, openedPINSlot, silentTouches) = try Self.attack(soft, store: custodian.home, slotID: withPIN.id, pinProtocol: pinProtocol)
        #expect(!openedPINSlot, "the key's output without its PIN does not open a PIN slot")
        #expect(silentTouches == 0)
    }

    /// Slots made before the header recorded the PIN (`slot add fido2` wrote a PRF slot for
    /// `sitekeep.invalid` with no such field) keep opening as they were made: with the PIN when
    /// the key has one.
    @Test(arguments: [false, true])
    func slotsMadeBeforeThePINWasRecordedKeepOpening(withPIN: Bool) throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        if withPIN { try soft.key.setPIN(try Self.secret("4821")) }
        let custodian = try FIDO2SlotTests.store(soft.folder, key: soft.key)
        // What the earlier `addFIDO2Slot` did, by hand.
        let rp = Custodian.fido2RelyingPartyID
        let evalInput = SecureRandom.bytes(count: 32)
        let credential = try soft.key.makeCredential(rp: rp, userID: Array("store".utf8), pin: withPIN ? try Self.secret("4821") : nil)
        let output = try soft.key.prfOutput(rp: rp, credentialID: credential.id, evalInput: evalInput, pin: withPIN ? try Self.secret("4821") : nil)
        let slot = try custodian.addPRFSlot(prfOutput: output, relyingPartyID: rp,
                                            credentialID: Base64.encode(credential.id, variant: .urlSafeNoPadding),
                                            prfEvalInput: Base64.encode(evalInput, variant: .urlSafeNoPadding), label: "fido2",
                                            current: .passphrase(try Self.secret(Self.passphrase)))
        #expect(slot.fido2PIN == nil, "the header says nothing of the PIN, as before")
        custodian.lock()
        try custodian.unlock(.fido2(pin: withPIN ? try Self.secret("4821") : nil))
        #expect(custodian.isUnlocked)
    }
}
