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
        // The TPM and the security key the store's settings name (`config set tpm-tcti|fido2-device`).
        let home = inv.settings.home
        configuration.deviceSettings = { DaemonSettings.devices(home: home) }
        return try open(home: inv.settings.home, keyring: KeyringChoice(rawValue: inv.settings.keyring) ?? .auto,
                        configuration: configuration, creating: creating)
    }

    /// Unlocks this process's custodian with the secret the invocation names: `--prf-file`,
    /// `--recovery-file`, else the passphrase (`--passphrase-file` or a prompt).
    ///
    /// Inside the daemon this unlocks the daemon itself (as `gpg-agent` caches a key its client
    /// unlocked): with the secret the command gives, or typed at the client's terminal; with
    /// neither, it fails saying the daemon is locked.
    /// - Returns: The unlock, as the approval of this command's uses
    ///   (``PresenceApproval/init(secretGiven:)``); nil when the custodian was unlocked already.
    @discardableResult
    func unlockOneShot(_ inv: Invocation) throws -> GivenSecret? {
        if custodian.isUnlocked { return nil }
        guard try custodian.isInitialized() else { throw CustodyError.notInitialized }
        if inv.hosted != nil, !inv.io.canPrompt, !UnlockKinds.given(inv), !SecretSource.all.contains(where: { inv.option($0.option) != nil }) {
            throw CommandFailure("the daemon serving this store is locked",
                                 remedy: "run 'sitekeep unlock' (once; the daemon then keeps the store unlocked until 'sitekeep lock' or its idle lock)",
                                 code: "locked")
        }
        var unlocked: GivenSecret?
        try UnlockInput.attempt(inv, isWrong: { ($0 as? CustodyError) == .unlockFailed }) { secret in
            unlocked = try inv.withProgress("Unlocking") { () throws in
                try custodian.unlock(secret.take())
            }
        }
        return unlocked
    }
}

/// Checks that a device unlock (the slot kind's name: `fido2`, `tpm2`) can be tried, where the
/// device will be asked; throws what is missing and what to do.
typealias DeviceCheck = (String) throws -> Void

/// A store or daemon start-up error, reported with its code and remedy.
extension DaemonError: CodedError {}

/// The unlock secret a command line gives, kept in guarded memory until used.
final class UnlockInput: @unchecked Sendable {
    // @unchecked: used once, on one thread, by the command that read it.
    private var secret: UnlockSecret?
    init(_ secret: consuming UnlockSecret) { self.secret = consume secret }
    func take() -> UnlockSecret { secret.take()! }

    /// The unlock secret of `inv`, as the slot kinds (``UnlockKinds``) name their inputs: a
    /// device's flag (`--tpm2`, `--fido2`) with its PIN when one is asked; else the first kind
    /// whose secret option is given (`--prf-file`, `--recovery-file`); else the default kind's
    /// (the passphrase: `--passphrase-file` or a prompt), each read by the one ``SecretReader``.
    ///
    /// A device's slot and the device itself are checked before its PIN is asked or the user
    /// is told to touch it, by the process that will ask the device: `deviceCheck` (a running
    /// daemon's answer), else this command's store (the daemon's own inside it).
    static func read(_ inv: Invocation, deviceCheck: DeviceCheck? = nil) throws -> UnlockInput {
        let kinds = UnlockKinds.kinds.all
        // Each kind's input is bound before it is matched (Swift 6.3's SILGen crashes on a
        // pattern matched straight off an existential metatype's property).
        let devices = kinds.filter { kind in
            let input = kind.unlockInput
            guard case .device(let flag, _, _, _) = input else { return false }
            return inv.flag(flag)
        }
        if devices.count > 1 {
            // Named as they always were: the later kind first ("--tpm2 or --fido2").
            let flags = devices.reversed().map { kind in kind.unlockInput.trigger }
            throw UsageError("give \(flags.joined(separator: " or ")), not both", command: inv.spec.commandLine)
        }
        if let device = devices.first {
            let input = device.unlockInput
            if case .device(_, let pinPrompt, let request, let note) = input {
                if let deviceCheck { try deviceCheck(device.name) }
                else { try StoreContext.open(inv).custodian.checkUnlockDevice(method: device.name) }
                let pin: SecretBytes?
                switch request {
                case .whenGiven: pin = try readPIN(inv, prompt: pinPrompt)
                case .whenTheDeviceHasOne:
                    pin = try storeNeedsNoKeyPIN(inv, kind: device.stored) ? readPIN(inv, prompt: pinPrompt) : readKeyPIN(inv, prompt: pinPrompt)
                }
                if let note { inv.note(note) }
                return UnlockInput(UnlockSecret(device, secret: pin))
            }
        }
        for kind in kinds {
            let input = kind.unlockInput
            if case .secret(let option, nil) = input, inv.option(option) != nil {
                return UnlockInput(UnlockSecret(kind, secret: try inv.secret(UnlockKinds.source(option), prompt: nil)))
            }
        }
        let (kind, source, prompt) = try UnlockKinds.promptedKind()
        return UnlockInput(UnlockSecret(kind, secret: try inv.secret(source, prompt: prompt)))
    }

