import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON

/// The encoder of commits (SGIT-FORMAT.md §4.3, §4.4), beside `Commit.parse`. One function makes
/// the canonical signing bytes for both the writer (what it signs) and the reader (what it
/// verifies), so the two cannot drift apart.
enum CommitEncoding {
    /// The canonical signing bytes: the normalised commit without `signature`, every other key
    /// present (nulls and empty arrays included), keys sorted, no whitespace.
    static func signingBytes(schema: String?, treeID: String, messageEnc: String?, branchID: String?, authorKeyID: String?,
                             authorSignature: JSONValue, parents: [String], timestampMs: Int64,
                             attestations: [JSONValue]) -> [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "schema", value: .string(schema)),
            JSONMember(key: "tree_id", value: .string(treeID)),
            JSONMember(key: "message_enc", value: .string(messageEnc)),
            JSONMember(key: "branch_id", value: .string(branchID)),
            JSONMember(key: "author_key_id", value: .string(authorKeyID)),
            JSONMember(key: "author_signature", value: authorSignature),
            JSONMember(key: "parents", value: .array(parents.map { .string($0) })),
            JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
            JSONMember(key: "attestations", value: .array(attestations)),
        ]), style: .canonical)
    }

    /// A new commit before signing.
    struct Draft {
        var treeID: ObjectID
        var parents: [ObjectID]
        var messageEnc: String
        var branchID: String
        var authorKeyID: String
        var timestampMs: Int64

        var signingBytes: [UInt8] {
            CommitEncoding.signingBytes(schema: "commit_v1", treeID: treeID.rawValue, messageEnc: messageEnc, branchID: branchID,
                                        authorKeyID: authorKeyID, authorSignature: .null, parents: parents.map(\.rawValue),
                                        timestampMs: timestampMs, attestations: [])
        }

        /// The stored plaintext, in sgit's written order and Python form.
        func plaintext(signature: [UInt8]) -> [UInt8] {
            JSONSerializer.bytes(.object([
                JSONMember(key: "schema", value: "commit_v1"),
                JSONMember(key: "tree_id", value: .string(treeID.rawValue)),
                JSONMember(key: "message_enc", value: .string(messageEnc)),
                JSONMember(key: "branch_id", value: .string(branchID)),
                JSONMember(key: "signature", value: .string(Base64.encode(signature))),
                JSONMember(key: "author_key_id", value: .string(authorKeyID)),
                JSONMember(key: "author_signature", value: .null),
                JSONMember(key: "parents", value: .array(parents.map { .string($0.rawValue) })),
                JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
                JSONMember(key: "attestations", value: .array([])),
            ]), style: .python)
        }
    }

    /// `message_enc`: b64 of the message sealed under a random IV (§3.4).
    static func encryptMessage(_ message: String, key: SymmetricKeyHandle) throws(VaultError) -> String {
        do {
            return Base64.encode(try Envelope.sealV1(Array(message.utf8), key: key, iv: SecureRandom.bytes(count: 12)))
        } catch { throw .io(path: "commit", reason: "encryption failed: \(error)") }
    }
}

/// The small mutable documents (§4.5–§4.7, §2.2), in sgit's written form.
enum DocumentEncoding {
    /// A ref's plaintext: `{"commit_id": "<id>"}`.
    static func ref(_ commit: ObjectID) -> [UInt8] {
        JSONSerializer.bytes(.object([JSONMember(key: "commit_id", value: .string(commit.rawValue))]), style: .python)
    }

    /// A public-key file's plaintext: `{"type": "public", "pem": "<SPKI PEM>"}`.
    static func publicKey(pem: String) -> [UInt8] {
        JSONSerializer.bytes(.object([JSONMember(key: "type", value: "public"), JSONMember(key: "pem", value: .string(pem))]), style: .python)
    }

    /// A branch entry in written order (§4.6).
    static func branch(id: String, name: String, type: String, headRef: String, publicKeyID: String,
                       createdAt: Int64, creator: String?) -> JSONValue {
        .object([
            JSONMember(key: "branch_id", value: .string(id)),
            JSONMember(key: "name", value: .string(name)),
            JSONMember(key: "branch_type", value: .string(type)),
            JSONMember(key: "head_ref_id", value: .string(headRef)),
            JSONMember(key: "public_key_id", value: .string(publicKeyID)),
            JSONMember(key: "private_key_id", value: .null),
            JSONMember(key: "created_at", value: .int(createdAt)),
            JSONMember(key: "creator_branch", value: .string(creator)),
            JSONMember(key: "display_name", value: .null),
        ])
    }

    /// A fresh branch index (for a vault that had none).
    static func emptyIndex() -> JSONValue {
        .object([
            JSONMember(key: "schema", value: "branch_index_v1"), JSONMember(key: "format", value: .null),
            JSONMember(key: "min_client", value: .null), JSONMember(key: "branches", value: .array([])),
            JSONMember(key: "features", value: .array([])), JSONMember(key: "tags", value: .array([])),
        ])
    }

    /// `index` with `branch` appended to its branches; every other member kept as it was
    /// (unknown fields, features and tags are preserved, §8).
    static func index(_ index: JSONValue, appending branch: JSONValue) -> JSONValue {
        guard case .object(var members) = index else { return index }
        if let i = members.lastIndex(where: { $0.key == "branches" }) {
            let existing = members[i].value.arrayValue ?? []
            members[i] = JSONMember(key: "branches", value: .array(existing + [branch]))
        } else {
            members.append(JSONMember(key: "branches", value: .array([branch])))
        }
        return .object(members)
    }

    /// sgit's default `local/config.json` for a full clone of branch `branchID` (indent 2).
    static func config(myBranchID: String, previous: JSONValue?) -> [UInt8] {
        var members: [JSONMember] = previous?.objectValue ?? [
            JSONMember(key: "my_branch_id", value: .null), JSONMember(key: "mode", value: .null),
            JSONMember(key: "sparse", value: false), JSONMember(key: "pack_store", value: false),
            JSONMember(key: "publish_visibility", value: .null), JSONMember(key: "last_remote_head", value: .null),
            JSONMember(key: "remote_heads_file", value: false), JSONMember(key: "scope_paths", value: .array([])),
            JSONMember(key: "shallow_boundaries", value: .array([])),
        ]
        if let i = members.firstIndex(where: { $0.key == "my_branch_id" }) {
            members[i] = JSONMember(key: "my_branch_id", value: .string(myBranchID))
        } else {
            members.insert(JSONMember(key: "my_branch_id", value: .string(myBranchID)), at: 0)
        }
        return JSONSerializer.bytes(.object(members), style: .pretty)
    }

    /// One `local/reflog.jsonl` line.
    static func reflogLine(ref: String, old: ObjectID?, new: ObjectID, timestampMs: Int64) -> [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "ref_id", value: .string(ref)), JSONMember(key: "old_commit", value: .string(old?.rawValue)),
            JSONMember(key: "new_commit", value: .string(new.rawValue)), JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
        ]), style: .python)
    }
}
