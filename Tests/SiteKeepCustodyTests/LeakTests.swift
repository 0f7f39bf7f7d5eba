import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
@testable import SiteKeepCustody
import SiteKeepTestSupport

func filesUnder(_ path: String) -> [String] {
    guard let e = FileManager.default.enumerator(atPath: path) else { return [] }
    return e.compactMap { $0 as? String }.map { path + "/" + $0 }.filter {
        var d: ObjCBool = false
        return FileManager.default.fileExists(atPath: $0, isDirectory: &d) && !d.boolValue
    }
}

@Suite struct LeakTests {
    @Test(arguments: Backend.allCases) func noKeyBytesInFilesKeyringItemsLogLinesRepliesOrErrors(backend: Backend) throws {
        let f = try Fixture(backend)
        var replies: [String] = []
        var errors: [String] = []
        func expectError(_ body: () throws -> Void) {
            do { try body(); Issue.record("expected an error") } catch { errors.append("\(error)"); errors.append(String(describing: error)) }
        }
        let created = try f.initialize()
        let code = try #require(created.recoveryCode)
        replies.append("\(created.passphraseSlot) \(created.deviceKey) \(String(describing: created.recoverySlot))")
        replies.append("\(try f.custodian.addPRFSlot(prfOutput: prfBytes(0xA7), relyingPartyID: "promptugal.news", credentialID: "Y3JlZA", prfEvalInput: "ZXZhbA", current: f.current()))")
        replies.append("\(try f.custodian.generateTeamKey(id: "ed", name: "Ed", algorithm: .ed25519))")
        replies.append("\(try f.custodian.generateTeamKey(id: "p", name: "P", algorithm: .p256))")
        let seed = SecureRandom.bytes(count: 32)
        replies.append("\(try f.custodian.importTeamKey(id: "linked", name: "L", material: TeamKeyMaterial.webLink("https://x.example/#key=" + Base64.encode(seed, variant: .urlSafeNoPadding))))")
        try f.custodian.storeVaultSecret(vaultID: "v1", secret: SecretBytes(randomCount: 32))
        let wu = try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked)
        replies.append(Hex.encode(try wu.seal([1, 2, 3], authenticating: [])))
        let message = Array("message".utf8)
        for id in ["ed", "p", "linked"] { replies.append(Hex.encode(try f.custodian.sign(keyID: id, message: message, context: f.approved(id)))) }
        replies.append(Hex.encode(try f.custodian.signAsDevice(message)))

        // Lock and unlock every way, with failures along the way.
        f.custodian.lock()
        expectError { _ = try f.custodian.sign(keyID: "ed", message: message, context: f.approved("ed")) }
        expectError { try f.custodian.unlock(.passphrase(secret("wrong passphrase"))) }
        try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
        f.custodian.lock()
        try f.custodian.unlock(.prf(prfBytes(0xA7)))
        f.custodian.lock()
        try f.custodian.unlock(UnlockSecret.recoveryCode(code.formatted))

        // Rotate and sign again; refused uses.
        for id in ["ed", "p"] { replies.append("\(try f.custodian.rotateTeamKey(id: id))") }
        for id in ["ed", "p", "linked"] { replies.append(Hex.encode(try f.custodian.sign(keyID: id, message: message, context: f.approved(id)))) }
        expectError { _ = try f.custodian.sign(keyID: "ed", version: 1, message: message, context: f.approved("ed")) }
        expectError { _ = try f.custodian.sign(keyID: "nope", message: message, context: f.approved("nope")) }
        expectError { _ = try TeamKeyMaterial.webLink("https://x.example/?key=" + Base64.encode(seed, variant: .urlSafeNoPadding)) }
        expectError { _ = try TeamKeyMaterial.webLink("https://x.example/#key=" + Base64.encode(seed + [1], variant: .urlSafeNoPadding)) }
        expectError { _ = try f.custodian.vaultKey(vaultID: "missing") }
        replies.append("\(try f.custodian.listTeamKeys()) \(try f.custodian.listSlots()) \(try f.custodian.status())")
        f.custodian.auditLog.flush()

        // Every secret the custodian holds, plus the unlock secrets themselves.
        var secrets = try f.custodian.leakScanMaterial()
        secrets.append(seed)
        secrets.append([UInt8](repeating: 0xA7, count: 32))
        secrets.append(Array(Fixture.passphrase.utf8))
        secrets.append(try RecoveryCode.parse(secret(code.formatted)).withUnsafeBytes { Array($0) })
        secrets.append(Array(code.formatted.utf8))
        #expect(secrets.count >= 20)   // master, 3 team + 1 device wrap keys, 6 team versions (+2 scalars), device (+scalar), site, vault, ...

        var haystacks: [(String, [UInt8])] = []
        for path in filesUnder(f.home.path) {
            haystacks.append((path, Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
        }
        #expect(haystacks.contains { $0.0.hasSuffix("audit.log") })
        for (i, blob) in try f.keyring.allBlobs.enumerated() { haystacks.append(("keyring item \(i)", blob)) }
        for (i, r) in replies.enumerated() { haystacks.append(("reply \(i)", Array(r.utf8))) }
        for (i, e) in errors.enumerated() { haystacks.append(("error \(i)", Array(e.utf8))) }
        #expect(errors.count == 14)

        var leaks: [String] = []
        for (si, s) in secrets.enumerated() {
            for form in leakForms(of: s) {
                for (name, hay) in haystacks where occurs(form, in: hay) {
                    leaks.append("secret \(si) found in \(name)")
                }
            }
        }
        #expect(leaks.isEmpty, "\(Set(leaks).sorted())")

        // The scan itself works: a planted key is found.
        #expect(leakForms(of: secrets[0]).contains { occurs($0, in: Array(("x" + Base64.encode([9] + secrets[0]) + "y").utf8)) })
    }
}
