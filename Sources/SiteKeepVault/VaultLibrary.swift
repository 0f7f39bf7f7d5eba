public import SiteKeepCustody
public import SiteKeepCrypto
import SiteKeepSystem
import Synchronization

/// A vault opened by the library, with the record it is read under.
public struct OpenedVault: Sendable {
    /// The vault, judged by the record's owner-independent trust rule (pins, policy).
    public let vault: Vault
    /// Its registry record (authenticated).
    public let record: VaultRecord
    /// Signers pinned by this call: a vault registered before pins, opened for the first time.
    public let pinnedAtFirstUse: [SignerPin]
}

/// The registered vaults of one SiteKeep: what `sitekeep vault …` and the bridge's vault ops
/// call, each command one method.
///
/// ```
/// vault add NAME --path DIR [--site S]  → add(name:path:keyText:siteID:allowUnsigned:)  (the only PBKDF2 run)
/// vault list                            → records()
/// vault remove NAME                     → remove(name:)
/// vault ls|cat|log|status|verify NAME   → open(_:).vault.list/read/log/status/verify
/// vault trust NAME KEYID                → trust(vault:keyID:)
/// vault assign NAME --site S            → assign(vault:siteID:)
/// vault policy NAME --allow-unsigned    → setAllowUnsigned(_:vault:)
/// vault.load|list|status (bridge)       → vault(named:forSite:), defaultVaultName(forSite:)
/// ```
///
/// A vault belongs to at most one site (``VaultRecord/siteID``). The bridge reaches only the
/// calling site's vaults: a name owned by another site, by no site, or whose record fails
/// authentication answers exactly as a name that does not exist.
public final class VaultLibrary: Sendable {
    /// The registry of names and folders.
    public let registry: VaultRegistry
    let keyStore: any VaultKeyStore
    let options: VaultOptions
    /// The open vaults, in the key store's lock scope: lock drops them all (and each vault's own
    /// keys and object cache are wiped in the same clear).
    private let open: LockBound<[String: Vault]>
    let signer: (@Sendable (String) -> any CommitSigner)?
    /// The daemon's watch on the registry's folder and the open vaults' HEAD folders.
    private let changeWatch = Mutex<ChangeWatch?>(nil)
    /// Where each vault's damaged fetched objects are fetched again from, by vault name.
    private let refetchProvider = Mutex<(@Sendable (String) -> ObjectRefetch?)?>(nil)

    /// - Parameter signer: who signs the commits written to the vault of a given name (the
    ///   product passes ``DeviceCommitSigner``); nil makes every vault read-only here.
    public init(registry: VaultRegistry, keyStore: any VaultKeyStore, options: VaultOptions = VaultOptions(),
                signer: (@Sendable (String) -> any CommitSigner)? = nil) {
        self.registry = registry
        self.keyStore = keyStore
        self.options = options
        open = keyStore.lockScope.cache()
        self.signer = signer
    }

    /// Registers the vault in `path` under `name`: parses the key text inside custody, derives
    /// the keys (PBKDF2, once), opens the vault and judges its HEAD (so a wrong key, or a HEAD no
    /// listed signer signed, is refused here), pins every signer its branch index lists, then
    /// keeps the keys in the key store and the record, tagged, in the registry.
    /// - Parameters:
    ///   - siteID: the owning site's id (resolved by the caller); nil: no site, CLI only.
    ///   - allowUnsigned: serve unsigned commits and untrusted signers.
    @discardableResult
    public func add(name: String, path: String, keyText: borrowing SecretBytes, siteID: String? = nil,
                    allowUnsigned: Bool = false) throws(VaultError) -> VaultStatus {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try registry.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        let keys: SgitKeys
        do { keys = try SgitKeys.derive(fromKeyText: keyText, lockScope: keyStore.lockScope) } catch { throw .key(error) }
        return try adopt(name: name, path: path, keys: keys, siteID: siteID, allowUnsigned: allowUnsigned, source: .vaultAdd)
    }

