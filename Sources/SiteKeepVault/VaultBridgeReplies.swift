public import SiteKeepJSON
import SiteKeepCrypto

/// The reply shapes of the bridge's vault ops, as JSON values the dispatcher sends unchanged.
/// They carry vault facts and file plaintext, never a key.
public enum VaultBridgeReplies: Sendable {
    /// `vault.status`: `{vault_id, head, branch, format, read_only, signature, timestamp_ms}`.
    public static func status(_ vault: Vault) throws(VaultError) -> JSONValue {
        try vault.requireServedHead()
        let s = try vault.status()
        return .object([
            JSONMember(key: "vault_id", value: .string(s.vaultID)),
            JSONMember(key: "head", value: .string(s.headCommit?.rawValue)),
            JSONMember(key: "branch", value: .string(s.branchName)),
            JSONMember(key: "format", value: .int(Int64(s.format))),
            JSONMember(key: "read_only", value: .bool(s.isReadOnly)),
            JSONMember(key: "signature", value: .string(s.headSignature?.rawValue)),
            JSONMember(key: "timestamp_ms", value: s.headTimestampMs.map { .int($0) } ?? .null),
        ])
    }

    /// `vault.list`: `{path, entries: [{path, size, content_type, blob_id}]}`.
    public static func list(_ vault: Vault, path: String?) throws(VaultError) -> JSONValue {
        let entries = try vault.list(path: path)
        return .object([
            JSONMember(key: "path", value: .string(path ?? "")),
            JSONMember(key: "entries", value: .array(entries.map { e in
                .object([
                    JSONMember(key: "path", value: .string(e.path.string)),
                    JSONMember(key: "size", value: .int(Int64(e.size))),
                    JSONMember(key: "content_type", value: .string(e.contentType)),
                    JSONMember(key: "blob_id", value: .string(e.blobID.rawValue)),
                ])
            })),
        ])
    }

    /// `vault.load`: `{path, size, content_type, data_b64}`, the plaintext of one file.
    public static func load(_ vault: Vault, path: String) throws(VaultError) -> JSONValue {
        let (entry, bytes) = try vault.file(at: path)
        let type = entry.contentType
        return .object([
            JSONMember(key: "path", value: .string(path)),
            JSONMember(key: "size", value: .int(Int64(bytes.count))),
            JSONMember(key: "content_type", value: .string(type)),
            JSONMember(key: "data_b64", value: .string(Base64.encode(bytes))),
        ])
    }
}
