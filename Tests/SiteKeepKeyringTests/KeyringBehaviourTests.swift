import SiteKeepKeyring
import Testing

/// One behaviour suite, run against every backend available here: the file keyring always, the
/// Secret Service when `SITEKEEP_TEST_SECRET_SERVICE=1` (tools/test starts a private one).
@Suite struct KeyringBehaviourTests {
    static let backends: [KeyringKind] = secretServiceTestsEnabled ? [.file, .secretService] : [.file]

    @Test(arguments: backends)
    func storeLoadReplaceDelete(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        let item = under.item("slot", "passphrase-1")
        try keyring.store([1, 2, 3], for: item, label: "SiteKeep test slot")
        #expect(try keyring.load(item) == [1, 2, 3])
        try keyring.store([9, 8, 7, 6], for: item, label: "SiteKeep test slot")
        #expect(try keyring.load(item) == [9, 8, 7, 6])
        #expect(try keyring.list(store: under.store, kind: nil) == [item])
        #expect(try keyring.delete(item) == true)
        #expect(throws: KeyringError.itemMissing(item)) { try keyring.load(item) }
        #expect(try keyring.delete(item) == false)
        #expect(try keyring.list(store: under.store, kind: nil).isEmpty)
    }

    @Test(arguments: backends)
    func listsByKind(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        let slots = [under.item("slot", "a"), under.item("slot", "b")]
        let team = under.item("team-key", "t1")
        for item in slots + [team] { try keyring.store([0x42], for: item, label: "SiteKeep \(item)") }
        #expect(try keyring.list(store: under.store, kind: "slot") == slots)
        #expect(try keyring.list(store: under.store, kind: "team-key") == [team])
        #expect(try keyring.list(store: under.store, kind: "vault-key").isEmpty)
        #expect(try Set(keyring.list(store: under.store, kind: nil)) == Set(slots + [team]))
    }

    @Test(arguments: backends)
    func binaryBlobsSurviveExactly(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        let blobs: [[UInt8]] = [
            [0x00],
            [0xFF, 0x00, 0xFF],
            [0x00, 0x00, 0x41, 0x00],
            (0...255).map { UInt8($0) },
            Array((0...255).map { UInt8($0) }.reversed()),
            [0xC3, 0x28, 0xA0, 0xA1, 0xE2, 0x28, 0xA1],  // invalid UTF-8
        ]
        for (index, blob) in blobs.enumerated() {
            let item = under.item("vault-key", "blob-\(index)")
            try keyring.store(blob, for: item, label: "SiteKeep binary test")
            #expect(try keyring.load(item) == blob, "blob \(index)")
        }
    }

    @Test(arguments: backends)
    func storesA64KiBBlob(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        var generator = SystemRandomNumberGenerator()
        let blob = (0..<65_536).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let item = under.item("storage-key", "big")
        try keyring.store(blob, for: item, label: "SiteKeep large test")
        #expect(try keyring.load(item) == blob)
    }

    @Test(arguments: backends)
    func storesDoNotSeeEachOther(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        let mine = under.item("slot", "same-id")
        let theirs = KeyringItemID(store: under.otherStore(), kind: "slot", id: "same-id")
        try keyring.store([1], for: mine, label: "SiteKeep store A")
        #expect(throws: KeyringError.itemMissing(theirs)) { try keyring.load(theirs) }
        #expect(try keyring.list(store: under.otherStore(), kind: nil).isEmpty)
        try keyring.store([2], for: theirs, label: "SiteKeep store B")
        #expect(try keyring.load(mine) == [1])
        #expect(try keyring.load(theirs) == [2])
        #expect(try keyring.list(store: under.store, kind: nil) == [mine])
        #expect(try keyring.delete(theirs))
        #expect(try keyring.load(mine) == [1])
    }

    @Test(arguments: backends)
    func missingItemIsItsOwnError(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let item = under.item("device-key", "never-stored")
        #expect(throws: KeyringError.itemMissing(item)) { try under.backend.load(item) }
        #expect(try under.backend.delete(item) == false)
        #expect(KeyringError.itemMissing(item).description.contains("device-key/never-stored"))
    }

    @Test(arguments: backends)
    func similarIDsAreDistinct(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let keyring = under.backend
        let a = under.item("slot", "a")
        let aa = under.item("slot", "aa")
        let otherKind = under.item("team-key", "a")
        try keyring.store([1], for: a, label: "x")
        try keyring.store([2], for: aa, label: "x")
        try keyring.store([3], for: otherKind, label: "x")
        #expect(try keyring.load(a) == [1])
        #expect(try keyring.load(aa) == [2])
        #expect(try keyring.load(otherKind) == [3])
        try keyring.delete(a)
        #expect(try keyring.load(aa) == [2])
        #expect(try keyring.load(otherKind) == [3])
    }
}
