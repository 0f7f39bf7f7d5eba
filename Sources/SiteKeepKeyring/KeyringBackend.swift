/// The address of one keyring item: which SiteKeep store it belongs to, what kind of item it
/// is and its id within that kind. These three become the Secret Service attributes (and the
/// file keyring's record key); none of them is secret.
public struct KeyringItemID: Hashable, Sendable, CustomStringConvertible {
    /// The SiteKeep store (one per `SITEKEEP_HOME`), so two stores on one keyring never mix.
    public let store: String
    /// The item kind: `slot`, `team-key`, `device-key`, `storage-key`, `vault-key`, ...
    public let kind: String
    /// The item's id within its kind.
    public let id: String

    /// Creates an item address.
    public init(store: String, kind: String, id: String) {
        self.store = store
        self.kind = kind
        self.id = id
    }

    public var description: String { "\(kind)/\(id)" }
}

/// Where wrapped key blobs are kept.
///
/// A backend stores **opaque wrapped blobs only**: anything that can read the keyring (any
/// process of the same user, once the Secret Service collection is unlocked) gets ciphertext,
/// never a usable key. Implementations must be safe to call from several threads.
public protocol KeyringBackend: Sendable {
    /// `secret-service` or `file`.
    var kind: KeyringKind { get }
    /// A one-line description for `sitekeep doctor` (where the items live).
    var location: String { get }
    /// Stores (or replaces) the blob for `item`, atomically.
    func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError)
    /// Loads the blob for `item`.
    /// - Throws: ``KeyringError/itemMissing(_:)`` when there is none.
    func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8]
    /// Deletes `item`; returns whether it existed.
    @discardableResult
    func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool
    /// Lists the items of `store`, optionally only those of one kind.
    func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID]
    /// Loads every item of `store` (of one kind, if given) in as few round trips as the backend
    /// allows; items that vanish between listing and loading are left out.
    func loadAll(store: String, kind: String?) throws(KeyringError) -> [(id: KeyringItemID, blob: [UInt8])]
}

extension KeyringBackend {
    /// The default: list, then load each item.
    public func loadAll(store: String, kind: String?) throws(KeyringError) -> [(id: KeyringItemID, blob: [UInt8])] {
        var out: [(id: KeyringItemID, blob: [UInt8])] = []
        for id in try list(store: store, kind: kind) {
            do { out.append((id, try load(id))) } catch .itemMissing { continue }
        }
        return out
    }
}

/// The backends SiteKeep knows.
public enum KeyringKind: String, Sendable, CaseIterable {
    /// The freedesktop Secret Service (gnome-keyring, KWallet, KeePassXC) through libsecret.
    case secretService = "secret-service"
    /// An encrypted file under the store's home, the embedded default.
    case file
}

/// The `--keyring` choice.
public enum KeyringChoice: String, Sendable, CaseIterable {
    /// The Secret Service when one answers on the session bus, else the file keyring.
    case auto
    /// The Secret Service or an error.
    case secretService = "secret-service"
    /// The file keyring.
    case file
}

/// What can go wrong in a keyring. Messages name the fix and never contain blob bytes.
public enum KeyringError: Error, Sendable, Equatable {
    /// No Secret Service answers on the session bus.
    case noSecretService(String)
    /// The Secret Service collection is locked and no prompt could unlock it.
    case collectionLocked
    /// No item with this address.
    case itemMissing(KeyringItemID)
    /// The Secret Service did not answer within the time limit.
    case timeout(seconds: Double)
    /// A file-system failure of the file keyring.
    case io(String)
    /// The file keyring's file is damaged or not a SiteKeep keyring.
    case corrupt(String)
    /// Folder or file permissions are looser than SiteKeep requires.
    case insecurePermissions(String)
    /// Any other backend failure.
    case backend(String)
}

extension KeyringError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .noSecretService(let why):
            "no Secret Service on the session bus (\(why)); start gnome-keyring-daemon or KeePassXC, or use --keyring file"
        case .collectionLocked:
            "the Secret Service collection is locked; unlock your login keyring (for example by logging in to the desktop) and try again"
        case .itemMissing(let item):
            "no keyring item \(item); run 'sitekeep init' first, or check --home and --keyring"
        case .timeout(let seconds):
            "the Secret Service did not answer within \(seconds) s; is a prompt waiting on another screen? Or use --keyring file"
        case .io(let what):
            "keyring file error: \(what)"
        case .corrupt(let what):
            "the keyring file is damaged: \(what); restore it from a backup or re-create the store from your recovery code"
        case .insecurePermissions(let what):
            "refusing an insecure keyring: \(what)"
        case .backend(let what):
            "keyring error: \(what)"
        }
    }
}
