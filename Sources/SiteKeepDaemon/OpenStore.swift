#if canImport(Glibc)
@preconcurrency import Glibc
#endif
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

    static let markerName = "keyring-backend"

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

    /// Whether `home` holds a store made by `init` (a store id and a keyring or audit trail of
    /// its initialisation), as opposed to nothing or the half folder old builds left behind.
    public static func exists(home: String) -> Bool {
        guard storeID(home: home) != nil else { return false }
        var st = stat()
        if stat(home + "/keyring-state", &st) == 0 { return true }
        return stat(home + "/audit.log", &st) == 0 && st.st_size > 0
    }

    /// Opens the store in `home` with the keyring `choice` (`auto` follows what the store recorded).
    /// - Parameter creating: true only to create a store; otherwise a folder that holds no
    ///   store is refused and nothing is created there.
    /// - Throws: ``DaemonError`` (`no_store`, `keyring_mismatch`, `keyring`), or the keyring's or
    ///   custody's error.
    public static func open(home path: String, keyring choice: KeyringChoice = .auto,
                            configuration: CustodianConfiguration = CustodianConfiguration(), creating: Bool = false) throws -> OpenStore {
        if !creating, !exists(home: path) {
            throw DaemonError("there is no SiteKeep store in \(path)",
                              remedy: "create one with 'sitekeep init --home \(path)', or point --home (or SITEKEEP_HOME) at your store",
                              code: "no_store")
        }
        let home = StoreHome(path: path)
        let marker = home.path + "/" + markerName
        let recorded: String?
        if case .bytes(let bytes)? = try? FileIO.readRegularFile(marker, limit: 4096) {
            recorded = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            recorded = nil
        }
        var choice = choice
        if let recorded, let kind = KeyringKind(rawValue: recorded) {
            switch (choice, kind) {
            case (.auto, .file): choice = .file
            case (.auto, .secretService): choice = .secretService
            case (.file, .secretService), (.secretService, .file):
                throw DaemonError("this store keeps its keys in the \(kind.rawValue) keyring, not \(choice.rawValue)",
                                  remedy: "pass --keyring \(kind.rawValue) (or leave --keyring at auto)", code: "keyring_mismatch")
            default: break
            }
        }
        let opened: Keyring.Opened
        do {
            opened = try Keyring.open(choice: choice, home: home)
        } catch {
            if recorded == KeyringKind.secretService.rawValue {
                throw DaemonError("this store keeps its keys in the Secret Service, which is not available: \(error)",
                                  remedy: "start and unlock your Secret Service (gnome-keyring-daemon), then retry", code: "keyring")
            }
            throw error
        }
        let custodian = try Custodian(home: home, keyring: opened.backend, configuration: configuration)
        if recorded == nil {
            // Record the backend the first time the store is opened (creation).
            try? AtomicFile.replace(marker, with: Array((opened.backend.kind.rawValue + "\n").utf8))
        }
        return OpenStore(home: home, keyring: opened.backend, keyringReason: opened.reason, custodian: custodian)
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
