public import SiteKeepCustody

/// Where the derived keys of registered vaults are kept between uses.
///
/// The CLI backs it with custody (`Custodian`: kind `vault-key`, wrapped under
/// HKDF(master, "vault:<id>") from ``SgitKeys``' package export), so that the PBKDF2 derivation
/// runs only at `vault add`. Implementations hand out ``SgitKeys`` (handles), never key bytes.
public protocol VaultKeyStore: Sendable {
    /// The scope whose clearing wipes the vaults opened with this store's keys (custody's
    /// ``Custodian/lockScope``, which lock clears); the keys it hands out belong to it.
    var lockScope: LockScope { get }
    /// Keeps `keys` for the vault registered as `name`, replacing any earlier ones.
    func store(_ keys: SgitKeys, forVault name: String) throws(VaultError)
    /// The keys of `name`. Throws ``VaultError/unknownVault(name:)`` when none are kept.
    func keys(forVault name: String) throws(VaultError) -> SgitKeys
    /// Forgets the keys of `name` (idempotent).
    func removeKeys(forVault name: String) throws(VaultError)
    /// An authentication tag over a registry record (``VaultRecord/taggedBytes``), under a key
    /// only this store holds (custody: HKDF(master, "record-tag:vault-record")).
    func recordTag(for bytes: [UInt8]) throws(VaultError) -> [UInt8]
    /// Whether `tag` is ``recordTag(for:)`` of `bytes`, compared in constant time.
    func isValidRecordTag(_ tag: [UInt8], for bytes: [UInt8]) throws(VaultError) -> Bool
}
