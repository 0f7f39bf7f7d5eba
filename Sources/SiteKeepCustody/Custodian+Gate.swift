import SiteKeepNames
import SiteKeepCrypto
import SiteKeepFIDO2
import Synchronization

// Custody's one gate, read top to bottom. Every key use that needs the user's approval, from
// every client (a page through the bridge, ssh and git through the agent socket, the command
// line inside the daemon or on its own), is decided here, once, in the same call that uses the
// key (``Custodian/signature(keyID:version:message:context:)``), or here without a key for a
// use custody holds no key for (``Custodian/approve(_:keyID:)``). The order, as OpenSSH's
// `process_sign_request2` reads:
//
// 1. SiteKeep is unlocked (or, with unlock on use, unlocked now by the secret asked on the
//    prompt: ``Custodian/unlockOnUse(_:)``); the unlock an approval must belong to is noted.
// 2. The key: it exists, the version a use takes, its SSH policy in force and whether a touch
//    approves it (``Custodian/keyFacts(kind:id:version:)``, one keyring read at most).
// 3. The client and op against the key's policy, read from what the bytes are
//    (``Custodian/checkPolicy(_:op:keyID:ssh:)``), and what the caller needs of the key
//    (``KeyUseContext/beforeAsking``): a use that cannot run is refused before anyone is asked.
// 4. Presence: a touch of the key's security key when its policy says so, else
//    ``Custodian/admit(_:keyID:unlockedAtNs:waited:)``: the proof the caller brings, the current
//    secret the command gave, a kept approval, or the user asked now; each checked once by
//    ``Custodian/checkProof(_:client:op:keyID:unlockedAtNs:lifetime:)``. The gate mints the
//    proofs of the secret and the touch itself; the verifiers mint the prompts'.
// 5. Sign with the key read in 2 (the keyring is not read again after the user answered:
//    what they approved is that record's use).
// 6. Audit: the use is in the log, approved or refused (``CustodyError/auditResult``), with the
//    key's version, before the signature is returned.

// MARK: - The gate

extension Custodian {
    /// Signs `message` with a team key's current version (Ed25519, or P-256 raw `r || s`).
    ///
    /// This is the one gate every team-key signature passes, whichever client asks (a page
    /// through the bridge, `ssh` through the agent socket, the command line inside the daemon
    /// or on its own):
    /// - An approval is required: `context.presence` (a proof for `context.client`, a site, the
    ///   ssh-agent, the command line: ``KeyUseClient``, `context.op` and `keyID`, younger than
    ///   the presence lifetime and issued in the current unlock) or `context.approval` (the
    ///   current secret given, a kept approval, or the user asked now); without one,
    ///   ``CustodyError/presenceRequired(_:)``. A key that needs a touch is approved by a touch
    ///   alone.
    /// - The key's policy, read from what the bytes are (``SignedDataKind``), not from what the
    ///   caller says: an SSHSIG is signed only in a namespace the key's SSH policy allows; an SSH
    ///   login request only for the ssh-agent socket (op `ssh.sign`, which has checked the
    ///   destination) and a key whose policy allows logins; other data through the agent only
    ///   when the policy allows other data. Otherwise ``CustodyError/policyRefused(_:)``.
    ///
    /// The use is in the audit log, with the id of the prompt that approved it, before the
    /// signature is returned; a refused use is logged with its reason word.
    /// - Parameters:
    ///   - version: nil for the current version; an older version is refused
    ///     (``CustodyError/versionVerifyOnly(keyID:version:)``).
    public func sign(keyID: String, version: Int? = nil, message: [UInt8], context: KeyUseContext = .local) throws(CustodyError) -> [UInt8] {
        try signature(keyID: keyID, version: version, message: message, context: context).signature
    }

    /// ``sign(keyID:version:message:context:)``, also saying which algorithm, version and public
    /// key signed. The bridge, the agent and `team sign` answer with this: the key's record is
    /// read at most once per signature, the user asked or not (none once the key is unwrapped
    /// in this unlock), and a key is opened at most once.
    public func signature(keyID: String, version: Int? = nil, message: [UInt8], context: KeyUseContext = .local) throws(CustodyError) -> TeamSignature {
        return try signWith(kind: .teamKey, key: Self.keyID(keyID), version: version, message: message, context: context)
    }

