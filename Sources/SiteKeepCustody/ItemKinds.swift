import SiteKeepVocabulary

extension Custodian {
    /// Keyring item kinds as the keyring stores them: the spellings of the vocabulary's
    /// ``SiteKeepVocabulary/ItemKind`` cases, as the strings the keyring's API and the signing
    /// code take today. (Once the signing path takes ``SiteKeepVocabulary/ItemKind`` itself,
    /// this becomes a typealias of it.)
    public enum ItemKind {
        /// ``SiteKeepVocabulary/ItemKind/slot``.
        public static let slot = SiteKeepVocabulary.ItemKind.slot.rawValue
        /// ``SiteKeepVocabulary/ItemKind/teamKey``.
        public static let teamKey = SiteKeepVocabulary.ItemKind.teamKey.rawValue
        /// ``SiteKeepVocabulary/ItemKind/deviceKey``.
        public static let deviceKey = SiteKeepVocabulary.ItemKind.deviceKey.rawValue
        /// ``SiteKeepVocabulary/ItemKind/storageKey``.
        public static let storageKey = SiteKeepVocabulary.ItemKind.storageKey.rawValue
        /// ``SiteKeepVocabulary/ItemKind/storageKeyWhenUnlocked``.
        public static let storageKeyWhenUnlocked = SiteKeepVocabulary.ItemKind.storageKeyWhenUnlocked.rawValue
        /// ``SiteKeepVocabulary/ItemKind/vaultKey``.
        public static let vaultKey = SiteKeepVocabulary.ItemKind.vaultKey.rawValue
    }
}
