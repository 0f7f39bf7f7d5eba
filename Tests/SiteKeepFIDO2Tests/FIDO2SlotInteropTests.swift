import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepKeyring
import SiteKeepSystem
import Foundation

/// The promise for the FIDO2 slot, shown on today's PRF slot: the bytes a browser's PRF
/// gives (`--prf-file`) and the key's hmac-secret through libfido2 for the slot's own salt
/// (`--fido2`, custody's `hmacSecretSalt(slotID:)`) open the same slot.
@Suite(.serialized)
struct FIDO2SlotInteropTests {
    @Test(arguments: [false, true])
    func aPRFSlotOpensWithTheKeysHMACSecretForItsSalt(withPIN: Bool) throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let home = soft.folder + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(folder: home),
                                      configuration: CustodianConfiguration(autoLockTimer: false))
        let passphrase = "correct horse battery staple"
        _ = try custodian.initialize(passphrase: try SecretBytes(copying: Array(passphrase.utf8)), parameters: .minimum, withRecoveryCode: false)

        let keyPIN: SecretBytes? = withPIN ? try SecretBytes(copying: Array("4821".utf8)) : nil
        if withPIN { try soft.key.setPIN(try SecretBytes(copying: Array("4821".utf8))) }
        let credential = try soft.key.makeCredential(rp: "sitekeep.example", userID: Array("store".utf8), pin: keyPIN)
        let input = SecureRandom.bytes(count: 32)
        // The PRF path: what a browser's PRF extension hands the page (the authenticator computes
        // it itself, with no hmac-secret transport), given to custody as `--prf-file` would.
        let browserPRF = try soft.control.prfOutput(credentialID: credential.id, evalInput: input, userVerified: withPIN)
        let slot = try custodian.addPRFSlot(prfOutput: try SecretBytes(copying: browserPRF), relyingPartyID: "sitekeep.example",
                                            credentialID: Base64.encode(credential.id, variant: .urlSafeNoPadding),
                                            prfEvalInput: Base64.encode(input, variant: .urlSafeNoPadding),
                                            current: .passphrase(try SecretBytes(copying: Array(passphrase.utf8))))
        custodian.lock()
        #expect(!custodian.isUnlocked)

        // The FIDO2 path: libfido2 asks the key for hmac-secret with the slot's salt.
        let salt = try custodian.hmacSecretSalt(slotID: slot.id)
        let fromKey = try soft.key.hmacSecret(rp: "sitekeep.example", credentialID: credential.id, salt: salt, pin: keyPIN)
        try custodian.unlock(.prf(fromKey), slotID: slot.id)
        #expect(custodian.isUnlocked)
        custodian.lock()
        // Another salt's bytes do not open it.
        let wrong = try soft.key.hmacSecret(rp: "sitekeep.example", credentialID: credential.id, salt: SecureRandom.bytes(count: 32), pin: keyPIN)
        var refused: CustodyError?
        do { try custodian.unlock(.prf(wrong), slotID: slot.id) } catch { refused = error }
        #expect(refused == .unlockFailed)
    }
}
