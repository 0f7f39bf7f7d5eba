#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import Foundation
public import SiteKeepCustody
public import SiteKeepKeyring
public import SiteKeepPartitions
public import SiteKeepVault
import SiteKeepSystem

/// One SiteKeep store, opened: the home folder, the keyring its keys live in, and the custodian
/// over them. The command line opens one per command; a ``Daemon`` opens one for its lifetime.
///
/// The keyring backend a store was created with is recorded in the home (`keyring-backend`),
/// so `auto` keeps using it: a Secret Service that appears later does not hide a file
/// keyring's items, and a store made on the Secret Service never falls back to an empty file.
public struct OpenStore: Sendable {
    public let home: StoreHome
    public let keyring: any KeyringBackend
    /// Why this keyring was chosen (for `doctor` and `status`).
    public let keyringReason: String
    public let custodian: Custodian
    /// The daemon's shared registry and vault library, when this is the store a daemon serves:
    /// every command run inside the daemon then uses the same instances as the bridge.
    public var shared: SharedStoreServices?

    public init(home: StoreHome, keyring: any KeyringBackend, keyringReason: String, custodian: Custodian,
                shared: SharedStoreServices? = nil) {
        self.home = home
        self.keyring = keyring
        self.keyringReason = keyringReason
        self.custodian = custodian
        self.shared = shared
    }

    /// The id of the store in `home` (its `store-id` file), or nil when there is no store there.
    /// Reads one small file; opens no keyring.
    public static func storeID(home: String) -> String? {
        StoreHome.storeID(at: home)
    }

    /// Whether `home` holds a store made by `init` (``StoreOpening/exists(home:)``).
    public static func exists(home: String) -> Bool {
        StoreOpening.exists(home: home)
    }

    /// Opens the store in `home` with the keyring `choice` (`auto` follows what the store
    /// recorded): ``StoreOpening/open(home:keyring:configuration:creating:)``.
    /// - Parameter creating: true only to create a store; otherwise a folder that holds no
    ///   store is refused and nothing is created there.
    /// - Throws: ``DaemonError`` (`no_store`, `keyring_mismatch`, `keyring`), or the keyring's or
    ///   custody's error.
    public static func open(home path: String, keyring choice: KeyringChoice = .auto,
                            configuration: CustodianConfiguration = CustodianConfiguration(), creating: Bool = false) throws -> OpenStore {
        let opened: StoreOpening.Opened
        do {
            opened = try StoreOpening.open(home: path, keyring: choice, configuration: configuration, creating: creating)
        } catch let e as StoreOpenError {
            throw DaemonError(e.problem, remedy: e.remedy, code: e.code)
        }
        return OpenStore(home: opened.home, keyring: opened.keyring, keyringReason: opened.keyringReason, custodian: opened.custodian)
    }

    /// The store's site registry: the daemon's shared one when there is one, else a new one.
    public func registry() throws -> SiteRegistry {
        if let shared { return shared.registry }
        return try SiteRegistry(home: URL(fileURLWithPath: home.path), keys: custodian)
    }

    /// The store's vault library (keys through custody, commits signed by the device key): the
    /// daemon's shared one when there is one, else a new one.
    public func vaultLibrary() -> VaultLibrary {
        if let shared { return shared.library }
        let registry = VaultRegistry(file: home.path + "/vaults.json")
        let custodian = self.custodian
        return VaultLibrary(registry: registry, keyStore: CustodianVaultKeyStore(custodian: custodian, registry: registry),
                            signer: { DeviceCommitSigner(custodian: custodian, vaultName: $0) })
    }
}
