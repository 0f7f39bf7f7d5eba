public import SiteKeepNames

// Custody's side of ``SSHAgentPolicy`` (the type is in SiteKeepNames, shared with the ssh-agent
// protocol): the check before a policy is kept, the comparison that decides whether a change
// needs a touch, and setting a team key's policy.

extension SSHAgentPolicy {
    /// Checks the namespaces: 1 to 64 bytes each of `a-z A-Z 0-9 . _ - @ +`, at most
    /// ``maximumNamespaces`` (the namespaces OpenSSH's tools use are words like `git`, `file`).
    /// - Throws: ``CustodyError/invalidArgument(_:)``.
    public func validate() throws(CustodyError) {
        guard let namespaces else { return }
        guard namespaces.count <= Self.maximumNamespaces else {
            throw .invalidArgument("at most \(Self.maximumNamespaces) SSH namespaces, got \(namespaces.count)")
        }
        for ns in namespaces where !Self.isValidNamespace(ns) {
            throw .invalidArgument("'\(ns.prefix(64))' is not an SSH namespace: use 1-64 characters from a-z A-Z 0-9 . _ - @ +")
        }
    }
}

extension Custodian {
    /// The op a change of a key's SSH policy is approved and logged under.
    public static let sshPolicyOp = OpName.teamSSH

    /// Sets (or, with nil, removes) the SSH agent policy of team key `id`, keeping everything
    /// else in its record. The policy is bound into the associated data every version of the key
    /// is wrapped with (as a touch requirement is), so every change wraps the versions again and
    /// needs the custodian unlocked; a policy added, changed or taken out of the record by a
    /// keyring edit is not in force (``sshPolicyInForce(keyID:)``).
    ///
    /// Turning SSH use on, or changing what it allows, changes what the key may sign: it needs
    /// `context.presence`, a proof for `context.client`, op ``sshPolicyOp`` and this key (the user
    /// approved this change, or gave the current secret for it). For a key that needs a touch
    /// (``requireTouch(keyID:pin:context:)``) a change that allows more than the policy in force
    /// needs what a touch needs and a program cannot click: a touch of the key's credential, or
    /// the current secret given for this change (a proof of method ``PresenceMethod/secret``),
    /// never a prompt's answer. Turning it off only narrows and needs no proof. The change is in
    /// the audit log and reaches this custodian's signing gate at once (the ssh-agent's open
    /// connections included).
    /// - Throws: ``CustodyError/keyNotFound(_:)``, ``CustodyError/locked``,
    ///   ``CustodyError/invalidArgument(_:)``, ``CustodyError/presenceRequired(_:)``,
    ///   ``CustodyError/fido2(_:)`` or a proof's own refusal.
    public func setSSHAgentPolicy(keyID id: String, _ policy: SSHAgentPolicy?,
                                  context: KeyUseContext = KeyUseContext(op: Custodian.sshPolicyOp)) throws(CustodyError) -> SigningKeyInfo {
        let key = try Self.keyID(id)
        try policy?.validate()
        let enabling = policy?.enabled == true
        var logged = context
        logged.op = Self.sshPolicyOp
        // Every change wraps the key's versions again, with the master key.
        let unlockedAt = try currentUnlock().unlockedAtNs
        var record = try loadRecord(kind: .teamKey, id: id)
        let inForce = try boundSSH(of: record, kind: .teamKey)
        if enabling, let policy {
            if let touch = record.touch, policy.allowsMore(than: inForce) {
                if let given = context.presence, given.method == .secret {
                    try checkProof(given, client: logged.client, op: logged.op, keyID: key, unlockedAtNs: unlockedAt,
                                   lifetime: configuration.presenceLifetime)
                    logged.presence = given
                } else {
                    logged.presence = try touchApproval(logged, keyID: key, credential: touch)
                }
            } else {
                // Through the one gate (``admit(_:keyID:unlockedAtNs:waited:)``), as a key use.
                guard let proof = try admit(logged, keyID: key, unlockedAtNs: unlockedAt) else {
                    throw .presenceRequired("changing what key \(id) may sign over SSH needs the user's approval; "
                        + "approve it when asked, or give the current passphrase (--passphrase-file) for this command")
                }
                logged.presence = proof
            }
        }
        try rewrap(&record, kind: .teamKey, touch: record.touch, ssh: enabling ? policy : nil)
        try storeRecord(record, kind: .teamKey)
        let stored = record.ssh
        signers.withLock { c in c.current["\(ItemKind.teamKey)/\(id)"]?.ssh = stored }
        logged.detail = stored?.summary ?? "off"
        try log(logged, key: id, result: "ok")
        return record.info()
    }
}

extension SSHAgentPolicy {
    /// Whether this policy lets the key sign something `other` does not (nil: SSH use off).
    func allowsMore(than other: SSHAgentPolicy?) -> Bool {
        guard enabled else { return false }
        guard let other, other.enabled else { return true }
        if login && !other.login { return true }
        if otherData && !other.otherData { return true }
        switch (namespaces, other.namespaces) {
        case (nil, nil): return false
        case (nil, _?): return true
        case (_?, nil): return false
        case let (mine?, theirs?): return !Set(mine).isSubset(of: Set(theirs))
        }
    }
}
