public import SiteKeepCustody
public import SiteKeepVault
import SiteKeepCrypto
import Synchronization

/// A ``VaultKeyStore`` in memory (test support only). The keys stay in custody's
/// guarded memory and vanish with the process.
public final class InMemoryVaultKeyStore: VaultKeyStore {
    private let keys = Mutex<[String: SgitKeys]>([:])
    /// A scope of its own (nothing locks an in-memory store).
    public let lockScope = LockScope()
    public init() {}
    public func store(_ keys: SgitKeys, forVault name: String) throws(VaultError) { self.keys.withLock { $0[name] = keys } }
    public func keys(forVault name: String) throws(VaultError) -> SgitKeys {
        guard let k = keys.withLock({ $0[name] }) else { throw .unknownVault(name: name) }
        return k
    }
    public func removeKeys(forVault name: String) throws(VaultError) { _ = keys.withLock { $0.removeValue(forKey: name) } }

    // Record tags under a random key that lives as long as this store.
    private let tagKey = Mutex<SymmetricKeyHandle?>(nil)

    private func currentTagKey() throws(VaultError) -> SymmetricKeyHandle {
        try tagKey.withLock { (k: inout SymmetricKeyHandle?) throws(VaultError) -> SymmetricKeyHandle in
            if let k { return k }
            do {
                let made = try SymmetricKeyHandle.random()
                k = made
                return made
            } catch { throw .keysUnavailable("could not make a record-tag key: \(error)") }
        }
    }

    public func recordTag(for bytes: [UInt8]) throws(VaultError) -> [UInt8] { try currentTagKey().authenticationCode(for: bytes) }

    public func isValidRecordTag(_ tag: [UInt8], for bytes: [UInt8]) throws(VaultError) -> Bool {
        ConstantTime.equals(try currentTagKey().authenticationCode(for: bytes), tag)
    }
}
