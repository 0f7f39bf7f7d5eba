/// The kinds of item custody keeps in a keyring; the raw value is the kind as the keyring
/// stores it (part of every item's name, so the spellings never change).
public enum ItemKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// A wrapping slot of the master key (passphrase, recovery, ...).
    case slot = "slot"
    /// A team signing key.
    case teamKey = "team-key"
    /// The device key.
    case deviceKey = "device-key"
    /// A site's storage key.
    case storageKey = "storage-key"
    /// A site's storage key wrapped under the master key (it opens only while SiteKeep is unlocked).
    case storageKeyWhenUnlocked = "storage-key-wu"
    /// A vault's key.
    case vaultKey = "vault-key"
    /// A key the user added through the ssh-agent socket (`ssh-add`), wrapped under the master key.
    case agentKey = "agent-key"

    /// Parses a stored kind.
    /// - Throws: ``VocabularyError/unknownItemKind(_:)``.
    public init(parsing text: String) throws(VocabularyError) {
        guard let kind = ItemKind(rawValue: text) else { throw .unknownItemKind(VocabularyError.kept(text)) }
        self = kind
    }

    /// The stored spelling (``rawValue``).
    public var description: String { rawValue }
}
