#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import SiteKeepCustody
internal import SiteKeepCrypto
internal import SiteKeepAgent
internal import SiteKeepWiring
internal import SiteKeepDaemon

/// The command line's side of the one gate: the approval a command needs before custody uses a
/// key for it, or changes what a key may do or which signers are trusted.
///
/// The command line is one more client: an unlocked daemon does not let it use a key unasked,
/// whichever process sent the command. An approval is one of:
/// - **the current secret given for this command**: `--passphrase-file`, `--prf-file`,
///   `--recovery-file`, or the passphrase typed when asked. On its own (no daemon) the command
///   unlocks with it, which is the approval; inside an unlocked daemon the secret is checked
///   against the slots (under the unlock back-off) and not used to unlock;
/// - **the user's answer to the daemon's presence prompt** (`SITEKEEP_ASKPASS` of the daemon),
///   naming the requesting process, the op and the key;
/// - else, on the client's terminal, **the passphrase typed again**.
///
/// Each gives a ``PresenceProof`` for the client ``KeyUseClient/commandLine``, this op and this
/// key only, which custody checks again at the use.
enum Approval {
    /// A proof that the user approved `op` with `keyID` for this command, or a failure saying
    /// what to give. `what` says the use in a few words for the prompt ("sign with team key summit").
    /// `subject`, when given, is shown after the requesting process (what a trust change is
    /// about: "grant key.sign to Notes (https://notes.example)").
    static func approve(_ inv: Invocation, store: StoreContext, op: OpName, keyID: KeyID?, subject: String? = nil) throws -> PresenceProof {
        let site = KeyUseClient.commandLine
        let custodian = store.custodian
        let givesSecret = SecretSource.all.contains { inv.option($0.option) != nil }
        func bySecret() -> PresenceProof {
            PresenceProof(client: site, op: op, keyID: keyID, method: .secret, issuedAtNanoseconds: BootClock.system.nanoseconds())
        }
        guard inv.hosted != nil else {
            // On its own, this process unlocks for this command alone, with the secret it gives
            // or types now: that is the approval.
            try store.unlockOneShot(inv)
            return bySecret()
        }
        if !custodian.isUnlocked {
            // The daemon is locked: unlocking it with the secret given or typed for this command
            // is the approval of this use too.
            try store.unlockOneShot(inv)
            return bySecret()
        }
        if givesSecret {
            try UnlockInput.attempt(inv, isWrong: { ($0 as? CustodyError) == .unlockFailed }) { secret in
                try custodian.verifySecret(secret.take(), op: .presenceSecret)
            }
            return bySecret()
        }
        let asker = inv.client ?? "a process of yours"
        let label = "\(asker) on the command line" + (subject.map { ": \($0)" } ?? "")
        if let verifier = store.shared?.presence {
            switch ask(verifier, site: site, label: label, op: op, keyID: keyID) {
            case .success(let proof): return proof
            case .failure(.presenceUnavailable(let why)):
                guard inv.io.canPrompt else { throw refusal(op: op, keyID: keyID, why: why) }
                inv.note("(no presence prompt: \(why); asking for the passphrase instead)")
            case .failure(.presenceDenied):
                refused(custodian, op: op, keyID: keyID, asker: asker)
                throw CommandFailure("\(describe(op: op, keyID: keyID)) was not approved", code: "presence_denied")
            case .failure(let other): throw other
            }
        }
        guard inv.io.canPrompt else {
            throw refusal(op: op, keyID: keyID, why: "the daemon has no presence prompt ('sitekeep doctor' says why)")
        }
        let verifier = PassphrasePresenceVerifier(custodian: custodian) { (prompt: String) throws(CustodyError) -> SecretBytes in
            do { return try SecretReader.prompt(.passphrase, prompt: prompt + " ", confirm: false, io: inv.io) } catch {
                throw .presenceDenied
            }
        }
        switch ask(verifier, site: site, label: label, op: op, keyID: keyID) {
        case .success(let proof): return proof
        case .failure(.presenceDenied):
            refused(custodian, op: op, keyID: keyID, asker: asker)
            throw CommandFailure("\(describe(op: op, keyID: keyID)) was not approved: the passphrase typed does not open this store",
                                 code: "presence_denied")
        case .failure(let other): throw other
        }
    }

    private static func ask(_ verifier: any PresenceVerifier, site: KeyUseClient, label: String, op: OpName, keyID: KeyID?) -> Result<PresenceProof, CustodyError> {
        do throws(CustodyError) {
            return .success(try verifier.requestPresence(client: site, siteLabel: label, op: op, keyID: keyID))
        } catch {
            return .failure(error)
        }
    }

    /// A denied use is in the audit log too, naming who asked (as the agent logs its refusals).
    static func refused(_ custodian: Custodian, op: OpName, keyID: KeyID?, asker: String) {
        try? custodian.auditLog.append(client: .commandLine, op: op, key: keyID?.string, result: "presence-refused",
                                       detail: "asked by \(asker)")
    }

    static func describe(op: OpName, keyID: KeyID?) -> String {
        keyID.map { "\(op) with \($0)" } ?? op.string
    }

    static func refusal(op: OpName, keyID: KeyID?, why: String) -> CommandFailure {
        CommandFailure("\(describe(op: op, keyID: keyID)) needs your approval, and there is no way to ask for it here: \(why)",
                       remedy: "run it at a terminal, give the current passphrase for this command (--passphrase-file PATH, '-' for stdin), "
                           + "or let the daemon show a prompt ('sitekeep doctor' says which it would use and what it needs)",
                       code: "presence_required")
    }
}

extension Approval {
    /// `id` as a key id, for an approval (the command has already checked it names a key).
    /// - Throws: ``CustodyError/invalidKeyID(_:)``.
    static func keyID(_ id: String) throws(CustodyError) -> KeyID {
        do throws(VocabularyError) { return try KeyID(parsing: id) } catch { throw .invalidKeyID(id) }
    }
}

// The command line's own op names: what its approvals and audit lines name.
extension OpName {
    /// A settings change that widens trust (`sitekeep config set`).
    static let daemonConfig = OpName(known: "daemon.config")
    /// Bridge ops granted to a site.
    static let siteGrant = OpName(known: "site.grant")
    /// Bridge ops taken back from a site.
    static let siteRevoke = OpName(known: "site.revoke")
    /// `site host add`: a program may bind the site's bridge connections.
    static let siteHost = OpName(known: "site.host")
    /// `site approve`: an entry of sites.json written without an approval made to apply.
    static let siteApprove = OpName(known: "site.approve")
    /// `site host remove`.
    static let siteHostRemove = OpName(known: "site.host.remove")
    /// A signer trusted in a vault.
    static let vaultTrust = OpName(known: "vault.trust")
    /// A vault's policy on unsigned commits widened.
    static let vaultPolicy = OpName(known: "vault.policy")
}

/// Who sent a command to the daemon, for the presence prompt.
enum ClientLabel {
    /// `sitekeep (pid 4242)`, as the agent names its peers (the command name, escaped and
    /// bounded, is only a hint: a process chooses its own).
    static func of(pid: Int32, uid: UInt32) -> String {
        AgentPeer(pid: pid, uid: uid, command: AgentSocketServer.command(of: pid)).label
    }
}
