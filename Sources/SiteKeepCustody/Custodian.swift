#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Dispatch
import Synchronization
public import SiteKeepCrypto
public import SiteKeepKeyring
public import SiteKeepSystem
import SiteKeepNames
public import SiteKeepTPM
public import SiteKeepFIDO2

/// Settings of a ``Custodian``.
public struct CustodianConfiguration: Sendable {
    /// Idle time after which the custodian locks itself (default 15 minutes).
    public var idleLifetime: Duration
    /// The presence-proof lifetime the custodian accepts (at most 60 s; clamped).
    public var presenceLifetime: Duration
    /// The audit log's fsync grouping interval.
    public var auditSyncInterval: Duration
    /// The longest the audit log's durable head waits to be anchored in the keyring (default
    /// 1 s): lines written since the last anchor can be cut from the log unnoticed.
    public var auditAnchorInterval: Duration
    /// Whether a timer locks after the idle lifetime even when nothing calls (default true;
    /// the idle check also runs on every use).
    public var autoLockTimer: Bool
    /// The monotonic clock for idle time and presence (tests inject one).
    public var bootClock: BootClock
    /// Wall-clock seconds since the epoch, for the persisted back-off (tests inject one).
    public var wallClockSeconds: @Sendable () -> Int64
    /// Where TPM 2.0 slots reach the TPM; nil: `SITEKEEP_TPM_TCTI`, else the stored `tpm-tcti`
    /// setting (``deviceSettings``), else `device:/dev/tpmrm0` (``Custodian/tpmConnection``,
    /// at each use).
    public var tpmConnection: TPMConnection? = nil
    /// The FIDO2 security key for `--fido2` slots and keys that need a touch; nil: the stored
    /// `fido2-device` setting (``deviceSettings``), else the one `SITEKEEP_FIDO2_DEVICE` names,
    /// else the one plugged in (``FIDO2Key/chosen(environment:)``, at each use).
    public var fido2Key: FIDO2Key? = nil
    /// The device settings the store keeps (`config set tpm-tcti|fido2-device`), read at each
    /// use so a change applies at once; a value applies only with its tag (``TaggedDeviceSetting``).
    public var deviceSettings: @Sendable () -> DeviceSettings = { DeviceSettings() }
    /// Told, just before custody waits for a touch that approves a use, what the touch is for
    /// (the daemon writes it to its log, so a user whose key blinks can read what asked).
    public var touchNotice: (@Sendable (TouchNotice) -> Void)? = nil
    /// The slot kinds this custodian knows (``SlotKinds/standard``; a test adds its own with
    /// ``SlotKinds/init(adding:)``): a slot of another kind lists as damaged and opens nothing.
    public var slotKinds: SlotKinds = .standard

    /// Settings; `presenceLifetime` is clamped to ``PresenceProof/maximumLifetime``.
    public init(idleLifetime: Duration = .seconds(15 * 60),
                presenceLifetime: Duration = PresenceProof.maximumLifetime,
                auditSyncInterval: Duration = .milliseconds(50),
                auditAnchorInterval: Duration = .seconds(1),
                autoLockTimer: Bool = true,
                bootClock: BootClock = .system,
                wallClockSeconds: @escaping @Sendable () -> Int64 = { AuditLog.wallClockMs() / 1000 }) {
        self.idleLifetime = idleLifetime
        self.presenceLifetime = min(presenceLifetime, PresenceProof.maximumLifetime)
        self.auditSyncInterval = auditSyncInterval
        self.auditAnchorInterval = auditAnchorInterval
        self.autoLockTimer = autoLockTimer
        self.bootClock = bootClock
        self.wallClockSeconds = wallClockSeconds
    }
}

/// What `sitekeep status` shows.
public struct CustodianStatus: Sendable, Equatable {
    /// Whether the store has at least one slot.
    public let initialized: Bool
    /// Whether the master key is in memory.
    public let unlocked: Bool
    /// The store id.
    public let storeID: String
    /// The home folder.
    public let home: String
    /// `secret-service` or `file`.
    public let keyringKind: KeyringKind
    /// Where the keyring items are.
    public let keyringLocation: String
    /// Number of unlock slots.
    public let slotCount: Int
    /// Seconds until auto-lock, when unlocked.
    public let secondsUntilAutoLock: Int?
    /// Seconds before the next unlock attempt is allowed.
    public let unlockBackoffSeconds: Int
}

