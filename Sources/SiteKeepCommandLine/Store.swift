#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepCrypto
internal import SiteKeepPartitions
internal import SiteKeepVault
public import SiteKeepKeyring
public import SiteKeepCustody
internal import SiteKeepSystem

/// One SiteKeep store as the CLI opens it: the home folder, the keyring its keys live in, and
/// the custodian over them.
///
/// The keyring backend a store was created with is recorded in the home (`keyring-backend`),
/// so `auto` keeps using it: a Secret Service that appears later does not hide a file
/// keyring's items, and a store made on the Secret Service never falls back to an empty file.
public struct StoreContext: Sendable {
    public let home: StoreHome
    public let keyring: any KeyringBackend
    public let keyringReason: String
    public let custodian: Custodian
    /// The daemon's shared registry and vault library, when this is the store a daemon serves:
    /// every command run inside the daemon then uses the same instances as the bridge.
    var shared: SharedStoreServices?

    static let markerName = "keyring-backend"

    /// The id of the store in `home` (its `store-id` file), or nil when there is no store there.
    /// Reads one small file; opens no keyring.
    static func storeID(home: String) -> String? {
        StoreHome.storeID(at: home)
    }

    /// Whether `home` holds a store made by `init` (a store id and a keyring or audit trail of
    /// its initialisation), as opposed to nothing or the half folder old builds left behind.
    static func exists(home: String) -> Bool {
        guard storeID(home: home) != nil else { return false }
        var st = stat()
        if stat(home + "/keyring-state", &st) == 0 { return true }
        return stat(home + "/audit.log", &st) == 0 && st.st_size > 0
    }

    /// Opens the store of `inv`'s `--home` with its `--keyring` choice. Inside the daemon this is
    /// the daemon's own open store.
    /// - Parameter creating: true only for `init`; every other command refuses a folder that
    ///   holds no store, and creates nothing there.
    public static func open(_ inv: Invocation, configuration: CustodianConfiguration = CustodianConfiguration(),
                            creating: Bool = false) throws -> StoreContext {
        if let hosted = inv.hosted {
            guard hosted.home.path == inv.settings.home else {
                throw CommandFailure("this daemon serves the store in \(hosted.home.path), not \(inv.settings.home)", code: "wrong_store")
            }
            return hosted
        }
        if !creating, !exists(home: inv.settings.home) {
            throw CommandFailure("there is no SiteKeep store in \(inv.settings.home)",
                                 remedy: "create one with 'sitekeep init --home \(inv.settings.home)', or point --home (or SITEKEEP_HOME) at your store",
                                 code: "no_store")
        }
        let home = StoreHome(path: inv.settings.home)
        let marker = home.path + "/" + markerName
        let recorded: String?
        if case .bytes(let bytes)? = try? FileIO.readRegularFile(marker, limit: 4096) {
            recorded = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            recorded = nil
        }
        var choice = KeyringChoice(rawValue: inv.settings.keyring) ?? .auto
        if let recorded, let kind = KeyringKind(rawValue: recorded) {
            switch (choice, kind) {
            case (.auto, .file): choice = .file
            case (.auto, .secretService): choice = .secretService
            case (.file, .secretService), (.secretService, .file):
                throw CommandFailure("this store keeps its keys in the \(kind.rawValue) keyring, not \(choice.rawValue)",
                                     remedy: "pass --keyring \(kind.rawValue) (or leave --keyring at auto)", code: "keyring_mismatch")
            default: break
            }
        }
        let opened: Keyring.Opened
        do {
            opened = try Keyring.open(choice: choice, home: home)
        } catch {
            if recorded == KeyringKind.secretService.rawValue {
                throw CommandFailure("this store keeps its keys in the Secret Service, which is not available: \(error)",
                                     remedy: "start and unlock your Secret Service (gnome-keyring-daemon), then retry", code: "keyring")
            }
            throw error
        }
        let custodian = try Custodian(home: home, keyring: opened.backend, configuration: configuration)
        if recorded == nil {
            // Record the backend the first time the store is opened (creation).
            try? AtomicFile.replace(marker, with: Array((opened.backend.kind.rawValue + "\n").utf8))
        }
        return StoreContext(home: home, keyring: opened.backend, keyringReason: opened.reason, custodian: custodian)
    }

    /// Unlocks this process's custodian with the secret the invocation names: `--prf-file`,
    /// `--recovery-file`, else the passphrase (`--passphrase-file` or a prompt).
    ///
    /// Inside the daemon this unlocks the daemon itself (as `gpg-agent` caches a key its client
    /// unlocked): with the secret the command gives, or typed at the client's terminal; with
    /// neither, it fails saying the daemon is locked.
    public func unlockOneShot(_ inv: Invocation) throws {
        if custodian.isUnlocked { return }
        guard try custodian.isInitialized() else { throw CustodyError.notInitialized }
        if inv.hosted != nil, !inv.io.canPrompt, !SecretSource.all.contains(where: { inv.option($0.option) != nil }) {
            throw CommandFailure("the daemon serving this store is locked",
                                 remedy: "run 'sitekeep unlock' (once; the daemon then keeps the store unlocked until 'sitekeep lock' or its idle lock)",
                                 code: "locked")
        }
        try UnlockInput.attempt(inv, isWrong: { ($0 as? CustodyError) == .unlockFailed }) { secret in
            try inv.withProgress("Unlocking") { () throws in
                try custodian.unlock(secret.take())
            }
        }
    }
}

/// What a daemon shares with the commands it runs: one site registry and one vault library
/// (their caches register with custody's lock scope, so `lock` clears them for everyone).
final class SharedStoreServices: Sendable {
    let registry: SiteRegistry
    let library: VaultLibrary
    init(registry: SiteRegistry, library: VaultLibrary) {
        self.registry = registry
        self.library = library
    }
}

/// The unlock secret a command line gives, kept in guarded memory until used.
final class UnlockInput: @unchecked Sendable {
    // @unchecked: used once, on one thread, by the command that read it.
    private var secret: UnlockSecret?
    init(_ secret: consuming UnlockSecret) { self.secret = consume secret }
    func take() -> UnlockSecret { secret.take()! }

    /// The unlock secret of `inv`: `--prf-file`, else `--recovery-file`, else the passphrase
    /// (`--passphrase-file` or a prompt), each read by the one ``SecretReader``.
    static func read(_ inv: Invocation) throws -> UnlockInput {
        if inv.option(SecretSource.prf.option) != nil {
            return UnlockInput(.prf(try inv.secret(.prf, prompt: nil)))
        }
        if inv.option(SecretSource.recoveryCode.option) != nil {
            return UnlockInput(.recoveryCode(try inv.secret(.recoveryCode, prompt: nil)))
        }
        return UnlockInput(.passphrase(try inv.secret(.passphrase, prompt: "SiteKeep passphrase: ")))
    }
}

/// Options every command that unlocks for itself accepts.
enum UnlockOptions {
    static let recoveryFile = OptionSpec.option("--recovery-file", value: "PATH",
                                                "unlock with the recovery code read from PATH ('-' for stdin)")
    static let secretInputs: [SecretInputKind] = [.passphrase, .prf]
    static let note = "Unlocks for this command only: give --passphrase-file, --prf-file or --recovery-file, or type the passphrase when asked."
}
