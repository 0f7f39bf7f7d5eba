public import SiteKeepCustody
public import SiteKeepAgent
import SiteKeepCrypto
import SiteKeepNames

/// The agent's keys from custody: the team keys whose SSH policy is on, signing through
/// custody's one gate, ``Custodian/signature(keyID:version:message:context:)``, which admits the
/// use (an approval kept for the same key and kind of use, else a prompt) and signs in one call.
///
/// **Approvals.** The prompt leads with the key, then what is signed
/// (``AgentSignRequest/presenceLabel``: the destination host key's fingerprint as the session
/// binding verified it, or `UNVERIFIED`, and the hosts the connection is forwarded through, then
/// the quoted user name; or the SSHSIG namespace), then who asks (the peer's quoted command name
/// and pid, and what the approval serves). An approval is kept in ``presence`` for at most 60 s
/// for the same key, the same kind of use (a login as the same user to the same verified host,
/// or an SSHSIG in the same namespace) and the same peer process (its pid and start time,
/// ``AgentPeer/process``): one for another key, host, namespace or process never serves. None
/// is kept for a login whose destination the connection did not verify (any such login would
/// look the same), nor for a peer whose start time could not be read
/// (``AgentSignRequest/presenceScope``).
///
/// **Client.** An agent connection is not a web site, so its key uses are bound and logged under
/// the client ``client`` (``SiteKeepCustody/KeyUseClient/sshAgent``, written `ssh-agent`): presence proofs are issued for it (and for the key and
/// kind of use: the ``PresenceApproval`` scope), custody's gate checks them against it, and every audit
/// line says `"site":"ssh-agent"`, `"op":"ssh.sign"`, the key, and a detail naming the kind of
/// data (SSH user-auth with the bound host, SSHSIG with its namespace, or other). Which keys an
/// agent may use is the keys' own SSH policy (`sitekeep team ssh enable`), not a site list.
///
/// **Policy.** The agent checks no policy of its own and writes no audit line: custody's gate
/// applies the key's SSH policy to what the bytes are and logs every use, refused ones too
/// (the policy, SiteKeep locked, presence denied), with the detail this request gives. Its
/// refusal text is what the daemon's log shows the ssh client's request was refused for.
public final class CustodyAgentKeys: AgentKeySource {
    /// The client agent connections act as.
    public static let client = KeyUseClient.sshAgent
    /// The op every agent signature is logged under.
    public static let op = OpName.sshSign

    public let custodian: Custodian
    /// The agent's kept approvals and the verifier that asks (in the custodian's lock scope, so
    /// lock forgets them).
    public let presence: PresenceWindow

    /// SiteKeep's crypto, for the connections' session bindings and fingerprints.
    public var cryptography: any SSHCryptography { CryptoSSHCryptography() }

    /// The other agent's socket now (the `ssh-agent-upstream` setting in force), or nil: none.
    public let upstream: @Sendable () -> String?

    /// Keys of `custodian`, approved through `presence`; `upstream` says where the other agent
    /// is (read at each listing and signature, so a change of the setting applies at once).
    public init(custodian: Custodian, presence: PresenceWindow, upstream: @escaping @Sendable () -> String? = { nil }) {
        self.custodian = custodian
        self.presence = presence
        self.upstream = upstream
    }

    /// The other agent's keys, when ``upstream`` names one.
    public func upstreamIdentities() throws(AgentRefusal) -> [AgentUpstreamKey] {
        guard let path = upstream() else { return [] }
        return try UpstreamAgent(path: path).identities(cryptography: cryptography)
    }