/// What ``Custodian/initialize(passphrase:parameters:withRecoveryCode:)`` created.
public struct InitializationResult: Sendable {
    /// The passphrase slot.
    public let passphraseSlot: SlotInfo
    /// The recovery slot, when one was asked for.
    public let recoverySlot: SlotInfo?
    /// The recovery code: show it to the user once; it is not stored anywhere.
    public let recoveryCode: RecoveryCode?
    /// The new device key's public facts.
    public let deviceKey: SigningKeyInfo
}

/// A new recovery slot and its code (show the code once; it is not stored).
public struct NewRecoverySlot: Sendable {
    /// The slot.
    public let slot: SlotInfo
    /// The code.
    public let code: RecoveryCode
}

/// The custodian: the one place unwrapped keys live.
///
/// Locked, it holds nothing secret and can only list public facts and verify signatures.
/// Unlocked (by any slot), it holds the 32-byte master key in guarded memory and derives from
/// it the keys that unwrap team keys (HKDF "team:<id>"), the device key ("device"),
/// when-unlocked site storage keys ("site:<id>") and vault keys ("vault:<id>"). Callers get
/// signatures and key handles, never key bytes. ``lock()`` and the idle lifetime wipe every
/// unwrapped key it holds and clear its ``lockScope``, where every holder of a handle, a
/// decrypted byte or a presence proof keeps it. Every key use is written to the ``auditLog``
/// before its result is returned.
///
/// Thread-safe: state is behind a `Mutex`; slow work (Argon2id) runs outside it.
public final class Custodian: Sendable {
    /// The store's home folder (made 0700 on open).
    public let home: StoreHome
    /// The store id (random, persisted in the home as `store-id`): it scopes every keyring item.
    public var storeID: String { directory.storeID }
    let directory: StoreDirectory
    /// Where wrapped items live.
    public let keyring: any KeyringBackend
    /// The audit log (`audit.log` in the home).
    public let auditLog: AuditLog
    /// The settings.
    public let configuration: CustodianConfiguration

    /// The device key's item id and the key id it is logged under.
    public static let deviceKeyID = "device"
    /// ``deviceKeyID`` as a key id, for the gate.
    static let deviceKey = KeyID(known: deviceKeyID)

    struct Unlocked {
        var master: LockedSecret
        /// When this unlock happened (``CustodianConfiguration/bootClock``): a presence proof
        /// issued before it does not serve.
        var unlockedAtNs: UInt64
        var lastUseNs: UInt64
    }
    struct State {
        var unlocked: Unlocked?
        var epoch: UInt64 = 0
    }
    /// Unwrapped signing keys, kept for this unlock in the ``lockScope``.
    struct SignerCache: LockWipeable {
        /// By `kind/id@version`.
        var byVersion: [String: SigningKeyHandle] = [:]
        /// The signing version of each key, by `kind/id`: rotations and deletions through this
        /// custodian update it; another process's rotation is seen after the next unlock.
        var current: [String: CurrentSigner] = [:]
        mutating func wipeForLock() {
            byVersion.wipeForLock()
            current.wipeForLock()
        }
    }
    struct CurrentSigner: LockWipeable {
        var handle: SigningKeyHandle
        var version: Int
        /// The key's SSH policy as its record said when the key was unwrapped (updated by
        /// ``setSSHAgentPolicy(keyID:_:context:)`` through this custodian), for the signing gate.
        var ssh: SSHAgentPolicy?
        /// The security-key credential a touch of which approves each use (nil: the prompt).
        var touch: FIDO2Credential?
        mutating func wipeForLock() {}
    }
    let state = Mutex<State>(State())
    /// The idle lifetime in force: the configuration's until ``setIdleLifetime(_:)``.
    private let idleNs = Atomic<Int64>(0)
    let backoff: UnlockBackoff
    /// Says the back-off record and the audit anchor live in the keyring (see ``KeyringStateMarker``).
    let marker: KeyringStateMarker

    /// What lock clears: every holder of a key handle, a decrypted byte or a presence proof
    /// that came from this custodian keeps it in a ``LockBound`` of this scope (custody's own
    /// signing-key cache, the bridge's open partitions, the vault library and its vaults, the
    /// presence window). ``lock()``, the idle auto-lock and every unlock clear it.
    public let lockScope = LockScope()
    /// Whether a locked use asks for the unlock (``unlocksOnUse``), and one such prompt at a time.
    let unlockOnUseState = UnlockOnUseState()
    let signers: LockBound<SignerCache>
    /// The last key records parsed, by item, with the bytes they were parsed from: a lookup whose
    /// bytes are the same skips the JSON decode (the ssh-agent lists every team key on each
    /// connection). Public facts and wrapped keys only, as stored; nothing a lock must wipe.
    let parsedRecords = Mutex<[String: ParsedRecord]>([:])
    /// The keys `ssh-add -t` added: their records (wrapped under the master key, as a stored
    /// record is) held in memory only, by id, with when they expire on the boot clock. Gone when
    /// the daemon stops; removed at expiry (``checkAgentKeyLifetime(id:)``).
    let heldAgentKeys = Mutex<[String: HeldAgentKey]>([:])