    func signWith(kind: SiteKeepNames.ItemKind, key: KeyID, version: Int?, message: [UInt8], context: KeyUseContext) throws(CustodyError) -> TeamSignature {
        let keyID = key.string
        var logKey = keyID
        var used = context
        var callerRefused = false
        let signed: TeamSignature
        do throws(CustodyError) {
            // 1. Unlocked, or unlocked now through the prompt (``unlockOnUse(_:)``: the secret
            // asked where the approval would be, opening a slot under the back-off, as
            // `sitekeep unlock` does). The approval is checked against this unlock: a lock or
            // unlock between that check and the key's use (another thread) voids it, as custody
            // refuses a proof taken before its last unlock.
            try unlockOnUse(context)
            let generation = lockScope.generation
            let unlockedAt = try currentUnlock().unlockedAtNs
            // 2. The key and its facts. A refusal from here on is logged with the version the
            // use would have taken.
            if kind == .agentKey { try checkAgentKeyLifetime(id: keyID) }
            let facts = try keyFacts(kind: kind, id: keyID, version: version)
            logKey = "\(keyID)@v\(facts.version)"
            // 3. The client and op against the key's policy, for what the bytes are, and what
            // the caller needs of the key: before anyone is asked, so a use that cannot run
            // never prompts (or waits for a touch).
            let dataKind = SignedDataKind(message)
            if kind != .deviceKey { try checkPolicy(dataKind, op: context.op, keyID: keyID, facts: facts) }
            do throws(CustodyError) {
                try context.beforeAsking?(KeyUseFacts(keyID: keyID, version: facts.version, algorithm: facts.algorithm, needsTouch: facts.touch != nil))
            } catch {
                // The caller's own argument, refused before any use: not a use to log.
                callerRefused = true
                throw error
            }
            // 4. Presence, checked once: a touch of the key's security key for each use when
            // its policy says so (no proof brought or kept counts), else ``admit``.
            var waited = false
            if let touch = facts.touch {
                used.presence = try touchApproval(context, keyID: key, credential: touch)
                waited = true
            } else {
                used.presence = try admit(context, keyID: key, unlockedAtNs: unlockedAt, waited: &waited)
            }
            if used.presence == nil, kind != .deviceKey {
                throw CustodyError.presenceRequired("signing with team key \(keyID) needs the user's approval of this use; "
                    + "approve it when asked, or give the current passphrase (--passphrase-file) for this command")
            }
            // 5. Sign, with the record read for the facts (one keyring read per signature, the
            // user asked or not): what was decided, and what the user approved, is that record's.
            // A key with an SSH policy was opened by that read and is taken from the cache.
            let (handle, v, ssh) = try signerAndPolicy(kind: kind, id: keyID, version: version, forSigning: true,
                                                       record: facts.record)
            if used.presence != nil, lockScope.generation != generation { throw CustodyError.presenceBeforeUnlock }
            logKey = "\(keyID)@v\(v)"
            if kind != .deviceKey, ssh != facts.ssh {
                // Again if the policy signed under is not the one checked: the cached signer
                // changed while the user was asked (`team ssh` updates it at once; a rotation).
                try Self.checkPolicy(dataKind, op: context.op, keyID: keyID, ssh: ssh)
            }
            let signature = try cr { () throws(CryptoError) in try handle.sign(message) }
            signed = TeamSignature(keyID: keyID, version: v, algorithm: handle.algorithm, signature: signature, publicKey: handle.publicKey)
        } catch {
            // 6. Audit, refused.
            if !callerRefused { logRefusal(used, key: logKey, error) }
            throw error
        }
        // 6. Audit, approved.
        try log(used, key: logKey, result: "ok")
        return signed
    }

    // MARK: 2. The key

    /// What the gate knows of a key before anyone is asked.
    struct KeyFacts {
        /// The version a use takes.
        let version: Int
        /// The SSH policy in force (bound to the key), nil when SSH use is off.
        let ssh: SSHAgentPolicy?
        /// The credential a touch of which approves each use (nil: the prompt).
        let touch: FIDO2Credential?
        /// The record names an SSH policy that is not bound to the key (so not in force).
        let sshUnbound: Bool
        /// The key's algorithm.
        let algorithm: SigningAlgorithm
        /// The record these facts were read from; nil when they came from the signer cache.
        let record: KeyRecord?
    }

