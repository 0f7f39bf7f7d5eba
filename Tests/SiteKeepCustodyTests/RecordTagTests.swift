import Foundation
import Testing
import SiteKeepCrypto
@testable import SiteKeepCustody

/// Record tags: what keeps a vault's owner and signer pins in `vaults.json` from being changed by
/// someone who can write the file but does not hold the master key (threats T15, T41).
@Suite struct RecordTagTests {
    @Test func recordTagsAreHMACUnderAKeyDerivedFromTheMasterKeyAndNeedTheUnlock() throws {
        let f = try Fixture(.memory)
        try f.initialize(recovery: false)
        let message = Array("sitekeep.vault-record.v1\0{\"name\":\"notes\"}".utf8)
        let tag = try f.custodian.recordTag(for: message, purpose: .vaultRecord)
        // The composition, from the two primitives the known-answer tests check (HKDF, HMAC).
        let expected = try f.custodian.currentMaster().withLock { (m: borrowing SecretBytes) throws -> [UInt8] in
            let key = try HKDF.deriveKey(inputKeyMaterial: m, info: Array("record-tag:vault-record".utf8))
            return HMACSHA256.authenticationCode(for: message, using: key)
        }
        #expect(tag == expected && tag.count == 32)
        #expect(try f.custodian.isValidRecordTag(tag, for: message, purpose: .vaultRecord))
        var changed = message
        changed[changed.count - 3] ^= 1
        #expect(try !f.custodian.isValidRecordTag(tag, for: changed, purpose: .vaultRecord))
        var flipped = tag
        flipped[0] ^= 0x80
        #expect(try !f.custodian.isValidRecordTag(flipped, for: message, purpose: .vaultRecord))
        // The same store after a restart makes the same tag; another store does not.
        let restarted = try f.reopened()
        try restarted.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(try restarted.recordTag(for: message, purpose: .vaultRecord) == tag)
        let other = try Fixture(.memory)
        try other.initialize(recovery: false)
        #expect(try !other.custodian.isValidRecordTag(tag, for: message, purpose: .vaultRecord))
        // Locked, no tag can be made or checked.
        f.custodian.lock()
        #expect(throws: CustodyError.locked) { try f.custodian.recordTag(for: message, purpose: .vaultRecord) }
        #expect(throws: CustodyError.locked) { try f.custodian.isValidRecordTag(tag, for: message, purpose: .vaultRecord) }
        // Each use is a logged key use, its outcome included (the restart shares the log file).
        let uses = try f.custodian.auditLog.entries().filter { $0.op.hasPrefix("record-tag") }.map { "\($0.op) \($0.result)" }
        #expect(uses == ["record-tag.make ok", "record-tag.check ok", "record-tag.check mismatch", "record-tag.check mismatch",
                         "record-tag.make ok", "record-tag locked", "record-tag locked"])
    }
}