    func didLock(_ how: OpName) {
        lockScope.clear()
        logQuietly(KeyUseContext(op: how), key: nil, result: "ok")
    }

    /// Opens the custodian of the store at `home`, locked: creates the folder (0700) and its
    /// store id when missing, and opens the audit log.
    ///
    /// ```swift
    /// let home = try StoreHome.resolve(environment: ProcessInfo.processInfo.environment)
    /// let keyring = try Keyring.open(choice: .auto, home: home).backend
    /// let custodian = try Custodian(home: home, keyring: keyring)
    /// ```
    /// - Throws: ``CustodyError/insecureHome(_:)`` for a home open to others or not ours;
    ///   ``CustodyError/io(_:)`` when the store id or audit log cannot be read or created.
    public init(home: StoreHome, keyring: any KeyringBackend, configuration: CustodianConfiguration = CustodianConfiguration()) throws(CustodyError) {
        let directory = try StoreDirectory(path: home.path)
        self.home = home
        self.directory = directory
        self.keyring = keyring
        self.configuration = configuration
        let marker = KeyringStateMarker(path: directory.file(KeyringStateMarker.fileName))
        self.marker = marker
        let storeID = directory.storeID
        let anchor = AuditAnchor(keyring: keyring, storeID: storeID, home: directory.path, marker: marker,
                                 interval: configuration.auditAnchorInterval)
        self.auditLog = try AuditLog(path: directory.file("audit.log"), genesis: AuditLog.genesis(storeID: storeID),
                                     syncInterval: configuration.auditSyncInterval, anchor: anchor)
        self.backoff = UnlockBackoff(keyring: keyring, storeID: storeID, home: directory.path, marker: marker) { () throws(CustodyError) -> Bool in
            do throws(KeyringError) { return try !keyring.list(store: storeID, kind: ItemKind.slot).isEmpty } catch { throw .keyring(error) }
        }
        // A store made before the back-off record and the audit anchor lived in the keyring
        // moves them there once (a failure is retried at the next open).
        self.signers = lockScope.bound(SignerCache())
        idleNs.store(Int64(clamping: PresenceProof.nanoseconds(configuration.idleLifetime)), ordering: .relaxed)
        if !marker.isPresent { try? migrateKeyringState() }
    }

    /// Creates the unlock back-off record and the audit anchor of an initialised store that has
    /// neither marked (one made by an older SiteKeep), then marks the store as having them.
    func migrateKeyringState() throws(CustodyError) {
        guard try isInitialized() else { return }
        try backoff.migrate()
        try auditLog.anchorCurrentHead()
        try marker.write()
    }

    deinit {
        // Dropping the state drops the master key and `signers` its cached signing keys
        // (sodium_free wipes them). Holders in the scope that outlive the custodian (a vault a
        // one-shot command still reads) keep what they hold until they are released; the daemon
        // locks on its way out.
        state.withLock { $0.unlocked = nil }
    }

    // MARK: - Helpers

    func item(_ kind: SiteKeepNames.ItemKind, _ id: String) -> KeyringItemID { KeyringItemID(store: storeID, kind: kind.rawValue, id: id) }

    func kr<R>(_ body: () throws(KeyringError) -> R) throws(CustodyError) -> R {
        do { return try body() } catch { throw .keyring(error) }
    }

    func cr<R: ~Copyable>(_ body: () throws(CryptoError) -> R) throws(CustodyError) -> R {
        do { return try body() } catch { throw .crypto(error) }
    }

    func log(_ context: KeyUseContext, key: String?, result: String) throws(CustodyError) {
        let age = context.presence.map { $0.ageMilliseconds(clock: configuration.bootClock) }
        // A use a touch approved says so (a prompt's id names no dialog there).
        let detail = context.presence?.method == .touch ? (context.detail.map { $0 + "; " } ?? "") + "approved by a touch of the security key" : context.detail
        try auditLog.append(client: context.client, op: context.op, key: key, result: result, presenceAgeMs: age,
                            prompt: context.presence?.promptID, detail: detail)
    }

    /// Logging that must not hide the error being thrown.
    func logQuietly(_ context: KeyUseContext, key: String?, result: String) {
        try? log(context, key: key, result: result)
    }

