import SiteKeepNames

extension Custodian {
    /// Keyring item kinds as the keyring stores them: the spellings of the vocabulary's
    /// ``SiteKeepNames/ItemKind`` cases, as the strings the keyring's API takes (its `list`
    /// and `loadAll` filter by them; the keyring reads kinds back from disk as text). Custody's
    /// own key and item code takes ``SiteKeepNames/ItemKind`` itself.
    public enum ItemKind {
        /// ``SiteKeepNames/ItemKind/slot``.
        public static let slot = SiteKeepNames.ItemKind.slot.rawValue
        /// ``SiteKeepNames/ItemKind/teamKey``.
        public static let teamKey = SiteKeepNames.ItemKind.teamKey.rawValue
        /// ``SiteKeepNames/ItemKind/deviceKey``.
        public static let deviceKey = SiteKeepNames.ItemKind.deviceKey.rawValue
        /// ``SiteKeepNames/ItemKind/storageKey``.
        public static let storageKey = SiteKeepNames.ItemKind.storageKey.rawValue
        /// ``SiteKeepNames/ItemKind/storageKeyWhenUnlocked``.
        public static let storageKeyWhenUnlocked = SiteKeepNames.ItemKind.storageKeyWhenUnlocked.rawValue
        /// ``SiteKeepNames/ItemKind/vaultKey``.
        public static let vaultKey = SiteKeepNames.ItemKind.vaultKey.rawValue
        /// ``SiteKeepNames/ItemKind/agentKey``.
        public static let agentKey = SiteKeepNames.ItemKind.agentKey.rawValue
    }
}
