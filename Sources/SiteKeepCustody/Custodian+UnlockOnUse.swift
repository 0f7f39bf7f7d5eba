import Synchronization
package import SiteKeepCrypto

// Unlock on use: a key use while SiteKeep is locked asks for the unlock secret on the prompt the
// approval would be asked on, then for the approval, as gpg-agent asks for a passphrase when a
// key is used. The secret opens a slot exactly as `sitekeep unlock` does (custody's slots and
// the unlock back-off); the unlock is custody's own, logged as every unlock is.

/// A presence verifier that can also ask for the unlock passphrase (the daemon's prompt:
/// a pinentry's `GETPIN`, or SiteKeep's own question without echo on the user's terminal).
package protocol UnlockPrompt: PresenceVerifier {
    /// Asks for the passphrase that unlocks SiteKeep, for a key use of `client`'s (`label` says
    /// what asked, as the approval would; `askerPID` the process, whose own terminal is told
    /// where to answer and is never asked). `attempt` counts from 1 (a later one says the
    /// last was wrong).
    /// - Returns: the typed bytes in guarded memory, or nil when the user cancelled.
    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when no prompt can be shown,
    ///   ``CustodyError/presenceTimedOut(seconds:)``.
    func requestUnlockPassphrase(client: KeyUseClient, label: String, askerPID: Int32?, attempt: Int) throws(CustodyError) -> SecretBytes?
}

/// The custodian's unlock-on-use state: whether it is on, one prompt for the secret at a time,
/// and who is told of an unlock it made.
final class UnlockOnUseState: Sendable {
    let enabled = Atomic(false)
    /// Held while the secret is asked: a second locked use waits, then finds SiteKeep unlocked.
    let asking = Mutex(())
    let unlocked = Mutex<(@Sendable () -> Void)?>(nil)
}

extension Custodian {
    /// The tries a locked use gets to type the passphrase (as `sitekeep unlock` at a terminal).
    public static let unlockOnUseTries = 3

    /// Whether a key use while locked asks for the unlock (``unlockOnUse(_:)``); off for a
    /// custodian until its owner turns it on (the daemon does, from its `unlock-on-use`
    /// setting, default on).
    public var unlocksOnUse: Bool { unlockOnUseState.enabled.load(ordering: .relaxed) }

    /// Turns unlock on use on or off; `unlocked` is called after each unlock it makes (the
    /// daemon checks its settings' tags then, as after `sitekeep unlock`).
    public func setUnlocksOnUse(_ on: Bool, unlocked: (@Sendable () -> Void)? = nil) {
        unlockOnUseState.enabled.store(on, ordering: .relaxed)
        if let unlocked { unlockOnUseState.unlocked.withLock { $0 = unlocked } }
    }

    /// Step 1 of the gate for a locked custodian: nothing when unlocked; else, when unlock on
    /// use is on and the use's approval asks through a verifier that can ask for the secret
    /// (``UnlockPrompt``), the passphrase is asked there (up to ``unlockOnUseTries`` times) and
    /// opens a passphrase slot through ``unlock(_:slotID:)``: the slots, the back-off and the
    /// audit line of `sitekeep unlock`. One use asks at a time; one waiting behind it finds
    /// SiteKeep unlocked.
    /// - Throws: ``CustodyError/locked`` when it is off, the use brings no prompt, or no prompt
    ///   can be shown (the reason is kept in the error's text); ``CustodyError/presenceDenied``
    ///   when the user cancelled; ``CustodyError/unlockFailed`` or the back-off's error after
    ///   the last wrong passphrase; the prompt's time-out.
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
            let label = approval.label
            var attempt = 1
            func ask(_ attempt: Int) throws(CustodyError) -> SecretBytes? {
                do throws(CustodyError) {
                    return try prompt.requestUnlockPassphrase(client: context.client, label: label, askerPID: approval.askerPID, attempt: attempt)
                } catch .presenceUnavailable {
                    // Nowhere to ask: today's refusal, naming what to do.
                    throw .locked
                }
            }
            while true {
                guard let typed = try ask(attempt) else { throw .presenceDenied }
                do throws(CustodyError) {
                    try unlock(.passphrase(typed))
                    break
                } catch .unlockFailed where attempt < Self.unlockOnUseTries {
                    attempt += 1
                }
            }
        }
        unlockOnUseState.unlocked.withLock { $0 }?()
    }
}