    static func validateID(_ id: String, what: String = "key") throws(CustodyError) {
        guard KeyID.isValid(id) else { throw .invalidKeyID(id) }
    }

    /// `id` parsed as a key id (the gate and the presence proof take it typed).
    /// - Throws: ``CustodyError/invalidKeyID(_:)``.
    static func keyID(_ id: String) throws(CustodyError) -> KeyID {
        do throws(VocabularyError) { return try KeyID(parsing: id) } catch { throw .invalidKeyID(id) }
    }

    static func validateItemName(_ id: String, what: String) throws(CustodyError) {
        let bytes = Array(id.utf8)
        guard (1...128).contains(bytes.count),
              bytes.allSatisfy({ (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || [0x2e, 0x5f, 0x2d, 0x3a].contains($0) }) else {
            throw .invalidArgument("\(what) id must be 1-128 characters from A-Z a-z 0-9 . _ - :")
        }
    }

    /// Runs `body` with the master key, after the idle check; updates the last-use time.
    func withMaster<R>(_ body: (LockedSecret) throws(CustodyError) -> R) throws(CustodyError) -> R {
        let master = try currentMaster()
        return try body(master)
    }

    /// The master key after the idle check; `touch` counts this as a use (resets the idle time).
    func currentMaster(touch: Bool = true) throws(CustodyError) -> LockedSecret {
        try currentUnlock(touch: touch).master
    }

    /// The master key and when this unlock happened, after the idle check.
    func currentUnlock(touch: Bool = true) throws(CustodyError) -> (master: LockedSecret, unlockedAtNs: UInt64) {
        let now = configuration.bootClock.nanoseconds()
        let idle = PresenceProof.nanoseconds(idleLifetime)
        let (unlock, expired): ((LockedSecret, UInt64)?, Bool) = state.withLock { s in
            guard let u = s.unlocked else { return (nil, false) }
            if now > u.lastUseNs, now - u.lastUseNs > idle {
                s.unlocked = nil
                s.epoch &+= 1
                return (nil, true)
            }
            if touch { s.unlocked?.lastUseNs = max(u.lastUseNs, now) }
            return ((u.master, u.unlockedAtNs), false)
        }
        if expired { didLock(.autoLock) }
        guard let unlock else { throw .locked }
        return unlock
    }

    func derive(_ master: LockedSecret, info: String) throws(CustodyError) -> SymmetricKeyHandle {
        try cr { () throws(CryptoError) -> SymmetricKeyHandle in
            let sub = try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in
                try HKDF.deriveKey(inputKeyMaterial: m, info: Array(info.utf8))
            }
            return try SymmetricKeyHandle(taking: sub)
        }
    }

    // MARK: - State

    /// How long unused before the custodian locks itself (the configuration's, or the last
    /// ``setIdleLifetime(_:)``).
    public var idleLifetime: Duration { .nanoseconds(idleNs.load(ordering: .relaxed)) }

    /// Changes the idle lifetime from now on (the daemon's `idle-lock` setting changed while it
    /// runs): the time already unused counts against the new lifetime, so a shorter one may lock
    /// at the next check, which the timer makes at once.
    public func setIdleLifetime(_ lifetime: Duration) {
        idleNs.store(Int64(clamping: PresenceProof.nanoseconds(lifetime)), ordering: .relaxed)
        let epoch: UInt64? = state.withLock { $0.unlocked == nil ? nil : $0.epoch }
        if let epoch { scheduleAutoLock(epoch: epoch, after: .zero) }
    }

    /// Whether the master key is in memory (this applies the idle check but is not a use).
    public var isUnlocked: Bool { (try? currentMaster(touch: false)) != nil }

