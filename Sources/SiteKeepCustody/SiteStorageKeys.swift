/// Apple-style data-protection classes for a site's partition.
public enum ProtectionClass: String, Sendable, CaseIterable {
    /// The site's storage key lives in the keyring and is usable once the user's keyring is
    /// open (after login), without unlocking SiteKeep. On the file keyring this means only file
    /// permissions protect it at rest; `sitekeep doctor` says so.
    case afterLogin = "after-login"
    /// The site's storage key is wrapped under a key derived from the master key
    /// (HKDF "site:<id>") and is usable only while SiteKeep is unlocked.
    case whenUnlocked = "when-unlocked"
}

/// Where partitions get their storage keys. Custody implements it; a partition never sees
/// key bytes, only a ``SymmetricKeyHandle``.
///
/// Every site has one random 32-byte storage key kept (wrapped, for `whenUnlocked`) in the
/// keyring. Destroying that item is crypto-shredding: the partition's files become unreadable
/// noise even if a copy of them survives.
public protocol SiteStorageKeyProvider: Sendable {
    /// The site's storage key, created on first use.
    /// - Throws: a custody error when the class needs an unlock that has not happened
    ///   (`whenUnlocked` while locked) or the keyring fails.
    func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle

    /// Destroys the site's storage key (crypto-shredding). Idempotent.
    func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws
}
