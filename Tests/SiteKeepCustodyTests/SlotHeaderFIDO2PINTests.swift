import Testing
import SiteKeepCrypto
@testable import SiteKeepCustody

/// The `fido2PIN` field of a PRF slot's header (issue 45, defect 8): whether the slot's bytes
/// are the key's output with its PIN. Part of the header, so of the associated data the master
/// key is wrapped with; absent from the headers written before it, which keep their bytes.
@Suite struct SlotHeaderFIDO2PINTests {
    static func prf(_ pin: Bool?) -> SlotHeader {
        SlotHeader(kind: .prf, slotID: "0011223344556677", storeID: "store", created: 1, label: "fido2", argon2: nil,
                   salt: Array(repeating: 7, count: 16), relyingPartyID: Custodian.fido2RelyingPartyID, credentialID: "AAAA",
                   prfEvalInput: "c2l0ZWtlZXA", fido2PIN: pin)
    }

    @Test func theFIDO2PINFieldIsCanonicalAndOnlyInPRFSlots() throws {
        for pin in [true, false] {
            let header = Self.prf(pin)
            let bytes = header.encoded()
            #expect(try SlotHeader.parse(bytes) == header)
            #expect(Array(bytes.suffix(4)) == [18, 0, 1, pin ? 1 : 0], "the last field, after every older tag")
            #expect(header.info.fido2PIN == pin)
            // Another value than 0 or 1 is refused.
            var edited = bytes
            edited[edited.count - 1] = 2
            #expect(throws: CustodyError.self) { try SlotHeader.parse(edited) }
        }
        // A header without it (every PRF slot written before) keeps its bytes and says nothing.
        let older = Self.prf(nil)
        let olderBytes = older.encoded()
        #expect(try SlotHeader.parse(olderBytes).fido2PIN == nil)
        #expect(Self.prf(true).encoded().dropLast(4).elementsEqual(olderBytes), "only the new field is added")
        // The field differs between the kinds, so the associated data does too.
        #expect(Self.prf(true).associatedData() != Self.prf(false).associatedData())
        // Not in another kind's header.
        var recovery = Self.prf(true)
        recovery.kind = .recovery
        recovery.relyingPartyID = nil; recovery.credentialID = nil; recovery.prfEvalInput = nil
        #expect(throws: CustodyError.self) { try SlotHeader.parse(recovery.encoded()) }
    }
}