    /// Whether the store has at least one unlock slot.
    public func isInitialized() throws(CustodyError) -> Bool {
        try !kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.slot) }.isEmpty
    }

    /// The facts `sitekeep status` prints.
    public func status() throws(CustodyError) -> CustodianStatus {
        let slots = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.slot) }
        let unlocked = isUnlocked
        let remaining: Int? = unlocked ? state.withLock { s in
            guard let u = s.unlocked else { return nil }
            let idle = PresenceProof.nanoseconds(idleLifetime)
            let used = configuration.bootClock.nanoseconds() &- u.lastUseNs
            return Int((idle > used ? idle - used : 0) / 1_000_000_000)
        } : nil
        return CustodianStatus(initialized: !slots.isEmpty, unlocked: unlocked, storeID: storeID, home: directory.path,
                               keyringKind: keyring.kind, keyringLocation: keyring.location, slotCount: slots.count,
                               secondsUntilAutoLock: remaining,
                               unlockBackoffSeconds: try backoff.remaining(now: configuration.wallClockSeconds()))
    }

    /// Unlocks with `master`; returns when, on the boot clock (the unlock's ``Unlocked/unlockedAtNs``).
    @discardableResult
    func becomeUnlocked(_ master: consuming SecretBytes) -> UInt64 {
        let locked = LockedSecret(master)
        let now = configuration.bootClock.nanoseconds()
        let epoch: UInt64 = state.withLock { s in
            s.unlocked = Unlocked(master: locked, unlockedAtNs: now, lastUseNs: now)
            s.epoch &+= 1
            return s.epoch
        }
        // Unlock starts from an empty scope: nothing cached while locked (a presence proof
        // above all) survives into the unlocked session. Cleared after the state is set, so a
        // proof a prompt returns during the unlock is refused by its holder's generation check.
        lockScope.clear()
        scheduleAutoLock(epoch: epoch, after: idleLifetime)
        return now
    }

    func scheduleAutoLock(epoch: UInt64, after delay: Duration) {
        guard configuration.autoLockTimer else { return }
        let ns = PresenceProof.nanoseconds(delay) + 1_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(min(ns, UInt64(Int.max / 2))))) { [weak self] in
            self?.autoLockTick(epoch: epoch)
        }
    }

    func autoLockTick(epoch: UInt64) {
        let idle = PresenceProof.nanoseconds(idleLifetime)
        let now = configuration.bootClock.nanoseconds()
        enum Next { case none, locked, again(UInt64) }
        let next: Next = state.withLock { s in
            guard s.epoch == epoch, let u = s.unlocked else { return .none }
            let used = now &- u.lastUseNs
            if now >= u.lastUseNs, used >= idle {
                s.unlocked = nil
                s.epoch &+= 1
                return .locked
            }
            return .again(idle - min(used, idle))
        }
        switch next {
        case .none: break
        case .locked: didLock(.autoLock)
        case .again(let ns): scheduleAutoLock(epoch: epoch, after: .nanoseconds(Int64(min(ns, UInt64(Int64.max)))))
        }
    }

    /// Wipes the master key and clears the ``lockScope``: every unwrapped key, every cache of
    /// decrypted bytes and every presence proof kept there. Idempotent; logged when it locked.
    public func lock() {
        let was: Bool = state.withLock { s in
            let was = s.unlocked != nil
            s.unlocked = nil
            s.epoch &+= 1
            return was
        }
        if was { didLock(.lock) } else { lockScope.clear() }
    }

    // MARK: - Initialisation

    /// Creates the store: a random master key, a passphrase slot, optionally a recovery slot,
    /// and the P-256 device key. Leaves the custodian unlocked.
    ///
    /// - Parameters:
    ///   - passphrase: The passphrase's bytes.
    ///   - parameters: Argon2id parameters (default: ``PassphraseKDF/calibrate(target:)``).
    ///   - withRecoveryCode: Whether to create a recovery slot too.
    /// - Throws: ``CustodyError/alreadyInitialized`` when slots exist.
    public func initialize(passphrase: consuming SecretBytes, parameters: Argon2id.Parameters? = nil,
                           withRecoveryCode: Bool = true) throws(CustodyError) -> InitializationResult {
        guard try !isInitialized() else { throw .alreadyInitialized }
        // Marked again below, once this store's back-off record and anchor exist.
        unlink(marker.path)
        let params = try calibrated(parameters)
        let master = LockedSecret(try cr { () throws(CryptoError) -> SecretBytes in try SecretBytes(randomCount: 32) })
        let pSlot = try writeSlot(kind: .passphrase, label: "passphrase", master: master,
                                  fields: NewSlotFields(argon2: params), kekInput: passphrase)
        var recoverySlot: SlotInfo? = nil, recoveryCode: RecoveryCode? = nil
        if withRecoveryCode {
            let generated = try RecoveryCode.generate()
            recoveryCode = generated.code
            recoverySlot = try writeSlot(kind: .recovery, label: "recovery", master: master, kekInput: generated.secret)
        }
        let dup = try cr { () throws(CryptoError) -> SecretBytes in
            try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in try m.duplicate() }
        }
        becomeUnlocked(dup)
        let device = try createDeviceKey()
        try log(KeyUseContext(op: .initialize), key: pSlot.id, result: "ok")
        // The back-off record and the audit anchor exist from the start; the marker says so.
        try backoff.save(.zero)
        try auditLog.anchorCurrentHead()
        try marker.write()
        return InitializationResult(passphraseSlot: pSlot, recoverySlot: recoverySlot, recoveryCode: recoveryCode, deviceKey: device)
    }
}