    /// What the gate needs to know of a key before anyone is asked: the version a use would
    /// take, its SSH policy and whether a touch approves it. From the signer cache when the
    /// current version was unwrapped in this unlock, else from its record (which must exist;
    /// one keyring read).
    ///
    /// A record that names an SSH policy has its current version opened first (while unlocked):
    /// the policy that counts is the one bound to the key, so a policy a keyring edit added or
    /// widened lets no request through to a prompt (`sshUnbound` then says the record names one
    /// that is not in force).
    func keyFacts(kind: SiteKeepNames.ItemKind, id: String, version: Int?) throws(CustodyError) -> KeyFacts {
        if version == nil, let hit = signers.withLock({ $0.current["\(kind)/\(id)"] }) {
            return KeyFacts(version: hit.version, ssh: hit.ssh, touch: hit.touch, sshUnbound: false, algorithm: hit.handle.algorithm, record: nil)
        }
        let record = try loadRecord(kind: kind, id: id)
        let v = version ?? record.versions.count
        guard record.sshToBind != nil else {
            return KeyFacts(version: v, ssh: nil, touch: record.touch, sshUnbound: false, algorithm: record.algorithm, record: record)
        }
        // The current version is opened to see the policy bound to it, and kept in the signer
        // cache (as any opened key is, for this unlock), so the signature does not open it again.
        let (_, _, ssh) = try signerAndPolicy(kind: kind, id: id, version: nil, forSigning: false, record: record)
        return KeyFacts(version: v, ssh: ssh, touch: record.touch, sshUnbound: ssh == nil, algorithm: record.algorithm, record: record)
    }

    // MARK: 3. The client and op against the key's policy

    /// ``checkPolicy(_:op:keyID:ssh:)`` with the key's facts: a refusal of a key whose record
    /// names an SSH policy that is not bound to it says so, and how to turn SSH use on again.
    func checkPolicy(_ kind: SignedDataKind, op: OpName, keyID: String, facts: KeyFacts) throws(CustodyError) {
        do throws(CustodyError) {
            try Self.checkPolicy(kind, op: op, keyID: keyID, ssh: facts.ssh)
        } catch .policyRefused(let why) where facts.sshUnbound {
            throw .policyRefused(why + "; the SSH policy in key \(keyID)'s keyring record is not the one SiteKeep bound to the key "
                + "(it was written before SiteKeep bound SSH policies, or edited outside SiteKeep), so SSH use is off: "
                + "turn it on again with 'sitekeep team ssh enable \(keyID)'")
        }
    }

    /// The signing gate's policy rule for a team key whose SSH policy is `ssh` (nil: SSH use
    /// off), asked to sign data of `kind` for `op`. The one copy of the rule: the ssh-agent
    /// checks no policy of its own.
    /// - Throws: ``CustodyError/policyRefused(_:)`` saying why and what would allow it.
    static func checkPolicy(_ kind: SignedDataKind, op: OpName, keyID: String, ssh: SSHAgentPolicy?) throws(CustodyError) {
        let policy = ssh ?? SSHAgentPolicy(enabled: false)
        switch kind {
        case .sshLogin:
            guard op == .sshSign else {
                throw .policyRefused("the data is an SSH login request; only the ssh-agent socket signs logins, after it has checked "
                    + "the destination (use ssh with SSH_AUTH_SOCK from 'sitekeep agent env')")
            }
            guard policy.enabled else { throw .policyRefused("SSH use of key \(keyID) is off ('sitekeep team ssh enable \(keyID)')") }
            guard policy.login else {
                throw .policyRefused("key \(keyID) does not log in over SSH (enable it again without --no-login)")
            }
        case .sshsig(let namespace):
            guard policy.enabled else {
                throw .policyRefused("key \(keyID) makes no SSH signatures: its SSH use is off "
                    + "('sitekeep team ssh enable \(keyID) --namespace NS' allows namespace NS)")
            }
            // Any namespace the blob names counts (a policy of "any namespace" allows what
            // `ssh-keygen -Y sign -n` takes); a listed policy names only plain ones.
            guard let namespace, !namespace.isEmpty else {
                throw .policyRefused("the data is an SSHSIG blob that names no namespace")
            }
            guard policy.permits(namespace: namespace) else {
                throw .policyRefused("key \(keyID) does not sign in SSHSIG namespace \(namespace) "
                    + "(allowed: \(policy.namespaces?.joined(separator: ", ") ?? "any"))")
            }
        case .other:
            if op == .sshSign {
                guard policy.enabled else { throw .policyRefused("SSH use of key \(keyID) is off") }
                guard policy.otherData else {
                    throw .policyRefused("key \(keyID) signs only SSH logins and SSHSIG signatures over SSH ('--other-data' allows more)")
                }
            }
        }
    }