    /// A signature with a key of the other agent: custody's gate admits the use first
    /// (``SiteKeepCustody/Custodian/approve(_:keyID:)``: SiteKeep unlocked or unlocked now,
    /// a kept approval of the same use by the same process, else the prompt, which names the
    /// other agent's socket, the key's comment and fingerprint), and writes the audit line
    /// (client `ssh-agent`, op `ssh.sign`, the key as `upstream-` and the fingerprint's first
    /// bytes in hex, the detail naming the fingerprint, the socket and the kind of data); only
    /// then is the request forwarded, and the other agent's signature returned as it is. A
    /// denied use never reaches the other agent.
    public func signUpstream(_ request: AgentUpstreamSignRequest) throws(AgentRefusal) -> [UInt8] {
        guard let path = upstream(), path == request.key.agentPath else {
            throw .policy("the key is no longer offered: ssh-agent-upstream changed since it was listed; list the keys again")
        }
        let keyID = try? KeyID(parsing: "upstream-" + Hex.encode(Array(cryptography.sha256(request.key.blob).prefix(12))))
        var approval = PresenceApproval(window: presence, label: request.presenceLabel, scope: request.presenceScope ?? "",
                                        keep: request.presenceScope != nil)
        approval.askerPID = request.peer.pid
        let detail = "other agent key \(request.key.fingerprint) at \(path); \(request.purpose.auditDetail)"
        let context = KeyUseContext(client: Self.client, op: Self.op, approval: approval, detail: detail)
        do {
            try custodian.approve(context, keyID: keyID)
        } catch .locked {
            throw .locked
        } catch where error.isPresenceRefusal {
            throw .presence(error.description)
        } catch {
            throw .custody(error.description)
        }
        return try UpstreamAgent(path: path).sign(blob: request.key.blob, data: request.data, flags: request.flags)
    }

    /// The SSH-enabled team keys. Unlocked, a key is listed with the policy in force
    /// (``SiteKeepCustody/Custodian/sshPolicyInForce(keyID:)``): one its keyring record names
    /// but custody did not bind to the key (a keyring edit) is not. Locked, the keys whose
    /// records name SSH use are listed (public facts, as gpg-agent lists keys whose passphrase
    /// it does not hold), so ssh and git ask to sign: the request then asks for the unlock
    /// (``SiteKeepCustody/Custodian/unlocksOnUse``), or is refused with the daemon's log line and
    /// a notice on the asker's terminal naming `sitekeep unlock`; custody's gate checks the
    /// policy bound to the key as for every use.
    ///
    /// After them, the keys added with `ssh-add` (``SiteKeepCustody/Custodian/listAgentKeys()``:
    /// a key whose `-t` lifetime has ended is removed first), commented as they were added.
    public func identities() -> [AgentIdentity] {
        guard let keys = try? custodian.listTeamKeys() else { return [] }
        let team: [AgentIdentity] = !custodian.isUnlocked ? keys.compactMap { AgentIdentity($0) } : keys.compactMap { info in
            guard info.ssh?.enabled == true, let policy = try? custodian.sshPolicyInForce(keyID: info.id) else { return nil }
            return AgentIdentity(info, policy: policy)
        }
        let added: [AgentIdentity] = ((try? custodian.listAgentKeys()) ?? []).compactMap { AgentIdentity(added: $0) }
        return team + added
    }

    /// Takes the key into custody (``SiteKeepCustody/Custodian/addAgentKey(algorithm:privateKey:publicKey:comment:confirm:lifetimeSeconds:)``,
    /// which wipes the private bytes it is given); adding needs SiteKeep unlocked.
    public func add(_ key: AgentNewKey, peer: AgentPeer) throws(AgentRefusal) {
        var secret = key.privateKey
        defer { for i in secret.indices { secret[i] = 0 } }
        let raw: [UInt8]
        switch key.publicKey {
        case .ed25519(let pk): raw = pk
        case .ecdsa(_, let point): raw = point
        case .rsa: throw .policy("an ssh-rsa key was not added: SiteKeep's agent holds ssh-ed25519 and ecdsa-sha2-nistp256 keys only")
        }
        do {
            _ = try custodian.addAgentKey(algorithm: key.algorithm, privateKey: &secret, publicKey: raw, comment: key.comment,
                                          confirm: key.confirm, lifetimeSeconds: key.lifetimeSeconds)
        } catch .locked {
            throw .policy("SiteKeep is locked, so ssh-add cannot add a key: run 'sitekeep unlock', then ssh-add again")
        } catch {
            throw .custody("the key was not added: \(error.description)")
        }
    }

