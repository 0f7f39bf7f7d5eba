import Testing
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody

/// A sixth slot kind that exists only in this test target: 32 bytes of a throw-away token
/// through HKDF-SHA256. Everything it says is here, against the ``SlotKind`` protocol (package
/// access: a kind is added inside SiteKeep, and its `prepare` turns a secret into key-encryption
/// input, which no public API hands out; this file imports custody without `@testable`); the
/// generic path does the rest.
enum ThrowAwaySlot: SlotKind {
    static let name = "throwaway"
    static let stored = StoredSlotKind(name: "throwaway", code: 0xF0, kdf: .hkdfSHA256(info: "sitekeep.test.slot.throwaway.v1"))
    static let unlockInput = SlotUnlockInput.secret(option: "--throwaway-file", prompt: nil)
    static let underBackoff = true

    static func describe(_ header: SlotHeader, into info: inout SlotInfo) {
        info.details = "throw-away token"
    }
}

/// A kind that takes a header code SiteKeep's PRF kind has: the registry refuses it.
enum ClashingSlot: SlotKind {
    static let name = "clash"
    static let stored = StoredSlotKind(name: "clash", code: 2, kdf: .hkdfSHA256(info: "sitekeep.test.slot.clash.v1"))
    static let unlockInput = SlotUnlockInput.secret(option: "--clash-file", prompt: nil)
    static let underBackoff = true
}

/// Issue 46, item 3 — **the must-show**: adding a sixth slot kind touches only the new kind's
/// file, the registry of kinds and tests. Here the kind (``ThrowAwaySlot``) is this test file
/// and the registry is the one the test builds (``SlotKinds/init(adding:)``), so no file
/// outside the tests changes: a store with a slot of that kind unlocks through the generic
/// path (candidates, back-off, the one unwrap), shows the slot in `slot list`'s listing, and
/// carries its secret over the control wire, all without a line of custody naming it.
@Suite struct ThrowAwaySlotKindTests {
    static let token = [UInt8](repeating: 0x5a, count: 32)

    func custodian(_ home: StoreHome, _ keyring: any KeyringBackend, kinds: SlotKinds = .standard) throws -> Custodian {
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.slotKinds = kinds
        return try Custodian(home: home, keyring: keyring, configuration: configuration)
    }

    @Test func aKindDefinedInOneFileUnlocksThroughTheGenericPathAndIsListed() throws {
        let kinds = try SlotKinds(adding: [ThrowAwaySlot.self])
        #expect(kinds.names == ["passphrase", "prf", "fido2", "recovery", "tpm2", "throwaway"])
        let home = StoreHome(path: try temporaryFolder())
        let keyring = TestKeyring(InMemoryKeyring())
        let c = try custodian(home, keyring, kinds: kinds)
        _ = try c.initialize(passphrase: secret(Fixture.passphrase), parameters: .minimum, withRecoveryCode: false)
        let site = "00000000-0000-4000-8000-00000000000a"
        let sealed = try c.typedStorageKey(forSite: site, protection: .whenUnlocked).seal(Array("before".utf8), authenticating: [1])

        // Make a slot of the kind (the generic add, authorised by the current secret).
        let slot = try c.addSlot(ThrowAwaySlot.self, kekInput: SecretBytes(copying: Self.token), label: "scratch",
                                 current: .passphrase(secret(Fixture.passphrase)))
        #expect(slot.kind == ThrowAwaySlot.stored && slot.kdf == "HKDF-SHA256" && slot.label == "scratch")

        // It appears in the slot listing, described by its kind.
        let listed = try #require(try c.listSlots().first { $0.id == slot.id })
        #expect(listed.kind.name == "throwaway" && listed.details == "throw-away token")
        #expect(try c.damagedSlotIDs().isEmpty)

        // It unlocks through the generic path, to the same master key (what it sealed before opens).
        c.lock()
        try c.unlock(UnlockSecret(ThrowAwaySlot.self, secret: SecretBytes(copying: Self.token)), slotID: slot.id)
        #expect(c.isUnlocked)
        #expect(try c.typedStorageKey(forSite: site, protection: .whenUnlocked).open(sealed, authenticating: [1]) == Array("before".utf8))

        // A wrong token is one more failed unlock, as for any guessable secret.
        c.lock()
        #expect(throws: CustodyError.unlockFailed) {
            try c.unlock(UnlockSecret(ThrowAwaySlot.self, secret: SecretBytes(copying: [UInt8](repeating: 1, count: 32))))
        }

        // The control wire carries it by the kind's name, with no change to the daemon.
        let wire = try UnlockSecret(ThrowAwaySlot.self, secret: SecretBytes(copying: Self.token)).wireForm()
        #expect(wire.method == "throwaway")
        try wire.bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CustodyError) in
            guard let back = try kinds.unlockSecret(method: wire.method, wireBytes: raw) else { throw .invalidArgument("no kind") }
            try c.unlock(back)
        }
        #expect(c.isUnlocked)

        // A custodian whose registry does not list the kind sees its slot as damaged (as a slot
        // a newer SiteKeep wrote), refuses the kind, and still opens with the passphrase.
        let plain = try custodian(StoreHome(path: home.path), keyring)
        #expect(try plain.damagedSlotIDs() == [slot.id])
        #expect(try !plain.listSlots().contains { $0.id == slot.id })
        #expect(throws: CustodyError.self) {
            try plain.unlock(UnlockSecret(ThrowAwaySlot.self, secret: SecretBytes(copying: Self.token)))
        }
        try plain.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(plain.isUnlocked)
    }

    @Test func theRegistryRefusesAKindThatClashes() throws {
        #expect(throws: CustodyError.self) { try SlotKinds(adding: [ClashingSlot.self]) }
        #expect(throws: CustodyError.self) { try SlotKinds(adding: [ThrowAwaySlot.self, ThrowAwaySlot.self]) }
    }
}
