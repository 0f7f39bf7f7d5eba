import Synchronization
public import SiteKeepCustody

/// How the agent asks the user to approve a signature: the seam over custody's presence.
///
/// ``WindowedAgentPresence`` keeps one ``PresenceWindow`` per kind of use (the same login
/// destination, the same SSHSIG namespace): a window binds its proofs to (site, op, key), and an
/// agent's use also depends on what is signed.
public protocol AgentPresence: Sendable {
    /// A presence proof for `request`, bound to ``CustodyAgentKeys/site``: a fresh one from the
    /// user, or one they gave within the window for the same key and the same kind of use.
    func approve(_ request: AgentSignRequest) throws(CustodyError) -> PresenceProof
    /// Forgets every cached approval (on lock).
    func clear()
}

/// Presence through custody's verifiers (askpass, passphrase), reused for at most 60 s for the
/// same key and the same kind of use: a login as the same user to the same host, or an SSHSIG in
/// the same namespace. An approval for one key, host or namespace never serves another.
///
/// The prompt leads with the key, then what is signed (``AgentSignRequest/presenceLabel``: the
/// destination host key's fingerprint as the session binding verified it, or `UNVERIFIED`, and
/// the hosts the connection is forwarded through, then the quoted user name; or the SSHSIG
/// namespace), then who asks (the peer's quoted command name and pid).
public final class WindowedAgentPresence: AgentPresence {
    private let verifier: any PresenceVerifier
    private let lifetime: Duration
    private let clock: BootClock
    private let lockScope: LockScope
    private let windows = Mutex<[String: PresenceWindow]>([:])
    /// The most scopes remembered; past it every window is dropped (a new scope asks again).
    static let maximumScopes = 256

    /// Approvals through `verifier`, kept in `lockScope` (the custodian's ``Custodian/lockScope``),
    /// so lock and unlock forget them.
    public init(verifier: any PresenceVerifier, lockScope: LockScope, lifetime: Duration = PresenceProof.maximumLifetime,
                clock: BootClock = .system) {
        self.verifier = verifier
        self.lockScope = lockScope
        self.lifetime = lifetime
        self.clock = clock
    }

    public func approve(_ request: AgentSignRequest) throws(CustodyError) -> PresenceProof {
        let scope = request.identity.keyID + "\0" + request.purpose.presenceScope
        let window = windows.withLock { w -> PresenceWindow in
            if let existing = w[scope] { return existing }
            if w.count >= Self.maximumScopes { w.removeAll() }
            let fresh = PresenceWindow(verifier: verifier, lockScope: lockScope, lifetime: lifetime, clock: clock)
            w[scope] = fresh
            return fresh
        }
        // The proof is for the op custody checks (`ssh.sign`); what is signed is in the label.
        return try window.proof(site: CustodyAgentKeys.site, siteLabel: request.presenceLabel,
                                op: CustodyAgentKeys.op, keyID: request.identity.keyID)
    }

    public func clear() { windows.withLock { $0.removeAll() } }
}

/// The agent's keys from custody: the team keys whose SSH policy is on, signing through
/// ``Custodian/signature(keyID:version:message:context:)`` with a presence proof.
///
/// **Site.** An agent connection is not a web site, so its key uses are bound and logged under
/// the pseudo-site ``site`` (`ssh-agent`): presence proofs are issued for it (and for the key and
/// kind of use, see ``WindowedAgentPresence``), custody checks them against it, and every audit
/// line says `"site":"ssh-agent"`, `"op":"ssh.sign"`, the key, and a detail naming the kind of
/// data (SSH user-auth with the bound host, SSHSIG with its namespace, or other). Which keys an
/// agent may use is the keys' own SSH policy (`sitekeep team ssh enable`), not a site list.
///
/// A use the policy refuses, or one refused because SiteKeep is locked or presence was denied,
/// is logged too, with that result.
public final class CustodyAgentKeys: AgentKeySource {
    /// The pseudo-site agent connections act as.
    public static let site = "ssh-agent"
    /// The op every agent signature is logged under.
    public static let op = "ssh.sign"

    public let custodian: Custodian
    public let presence: any AgentPresence

    /// Keys of `custodian`, approved through `presence` (whose approvals live in the custodian's
    /// lock scope, so lock forgets them).
    public init(custodian: Custodian, presence: any AgentPresence) {
        self.custodian = custodian
        self.presence = presence
    }

    /// The SSH-enabled team keys; none while locked (as a locked ssh-agent lists none).
    public func identities() -> [AgentIdentity] {
        guard custodian.isUnlocked, let keys = try? custodian.listTeamKeys() else { return [] }
        return keys.compactMap(AgentIdentity.init)
    }

    public func sign(_ request: AgentSignRequest) throws(AgentRefusal) -> [UInt8] {
        let identity = request.identity
        let detail = request.purpose.auditDetail
        if let why = identity.policy.refusal(of: request.purpose) {
            refuse(identity, "policy-refused", detail)
            throw .policy(why)
        }
        guard custodian.isUnlocked else {
            refuse(identity, "locked", detail)
            throw .locked
        }
        let proof: PresenceProof
        do {
            proof = try presence.approve(request)
        } catch {
            refuse(identity, "presence-refused", detail)
            throw .presence(error.description)
        }
        let signed: TeamSignature
        do {
            // Custody checks the proof again and writes the audit line before returning.
            signed = try custodian.signature(keyID: identity.keyID, message: request.data,
                                             context: KeyUseContext(site: Self.site, op: Self.op, presence: proof, detail: detail))
        } catch .locked {
            throw .locked
        } catch {
            throw .custody(error.description)
        }
        guard signed.version == identity.version else {
            throw .custody("key \(identity.keyID) was rotated since it was listed; list the keys again")
        }
        do { return try SSHSignatureBlob.make(algorithm: signed.algorithm, raw: signed.signature) } catch {
            throw .custody(error.description)
        }
    }

    private func refuse(_ identity: AgentIdentity, _ result: String, _ detail: String) {
        try? custodian.auditLog.append(site: Self.site, op: Self.op, key: "\(identity.keyID)@v\(identity.version)", result: result, detail: detail)
    }
}
