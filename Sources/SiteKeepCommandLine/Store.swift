#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepCrypto
public import SiteKeepKeyring
public import SiteKeepCustody

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

    static let markerName = "keyring-backend"

    /// Opens the store of `inv`'s `--home` with its `--keyring` choice.
    public static func open(_ inv: Invocation, configuration: CustodianConfiguration = CustodianConfiguration()) throws -> StoreContext {
        let home = StoreHome(path: inv.settings.home)
        let marker = home.path + "/" + markerName
        let recorded = (try? String(contentsOfFile: marker, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
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
            let data = Data((opened.backend.kind.rawValue + "\n").utf8)
            _ = FileManager.default.createFile(atPath: marker, contents: data, attributes: [.posixPermissions: 0o600])
        }
        return StoreContext(home: home, keyring: opened.backend, keyringReason: opened.reason, custodian: custodian)
    }

    /// Unlocks this process's custodian with the secret the invocation names: `--prf-file`,
    /// `--recovery-file`, else the passphrase (`--passphrase-file` or a prompt).
    public func unlockOneShot(_ inv: Invocation) throws {
        guard try custodian.isInitialized() else { throw CustodyError.notInitialized }
        if custodian.isUnlocked { return }
        try UnlockInput.attempt(inv, isWrong: { ($0 as? CustodyError) == .unlockFailed }) { secret in
            try inv.withProgress("Unlocking") { () throws in
                try custodian.unlock(secret.take())
            }
        }
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
