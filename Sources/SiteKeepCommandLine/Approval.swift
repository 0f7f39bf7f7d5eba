#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import SiteKeepCustody
internal import SiteKeepCrypto
internal import SiteKeepAgent
internal import SiteKeepWiring
internal import SiteKeepDaemon

/// The command line's side of the one gate: it describes how the user approves a command's use
/// of a key (or a change of what a key may do or which signers are trusted), and custody's gate
/// (`Custodian+Gate.swift`) checks that approval and mints its proof. The command line mints
/// none and asks no verifier itself.
///
/// The command line is one more client: an unlocked daemon does not let it use a key unasked,
/// whichever process sent the command. An approval is one of:
/// - **the current secret given for this command**: `--passphrase-file`, `--prf-file`,
///   `--recovery-file`, or the passphrase typed when asked. On its own (no daemon) the command
///   unlocks with it, and that unlock is the approval; inside an unlocked daemon the gate checks
///   the secret against the slots (under the unlock back-off) and does not unlock with it
///   (``PresenceApproval/init(secretGiven:)``);
/// - **the user's answer to the daemon's presence prompt** (`SITEKEEP_ASKPASS` of the daemon),
///   naming the requesting process, the op and the key;
/// - else, on the client's terminal, **the passphrase typed again**
///   (``PresenceApproval/init(asking:label:)`` either way).
///
/// Each gives a ``PresenceProof`` for the client ``KeyUseClient/commandLine``, this op and this
/// key only.
enum Approval {
    /// How the user approves this command's use: described for custody's gate, which checks it.
    /// `subject`, when given, is shown after the requesting process (what a trust change is
    /// about: "grant key.sign to Notes (https://notes.example)").
    static func request(_ inv: Invocation, store: StoreContext, op: OpName, keyID: KeyID?, subject: String? = nil) throws -> PresenceApproval {
        let custodian = store.custodian
        if inv.hosted == nil {
            // On its own, this process unlocks for this command alone, with the secret it gives
            // or types now: that unlock (now or earlier in this command) is the approval.
            return PresenceApproval(secretGiven: try store.unlockOneShot(inv) ?? custodian.currentUnlockGiven())
        }
        if !custodian.isUnlocked, let unlocked = try store.unlockOneShot(inv) {
            // The daemon is locked: unlocking it with the secret given or typed for this command
            // is the approval of this use too.
            return PresenceApproval(secretGiven: unlocked)
        }
        if SecretSource.all.contains(where: { inv.option($0.option) != nil }) {
            return PresenceApproval(secretGiven: GivenSecret(try UnlockInput.read(inv).take()))
        }
        let label = "\(asker(inv)) on the command line" + (subject.map { ": \($0)" } ?? "")
        let typed: (any PresenceVerifier)? = inv.io.canPrompt ? TypedPassphrase(custodian: custodian, io: inv.io) : nil
        if let daemon = store.shared?.presence {
            return PresenceApproval(asking: DaemonPromptOrTyped(daemon: daemon, typed: typed, inv: inv), label: label, requester: asker(inv))
        }
        guard let typed else {
            throw refusal(op: op, keyID: keyID, why: "the daemon has no presence prompt ('sitekeep doctor' says why)")
        }
        return PresenceApproval(asking: typed, label: label, requester: asker(inv))
    }

    /// A proof that the user approved `op` with `keyID` for this command (``request(_:store:op:keyID:subject:)``,
    /// checked by custody's gate), or a failure saying what to give.
    static func approve(_ inv: Invocation, store: StoreContext, op: OpName, keyID: KeyID?, subject: String? = nil) throws -> PresenceProof {
        let approval = try request(inv, store: store, op: op, keyID: keyID, subject: subject)
        let context = KeyUseContext(client: .commandLine, op: op, approval: approval)
        do {
            return try store.custodian.approval(of: context, keyID: keyID)
        } catch {
            throw failure(error, op: op, keyID: keyID)
        }
    }

    /// Who asked, for the prompt and the audit line of a refusal.
    static func asker(_ inv: Invocation) -> String { inv.client ?? "a process of yours" }

    /// The command's failure for a refusal of the gate's approval: what to give, or that the user
    /// did not approve; other errors as they are.
    static func failure(_ error: CustodyError, op: OpName, keyID: KeyID?) -> any Error {
        switch error {
        case .presenceUnavailable(let why): return refusal(op: op, keyID: keyID, why: why)
        case .presenceDenied: return CommandFailure("\(describe(op: op, keyID: keyID)) was not approved", code: "presence_denied")
        case .presenceRequired(TypedPassphrase.wrong):
            return CommandFailure("\(describe(op: op, keyID: keyID)) was not approved: the passphrase typed does not open this store",
                                  code: "presence_denied")
        default: return error
        }
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

/// The passphrase typed again at the command line's terminal, checked by custody's
/// ``PassphrasePresenceVerifier`` (which mints the proof). A wrong one is
/// ``CustodyError/presenceRequired(_:)`` with ``wrong``, so the command can say so.
struct TypedPassphrase: PresenceVerifier {
    static let wrong = "the passphrase typed does not open this store"
    let custodian: Custodian
    let io: any ToolIO

    func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }

    func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        let io = io
        let verifier = PassphrasePresenceVerifier(custodian: custodian) { (prompt: String) throws(CustodyError) -> SecretBytes in
            do { return try SecretReader.prompt(.passphrase, prompt: prompt + " ", confirm: false, io: io) } catch {
                throw .presenceDenied
            }
        }
        do { return try verifier.requestPresence(client: client, siteLabel: siteLabel, op: op, keyID: keyID) } catch .presenceDenied {
            throw .presenceRequired(Self.wrong)
        }
    }
}

/// The daemon's presence prompt, or, when it has none that works and the command has a
/// terminal, the passphrase typed there (saying why).
struct DaemonPromptOrTyped: PresenceVerifier {
    let daemon: any PresenceVerifier
    let typed: (any PresenceVerifier)?
    let inv: Invocation

    func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }

    func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        do {
            return try daemon.requestPresence(client: client, siteLabel: siteLabel, op: op, keyID: keyID)
        } catch .presenceUnavailable(let why) {
            guard let typed else { throw .presenceUnavailable(why) }
            inv.note("(no presence prompt: \(why); asking for the passphrase instead)")
            return try typed.requestPresence(client: client, siteLabel: siteLabel, op: op, keyID: keyID)
        }
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
