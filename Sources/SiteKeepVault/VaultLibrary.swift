import SiteKeepCustody
public import SiteKeepCrypto
import Synchronization

/// The registered vaults of one SiteKeep: what `sitekeep vault add|list|remove|ls|cat|log|status`
/// call, each command one method.
///
/// ```
/// vault add NAME --path DIR   → add(name:path:keyText:)        (the only PBKDF2 run)
/// vault list                  → records()
/// vault remove NAME           → remove(name:)
/// vault ls NAME [PATH]        → vault(named:).list(path:)
/// vault cat NAME PATH         → vault(named:).read(path:)
/// vault log NAME              → vault(named:).log(limit:)
/// vault status NAME           → vault(named:).status()
/// ```
public final class VaultLibrary: Sendable {
    /// The registry of names and folders.
    public let registry: VaultRegistry
    let keyStore: any VaultKeyStore
    let options: VaultOptions
    /// The open vaults, in the key store's lock scope: lock drops them all (and each vault's own
    /// keys and object cache are wiped in the same clear).
    private let open: LockBound<[String: Vault]>

    public init(registry: VaultRegistry, keyStore: any VaultKeyStore, options: VaultOptions = VaultOptions()) {
        self.registry = registry
        self.keyStore = keyStore
        self.options = options
        open = keyStore.lockScope.cache()
    }

    /// Registers the vault in `path` under `name`: parses the key text inside custody, derives
    /// the keys (PBKDF2, once), opens and verifies the vault's HEAD with them (so a wrong key is
    /// refused here), then keeps the keys in the key store and the record in the registry.
    @discardableResult
    public func add(name: String, path: String, keyText: borrowing SecretBytes) throws(VaultError) -> VaultStatus {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try registry.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        let keys: SgitKeys
        do { keys = try SgitKeys.derive(fromKeyText: keyText, lockScope: keyStore.lockScope) } catch { throw .key(error) }
        let vault = try Vault.open(path: path, keys: keys, options: options)
        let status = try vault.status()
        try keyStore.store(keys, forVault: name)
        do {
            try registry.add(VaultRecord(name: name, path: vault.root, vaultID: keys.vaultID, readOnly: keys.isReadOnly))
        } catch {
            try? keyStore.removeKeys(forVault: name)
            throw error
        }
        _ = self.open.withLock(ifNotClearedSince: keys.lockGeneration) { $0[name] = vault }
        return status
    }

    /// Every registered vault.
    public func records() throws(VaultError) -> [VaultRecord] { try registry.records() }

    /// Forgets a vault: its record and its keys (the folder is left alone).
    public func remove(name: String) throws(VaultError) {
        try registry.remove(named: name)
        try keyStore.removeKeys(forVault: name)
        _ = self.open.withLock { $0.removeValue(forKey: name) }
    }

    /// The opened vault `name` (kept open until the next lock, so its object cache serves later
    /// calls). Locked, it throws ``VaultError/keysUnavailable(_:)``.
    public func vault(named name: String) throws(VaultError) -> Vault {
        if let v = self.open.withLock({ $0[name] }) { return v }
        let record = try registry.record(named: name)
        let keys = try keyStore.keys(forVault: name)
        let v = try Vault.open(path: record.path, keys: keys, options: options)
        // Not kept when a lock came between the unwrap and now (the vault is then dead anyway).
        _ = self.open.withLock(ifNotClearedSince: keys.lockGeneration) { $0[name] = v }
        return v
    }

    /// How many vaults are open (for tests).
    package var openCount: Int { open.withLock { $0.count } }
}
