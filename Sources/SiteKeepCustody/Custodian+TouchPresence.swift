public import SiteKeepCrypto
import SiteKeepFIDO2
public import SiteKeepNames

/// Presence by touch: a team key can require, for each use and from every client (the command
/// line, a page's `key.sign`, the ssh-agent socket), a touch of a FIDO2 security key. The key
/// holds a credential made for it (relying party ``Custodian/fido2RelyingPartyID``); a use
/// is approved by an assertion over a fresh random challenge whose signature, relying party
/// and presence flag custody checks (``FIDO2Key/touch(rp:credentialID:publicKey:)``): hardware
/// presence that no program of the user can give by clicking a dialog or replaying an answer.
///
/// No approval is kept for such a key and no proof a caller brings counts (not the command
/// line's current secret either): each signature is one touch.
extension Custodian {
    /// The op a change of a key's presence policy is approved and logged under.
    public static let presencePolicyOp = OpName(known: "team.presence")

    /// The device part of a touch approval (the gate's ``touchApproval(_:keyID:credential:)``
    /// decides and mints the proof): the plugged security key signs a fresh random challenge
    /// for `credential`, whose signature, relying party and presence flag are checked.
    /// - Throws: ``CustodyError/fido2(_:)``: not touched in time (``FIDO2Error/noTouch``), the
    ///   key absent or not holding the credential, a reply that does not verify.
    func touchDevice(_ credential: FIDO2Credential) throws(CustodyError) {
        let key = try fido2Key()
        try fido2Call { () throws(FIDO2Error) in
            try key.touch(rp: credential.relyingPartyID, credentialID: credential.id, publicKey: credential.publicKey)
        }
    }

    /// Makes team key `id` need a touch of the plugged security key for each use: the key makes
    /// a credential for it (a touch; `pin` when the key has a PIN), kept in the key's record.
    /// A key that needs a touch already is left as it is (to move to another security key,
    /// ``allowPrompt(keyID:context:)`` first).
    ///
    /// The change is approved as a use of the key under `context.op` (``presencePolicyOp``, or
    /// the SSH policy's op when `team ssh enable --presence fido2` makes both changes): with
    /// `context.presence` (the user approved it at the prompt, or gave the current secret) or
    /// its ``KeyUseContext/approval``. It is in the audit log and reaches this custodian's
    /// signing gate at once.
    /// - Throws: ``CustodyError/keyNotFound(_:)``, ``CustodyError/locked``,
    ///   ``CustodyError/presenceRequired(_:)``, ``CustodyError/fido2(_:)``.
    public func requireTouch(keyID id: String, pin: consuming SecretBytes? = nil,
                             context: KeyUseContext = KeyUseContext(op: Custodian.presencePolicyOp)) throws(CustodyError) -> SigningKeyInfo {
        let key = try Self.keyID(id)
        var logged = context
        do throws(CustodyError) {
            var record = try loadRecord(kind: .teamKey, id: id)
            guard record.touch == nil else { return record.info() }
            let unlockedAt = try currentUnlock().unlockedAtNs
            guard let proof = try admit(logged, keyID: key, unlockedAtNs: unlockedAt) else {
                throw .presenceRequired("making key \(id) need a touch of a security key needs the user's approval; "
                    + "approve it when asked, or give the current passphrase (--passphrase-file) for this command")
            }
            logged.presence = proof
            let device = try fido2Key()
            let credential = try fido2Call { () throws(FIDO2Error) in
                try device.makeCredential(rp: Self.fido2RelyingPartyID, userID: Array("team:\(id)".utf8.prefix(64)), pin: pin)
            }
            return try store(touch: credential, in: &record, approvedBy: &logged)
        } catch {
            logQuietly(logged, key: id, result: Self.resultWord(error))
            throw error
        }
    }

    /// Lets team key `id` be approved by the presence prompt again, instead of a touch. This
    /// widens who can approve its uses, so it needs what a touch needs and a program cannot
    /// click: a touch of the key's current credential, or the current secret given for this
    /// change (`context.presence` of method ``PresenceMethod/secret`` for `context.op`, for a
    /// lost security key). A key that needs no touch is left as it is.
    /// - Throws: ``CustodyError/keyNotFound(_:)``, ``CustodyError/locked``, ``CustodyError/fido2(_:)``
    ///   or a proof's own refusal.
    public func allowPrompt(keyID id: String,
                            context: KeyUseContext = KeyUseContext(op: Custodian.presencePolicyOp)) throws(CustodyError) -> SigningKeyInfo {
        let key = try Self.keyID(id)
        var logged = context
        do throws(CustodyError) {
            var record = try loadRecord(kind: .teamKey, id: id)
            guard let current = record.touch else { return record.info() }
            let unlockedAt = try currentUnlock().unlockedAtNs
            if let given = context.presence, given.method == .secret {
                try checkProof(given, client: logged.client, op: logged.op, keyID: key, unlockedAtNs: unlockedAt,
                               lifetime: configuration.presenceLifetime)
                logged.presence = given
            } else {
                logged.presence = try touchApproval(logged, keyID: key, credential: current)
            }
            return try store(touch: nil, in: &record, approvedBy: &logged)
        } catch {
            logQuietly(logged, key: id, result: Self.resultWord(error))
            throw error
        }
    }

    /// Keeps `touch` in `record`, its versions wrapped again with it in their associated data (so
    /// the requirement cannot be taken out of the stored record without the key ceasing to
    /// unwrap) beside the SSH policy in force (one only the record names is dropped), tells this
    /// custodian's signing gate at once and logs the change as `logged` approved it.
    private func store(touch: FIDO2Credential?, in record: inout KeyRecord, approvedBy logged: inout KeyUseContext) throws(CustodyError) -> SigningKeyInfo {
        try rewrap(&record, kind: .teamKey, touch: touch, ssh: try boundSSH(of: record, kind: .teamKey))
        try storeRecord(record, kind: .teamKey)
        let id = record.id
        signers.withLock { c in c.current["\(ItemKind.teamKey)/\(id)"]?.touch = touch }
        logged.detail = touch == nil ? "prompt" : "touch"
        try log(logged, key: id, result: "ok")
        return record.info()
    }
}

/// What a touch custody is waiting for approves (``CustodianConfiguration/touchNotice``).
public struct TouchNotice: Sendable, CustomStringConvertible {
    /// The client asking.
    public let client: KeyUseClient
    /// The op.
    public let op: OpName
    /// The key.
    public let keyID: KeyID
    /// Who asks, as a prompt would name them (the site's quoted name and origin; the
    /// destination, namespace and process for the agent), when the client named one.
    public let requester: String?

    /// One line: `touch the security key to approve OP with key KEY for REQUESTER`.
    public var description: String {
        "touch the security key to approve \(op) with key \(keyID) for " + (requester ?? client.auditName)
    }
}