    /// Registers a vault folder whose keys are already derived (a clone): keys into the key
    /// store, a tagged record owned by `siteID` whose signers (those the cloned branch index
    /// lists) are pinned with `source` (``SignerPin/Source/authenticatedPull`` for a clone from the
    /// vault server's API, ``SignerPin/Source/vaultAdd`` for a first look at a folder).
    /// - Parameter pinHistory: HEAD is judged by every signer about to be pinned (those the
    ///   index lists and those of HEAD's last 64 commits it does not), not by the index alone:
    ///   for `vault clone`, whose fetch verified every commit's signature and chose its signers
    ///   (the sites' web client rewrites the index to one unkeyed entry on every push).
    @discardableResult
    public func register(name: String, path: String, keys: SgitKeys, siteID: String? = nil,
                         allowUnsigned: Bool = false, source: SignerPin.Source = .authenticatedPull,
                         pinHistory: Bool = false) throws(VaultError) -> VaultStatus {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try registry.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        return try adopt(name: name, path: path, keys: keys, siteID: siteID, allowUnsigned: allowUnsigned, source: source,
                         pinHistory: pinHistory)
    }

    /// Opens the vault with `keys` (every listed signer accepted for this first look, and with
    /// `pinHistory` those of HEAD's recent history too), pins its signers, and keeps its keys
    /// and its tagged record.
    private func adopt(name: String, path: String, keys: SgitKeys, siteID: String?, allowUnsigned: Bool,
                       source: SignerPin.Source, pinHistory: Bool = false) throws(VaultError) -> VaultStatus {
        var checking = options
        checking.trust = VaultTrust(signers: .anyListed, allowUnsigned: allowUnsigned, vaultName: name)
        let vault: Vault
        let signers: [SignerPin]
        if pinHistory {
            vault = try Vault.load(path: path, keys: keys, options: checking)
            signers = try vault.currentSigners(source: source)
            vault.setTrust(VaultTrust(signers: .pinned(signers), allowUnsigned: allowUnsigned, vaultName: name))
            try vault.requireServedHead()
        } else {
            vault = try Vault.open(path: path, keys: keys, options: checking)
            signers = try vault.currentSigners(source: source)
        }
        var record = VaultRecord(name: name, path: vault.root, vaultID: keys.vaultID, readOnly: keys.isReadOnly, siteID: siteID,
                                 allowUnsigned: allowUnsigned, signers: signers)
        record.tag = try keyStore.recordTag(for: record.taggedBytes)
        try keyStore.store(keys, forVault: name)
        do {
            try registry.add(record)
        } catch {
            try? keyStore.removeKeys(forVault: name)
            throw error
        }
        vault.setTrust(trust(of: record), fromAuthenticated: record)
        _ = self.open.withLock(ifNotClearedSince: keys.lockGeneration) { $0[name] = vault }
        return try vault.status()
    }

    /// Every registered vault (as the file says; ``open(_:)`` authenticates one before use).
    public func records() throws(VaultError) -> [VaultRecord] { try registry.records() }

    /// Forgets a vault: its record and its keys (the folder is left alone).
    public func remove(name: String) throws(VaultError) {
        try registry.remove(named: name)
        try keyStore.removeKeys(forVault: name)
        _ = self.open.withLock { $0.removeValue(forKey: name) }
    }

    /// The vault `name` for the CLI, whichever site owns it: its record authenticated (a record
    /// from before pins is pinned and tagged now), the vault judged by the record's pins and
    /// policy. Kept open, so its object cache serves later calls.
    public func open(_ name: String) throws(VaultError) -> OpenedVault {
        var record = try registry.record(named: name)
        let v = try cachedOrLoaded(record)
        var pinned: [SignerPin] = []
        if record.isLegacy {
            // Registered before owners and pins: the signers listed now are trusted from now on,
            // as `vault add` would have; the record stays owned by no site.
            pinned = try v.currentSigners(source: .firstUse)
            record.signers = pinned
            record.tag = try keyStore.recordTag(for: record.taggedBytes)
            try registry.update(record)
        } else if !v.trustCame(from: record) {
            guard let tag = record.tag, try keyStore.isValidRecordTag(tag, for: record.taggedBytes) else {
                throw .recordNotAuthentic(name: name)
            }
        }
        v.setTrust(trust(of: record), fromAuthenticated: record)
        return OpenedVault(vault: v, record: record, pinnedAtFirstUse: pinned)
    }