    // MARK: 4. Presence

    /// The approval of `context`'s use of `keyID`, checked once: the proof the caller brings,
    /// else what ``KeyUseContext/approval`` says: the current secret given for this command
    /// (checked against the slots, or the unlock it made: the gate mints the proof), the user
    /// asked now through a verifier, or a kept approval of its window, else the user asked
    /// through it. Each is checked by ``checkProof(_:client:op:keyID:unlockedAtNs:lifetime:)``
    /// only; a kept one that fails is forgotten and the user is asked. Nothing is kept for, or
    /// serves, an approval that says not to keep (``PresenceApproval/keep``). Nil when the
    /// context brings neither. `waited` is set when the user was asked.
    func admit(_ context: KeyUseContext, keyID: KeyID?, unlockedAtNs: UInt64, waited: inout Bool) throws(CustodyError) -> PresenceProof? {
        let client = context.client
        if let given = context.presence {
            try checkProof(given, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: configuration.presenceLifetime)
            return given
        }
        guard let approval = context.approval else { return nil }
        switch approval.way {
        case .secret(let secret):
            let proof = try secretApproval(secret, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs)
            try checkProof(proof, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: configuration.presenceLifetime)
            return proof
        case .ask(let verifier):
            waited = true
            let fresh = try verifier.requestPresence(client: client, siteLabel: approval.label, op: context.op, keyID: keyID, askerPID: approval.askerPID)
            try checkProof(fresh, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: configuration.presenceLifetime)
            return fresh
        case .window(let window):
            let use = PresenceWindow.Use(client: client, op: context.op, keyID: keyID, scope: approval.scope)
            let lifetime = min(configuration.presenceLifetime, window.lifetime)
            if approval.keep, let kept = window.kept(use) {
                do throws(CustodyError) {
                    try checkProof(kept, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: lifetime)
                    return kept
                } catch {
                    window.forget(use)
                }
            }
            waited = true
            let generation = window.generation
            let fresh = try window.ask(use, label: approval.label, askerPID: approval.askerPID)
            try checkProof(fresh, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: lifetime)
            if approval.keep { window.keep(fresh, for: use, ifNotClearedSince: generation) }
            return fresh
        }
    }

    /// ``admit(_:keyID:unlockedAtNs:waited:)``, for a caller that does not ask whether the user waited.
    func admit(_ context: KeyUseContext, keyID: KeyID?, unlockedAtNs: UInt64) throws(CustodyError) -> PresenceProof? {
        var waited = false
        return try admit(context, keyID: keyID, unlockedAtNs: unlockedAtNs, waited: &waited)
    }

    /// The presence rule, in one place: the proof is for this client, op and key, younger than
    /// `lifetime`, and issued in the current unlock.
    func checkProof(_ proof: PresenceProof, client: KeyUseClient, op: OpName, keyID: KeyID?, unlockedAtNs: UInt64,
                    lifetime: Duration) throws(CustodyError) {
        try proof.check(client: client, op: op, keyID: keyID, clock: configuration.bootClock, lifetime: lifetime)
        guard proof.issuedAtNanoseconds >= unlockedAtNs else { throw .presenceBeforeUnlock }
    }

