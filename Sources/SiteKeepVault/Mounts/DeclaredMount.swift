/// A child vault that a vault declares with a `*.link.json` file, read as the sites' web client
/// (`lib/links/vault-links.js`, `DeclaredMounts.scan` of the web vault UI v0.2.3) reads it.
///
/// The link file carries no key (`vault_id`, `ref_id`, `label`, `pin`, …); the child's read key
/// is in the parent's `.vault/owner/ro-links.json`, under the link's `ref_id`. This value holds
/// only public facts: whether a credential was found, never the credential.
public struct DeclaredMount: Sendable, Equatable {
    /// What became of the link.
    public enum State: Sendable, Equatable {
        /// `ro-links.json` holds a read key for the child: it opens read-only.
        case resolved
        /// No usable credential (why): the link stays a plain file, as in the web client.
        case noCredential(String)
        /// An earlier link (this path) names the same child vault or `ref_id`: only the first
        /// mounts, as in the web client.
        case duplicate(of: String)
        /// The link names the vault that declares it.
        case cycle
    }

    /// The link file's path, `subvaults/acme.link.json`.
    public let linkPath: String
    /// Where the child's files appear in the parent: the link path without `.link.json`.
    public let mountPath: String
    /// The link's `ref_id`, the key of its record in `ro-links.json`.
    public let refID: String
    /// The link's label (its own, the record's, else the file name).
    public let label: String
    /// The child's vault id: the link's `vault_id`, else the record's.
    public let childVaultID: String?
    public let state: State

    /// Whether the child can be opened (a credential resolved, no duplicate, no cycle).
    public var isResolved: Bool { state == .resolved }

    /// Whether `path` is the mount point or below it.
    public func contains(_ path: String) -> Bool {
        path == mountPath || path.hasPrefix(mountPath + "/")
    }
}