    /// The opened vault `name` (``open(_:)``'s vault).
    public func vault(named name: String) throws(VaultError) -> Vault { try open(name).vault }

    /// The vault `name` for a bridge call of the site `siteID`. A vault owned by another site,
    /// by no site, or whose record fails authentication throws
    /// ``VaultError/unknownVault(name:)``, exactly as a name that does not exist; nothing of such
    /// a vault is opened or read.
    public func vault(named name: String, forSite siteID: String) throws(VaultError) -> Vault {
        let record = try registry.record(named: name)
        guard let tag = record.tag, record.siteID == siteID else { throw .unknownVault(name: name) }
        let v = try cachedOrLoaded(record)
        if !v.trustCame(from: record) {
            guard try keyStore.isValidRecordTag(tag, for: record.taggedBytes) else { throw .unknownVault(name: name) }
        }
        v.setTrust(trust(of: record), fromAuthenticated: record)
        return v
    }

    /// The vault a bridge call of `siteID` without `args.vault` means: the site's only vault, or
    /// its vault named `default`; nil when it has none or several without a `default`.
    public func defaultVaultName(forSite siteID: String) throws(VaultError) -> String? {
        let mine = try registry.records().filter { $0.tag != nil && $0.siteID == siteID }
        if mine.count == 1 { return mine[0].name }
        return mine.contains { $0.name == "default" } ? "default" : nil
    }

    /// Trusts the signer `keyID` of vault `name` (`sitekeep vault trust`): the key must be listed
    /// by the vault's branch index (without an index: HEAD's signer) with its key file present;
    /// its current public key is pinned.
    /// - Returns: the pin, and whether it was already pinned.
    @discardableResult
    public func trust(vault name: String, keyID: String) throws(VaultError) -> (pin: SignerPin, alreadyPinned: Bool) {
        let opened = try open(name)
        guard let key = Identifiers.keyID(keyID),
              let listed = try opened.vault.status(historySigners: true).signers.first(where: { $0.keyID == key }),
              let fingerprint = listed.fingerprint else {
            throw .signerNotListed(vault: name, keyID: keyID)
        }
        let wanted = SignerPin(keyID: key, fingerprint: fingerprint, source: .user)
        let added = try self.pin([wanted], vault: name)
        let existing = listed.pin ?? wanted
        return (added.first ?? existing, added.isEmpty)
    }

    /// Pins signers of vault `name` (``trust(vault:keyID:)`` does, for `sitekeep vault trust`).
    /// A pull never calls it: a signer that arrives through a pull is new until the user trusts
    /// it (issue 32). A key already pinned with the same public key is left as it is; one pinned
    /// with another public key is refused.
    /// - Returns: the pins that were added.
    @discardableResult
    public func pin(_ pins: [SignerPin], vault name: String) throws(VaultError) -> [SignerPin] {
        var record = try open(name).record
        var all = record.signers ?? []
        var added: [SignerPin] = []
        for p in pins {
            guard Identifiers.keyID(p.keyID) == p.keyID, SignerPin.isFingerprint(p.fingerprint) else {
                throw .signerNotListed(vault: name, keyID: p.keyID)
            }
            if let existing = all.first(where: { $0.keyID == p.keyID }) {
                guard existing.fingerprint == p.fingerprint else {
                    throw .pinConflict(vault: name, keyID: p.keyID, pinned: existing.fingerprint, found: p.fingerprint)
                }
                continue
            }
            all.append(p)
            added.append(p)
        }
        guard !added.isEmpty else { return [] }
        record.signers = all
        try rewrite(record)
        return added
    }

    /// Gives vault `name` to the site `siteID` (nil: to no site, CLI only).
    public func assign(vault name: String, siteID: String?) throws(VaultError) {
        var record = try open(name).record
        record.siteID = siteID
        try rewrite(record)
    }

