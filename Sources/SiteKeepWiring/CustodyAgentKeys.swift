public import SiteKeepCustody
public import SiteKeepAgent
import SiteKeepCrypto

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

    /// Keys of `custodian`, approved through `presence`.
    public init(custodian: Custodian, presence: PresenceWindow) {
        self.custodian = custodian
        self.presence = presence
    }

    /// The SSH-enabled team keys. Unlocked, a key is listed with the policy in force
    /// (``SiteKeepCustody/Custodian/sshPolicyInForce(keyID:)``): one its keyring record names
    /// but custody did not bind to the key (a keyring edit) is not. Locked, the keys whose
    /// records name SSH use are listed (public facts, as gpg-agent lists keys whose passphrase
    /// it does not hold), so ssh and git ask to sign: the request then asks for the unlock
    /// (``SiteKeepCustody/Custodian/unlocksOnUse``), or is refused with the daemon's log line and
    /// a notice on the asker's terminal naming `sitekeep unlock`; custody's gate checks the
    /// policy bound to the key as for every use.
    public func identities() -> [AgentIdentity] {
        guard let keys = try? custodian.listTeamKeys() else { return [] }
        guard custodian.isUnlocked else { return keys.compactMap { AgentIdentity($0) } }
        return keys.compactMap { info in
            guard info.ssh?.enabled == true, let policy = try? custodian.sshPolicyInForce(keyID: info.id) else { return nil }
            return AgentIdentity(info, policy: policy)
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
            var approval = PresenceApproval(window: presence, label: request.presenceLabel,
                                            scope: request.presenceScope ?? "", keep: request.presenceScope != nil)
            // The peer's own terminal is told where the prompt asks (never asked itself).
            approval.askerPID = request.peer.pid
            signed = try custodian.signature(keyID: identity.keyID, message: request.data,
                                             context: KeyUseContext(client: Self.client, op: Self.op, approval: approval, detail: detail))
        } catch .locked {
            throw .locked
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
