import Synchronization
package import SiteKeepCrypto
import SiteKeepFIDO2
import SiteKeepTPM

// Unlock on use: a key use while SiteKeep is locked asks for the unlock on the prompt the
// approval would be asked on, then for the approval, as gpg-agent asks for a passphrase when a
// key is used. The unlock is the passphrase, or a touch of the security key (with its PIN when
// its slot needs it), or the TPM (with its PIN when its slot has one): it opens a slot exactly
// as `sitekeep unlock` does (custody's slots and the unlock back-off); the unlock is custody's
// own, logged as every unlock is.

/// What a locked use asks for on the prompt, to unlock SiteKeep.
package enum UnlockAsk: Sendable, Equatable {
    /// The passphrase of a passphrase slot.
    case passphrase
    /// The PIN of a TPM 2.0 slot.
    case tpmPIN
    /// The security key's PIN (a FIDO2 slot that needs it); the key is touched after.
    case securityKeyPIN
}

/// A presence verifier that can also ask for an unlock secret (the daemon's prompt: a
/// pinentry's `GETPIN`, or SiteKeep's own question without echo on the user's terminal).
package protocol UnlockPrompt: PresenceVerifier {
    /// Asks for `ask` (the passphrase, a TPM PIN, a security key's PIN) to unlock SiteKeep, for
    /// a key use of `client`'s (`label` says what asked, as the approval would; `askerPID` the
    /// process, whose own terminal is told where to answer and is never asked). `attempt`
    /// counts from 1 (a later one says the last was wrong).
    /// - Returns: the typed bytes in guarded memory, or nil when the user cancelled.
    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when no prompt can be shown,
    ///   ``CustodyError/presenceTimedOut(seconds:)``.
    func requestUnlockSecret(_ ask: UnlockAsk, client: KeyUseClient, label: String, askerPID: Int32?, attempt: Int) throws(CustodyError) -> SecretBytes?

    /// Says, on the prompt's terminal and the asker's, that a touch of the security key now
    /// unlocks SiteKeep for a key use. A touch is given on the key, never on a screen, so no
    /// process can give it: the asker's own terminal may be told.
    func announceUnlockTouch(askerPID: Int32?)
}

/// The custodian's unlock-on-use state: whether it is on, how it unlocks, one prompt for the
/// secret at a time, and who is told of an unlock it made.
final class UnlockOnUseState: Sendable {
    let enabled = Atomic(false)
    /// The slot kind a locked use unlocks with (`passphrase`, `fido2`, `tpm2`); nil: the first
    /// that can be used (``Custodian/unlockOnUseKinds()``).
    let kind = Mutex<String?>(nil)
    /// Held while the secret is asked: a second locked use waits, then finds SiteKeep unlocked.
    let asking = Mutex(())
    let unlocked = Mutex<(@Sendable () -> Void)?>(nil)
}

extension Custodian {
    /// The tries a locked use gets to type the passphrase or a PIN (as `sitekeep unlock` at a
    /// terminal).
    public static let unlockOnUseTries = 3

    /// The slot kinds a locked use may unlock with, as the `unlock-on-use` setting names them.
    public static let unlockOnUseKindNames = [PassphraseSlot.name, FIDO2Slot.name, TPM2Slot.name]

    /// Whether a key use while locked asks for the unlock (``unlockOnUse(_:)``); off for a
    /// custodian until its owner turns it on (the daemon does, from its `unlock-on-use`
    /// setting, default on).
    public var unlocksOnUse: Bool { unlockOnUseState.enabled.load(ordering: .relaxed) }

    /// The slot kind a locked use unlocks with; nil: the first that can be used.
    public var unlockOnUseKind: String? { unlockOnUseState.kind.withLock { $0 } }

    /// Turns unlock on use on or off; `kind` (one of ``unlockOnUseKindNames``) makes it unlock
    /// with that slot kind only, nil with the first that can be used; `unlocked` is called after
    /// each unlock it makes (the daemon checks its settings' tags then, as after `sitekeep unlock`).
    public func setUnlocksOnUse(_ on: Bool, kind: String? = nil, unlocked: (@Sendable () -> Void)? = nil) {
        unlockOnUseState.enabled.store(on, ordering: .relaxed)
        unlockOnUseState.kind.withLock { $0 = kind.flatMap { Self.unlockOnUseKindNames.contains($0) ? $0 : nil } }
        if let unlocked { unlockOnUseState.unlocked.withLock { $0 = unlocked } }
    }

