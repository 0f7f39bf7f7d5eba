import SiteKeepNames

// Custody's one gate for every key use, from every client (a page through the bridge, ssh and
// git through the agent socket, the command line): whether the user approved this use now
// (``Custodian/admit(_:keyID:unlockedAtNs:beforeAsking:)``: one check of one proof, in the same
// call that uses the key) and what the key may sign (``SignedDataKind`` and the key's policy).

/// What a team key is asked to sign, read from the bytes themselves: the signing gate's policy
/// check depends on what the data *is*, never on what the caller says it is, so a raw
/// `team sign` or `key.sign` of an SSH login request is treated as the login it would be.
///
/// The reading is deliberately loose (a prefix, not a full parse): anything that starts as an
/// SSH user-authentication request or an SSHSIG blob is treated as one, since a signature over
/// such bytes is what an SSH server or `ssh-keygen -Y verify` would accept.
public enum SignedDataKind: Sendable, Equatable {
    /// An RFC 4252 §7 public-key user-authentication request: `string session-id` (1 to 256
    /// bytes), then `SSH_MSG_USERAUTH_REQUEST` (50). A signature over it logs in somewhere.
    case sshLogin
    /// An SSHSIG signed-data blob (`"SSHSIG"` magic, then the namespace); the namespace is
    /// nil when the blob is too short or malformed to name one.
    case sshsig(namespace: String?)
    /// Anything else.
    case other

    /// The kind of `data`.
    public init(_ data: [UInt8]) {
        if data.count >= 6, data[0..<6].elementsEqual("SSHSIG".utf8) {
            self = .sshsig(namespace: Self.sshString(data, at: 6).flatMap { String(validating: $0, as: UTF8.self) })
            return
        }
        if data.count >= 5 {
            let n = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
            if (1...256).contains(n), data.count > 4 + n, data[4 + n] == 50 {
                self = .sshLogin
                return
            }
        }
        self = .other
    }

    /// The SSH `string` at `offset`, or nil when it does not fit.
    private static func sshString(_ data: [UInt8], at offset: Int) -> ArraySlice<UInt8>? {
        guard data.count >= offset + 4 else { return nil }
        let n = Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8 | Int(data[offset + 3])
        guard n <= data.count - offset - 4 else { return nil }
        return data[(offset + 4)..<(offset + 4 + n)]
    }
}

extension Custodian {
    /// The signing gate's policy rule for a team key whose SSH policy is `ssh` (nil: SSH use
    /// off), asked to sign data of `kind` for `op`.
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
}

/// Where custody's gate gets the user's approval when the caller brings no proof: an approval
/// kept in ``window`` for the same use, else the window's verifier asks the user, who is shown
/// ``label``.
///
/// The bridge passes one for `key.sign` and `sealed.open` (the label is the site's quoted name
/// and origin), the ssh-agent for `ssh.sign` (the label names the key, the destination or
/// namespace and the requesting process; ``scope`` is the kind of use, so an approval for one
/// host or namespace never serves another).
///
/// The label is made only when the user is asked: most uses are served by a kept approval, and
/// quoting a label (every scalar checked for hidden characters) costs more than the rest of the
/// gate (about 20,000 instructions of the ssh-agent's, per signature).
public struct PresenceApproval: Sendable {
    /// The kept approvals and the verifier that asks.
    public let window: PresenceWindow
    /// The kind of use an approval is kept for, beyond the client, op and key (nil: any).
    public let scope: String?
    /// Whether an approval is kept for the use at all (false: the user's answer approves this
    /// one use, and no kept approval serves it).
    public let keep: Bool
    private let makeLabel: @Sendable () -> String

    /// - Parameters:
    ///   - label: evaluated only when the user is asked, each time (see ``label``).
    ///   - keep: false when the use is one no approval should serve twice (the ssh-agent's login
    ///     to a destination the connection did not verify).
    public init(window: PresenceWindow, label: @autoclosure @escaping @Sendable () -> String, scope: String? = nil, keep: Bool = true) {
        self.window = window
        self.makeLabel = label
        self.scope = scope
        self.keep = keep
    }

    /// What the prompt names as the requester (quoted and bounded by the prompt), made now.
    public var label: String { makeLabel() }
}

// The one gate: every key use that needs the user's approval, from every client, is admitted
// here, once, in the same call that uses the key (``Custodian/signature(keyID:version:message:context:)``)
// or approves a use custody holds no key for (``Custodian/approve(_:keyID:)``).
extension Custodian {
    /// The approval of `context`'s use of `keyID`, checked once: the proof the caller brings,
    /// else a kept one of ``KeyUseContext/approval``'s window, else (after `beforeAsking`, which
    /// throws for a use that cannot run, so it never prompts) a fresh one from the user. Each is
    /// checked by ``checkProof(_:client:op:keyID:unlockedAtNs:lifetime:)`` only; a kept one that
    /// fails is forgotten and the user is asked. Nothing is kept for, or serves, an approval
    /// that says not to keep (``PresenceApproval/keep``). Nil when the context brings neither.
    func admit(_ context: KeyUseContext, keyID: KeyID?, unlockedAtNs: UInt64,
               beforeAsking: () throws(CustodyError) -> Void) throws(CustodyError) -> PresenceProof? {
        let client = context.client
        if let given = context.presence {
            try checkProof(given, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: configuration.presenceLifetime)
            return given
        }
        guard let approval = context.approval else { return nil }
        let window = approval.window
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
        try beforeAsking()
        let generation = window.generation
        let fresh = try window.ask(use, label: approval.label)
        try checkProof(fresh, client: client, op: context.op, keyID: keyID, unlockedAtNs: unlockedAtNs, lifetime: lifetime)
        if approval.keep { window.keep(fresh, for: use, ifNotClearedSince: generation) }
        return fresh
    }

    /// The presence rule, in one place: the proof is for this client, op and key, younger than
    /// `lifetime`, and issued in the current unlock.
    func checkProof(_ proof: PresenceProof, client: KeyUseClient, op: OpName, keyID: KeyID?, unlockedAtNs: UInt64,
                    lifetime: Duration) throws(CustodyError) {
        try proof.check(client: client, op: op, keyID: keyID, clock: configuration.bootClock, lifetime: lifetime)
        guard proof.issuedAtNanoseconds >= unlockedAtNs else { throw .presenceBeforeUnlock }
    }

    /// Approves a use that needs the user's presence but no key custody holds (the bridge's
    /// `sealed.open`), through the same gate as a signature: SiteKeep unlocked, then the proof
    /// the context brings or its ``KeyUseContext/approval`` (kept, else asked), checked once.
    /// The use is in the audit log, approved or refused, before this returns.
    /// - Throws: ``CustodyError/locked``, ``CustodyError/presenceRequired(_:)`` when the context
    ///   brings no way to approve, or the verifier's or the check's refusal.
    @discardableResult
    public func approve(_ context: KeyUseContext, keyID: KeyID? = nil) throws(CustodyError) -> PresenceProof {
        var logged = context
        do throws(CustodyError) {
            let unlockedAt = try currentUnlock().unlockedAtNs
            guard let proof = try admit(context, keyID: keyID, unlockedAtNs: unlockedAt, beforeAsking: {}) else {
                throw .presenceRequired("\(context.op) needs the user's approval")
            }
            logged.presence = proof
        } catch {
            logQuietly(context, key: keyID?.string, result: Self.resultWord(error))
            throw error
        }
        try log(logged, key: keyID?.string, result: "ok")
        return logged.presence!
    }
}