    /// Removes the added key with this blob; a team key's blob is refused, naming the command
    /// that stops offering it.
    public func remove(blob: [UInt8], peer: AgentPeer) throws(AgentRefusal) {
        guard custodian.isUnlocked else { throw .policy("SiteKeep is locked, so ssh-add cannot remove a key: run 'sitekeep unlock' first") }
        if let added = ((try? custodian.listAgentKeys()) ?? []).first(where: { AgentIdentity(added: $0)?.blob == blob }) {
            do { try custodian.removeAgentKey(id: added.key.id) } catch { throw .custody(error.description) }
            return
        }
        if let path = upstream(), ((try? upstreamIdentities()) ?? []).contains(where: { $0.blob == blob }) {
            throw .policy("that key is your other agent's (ssh-agent-upstream), which SiteKeep's ssh-add never removes: "
                + "remove it there with 'SSH_AUTH_SOCK=\(path) ssh-add -d KEY'")
        }
        if let team = identities().first(where: { $0.blob == blob && $0.origin == .team }) {
            throw .policy("\(team.keyID) is a SiteKeep team key, which ssh-add does not remove: "
                + "'sitekeep team ssh disable \(team.keyID)' stops offering it to ssh")
        }
        throw .unknownKey
    }

    /// Removes every key added with `ssh-add`; team keys stay (they are SiteKeep's, offered by
    /// their SSH policy).
    public func removeAll(peer: AgentPeer) throws(AgentRefusal) {
        do { try custodian.removeAllAgentKeys() } catch .locked {
            throw .policy("SiteKeep is locked, so ssh-add cannot remove keys: run 'sitekeep unlock' first")
        } catch {
            throw .custody(error.description)
        }
    }

    public func sign(_ request: AgentSignRequest) throws(AgentRefusal) -> [UInt8] {
        let identity = request.identity
        let detail = request.purpose.auditDetail
        let signed: TeamSignature
        do {
            // The gate checks the key's policy, admits the use (kept approval or prompt), signs,
            // and writes the audit line, approved or refused, before returning.
            // Kept only for a use the approval names, and only for the process that asked.
            // A key added with `ssh-add -c` keeps no approval: each use is asked.
            var keep = request.presenceScope != nil
            if case .added(_, let confirm) = identity.origin, confirm { keep = false }
            var approval = PresenceApproval(window: presence, label: request.presenceLabel,
                                            scope: request.presenceScope ?? "", keep: keep)
            // The peer's own terminal is told where the prompt asks (never asked itself).
            approval.askerPID = request.peer.pid
            let context = KeyUseContext(client: Self.client, op: Self.op, approval: approval, detail: detail)
            if case .added = identity.origin {
                signed = try custodian.agentKeySignature(keyID: identity.keyID, message: request.data, context: context)
            } else {
                signed = try custodian.signature(keyID: identity.keyID, message: request.data, context: context)
            }
        } catch .locked {
            throw .locked
        } catch .keyNotFound where identity.origin != .team {
            throw .policy("the key \(identity.keyID) added by ssh-add is gone (removed, or its lifetime ended); list the keys again")
        } catch .policyRefused(let why) {
            throw .policy(why)
        } catch where error.isPresenceRefusal {
            throw .presence(error.description)
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

}

extension AgentIdentity {
    /// The identity of a key added with `ssh-add`, or nil for a record whose public key is not
    /// readable.
    public init?(added info: AgentKeyInfo) {
        guard let raw = try? Base64.decode(info.key.publicKey),
              let key = try? SSHPublicKey(algorithm: info.key.algorithm, publicKey: raw) else { return nil }
        self.init(keyID: info.key.id, name: info.key.name, version: info.key.version, algorithm: info.key.algorithm, publicKey: key,
                  policy: SSHAgentPolicy(enabled: true, login: true, namespaces: nil, otherData: true),
                  origin: .added(comment: info.comment, confirm: info.confirm))
    }

    /// The identity of a team key's public facts, or nil when its SSH policy is off.
    public init?(_ info: SigningKeyInfo) {
        self.init(info, policy: info.ssh)
    }

    /// The identity of a team key's public facts under `policy` (the one in force, which custody
    /// checked is bound to the key), or nil when it is off.
    public init?(_ info: SigningKeyInfo, policy: SSHAgentPolicy?) {
        guard let policy, policy.enabled, let raw = try? Base64.decode(info.publicKey),
              let key = try? SSHPublicKey(algorithm: info.algorithm, publicKey: raw) else { return nil }
        self.init(keyID: info.id, name: info.name, version: info.version, algorithm: info.algorithm, publicKey: key, policy: policy)
    }
}