    /// Step 1 of the gate for a locked custodian: nothing when unlocked; else, when unlock on
    /// use is on and the use's approval asks through a verifier that can ask for the secret
    /// (``UnlockPrompt``), SiteKeep is unlocked there by the first way that can be used
    /// (``unlockOnUseKinds()``): the passphrase typed (up to ``unlockOnUseTries`` times), a
    /// touch of the security key (its PIN typed first when the slot needs it), or the TPM (its
    /// PIN typed when the slot has one), each through ``unlock(_:slotID:)``: the slots, the
    /// back-off and the audit line of `sitekeep unlock`. A prompt that cannot ask for a
    /// passphrase (an askpass program) passes on to a device. One use asks at a time; one
    /// waiting behind it finds SiteKeep unlocked.
    /// - Throws: ``CustodyError/locked`` when it is off, the use brings no prompt, or nothing
    ///   can be asked; ``CustodyError/presenceDenied`` when the user cancelled;
    ///   ``CustodyError/unlockFailed``, the back-off's error or the device's after the last
    ///   try; the prompt's time-out.
    func unlockOnUse(_ context: KeyUseContext) throws(CustodyError) {
        guard !isUnlocked else { return }
        guard unlocksOnUse, let approval = context.approval else { throw .locked }
        let verifier: any PresenceVerifier
        switch approval.way {
        case .window(let window): verifier = window.verifier
        case .ask(let asking): verifier = asking
        case .secret: throw .locked
        }
        guard let prompt = verifier as? any UnlockPrompt else { throw .locked }
        try unlockOnUseState.asking.withLock { (_: inout ()) throws(CustodyError) in
            guard !isUnlocked else { return }
            let ways = unlockOnUseKinds()
            for (index, kind) in ways.enumerated() {
                do throws(CustodyError) {
                    try unlockOnUse(by: kind, prompt: prompt, context: context, approval: approval)
                    return
                } catch .presenceUnavailable {
                    // Nowhere to ask for this one: the next way, else today's refusal naming what to do.
                    if index == ways.count - 1 { throw .locked }
                }
            }
            throw .locked
        }
        unlockOnUseState.unlocked.withLock { $0 }?()
    }

    /// The slot kinds a locked use tries, in order: the one the setting names; else the
    /// passphrase when the store has a passphrase slot, then a security key and the TPM when
    /// the store has their slot and the device answers (``checkUnlockDevice(method:)``).
    func unlockOnUseKinds() -> [String] {
        if let chosen = unlockOnUseKind { return [chosen] }
        let stored = Set(((try? loadSlots()) ?? []).compactMap { $0.header?.kind })
        var ways: [String] = []
        if stored.contains(PassphraseSlot.stored) { ways.append(PassphraseSlot.name) }
        for device in [FIDO2Slot.name, TPM2Slot.name] where (try? checkUnlockDevice(method: device)) != nil {
            ways.append(device)
        }
        return ways
    }

    /// Unlocks by `kind` for a locked use: asks its secret on `prompt` when it has one.
    private func unlockOnUse(by kind: String, prompt: any UnlockPrompt, context: KeyUseContext,
                             approval: PresenceApproval) throws(CustodyError) {
        let label = approval.label
        func ask(_ what: UnlockAsk, _ attempt: Int) throws(CustodyError) -> SecretBytes {
            guard let typed = try prompt.requestUnlockSecret(what, client: context.client, label: label,
                                                             askerPID: approval.askerPID, attempt: attempt) else { throw .presenceDenied }
            return typed
        }
        /// Asks `what` and unlocks with it, again after a wrong one (`isWrong`), up to the tries.
        func typed(_ what: UnlockAsk, isWrong: (CustodyError) -> Bool) throws(CustodyError) {
            var attempt = 1
            while true {
                let secret = try ask(what, attempt)
                if what == .securityKeyPIN { prompt.announceUnlockTouch(askerPID: approval.askerPID) }
                do throws(CustodyError) {
                    try unlock(Self.unlockSecret(what, secret))
                    return
                } catch where attempt < Self.unlockOnUseTries && isWrong(error) {
                    attempt += 1
                }
            }
        }
        switch kind {
        case FIDO2Slot.name:
            try checkUnlockDevice(method: kind)
            if try fido2SlotsNeedPIN() {
                try typed(.securityKeyPIN, isWrong: Self.isWrongPIN)
                return
            }
            prompt.announceUnlockTouch(askerPID: approval.askerPID)
            try unlock(.fido2(pin: nil))
        case TPM2Slot.name:
            try checkUnlockDevice(method: kind)
            let slots = try loadSlots().compactMap(\.header).filter { $0.kind == TPM2Slot.stored }
            if slots.allSatisfy(\.tpmPIN) {
                try typed(.tpmPIN, isWrong: Self.isWrongPIN)
            } else {
                try unlock(UnlockSecret(TPM2Slot.self, secret: nil))
            }
        default:
            try typed(.passphrase, isWrong: { $0 == .unlockFailed })
        }
    }

    /// Whether `error` is a device's refusal of a wrong PIN (asked again, up to the tries).
    static func isWrongPIN(_ error: CustodyError) -> Bool {
        switch error {
        case .fido2(.pinWrong), .tpm(.wrongPIN): true
        default: false
        }
    }

    /// The unlock secret `typed` is, as `what` asked for it.
    static func unlockSecret(_ what: UnlockAsk, _ typed: consuming SecretBytes) -> UnlockSecret {
        switch what {
        case .passphrase: .passphrase(typed)
        case .tpmPIN: UnlockSecret(TPM2Slot.self, secret: typed)
        case .securityKeyPIN: .fido2(pin: typed)
        }
    }

    /// Whether opening a FIDO2 slot asks the key's PIN: a slot made with it, or one that does
    /// not say while the key has a PIN (as ``FIDO2Slot`` opens them).
    func fido2SlotsNeedPIN() throws(CustodyError) -> Bool {
        let slots = try loadSlots().compactMap(\.header).filter { $0.kind == FIDO2Slot.stored && $0.relyingPartyID != nil }
        if slots.contains(where: { $0.fido2PIN == true }) { return true }
        guard slots.contains(where: { $0.fido2PIN == nil }) else { return false }
        let key = try fido2Key()
        return try fido2Call { () throws(FIDO2Error) in try key.info().hasPIN }
    }
}
