/// Where custody's gate gets the user's approval when the caller brings no proof: an approval
/// kept in ``window`` for the same use, else the window's verifier asks the user, who is shown
/// ``label``.
///
/// The bridge passes one for `key.sign` and `sealed.open` (the label is the site's quoted name
/// and origin), the ssh-agent for `ssh.sign` (the label names the key, the destination or
/// namespace and the requesting process; ``scope`` is the kind of use, so an approval for one
/// host or namespace never serves another).
public struct PresenceApproval: Sendable {
    /// The kept approvals and the verifier that asks.
    public let window: PresenceWindow
    /// What the prompt names as the requester (quoted and bounded by the prompt).
    public let label: String
    /// The kind of use an approval is kept for, beyond the client, op and key (nil: any).
    public let scope: String?

    public init(window: PresenceWindow, label: String, scope: String? = nil) {
        self.window = window
        self.label = label
        self.scope = scope
    }
}

// The one gate: every key use that needs the user's approval, from every client, is admitted
// here, once, in the same call that uses the key (``Custodian/signature(keyID:version:message:context:)``)
// or approves a use custody holds no key for (``Custodian/approve(_:keyID:)``).
extension Custodian {
    /// The approval of `context`'s use of `keyID`, checked once: the proof the caller brings,
    /// else a kept one of ``KeyUseContext/approval``'s window, else (after `beforeAsking`, which
    /// throws for a use that cannot run, so it never prompts) a fresh one from the user. Each is
    /// checked by ``checkProof(_:site:op:keyID:unlockedAtNs:lifetime:)`` only; a kept one that
    /// fails is forgotten and the user is asked. Nil when the context brings neither.
    func admit(_ context: KeyUseContext, keyID: String?, unlockedAtNs: UInt64,
               beforeAsking: () throws(CustodyError) -> Void) throws(CustodyError) -> PresenceProof? {
        let site = context.site ?? "-"
        if let given = context.presence {
            try checkProof(given, site: site, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: configuration.presenceLifetime)
            return given
        }
        guard let approval = context.approval else { return nil }
        let window = approval.window
        let use = PresenceWindow.Use(site: site, op: context.op, keyID: keyID, scope: approval.scope)
        let lifetime = min(configuration.presenceLifetime, window.lifetime)
        if let kept = window.kept(use) {
            do throws(CustodyError) {
                try checkProof(kept, site: site, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: lifetime)
                return kept
            } catch {
                window.forget(use)
            }
        }
        try beforeAsking()
        let generation = window.generation
        let fresh = try window.ask(use, label: approval.label)
        try checkProof(fresh, site: site, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: lifetime)
        window.keep(fresh, for: use, ifNotClearedSince: generation)
        return fresh
    }

    /// The presence rule, in one place: the proof is for this client (`site`), op and key,
    /// younger than `lifetime`, and issued in the current unlock.
    func checkProof(_ proof: PresenceProof, site: String, op: String, keyID: String?, unlockedAtNs: UInt64,
                    lifetime: Duration) throws(CustodyError) {
        try proof.check(site: site, op: op, keyID: keyID, clock: configuration.bootClock, lifetime: lifetime)
        guard proof.issuedAtNanoseconds >= unlockedAtNs else { throw .presenceBeforeUnlock }
    }

    /// Approves a use that needs the user's presence but no key custody holds (the bridge's
    /// `sealed.open`), through the same gate as a signature: SiteKeep unlocked, then the proof
    /// the context brings or its ``KeyUseContext/approval`` (kept, else asked), checked once.
    /// The use is in the audit log, approved or refused, before this returns.
    /// - Throws: ``CustodyError/locked``, ``CustodyError/presenceRequired(_:)`` when the context
    ///   brings no way to approve, or the verifier's or the check's refusal.
    @discardableResult
    public func approve(_ context: KeyUseContext, keyID: String? = nil) throws(CustodyError) -> PresenceProof {
        var logged = context
        do throws(CustodyError) {
            let unlockedAt = try currentUnlock().unlockedAtNs
            guard let proof = try admit(context, keyID: keyID, unlockedAtNs: unlockedAt, beforeAsking: {}) else {
                throw .presenceRequired("\(context.op) needs the user's approval")
            }
            logged.presence = proof
        } catch {
            logQuietly(context, key: keyID, result: Self.resultWord(error))
            throw error
        }
        try log(logged, key: keyID, result: "ok")
        return logged.presence!
    }
}