    /// The proof that the current secret was given for this use (``PresenceMethod/secret``),
    /// minted here once the gate has checked it: a secret not yet checked must open one of the
    /// store's slots (under the unlock back-off, a failure logged under `presence.secret`); an
    /// unlock the command made with it must be the current one, and young.
    /// - Throws: ``CustodyError/unlockFailed`` and the back-off's errors, or
    ///   ``CustodyError/presenceBeforeUnlock`` / ``CustodyError/presenceExpired(ageSeconds:)``
    ///   for an unlock that is not this one or too old, ``CustodyError/presenceRequired(_:)``
    ///   for a secret already used.
    func secretApproval(_ given: GivenSecret, client: KeyUseClient, op: OpName, keyID: KeyID?, unlockedAtNs: UInt64) throws(CustodyError) -> PresenceProof {
        switch try given.take() {
        case .secret(let secret):
            try verifySecret(secret, op: .presenceSecret)
        case .unlock(let at):
            // The unlock this command made, still the current one.
            guard at == unlockedAtNs else { throw .presenceBeforeUnlock }
            let now = configuration.bootClock.nanoseconds()
            let age = now > at ? now - at : 0
            guard age <= PresenceProof.nanoseconds(configuration.presenceLifetime) else {
                throw .presenceExpired(ageSeconds: Int(age / 1_000_000_000))
            }
        }
        return PresenceProof(client: client, op: op, keyID: keyID, method: .secret, issuedAtNanoseconds: configuration.bootClock.nanoseconds())
    }

    /// A fresh touch of `credential`'s security key, as the proof of this use: the notice says
    /// what it approves, then the device is asked (``touchDevice(_:)``), then the gate mints the
    /// proof.
    /// - Throws: ``CustodyError/fido2(_:)``: not touched in time (``FIDO2Error/noTouch``), the
    ///   key absent or not holding the credential, a reply that does not verify.
    func touchApproval(_ context: KeyUseContext, keyID: KeyID, credential: FIDO2Credential) throws(CustodyError) -> PresenceProof {
        configuration.touchNotice?(TouchNotice(client: context.client, op: context.op, keyID: keyID,
                                               requester: context.approval?.label))
        try touchDevice(credential)
        return PresenceProof(client: context.client, op: context.op, keyID: keyID, method: .touch,
                             issuedAtNanoseconds: configuration.bootClock.nanoseconds())
    }

    /// The current unlock as the approval of the command that made it, for a custodian that
    /// serves one command in that command's own process (the command line on its own: every
    /// unlock it has is that command's, with the secret it was given). The gate still checks
    /// it is the current unlock and younger than the presence lifetime. Package access: inside
    /// the daemon an unlock is not an approval, so no library user of custody may turn one into it.
    /// - Throws: ``CustodyError/locked``.
    package func currentUnlockGiven() throws(CustodyError) -> GivenSecret {
        GivenSecret(unlockedAtNanoseconds: try currentUnlock(touch: false).unlockedAtNs)
    }

    // MARK: A use without a key

    /// The approval of a use that needs the user's presence but no key custody holds (the
    /// command line's trust changes: `vault trust`, `site grant`, ...), through the same gate
    /// as a signature: SiteKeep unlocked, then the proof the context brings or its
    /// ``KeyUseContext/approval`` (the current secret given, a kept approval, or the user
    /// asked), checked once, for the caller to act on (its own audit line says the use). A
    /// refusal is in the audit log before this throws.
    /// - Throws: ``CustodyError/locked``, ``CustodyError/presenceRequired(_:)`` when the context
    ///   brings no way to approve, or the verifier's or the check's refusal.
    public func approval(of context: KeyUseContext, keyID: KeyID? = nil) throws(CustodyError) -> PresenceProof {
        do throws(CustodyError) {
            try unlockOnUse(context)
            let unlockedAt = try currentUnlock().unlockedAtNs
            guard let proof = try admit(context, keyID: keyID, unlockedAtNs: unlockedAt) else {
                throw .presenceRequired("\(context.op) needs the user's approval")
            }
            return proof
        } catch {
            logRefusal(context, key: keyID?.string, error)
            throw error
        }
    }

    /// ``approval(of:keyID:)`` for a use that is complete once approved (the bridge's
    /// `sealed.open`): the approval is in the audit log, approved or refused, before this
    /// returns.
    @discardableResult
    public func approve(_ context: KeyUseContext, keyID: KeyID? = nil) throws(CustodyError) -> PresenceProof {
        var logged = context
        logged.presence = try approval(of: context, keyID: keyID)
        try log(logged, key: keyID?.string, result: "ok")
        return logged.presence!
    }
}

// MARK: 6. Audit: the one refusal classifier

extension CustodyError {
    /// Whether this refusal is about the user's approval (denied, timed out, no way to ask, a
    /// proof that does not serve, a security key not touched): every caller asks this one
    /// question, never a switch of its own (the agent's ``presence`` refusal, the audit word,
    /// the bridge's `presence_required`).
    public var isPresenceRefusal: Bool {
        switch self {
        case .presenceExpired, .presenceWrongSite, .presenceWrongUse, .presenceBeforeUnlock, .presenceRequired,
             .presenceDenied, .presenceTimedOut, .presenceUnavailable, .fido2(.noTouch), .fido2(.denied): true
        default: false
        }
    }

