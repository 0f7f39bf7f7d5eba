import SiteKeepNames
public import SiteKeepCrypto
import SiteKeepKeyring

extension Custodian: SiteStorageKeyProvider {
    static func siteKeyAD(store: String, site: String) -> [UInt8] { Array("sitekeep.site-key.v1\0\(store)\0\(site)".utf8) }
    static func vaultKeyAD(store: String, vault: String) -> [UInt8] { Array("sitekeep.vault-key.v1\0\(store)\0\(vault)".utf8) }

    /// The site's storage key, created on first use.
    ///
    /// `afterLogin`: a random 32-byte key kept as keyring item `storage-key/<site>` (protected by
    /// the keyring, usable while SiteKeep is locked). `whenUnlocked`: a random 32-byte key kept
    /// wrapped under HKDF(master, "site:<id>") as `storage-key-wu/<site>`; needs SiteKeep unlocked.
    /// `siteID` is a ``SiteID``'s lower-case form (the registry's); the use is logged for that
    /// site (``KeyUseClient/site(_:)``). Anything else is ``CustodyError/invalidArgument(_:)``.
    public func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        try typedStorageKey(forSite: siteID, protection: protection)
    }

    /// ``storageKey(forSite:protection:)`` with its error type.
    public func typedStorageKey(forSite siteID: String, protection: ProtectionClass) throws(CustodyError) -> SymmetricKeyHandle {
        let context = KeyUseContext(client: .site(try Self.siteID(siteID)), op: .storageKey)
        switch protection {
        case .afterLogin:
            let id = item(.storageKey, siteID)
            var bytes: [UInt8]
            do {
                bytes = try keyring.load(id)
            } catch .itemMissing {
                bytes = SecureRandom.bytes(count: 32)
                do { try keyring.store(bytes, for: id, label: "SiteKeep storage key (after login)") } catch {
                    SecureMemory.zero(&bytes)
                    throw .keyring(error)
                }
            } catch { throw .keyring(error) }
            guard bytes.count == 32 else { SecureMemory.zero(&bytes); throw .damagedItem("storage-key/\(siteID) is not 32 bytes") }
            let handle = try cr { () throws(CryptoError) in try SymmetricKeyHandle(taking: SecretBytes(consumingAndZeroing: &bytes)) }
            try log(context, key: "storage-key/\(siteID)", result: "ok")
            return handle
        case .whenUnlocked:
            let handle: SymmetricKeyHandle
            do {
                let secret = try wrappedSecret(kind: .storageKeyWhenUnlocked, id: siteID, info: "site:\(siteID)",
                                               ad: Self.siteKeyAD(store: storeID, site: siteID), createIfMissing: 32)
                handle = try Self.handle(taking: secret)
            } catch let e {
                logQuietly(context, key: "storage-key-wu/\(siteID)", result: Self.resultWord(e))
                throw e
            }
            try log(context, key: "storage-key-wu/\(siteID)", result: "ok")
            return handle
        }
    }

    /// Destroys the site's storage key (crypto-shredding). Idempotent.
    public func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        let site = try Self.siteID(siteID)
        let kind: SiteKeepNames.ItemKind = protection == .afterLogin ? .storageKey : .storageKeyWhenUnlocked
        try kr { () throws(KeyringError) in _ = try keyring.delete(item(kind, siteID)) }
        try log(KeyUseContext(client: .site(site), op: .storageKeyDestroy), key: "\(kind)/\(siteID)", result: "ok")
    }

    /// `text` parsed as a site id, which must already be in its canonical (lower-case) form: the
    /// keyring item and the audit line name the site by exactly these bytes.
    /// - Throws: ``CustodyError/invalidArgument(_:)``.
    static func siteID(_ text: String) throws(CustodyError) -> SiteID {
        guard let id = try? SiteID(parsing: text), id.string == text else {
            throw .invalidArgument("site id must be a site identifier in lower case (a UUID)")
        }
        return id
    }

    /// Loads (or creates with `createIfMissing` random bytes) a secret wrapped under
    /// HKDF(master, info).
    func wrappedSecret(kind: SiteKeepNames.ItemKind, id: String, info: String, ad: [UInt8], createIfMissing: Int?) throws(CustodyError) -> SecretBytes {
        let master = try currentMaster()
        let wrapKey = try derive(master, info: info)
        let itemID = item(kind, id)
        do {
            let blob = try keyring.load(itemID)
            do { return try wrapKey.unwrap(blob, authenticating: ad) } catch {
                throw CustodyError.damagedItem("\(kind)/\(id) does not unwrap under this store's master key")
            }
        } catch KeyringError.itemMissing(_) where createIfMissing != nil {
            let fresh = try cr { () throws(CryptoError) in try SecretBytes(randomCount: createIfMissing ?? 32) }
            let wrapped = try cr { () throws(CryptoError) in try wrapKey.wrap(fresh, authenticating: ad) }
            try kr { () throws(KeyringError) in try keyring.store(wrapped, for: itemID, label: "SiteKeep \(kind) \(id)") }
            return fresh
        } catch KeyringError.itemMissing(_) {
            throw .keyNotFound("\(kind)/\(id)")
        } catch let e as KeyringError {
            throw .keyring(e)
        } catch let e as CustodyError {
            throw e
        } catch {
            throw .damagedItem("\(kind)/\(id)")
        }
    }

    static func handle(taking secret: consuming SecretBytes) throws(CustodyError) -> SymmetricKeyHandle {
        do { return try SymmetricKeyHandle(taking: secret) } catch { throw .crypto(error) }
    }

    // MARK: - Vault secrets

    /// Stores a vault's secret (an sgit read/write key, 1-4096 bytes) wrapped under
    /// HKDF(master, "vault:<id>") as keyring item `vault-key/<vaultID>`, replacing any earlier one.
    public func storeVaultSecret(vaultID: String, secret: borrowing SecretBytes) throws(CustodyError) {
        try Self.validateItemName(vaultID, what: "vault")
        guard (1...4096).contains(secret.count) else { throw .invalidArgument("a vault secret is 1-4096 bytes") }
        let master = try currentMaster()
        let wrapKey = try derive(master, info: "vault:\(vaultID)")
        let wrapped = try cr { () throws(CryptoError) in try wrapKey.wrap(secret, authenticating: Self.vaultKeyAD(store: storeID, vault: vaultID)) }
        try kr { () throws(KeyringError) in try keyring.store(wrapped, for: item(.vaultKey, vaultID), label: "SiteKeep vault key \(vaultID)") }
        try log(KeyUseContext(op: .vaultKeyStore), key: "vault-key/\(vaultID)", result: "ok")
    }

    /// A 32-byte vault key as a handle (seal/open/AES-GCM/HMAC/derive without the bytes).
    /// - Throws: ``CustodyError/keyNotFound(_:)``, ``CustodyError/locked``, or
    ///   ``CustodyError/invalidArgument(_:)`` when the stored secret is not 32 bytes (use
    ///   ``withVaultSecret(vaultID:_:)``).
    public func vaultKey(vaultID: String, context: KeyUseContext = KeyUseContext(op: .vaultKey)) throws(CustodyError) -> SymmetricKeyHandle {
        try withVaultSecret(vaultID: vaultID, context: context) { (secret: borrowing SecretBytes) throws(CustodyError) -> SymmetricKeyHandle in
            guard secret.count == 32 else { throw .invalidArgument("vault secret \(vaultID) is \(secret.count) bytes, not a 32-byte key") }
            return try cr { () throws(CryptoError) in try SymmetricKeyHandle(taking: secret.duplicate()) }
        }
    }

    /// Runs `body` with a vault's secret in guarded memory (SiteKeep's own modules only, for
    /// derivations such as sgit's PBKDF2 that need the bytes). Logged as a key use.
    package func withVaultSecret<R>(vaultID: String, context: KeyUseContext = KeyUseContext(op: .vaultKey),
                                    _ body: (borrowing SecretBytes) throws(CustodyError) -> R) throws(CustodyError) -> R {
        try Self.validateItemName(vaultID, what: "vault")
        let secret: SecretBytes
        do {
            secret = try wrappedSecret(kind: .vaultKey, id: vaultID, info: "vault:\(vaultID)",
                                       ad: Self.vaultKeyAD(store: storeID, vault: vaultID), createIfMissing: nil)
        } catch {
            logQuietly(context, key: "vault-key/\(vaultID)", result: Self.resultWord(error))
            throw error
        }
        let result = try body(secret)
        try log(context, key: "vault-key/\(vaultID)", result: "ok")
        return result
    }

    /// Deletes a vault's stored secret; returns whether there was one.
    @discardableResult
    public func deleteVaultSecret(vaultID: String) throws(CustodyError) -> Bool {
        try Self.validateItemName(vaultID, what: "vault")
        let existed = try kr { () throws(KeyringError) in try keyring.delete(item(.vaultKey, vaultID)) }
        try log(KeyUseContext(op: .vaultKeyDelete), key: "vault-key/\(vaultID)", result: existed ? "ok" : "absent")
        return existed
    }

    /// The ids of the vaults with a stored secret.
    public func vaultSecretIDs() throws(CustodyError) -> [String] {
        try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.vaultKey) }.map(\.id).sorted()
    }
}