    /// The PIN of a TPM slot or a security key: from `--pin-file`, typed with `--pin`, else none.
    static func readPIN(_ inv: Invocation, prompt: String) throws -> SecretBytes? {
        guard inv.option(SecretSource.pin.option) != nil || inv.flag("--pin") else { return nil }
        return try inv.secret(.pin, prompt: prompt)
    }

    /// Whether every FIDO2 slot (of `kind`) of the store was made without the key's PIN
    /// (`--no-pin`), so `--fido2` asks for no PIN even from a key that has one now (what the
    /// slots' headers say; false when they cannot be read, or a slot needs or may need the PIN).
    static func storeNeedsNoKeyPIN(_ inv: Invocation, kind: StoredSlotKind) -> Bool {
        guard let slots = try? StoreContext.open(inv).custodian.listSlots() else { return false }
        let prf = slots.filter { $0.kind == kind }
        return !prf.isEmpty && prf.allSatisfy { $0.fido2PIN == false }
    }

    /// The security key's PIN: from `--pin-file` or `--pin`; else, on a terminal, typed when the
    /// key says it has one (asked without a touch), as `fido2-assert` and ssh ask; else none.
    static func readKeyPIN(_ inv: Invocation, prompt: String = "Security key PIN: ") throws -> SecretBytes? {
        if let given = try readPIN(inv, prompt: prompt) { return given }
        guard inv.io.canPrompt else { return nil }
        // The key this command's custodian will ask: the daemon's when run inside it.
        let environment = inv.hosted == nil ? inv.environment : ProcessEnvironment.current()
        guard let key = try? FIDO2Key.chosen(environment: environment), (try? key.info())?.hasPIN == true else { return nil }
        return try inv.secret(.pin, prompt: prompt)
    }
}

/// The command line's view of the slot kinds (``SlotKinds/standard``): the option or flag
/// that picks each kind's unlock input, and the secret reader for each option.
enum UnlockKinds {
    static var kinds: SlotKinds { .standard }

    /// The reader's description of a kind's secret option (`--prf-file`).
    static func source(_ option: String) throws -> SecretSource {
        guard let source = SecretSource.all.first(where: { $0.option == option }) else {
            throw CommandFailure("the command line cannot read '\(option)'", code: "internal")
        }
        return source
    }

    /// The secret options of the kinds that read a secret, in the registry's order.
    static var secretSources: [SecretSource] {
        kinds.all.compactMap { kind in
            let input = kind.unlockInput
            guard case .secret(let option, _) = input else { return nil }
            return SecretSource.all.first { $0.option == option }
        }
    }

    /// Whether `inv` names any kind's unlock input (a secret option or a device flag), leaving
    /// out `besides`'s.
    static func given(_ inv: Invocation, besides: (any SlotKind.Type)? = nil) -> Bool {
        kinds.all.contains { kind in
            if let besides, kind.name == besides.name { return false }
            let input = kind.unlockInput
            switch input {
            case .secret(let option, _): return inv.option(option) != nil
            case .device(let flag, _, _, _): return inv.flag(flag)
            }
        }
    }

    /// The kind asked at the prompt when the command line names none (the passphrase).
    static func promptedKind() throws -> (any SlotKind.Type, SecretSource, String) {
        for kind in kinds.all {
            let input = kind.unlockInput
            if case .secret(let option, let prompt?) = input { return (kind, try source(option), prompt) }
        }
        throw CommandFailure("no slot kind can be typed at a prompt", code: "internal")
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
        let (kind, source, _) = try UnlockKinds.promptedKind()
        if UnlockKinds.given(inv, besides: kind) {
            return try UnlockInput.read(inv)
        }
        guard inv.option(source.option) != nil || inv.io.canPrompt else {
            throw CommandFailure("\(inv.spec.commandLine) changes who can unlock this store, so it needs the current secret, "
                                 + "even with the daemon unlocked; none was given and there is no terminal to ask on",
                                 remedy: "give it for this command: --passphrase-file PATH ('-' for stdin), --prf-file PATH, --recovery-file PATH, --tpm2 or --fido2",
                                 code: "no_secret")
        }
        return UnlockInput(UnlockSecret(kind, secret: try inv.secret(source, prompt: prompt)))
    }
}