    /// The audit line's result word for a use refused with this error.
    public var auditResult: String {
        if isPresenceRefusal { return "presence-refused" }
        switch self {
        case .locked: return "locked"
        case .policyRefused: return "policy-refused"
        case .keyNotFound, .versionNotFound: return "no-such-key"
        case .versionVerifyOnly: return "verify-only"
        default: return "failed"
        }
    }
}

extension Custodian {
    /// The audit line's result word for a refusal (``CustodyError/auditResult``).
    static func resultWord(_ e: CustodyError) -> String { e.auditResult }

    /// The audit line of a use the gate refused: its result word, and for a refusal of the
    /// user's approval, who asked (``PresenceApproval/requester``) after the use's detail.
    func logRefusal(_ context: KeyUseContext, key: String?, _ error: CustodyError) {
        var logged = context
        if error.isPresenceRefusal, let who = context.approval?.requester {
            logged.detail = (context.detail.map { $0 + "; " } ?? "") + "asked by \(who)"
        }
        logQuietly(logged, key: key, result: error.auditResult)
    }
}

// MARK: - What a request says

/// Who is asking for a key use and how it may be approved: what a client describes, and all
/// the gate reads of it.
public struct KeyUseContext: Sendable {
    /// Who asks: a site, the command line, the ssh-agent, or SiteKeep itself (``KeyUseClient/local``).
    public var client: KeyUseClient
    /// The operation name logged (`sign`, `key.sign`, `vault.commit`, ...).
    public var op: OpName
    /// A presence proof the caller already has. Custody's gate checks it, once, at use: it must
    /// be for this `client`, this `op` and the key used, young enough, and taken in the current
    /// unlock.
    public var presence: PresenceProof?
    /// Where the gate gets the approval when ``presence`` is nil: the current secret given for
    /// this command, a verifier that asks, or a window (a kept one for this exact use, else the
    /// user is asked), after custody has checked the use could run.
    public var approval: PresenceApproval?
    /// What is being signed, in a few words, for the audit line (no secrets, at most 200
    /// characters are kept): for the SSH agent the kind of data and the destination.
    public var detail: String?
    /// What the caller needs of the key for this use to run (`team sign --der`: a P-256 key),
    /// told the key's public facts after custody's own checks and before anyone is asked; it
    /// throws to refuse the use unasked.
    public var beforeAsking: (@Sendable (KeyUseFacts) throws(CustodyError) -> Void)?

    /// A context; the client is SiteKeep itself (``KeyUseClient/local``) unless given.
    public init(client: KeyUseClient = .local, op: OpName = .sign, presence: PresenceProof? = nil, approval: PresenceApproval? = nil,
                detail: String? = nil, beforeAsking: (@Sendable (KeyUseFacts) throws(CustodyError) -> Void)? = nil) {
        self.client = client
        self.op = op
        self.presence = presence
        self.approval = approval
        self.detail = detail
        self.beforeAsking = beforeAsking
    }

    /// SiteKeep itself, for the local user, op `sign`.
    public static let local = KeyUseContext()
}

/// A key's public facts as the gate has them before anyone is asked
/// (``KeyUseContext/beforeAsking``).
public struct KeyUseFacts: Sendable, Equatable {
    /// The key's id.
    public let keyID: String
    /// The version the use takes.
    public let version: Int
    /// Its algorithm.
    public let algorithm: SigningAlgorithm
    /// Whether a touch of a security key approves the use (no prompt is shown).
    public let needsTouch: Bool
}

