// The names custody's API speaks (SiteID, KeyID, OpName, ItemKind) live in SiteKeepNames, the
// Foundation-free part of the vocabulary, below custody. Custody re-exports them, as the keyring
// re-exports `StoreHome`: a client that names a client, an op or a key id through custody (the
// wiring, the agent, the command line, the vault) needs no import of its own.
@_exported public import SiteKeepNames

/// Who asks custody to use a key: the one vocabulary for the client of a key use, from the
/// caller's API down to the presence proof, the gate's matching and the audit line.
///
/// A proof approved for one client never serves another (``PresenceProof/check(client:op:keyID:clock:lifetime:)``).
/// Each case writes one fixed audit `site` spelling (``auditName``), the one older versions
/// wrote, so the hash-chained log keeps its bytes.
public enum KeyUseClient: Sendable, Hashable, CustomStringConvertible {
    /// A registered site (a page through the bridge, or custody's storage key of that site);
    /// logged as its id.
    case site(SiteID)
    /// The command line (`sitekeep team sign`, a trust change, ...); logged as `command-line`.
    case commandLine
    /// The ssh-agent socket (ssh, git, `ssh-keygen -Y sign`); logged as `ssh-agent`.
    case sshAgent
    /// SiteKeep itself, for the local user: unlock, lock, key management, the vault's own key
    /// uses. No presence proof names it. Logged as `-`.
    case local

    /// The audit line's `site` value: the site's id, `command-line`, `ssh-agent` or `-`.
    public var auditName: String {
        switch self {
        case .site(let id): id.string
        case .commandLine: "command-line"
        case .sshAgent: "ssh-agent"
        case .local: "-"
        }
    }

    /// The ``auditName``.
    public var description: String { auditName }
}

// Custody's own op names, as its audit log writes them. The bridge's ops (`key.sign`,
// `sealed.open`) are in its catalogue; these are the rest a key use is approved or logged under.
extension OpName {
    /// A signature with the default context (the local user).
    public static let sign = OpName(known: "sign")
    /// An unlock (any slot).
    public static let unlock = OpName(known: "unlock")
    /// A lock on request.
    public static let lock = OpName(known: "lock")
    /// The idle lock.
    public static let autoLock = OpName(known: "auto-lock")
    /// The store's set-up.
    public static let initialize = OpName(known: "init")
    /// A passphrase typed at a presence prompt, checked against the slots.
    public static let presencePassphrase = OpName(known: "presence.passphrase")
    /// A secret given for one command, checked against the slots (the command line's approval).
    public static let presenceSecret = OpName(known: "presence.secret")
    /// A slot added.
    public static let slotAdd = OpName(known: "slot.add")
    /// A slot removed.
    public static let slotRemove = OpName(known: "slot.remove")
    /// A passphrase slot's passphrase changed.
    public static let slotPassphraseChange = OpName(known: "slot.passphrase-change")
    /// The device key made.
    public static let deviceCreate = OpName(known: "device.create")
    /// A device-key signature with the default context.
    public static let deviceSign = OpName(known: "device.sign")
    /// A team key generated.
    public static let teamAdd = OpName(known: "team.add")
    /// A team key imported.
    public static let teamImport = OpName(known: "team.import")
    /// A team key rotated.
    public static let teamRotate = OpName(known: "team.rotate")
    /// A team key deleted.
    public static let teamDelete = OpName(known: "team.delete")
    /// A team-key signature the command line asked for (`sitekeep team sign`, `agent sign`).
    public static let teamSign = OpName(known: "team.sign")
    /// A team key's SSH policy changed.
    public static let teamSSH = OpName(known: "team.ssh")
    /// A signature through the ssh-agent socket (its client checked the destination and the
    /// session binding of a login before asking).
    public static let sshSign = OpName(known: "ssh.sign")
    /// A key added through the ssh-agent socket (`ssh-add`).
    public static let agentAdd = OpName(known: "agent.add")
    /// A key added through the ssh-agent socket removed (`ssh-add -d`, `-D`, or its lifetime ended).
    public static let agentRemove = OpName(known: "agent.remove")
    /// A site's storage key opened (or made).
    public static let storageKey = OpName(known: "storage-key")
    /// A site's storage key destroyed.
    public static let storageKeyDestroy = OpName(known: "storage-key.destroy")
    /// A vault key used with the default context.
    public static let vaultKey = OpName(known: "vault-key")
    /// A vault key stored.
    public static let vaultKeyStore = OpName(known: "vault-key.store")
    /// A vault key deleted.
    public static let vaultKeyDelete = OpName(known: "vault-key.delete")
    /// A record tag's key used, and the use failed.
    public static let recordTag = OpName(known: "record-tag")
    /// A record tag made.
    public static let recordTagMake = OpName(known: "record-tag.make")
    /// A record tag checked.
    public static let recordTagCheck = OpName(known: "record-tag.check")
}