    /// Sets whether vault `name` serves unsigned commits and untrusted signers.
    public func setAllowUnsigned(_ allow: Bool, vault name: String) throws(VaultError) {
        var record = try open(name).record
        record.allowUnsigned = allow
        try rewrite(record)
    }

    // MARK: -

    /// Tags and writes `record`, and applies it to the open vault.
    private func rewrite(_ record: VaultRecord) throws(VaultError) {
        var r = record
        r.tag = try keyStore.recordTag(for: r.taggedBytes)
        try registry.update(r)
        if let v = self.open.withLock({ $0[r.name] }) { v.setTrust(trust(of: r), fromAuthenticated: r) }
    }

    /// The open vault of `record`, or the vault opened now (its keys from the key store).
    private func cachedOrLoaded(_ record: VaultRecord) throws(VaultError) -> Vault {
        if let v = self.open.withLock({ $0[record.name] }) { return v }
        let keys = try keyStore.keys(forVault: record.name)
        let v = try Vault.load(path: record.path, keys: keys, options: options, refetch: refetchProvider.withLock({ $0 })?(record.name))
        if let watch = changeWatch.withLock({ $0 }) { v.watch(with: watch) }
        // Not kept when a lock came between the unwrap and now (the vault is then dead anyway).
        _ = self.open.withLock(ifNotClearedSince: keys.lockGeneration) { $0[record.name] = v }
        return v
    }

    /// Gives every vault this library opens (and every one open now) where its damaged fetched
    /// objects are fetched again from: `provider(name)` (issue 50, ``ObjectRefetch``).
    public func setRefetch(_ provider: @escaping @Sendable (_ vaultName: String) -> ObjectRefetch?) {
        refetchProvider.withLock { $0 = provider }
        let vaults = open.withLock { $0 }
        for (name, v) in vaults { v.setRefetch(provider(name)) }
    }

    /// The trust rule a record states.
    func trust(of record: VaultRecord) -> VaultTrust {
        VaultTrust(signers: .pinned(record.signers ?? []), allowUnsigned: record.allowUnsigned, vaultName: record.name,
                   ownKeys: ownKeys(forVault: record.name))
    }

    /// This device's key fingerprint (read once from custody's public facts): commits it signs
    /// were written here, so they are trusted without a pin (``VaultTrust/ownKeys``).
    private let deviceFingerprint = Mutex<String?>(nil)

    func ownKeys(forVault name: String) -> Set<String> {
        if let known = deviceFingerprint.withLock({ $0 }) { return [known] }
        guard let signer, let der = try? signer(name).publicKeyDER() else { return [] }
        let fingerprint = Hex.encode(SHA256.hash(der))
        deviceFingerprint.withLock { $0 = fingerprint }
        return [fingerprint]
    }

    /// Makes this library notice other processes' changes to the registry and to its vaults'
    /// HEAD files through one inotify watch (see ``ChangeWatch``): a bridge read then looks at no
    /// file on disk while nothing changed, instead of `lstat`ing five. For a long-running process:
    /// the daemon calls it once. Without inotify, or on a network file system, nothing changes
    /// (each read compares file stamps, as before).
    public func watchForChanges() {
        let made = changeWatch.withLock { w -> ChangeWatch? in
            guard w == nil, let new = ChangeWatch(folders: [AtomicFile.folder(of: registry.file)]) else { return nil }
            w = new
            return new
        }
        guard let made else { return }
        registry.follow(made)
        for v in open.withLock({ Array($0.values) }) { v.watch(with: made) }
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
    /// one sgit writes: `Commit: N added, N modified, N deleted`. A path under one of the vault's
    /// declared mounts is refused (``refuseWriteUnderMount(name:path:)``): children are read-only.
    @discardableResult
    public func commit(name: String, changes: [(VaultPath, VaultChange)], message: String? = nil) throws(VaultError) -> CommitResult {
        let vault = try vault(named: name)
        for (path, _) in changes { try refuseWriteUnderMount(name: name, path: path.string) }
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
