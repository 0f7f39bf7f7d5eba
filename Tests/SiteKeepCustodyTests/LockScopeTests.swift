import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
@testable import SiteKeepCustody

/// Custody's lock scope: the one place that owns what lock clears (issue 12, defect 1).
@Suite struct LockScopeTests {
    /// A holder of decrypted bytes in custody's scope is emptied by every way SiteKeep locks
    /// (lock, lock while locked, the idle lock on use and by timer) and by unlock.
    @Test func everyLockPathClearsTheScope() async throws {
        let f = try Fixture(.memory, idle: .seconds(60))
        try f.initialize(recovery: false)
        let held = f.custodian.lockScope.cache(of: [UInt8].self, keyedBy: String.self)
        func fill() { held.withLock { $0["plain"] = Array("decrypted bytes".utf8) } }
        func isEmpty() -> Bool { held.withLock { $0.isEmpty } }

        fill()
        f.custodian.lock()
        #expect(isEmpty(), "lock")
        fill()
        f.custodian.lock()
        #expect(isEmpty(), "lock while locked")
        fill()
        try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(isEmpty(), "unlock: nothing held while locked survives it")
        fill()
        f.clock.advance(seconds: 61)
        #expect(!f.custodian.isUnlocked)
        #expect(isEmpty(), "the idle lock, noticed on use")

        // The idle lock by timer, with no call at all.
        let home = StoreHome(path: try temporaryFolder())
        let timed = try Custodian(home: home, keyring: InMemoryKeyring(),
                                  configuration: CustodianConfiguration(idleLifetime: .milliseconds(300)))
        _ = try timed.initialize(passphrase: secret("pw"), parameters: .minimum, withRecoveryCode: false)
        let byTimer = timed.lockScope.cache(of: [UInt8].self, keyedBy: String.self)
        byTimer.withLock { $0["plain"] = [1, 2, 3] }
        try await Task.sleep(for: .milliseconds(1200))
        #expect(byTimer.withLock { $0.isEmpty }, "the idle lock by timer")
    }

    /// What was fetched before a clear is not stored after it; what was stored is wiped.
    @Test func aStoreAcrossAClearIsRefused() {
        let scope = LockScope()
        let held = scope.cache(of: [UInt8].self, keyedBy: String.self)
        let before = scope.generation
        #expect(held.withLock(ifNotClearedSince: before) { $0["a"] = [1] } != nil)
        scope.clear()
        #expect(held.withLock { $0.isEmpty })
        #expect(scope.wasCleared(since: before))
        #expect(held.withLock(ifNotClearedSince: before) { $0["b"] = [2] } == nil, "fetched before the clear: not kept")
        #expect(held.withLock { $0.isEmpty })
        #expect(held.withLock(ifNotClearedSince: scope.generation) { $0["c"] = [3] } != nil)
    }

    /// Wiping zeroes bytes in their own storage before letting them go, and empties containers.
    @Test func wipingZeroesInPlaceAndEmpties() {
        var bytes: [UInt8] = Array(repeating: 0x5a, count: 64)
        let address = bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        SecureMemory.zero(&bytes)
        #expect(bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } == address && bytes.allSatisfy { $0 == 0 })
        var again = bytes
        again.wipeForLock()
        #expect(again.isEmpty)
        var optional: [UInt8]? = [1, 2]
        optional.wipeForLock()
        #expect(optional == nil)
        var dictionary: [String: [UInt8]] = ["a": [1], "b": [2]]
        dictionary.wipeForLock()
        #expect(dictionary.isEmpty)
    }

    /// Custody's own cache of unwrapped signing keys lives in the scope: a signature with the
    /// key cached reads no keyring item; clearing the scope (as every lock does) empties the
    /// cache, and the next signature reads and unwraps the key again; after a lock, signing
    /// needs an unlock, and then unwraps the key again too.
    @Test(arguments: Backend.allCases) func custodysSigningKeysAreInTheScope(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        /// Signs, and says how many keyring items the signature read.
        func reads(signing byte: UInt8) throws -> Int {
            let before = f.keyring.loads.withLock { $0 }
            _ = try f.custodian.sign(keyID: "t", message: [byte], context: f.approved("t"))
            return f.keyring.loads.withLock { $0 } - before
        }
        #expect(try reads(signing: 1) > 0, "the first signature reads the key's record")
        #expect(try reads(signing: 2) == 0, "the next is served by the cached key")
        f.custodian.lockScope.clear()
        #expect(try reads(signing: 3) > 0, "clearing the scope emptied the cache")
        #expect(try reads(signing: 4) == 0)
        f.custodian.lock()
        #expect(throws: CustodyError.locked) { try reads(signing: 5) }
        try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(try reads(signing: 6) > 0, "no key unwrapped before the lock serves after it")
    }
}
