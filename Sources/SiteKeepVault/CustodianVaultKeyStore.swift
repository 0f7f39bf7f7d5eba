public import SiteKeepCustody
internal import SiteKeepCrypto

/// A ``VaultKeyStore`` backed by custody: each vault's derived sgit keys (read key, and write
/// key when there is one) are wrapped under HKDF(master, "vault:<name>") and kept in the
/// keyring as item `vault-key/<name>`. Storing and fetching need the custodian unlocked;
/// fetching costs one unwrap, never PBKDF2 again.
public final class CustodianVaultKeyStore: VaultKeyStore {
    private let custodian: Custodian
    private let registry: VaultRegistry

    /// Keys for the vaults of `registry`, kept by `custodian`.
    public init(custodian: Custodian, registry: VaultRegistry) {
        self.custodian = custodian
        self.registry = registry
    }

    public func store(_ keys: SgitKeys, forVault name: String) throws(VaultError) {
        do {
            let secret = try keys.exportForWrapping()
            try custodian.storeVaultSecret(vaultID: name, secret: secret)
        } catch let error as CustodyError {
            throw .keysUnavailable(error.description)
        } catch {
            throw .keysUnavailable(String(describing: error))
        }
    }

    /// The custodian's scope: lock wipes every vault opened with these keys.
    public var lockScope: LockScope { custodian.lockScope }

    public func keys(forVault name: String) throws(VaultError) -> SgitKeys {
        let record = try registry.record(named: name)
        // Before the unwrap: keys unwrapped across a lock are born stale (a vault keeps none).
        let generation = custodian.lockScope.generation
        do {
            return try custodian.withVaultSecret(vaultID: name, context: KeyUseContext(op: .vaultOpen)) { (secret: borrowing SecretBytes) throws(CustodyError) -> SgitKeys in
                do {
                    return try SgitKeys.importWrapped(try secret.duplicate(), vaultID: record.vaultID,
                                                      lockScope: custodian.lockScope, since: generation)
                } catch let e as SgitKeyError {
                    throw CustodyError.damagedItem("vault-key/\(name): \(e)")
                } catch {
                    throw CustodyError.damagedItem("vault-key/\(name)")
                }
            }
        } catch {
            throw .keysUnavailable(error.description)
        }
    }

    public func removeKeys(forVault name: String) throws(VaultError) {
        do { _ = try custodian.deleteVaultSecret(vaultID: name) } catch { throw .keysUnavailable(error.description) }
    }

    public func recordTag(for bytes: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try custodian.recordTag(for: bytes, purpose: .vaultRecord) } catch { throw .keysUnavailable(error.description) }
    }

    public func isValidRecordTag(_ tag: [UInt8], for bytes: [UInt8]) throws(VaultError) -> Bool {
        do { return try custodian.isValidRecordTag(tag, for: bytes, purpose: .vaultRecord) } catch { throw .keysUnavailable(error.description) }
    }
}

// The vault's op names in custody's audit log.
extension OpName {
    /// A vault's key opened.
    static let vaultOpen = OpName(known: "vault.open")
    /// A commit signed with the device key.
    static let vaultCommit = OpName(known: "vault.commit")
}
