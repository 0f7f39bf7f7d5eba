import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
@testable import SiteKeepVault

/// Lock reaches the vault library (issue 12, defect 1): its open vaults, each vault's keys and
/// each vault's object cache are kept in custody's lock scope.
@Suite("Vaults and lock", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct VaultLockTests {
    static let passphrase = "vault lock test passphrase"

    /// A real custodian (file keyring), unlocked, with the fixture's plain vault added.
    static func library(idle: Duration = .seconds(900)) throws -> (Custodian, VaultLibrary, String) {
        let f = try SgitFixture.get()
        let dir = try temporaryDirectory()
        let home = StoreHome(path: dir + "/home")
        let custodian = try Custodian(home: home, keyring: try FileKeyring(home: home),
                                      configuration: CustodianConfiguration(idleLifetime: idle))
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array(passphrase.utf8)), parameters: .minimum, withRecoveryCode: false)
        let registry = VaultRegistry(file: dir + "/vaults.json")
        let library = VaultLibrary(registry: registry, keyStore: CustodianVaultKeyStore(custodian: custodian, registry: registry))
        // The read key (no PBKDF2 at add: these tests time the idle lock).
        try library.add(name: "notes", path: f.plainPath, keyText: SecretBytes(copying: Array("\(f.readKeyHex):itest01".utf8)))
        return (custodian, library, dir)
    }

    static func isLocked(_ error: VaultError) -> Bool {
        if case .keysUnavailable(let why) = error { return why == CustodyError.locked.description }
        return false
    }

    @Test("lock drops the open vaults, wipes a held vault's keys and empties its object cache")
    func lockWipesOpenVaultsTheirKeysAndDecryptedBytes() throws {
        let (custodian, library, dir) = try Self.library()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let held = try library.vault(named: "notes")
        #expect(try held.read(path: "docs/a.txt") == Array("hello again\n".utf8))
        #expect(held.cacheStatistics.entries > 0)
        #expect(try library.vault(named: "notes") === held, "the library keeps the vault open")

        custodian.lock()
        #expect(held.isWiped, "a vault someone still holds has no keys after the lock")
        #expect(held.cacheStatistics.entries == 0 && held.cacheStatistics.bytes == 0, "and no decrypted byte")
        #expect { try held.read(path: "docs/a.txt") } throws: { Self.isLocked($0 as! VaultError) }
        #expect { try held.list() } throws: { Self.isLocked($0 as! VaultError) }
        #expect { try held.status() } throws: { Self.isLocked($0 as! VaultError) }
        #expect { try library.vault(named: "notes") } throws: { Self.isLocked($0 as! VaultError) }

        // After the next unlock the library opens the vault again, with fresh keys.
        try custodian.unlock(.passphrase(SecretBytes(copying: Array(Self.passphrase.utf8))))
        let reopened = try library.vault(named: "notes")
        #expect(reopened !== held, "the library keeps no vault across a lock")
        #expect(try reopened.read(path: "docs/a.txt") == Array("hello again\n".utf8))
        #expect(held.isWiped, "the old vault stays dead")
    }

    @Test("the idle lock by timer wipes the vaults with no call at all")
    func idleLockWipesTheVaults() async throws {
        // The idle time counts from the last custody use: here, the unwrap of the vault's keys.
        let (custodian, library, dir) = try Self.library(idle: .seconds(2))
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let held = try library.vault(named: "notes")
        _ = try held.read(path: "docs/a.txt")
        #expect(!held.isWiped)
        try await Task.sleep(for: .milliseconds(3500))
        #expect(held.isWiped && held.cacheStatistics.entries == 0)
        #expect { try held.read(path: "docs/a.txt") } throws: { Self.isLocked($0 as! VaultError) }
        try custodian.unlock(.passphrase(SecretBytes(copying: Array(Self.passphrase.utf8))))
        #expect(try library.vault(named: "notes") !== held, "the library kept no vault across the idle lock")
    }

    @Test("keys unwrapped before a lock open no vault that outlives it")
    func keysFromBeforeALockMakeADeadVault() throws {
        let (custodian, _, dir) = try Self.library()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let registry = VaultRegistry(file: dir + "/vaults.json")
        let store = CustodianVaultKeyStore(custodian: custodian, registry: registry)
        let keys = try store.keys(forVault: "notes")
        custodian.lock()
        try custodian.unlock(.passphrase(SecretBytes(copying: Array(Self.passphrase.utf8))))
        #expect { try Vault.open(path: SgitFixture.get().plainPath, keys: keys) } throws: { Self.isLocked($0 as! VaultError) }
    }

    @Test("the object cache zeroes decrypted bytes in their own storage before it lets them go")
    func objectCacheZeroesDecryptedBytesInPlace() throws {
        let f = try SgitFixture.get()
        // A vault that caches nothing, so each object decoded below is owned by the cache state
        // this test fills alone, as a vault's cache owns what it keeps.
        var options = VaultOptions()
        options.cacheBytes = 0
        let vault = try Vault.open(path: f.plainPath, keys: f.plainKeys, options: options)
        let head = try vault.resolveHead()
        let headID = try #require(head.commitID)
        func commitItem() throws -> ObjectCache.Item { .commit(try vault.commit(headID, index: head.index)) }
        func treeItem() throws -> ObjectCache.Item { .tree(try vault.tree(try vault.commit(headID, index: head.index).treeID)) }
        let entry = try vault.file(at: "docs/a.txt").entry
        func blobItem() throws -> ObjectCache.Item {
            let plain = try vault.blob(entry.blobID, size: entry.size, contentHash: entry.contentHash, path: entry.path)
            return .blob(plain, digest: SHA256.hash(plain))
        }
        var state = ObjectCache.State()
        state.items = ["commit": (try commitItem(), 1), "tree": (try treeItem(), 2), "blob": (try blobItem(), 3)]

        struct Seen { var address: UInt; var count: Int }
        func storage(_ b: [UInt8]) -> Seen { b.withUnsafeBufferPointer { Seen(address: UInt(bitPattern: $0.baseAddress), count: $0.count) } }
        func decrypted(_ item: ObjectCache.Item) -> [[UInt8]] {
            switch item {
            case .blob(let b, let digest): [b, digest]
            case .tree(let t): t.entries.flatMap { [$0.nameBytes] + [$0.contentHash, $0.contentType].compactMap { $0.map { Array($0.utf8) } } }
            case .commit(_, let m): m.map { [$0] } ?? []
            case .publicKey: []
            }
        }
        for (k, v) in state.items { #expect(decrypted(v.item).contains { !$0.isEmpty && !$0.allSatisfy { $0 == 0 } }, "\(k) holds plaintext") }
        // Where each entry's blob bytes and each tree entry's name live, before the wipe.
        var before: [String: [Seen]] = [:]
        for (k, v) in state.items {
            if case .tree(let t) = v.item { before[k] = t.entries.map { storage($0.nameBytes) } }
            if case .blob(let b, let digest) = v.item { before[k] = [storage(b), storage(digest)] }
        }
        state.zeroInPlace()
        for (k, v) in state.items {
            for bytes in decrypted(v.item) { #expect(!bytes.isEmpty && bytes.allSatisfy { $0 == 0 }, "\(k)") }
            if case .tree(let t) = v.item { #expect(t.entries.map { storage($0.nameBytes).address } == before[k]?.map(\.address), "tree names zeroed where they were") }
            if case .blob(let b, let digest) = v.item {
                #expect([storage(b).address, storage(digest).address] == before[k]?.map(\.address), "blob and its digest zeroed where they were")
            }
        }
        state.wipeForLock()
        #expect(state.items.isEmpty && state.bytes == 0)
    }
}