/// How custody's gate gets the user's approval when the caller brings no proof.
///
/// - ``init(window:label:scope:keep:)``: an approval kept in the window for the same use, else
///   the window's verifier asks the user, who is shown ``label``. The bridge passes one for
///   `key.sign` and `sealed.open` (the label is the site's quoted name and origin), the
///   ssh-agent for `ssh.sign` (the label names the key, the destination or namespace and the
///   requesting process; ``scope`` is the kind of use, so an approval for one host or
///   namespace never serves another).
/// - ``init(asking:label:)``: the verifier asks for this use alone (the command line: the
///   daemon's prompt, or the passphrase typed again at its terminal).
/// - ``init(secretGiven:)``: the current secret was given for this command; the gate checks it
///   itself and mints the proof.
///
/// The label is made only when the user is asked: most uses are served by a kept approval, and
/// quoting a label (every scalar checked for hidden characters) costs more than the rest of the
/// gate (about 20,000 instructions of the ssh-agent's, per signature).
public struct PresenceApproval: Sendable {
    enum Way: Sendable {
        case window(PresenceWindow)
        case ask(any PresenceVerifier)
        case secret(GivenSecret)
    }
    let way: Way
    /// The kind of use an approval is kept for, beyond the client, op and key (nil: any).
    public let scope: String?
    /// Whether an approval is kept for the use at all (false: the user's answer approves this
    /// one use, and no kept approval serves it).
    public let keep: Bool
    /// Who asked, for the audit line of a refused approval (nil: the client says it).
    public private(set) var requester: String? = nil
    /// The process that asked, when the caller knows it (the ssh-agent's peer): a prompt shown
    /// elsewhere tells that process's own terminal where to answer, and never asks there.
    public var askerPID: Int32? = nil
    private let makeLabel: @Sendable () -> String

    /// Approval through `window`: kept, else asked.
    /// - Parameters:
    ///   - label: evaluated only when the user is asked, each time (see ``label``).
    ///   - keep: false when the use is one no approval should serve twice (the ssh-agent's login
    ///     to a destination the connection did not verify).
    public init(window: PresenceWindow, label: @autoclosure @escaping @Sendable () -> String, scope: String? = nil, keep: Bool = true) {
        self.way = .window(window)
        self.makeLabel = label
        self.scope = scope
        self.keep = keep
    }

    /// Approval by asking `verifier` now, showing `label`; nothing is kept. `requester` names
    /// who asked in the audit line of a refusal (the command line's client process).
    public init(asking verifier: any PresenceVerifier, label: @autoclosure @escaping @Sendable () -> String, requester: String? = nil) {
        self.way = .ask(verifier)
        self.makeLabel = label
        self.scope = nil
        self.keep = false
        self.requester = requester
    }

    /// Approval by the current secret given for this command (``GivenSecret``).
    public init(secretGiven: GivenSecret) {
        self.way = .secret(secretGiven)
        self.makeLabel = { "" }
        self.scope = nil
        self.keep = false
    }

    /// What the prompt names as the requester (quoted and bounded by the prompt), made now.
    public var label: String { makeLabel() }
}

/// The current secret given for one command (`--passphrase-file`, `--prf-file`,
/// `--recovery-file`, or typed when asked): the command line's approval of that command's key
/// uses, which custody's gate checks itself (``PresenceApproval/init(secretGiven:)``). Either the
/// secret, not yet checked (the gate checks it opens a slot), or the unlock the command made
/// with it (``Custodian/unlock(_:slotID:)`` returns one). Serves one check.
public final class GivenSecret: @unchecked Sendable {
    // @unchecked: `secret` is written once, in `init`, and taken once, by the one caller `used`
    // lets through (the gate's check); no other access exists.
    enum Evidence: ~Copyable {
        case secret(UnlockSecret)
        /// The unlock at this reading of the custodian's boot clock.
        case unlock(atNanoseconds: UInt64)
    }
    private let used = Mutex(false)
    private var secret: UnlockSecret?
    private let unlockedAt: UInt64?

    /// A secret the command was given, for the gate to check against the slots.
    public init(_ secret: consuming UnlockSecret) {
        self.secret = consume secret
        self.unlockedAt = nil
    }

    /// The unlock made with the secret given, at `atNanoseconds`.
    init(unlockedAtNanoseconds: UInt64) {
        self.secret = nil
        self.unlockedAt = unlockedAtNanoseconds
    }

    /// The evidence, once.
    func take() throws(CustodyError) -> Evidence {
        let first = used.withLock { used in
            defer { used = true }
            return !used
        }
        guard first else { throw .presenceRequired("the secret given for this command has already approved a use") }
        if let unlockedAt { return .unlock(atNanoseconds: unlockedAt) }
        guard let taken = secret.take() else { throw .presenceRequired("no secret was given for this command") }
        return .secret(taken)
    }
}
