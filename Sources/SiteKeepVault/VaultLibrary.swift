public import SiteKeepCustody
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
    let signer: (@Sendable (String) -> any CommitSigner)?
    private let open = Mutex<[String: Vault]>([:])

    /// - Parameter signer: who signs the commits written to the vault of a given name (the
    ///   product passes ``DeviceCommitSigner``); nil makes every vault read-only here.
    public init(registry: VaultRegistry, keyStore: any VaultKeyStore, options: VaultOptions = VaultOptions(),
                signer: (@Sendable (String) -> any CommitSigner)? = nil) {
        self.registry = registry
        self.keyStore = keyStore
        self.options = options
        self.signer = signer
    }

    /// Registers the vault in `path` under `name`: parses the key text inside custody, derives
    /// the keys (PBKDF2, once), opens and verifies the vault's HEAD with them (so a wrong key is
    /// refused here), then keeps the keys in the key store and the record in the registry.
    @discardableResult
    public func add(name: String, path: String, keyText: borrowing SecretBytes) throws(VaultError) -> VaultStatus {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try registry.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        let keys: SgitKeys
        do { keys = try SgitKeys.derive(fromKeyText: keyText) } catch { throw .key(error) }
        let vault = try Vault.open(path: path, keys: keys, options: options)
        let status = try vault.status()
        try keyStore.store(keys, forVault: name)
        do {
            try registry.add(VaultRecord(name: name, path: vault.root, vaultID: keys.vaultID, readOnly: keys.isReadOnly))
        } catch {
            try? keyStore.removeKeys(forVault: name)
            throw error
        }
        self.open.withLock { $0[name] = vault }
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

    /// The opened vault `name` (kept open, so its object cache serves later calls).
    public func vault(named name: String) throws(VaultError) -> Vault {
        if let v = self.open.withLock({ $0[name] }) { return v }
        let record = try registry.record(named: name)
        let keys = try keyStore.keys(forVault: name)
        let v = try Vault.open(path: record.path, keys: keys, options: options)
        self.open.withLock { $0[name] = v }
        return v
    }

    /// Registers a vault folder whose keys are already derived (a clone): keys into the key
    /// store, the record into the registry.
    public func register(name: String, path: String, keys: SgitKeys) throws(VaultError) {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try registry.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        let vault = try Vault.open(path: path, keys: keys, options: options)
        try keyStore.store(keys, forVault: name)
        do {
            try registry.add(VaultRecord(name: name, path: vault.root, vaultID: keys.vaultID, readOnly: keys.isReadOnly))
        } catch {
            try? keyStore.removeKeys(forVault: name)
            throw error
        }
        self.open.withLock { $0[name] = vault }
    }

    /// The keys of the vault `name` (handles; for its remotes).
    public func keys(named name: String) throws(VaultError) -> SgitKeys { try keyStore.keys(forVault: name) }

    /// The signer for the vault `name`.
    public func commitSigner(for name: String) throws(VaultError) -> any CommitSigner {
        guard let signer else { throw .readOnly(reason: "this SiteKeep has no device key to sign commits with") }
        return signer(name)
    }

    /// Commits `changes` to the vault `name` on this device's clone branch (see
    /// ``Vault/commit(_:message:signer:parents:checkoutWhenAdopting:)``). Without a message, the
    /// one sgit writes: `Commit: N added, N modified, N deleted`.
    @discardableResult
    public func commit(name: String, changes: [(VaultPath, VaultChange)], message: String? = nil) throws(VaultError) -> CommitResult {
        let vault = try vault(named: name)
        let text: String
        if let message { text = message } else {
            var added = 0, modified = 0, deleted = 0
            for (path, change) in changes {
                let exists = !((try? vault.list(path: path.string)) ?? []).isEmpty
                switch change {
                case .remove: deleted += 1
                default: if exists { modified += 1 } else { added += 1 }
                }
            }
            text = "Commit: \(added) added, \(modified) modified, \(deleted) deleted"
        }
        return try vault.commit(changes, message: text, signer: try commitSigner(for: name))
    }

    /// Writes one file (see ``commit(name:changes:message:)``).
    @discardableResult
    public func write(name: String, path: String, contents: [UInt8], message: String? = nil) throws(VaultError) -> CommitResult {
        try commit(name: name, changes: [(try VaultPath(validating: path), .write(contents))], message: message)
    }

    /// Removes one file.
    @discardableResult
    public func remove(name: String, path: String, message: String? = nil) throws(VaultError) -> CommitResult {
        try commit(name: name, changes: [(try VaultPath(validating: path), .remove)], message: message)
    }

    /// Moves one file (the blob is kept; nothing is re-encrypted).
    @discardableResult
    public func move(name: String, from: String, to: String, message: String? = nil) throws(VaultError) -> CommitResult {
        let vault = try vault(named: name)
        let source = try VaultPath(validating: from), target = try VaultPath(validating: to)
        guard let e = try vault.list(path: from).first, e.path == source else { throw .notFound(path: from) }
        if ((try? vault.list(path: to)) ?? []).contains(where: { $0.path.isWithin(target) }) {
            throw .invalidPath(to, reason: "something is already there; remove it first")
        }
        let flat = FlatFile(blobID: e.blobID, size: e.size, contentHash: e.contentHash ?? "", contentType: e.contentType ?? "", large: e.large)
        return try commit(name: name, changes: [(target, .entry(flat)), (source, .remove)],
                          message: message ?? "Move \(from) to \(to)")
    }
}
