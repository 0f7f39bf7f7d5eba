internal import SiteKeepCrypto
internal import SiteKeepKeyring
internal import SiteKeepCustody
internal import SiteKeepFIDO2
internal import SiteKeepSystem
public import SiteKeepDaemon

/// One SiteKeep store as the CLI opens it: the daemon target's ``OpenStore`` (home, keyring,
/// custodian, and the daemon's shared registry and vault library when run inside it).
public typealias StoreContext = OpenStore

extension OpenStore {
    /// Opens the store of `inv`'s `--home` with its `--keyring` choice. Inside the daemon this is
    /// the daemon's own open store.
    /// - Parameter creating: true only for `init`; every other command refuses a folder that
    ///   holds no store, and creates nothing there.
    static func open(_ inv: Invocation, configuration: CustodianConfiguration = CustodianConfiguration(),
                     creating: Bool = false) throws -> StoreContext {
        if let hosted = inv.hosted {
            guard hosted.home.path == inv.settings.home else {
                throw CommandFailure("this daemon serves the store in \(hosted.home.path), not \(inv.settings.home)", code: "wrong_store")
            }
            return hosted
        }
        // This command's own process: the security key its environment names (the daemon's
        // custodian uses the daemon's).
        var configuration = configuration
        if configuration.fido2Key == nil, let device = inv.environment[FIDO2Key.environmentVariable], !device.isEmpty {
            configuration.fido2Key = FIDO2Key(path: device)
        }
        return try open(home: inv.settings.home, keyring: KeyringChoice(rawValue: inv.settings.keyring) ?? .auto,
                        configuration: configuration, creating: creating)
    }

    /// Unlocks this process's custodian with the secret the invocation names: `--prf-file`,
    /// `--recovery-file`, else the passphrase (`--passphrase-file` or a prompt).
    ///
    /// Inside the daemon this unlocks the daemon itself (as `gpg-agent` caches a key its client
    /// unlocked): with the secret the command gives, or typed at the client's terminal; with
    /// neither, it fails saying the daemon is locked.
    func unlockOneShot(_ inv: Invocation) throws {
        if custodian.isUnlocked { return }
        guard try custodian.isInitialized() else { throw CustodyError.notInitialized }
        if inv.hosted != nil, !inv.io.canPrompt, !inv.flag("--tpm2"), !inv.flag("--fido2"), !SecretSource.all.contains(where: { inv.option($0.option) != nil }) {
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

/// A store or daemon start-up error, reported with its code and remedy.
extension DaemonError: CodedError {}

/// The unlock secret a command line gives, kept in guarded memory until used.
final class UnlockInput: @unchecked Sendable {
    // @unchecked: used once, on one thread, by the command that read it.
    private var secret: UnlockSecret?
    init(_ secret: consuming UnlockSecret) { self.secret = consume secret }
    func take() -> UnlockSecret { secret.take()! }

    /// The unlock secret of `inv`: `--prf-file`, else `--recovery-file`, else the passphrase
    /// (`--passphrase-file` or a prompt), each read by the one ``SecretReader``.
    static func read(_ inv: Invocation) throws -> UnlockInput {
        if inv.flag("--tpm2") {
            guard !inv.flag("--fido2") else { throw UsageError("give --tpm2 or --fido2, not both", command: inv.spec.commandLine) }
            return UnlockInput(.tpm2(pin: try readPIN(inv, noun: "TPM PIN")))
        }
        if inv.flag("--fido2") {
            let pin = try storeNeedsNoKeyPIN(inv) ? readPIN(inv, noun: "Security key PIN") : readKeyPIN(inv)
            inv.note("Touch the security key when it blinks, to unlock.")
            return UnlockInput(.fido2(pin: pin))
        }
        if inv.option(SecretSource.prf.option) != nil {
            return UnlockInput(.prf(try inv.secret(.prf, prompt: nil)))
        }
        if inv.option(SecretSource.recoveryCode.option) != nil {
            return UnlockInput(.recoveryCode(try inv.secret(.recoveryCode, prompt: nil)))
        }
        return UnlockInput(.passphrase(try inv.secret(.passphrase, prompt: "SiteKeep passphrase: ")))
    }

    /// The PIN of a TPM slot or a security key: from `--pin-file`, typed with `--pin`, else none.
    static func readPIN(_ inv: Invocation, noun: String) throws -> SecretBytes? {
        guard inv.option(SecretSource.pin.option) != nil || inv.flag("--pin") else { return nil }
        return try inv.secret(.pin, prompt: noun + ": ")
    }

    /// Whether every FIDO2 slot of the store was made without the key's PIN (`--no-pin`), so
    /// `--fido2` asks for no PIN even from a key that has one now (what the slots' headers say;
    /// false when they cannot be read, or a slot needs or may need the PIN).
    static func storeNeedsNoKeyPIN(_ inv: Invocation) -> Bool {
        guard let slots = try? StoreContext.open(inv).custodian.listSlots() else { return false }
        let prf = slots.filter { $0.kind == .prf }
        return !prf.isEmpty && prf.allSatisfy { $0.fido2PIN == false }
    }

    /// The security key's PIN: from `--pin-file` or `--pin`; else, on a terminal, typed when the
    /// key says it has one (asked without a touch), as `fido2-assert` and ssh ask; else none.
    static func readKeyPIN(_ inv: Invocation) throws -> SecretBytes? {
        if let given = try readPIN(inv, noun: "Security key PIN") { return given }
        guard inv.io.canPrompt else { return nil }
        // The key this command's custodian will ask: the daemon's when run inside it.
        let environment = inv.hosted == nil ? inv.environment : ProcessEnvironment.current()
        guard let key = try? FIDO2Key.chosen(environment: environment), (try? key.info())?.hasPIN == true else { return nil }
        return try inv.secret(.pin, prompt: "Security key PIN: ")
    }
}

/// Options every command that unlocks for itself accepts.
enum UnlockOptions {
    static let recoveryFile = OptionSpec.option("--recovery-file", value: "PATH",
                                                "unlock with the recovery code read from PATH ('-' for stdin)")
    static let secretInputs: [SecretInputKind] = [.passphrase, .prf, .tpm2, .fido2]
    static let note = "Unlocks for this command only: give --passphrase-file, --prf-file, --recovery-file, --tpm2 or --fido2 (with --pin-file or --pin for a PIN), or type the passphrase when asked."
}

/// The current secret a command that changes who can unlock must give for itself, whether or
/// not a daemon is unlocked (as `cryptsetup luksAddKey` asks for an existing passphrase): from
/// `--prf-file`, `--recovery-file`, `--passphrase-file`, or typed at the prompt. Custody checks
/// it against the slots, under the unlock back-off.
enum CurrentSecret {
    static func read(_ inv: Invocation, prompt: String = "Current SiteKeep passphrase: ") throws -> UnlockInput {
        if inv.option(SecretSource.prf.option) != nil || inv.option(SecretSource.recoveryCode.option) != nil || inv.flag("--tpm2") || inv.flag("--fido2") {
            return try UnlockInput.read(inv)
        }
        guard inv.option(SecretSource.passphrase.option) != nil || inv.io.canPrompt else {
            throw CommandFailure("\(inv.spec.commandLine) changes who can unlock this store, so it needs the current secret, "
                                 + "even with the daemon unlocked; none was given and there is no terminal to ask on",
                                 remedy: "give it for this command: --passphrase-file PATH ('-' for stdin), --prf-file PATH, --recovery-file PATH, --tpm2 or --fido2",
                                 code: "no_secret")
        }
        return UnlockInput(.passphrase(try inv.secret(.passphrase, prompt: prompt)))
    }
}
