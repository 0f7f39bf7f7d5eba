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

/// The commit's decoder, beside its encoder: the one parse of a stored commit (§4.3), for
/// reads and fetches alike (``Vault/decodeCommit(_:id:)``).
extension Commit {
    static func parse(_ plaintext: [UInt8], id: ObjectID) throws(VaultError) -> Commit {
        let object = "commit \(id.fileID)"
        let f = try Fields(parsing: plaintext, object: object, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 16, maxStringBytes: 64 << 10, maxElements: 10_000))
        let schema = try f.optionalString("schema")
        guard let schema, Self.readableSchemas.contains(schema) else {
            throw .malformed(object: object, reason: Self.schemaRefusal(schema))
        }
        guard let treeRaw = try f.optionalString("tree_id") else { throw .malformed(object: object, reason: "tree_id is missing") }
        guard let tree = ObjectID(treeRaw) else { throw .invalidID(kind: "tree id", value: treeRaw, in: object) }
        var parents: [ObjectID] = []
        for p in try f.array("parents") {
            guard case .string(let s) = p else { throw .malformed(object: object, reason: "parents must hold strings, found \(p.typeName)") }
            guard let pid = ObjectID(s) else { throw .invalidID(kind: "parent id", value: s, in: object) }
            parents.append(pid)
        }
        let ts = try f.optionalInt("timestamp_ms") ?? 0
        guard ts >= 0 else { throw .malformed(object: object, reason: "timestamp_ms is negative") }
        let authorSignature = f.value("author_signature") ?? .null
        switch authorSignature {
        case .null, .string: break
        default: throw .malformed(object: object, reason: "field author_signature must be a string or null, found \(authorSignature.typeName)")
        }
        let messageEnc = try f.optionalString("message_enc")
        if let m = messageEnc, !m.isEmpty, !Identifiers.isBase64(m, max: 1 << 20) {
            throw .malformed(object: object, reason: "message_enc is not base64")
        }
        let signature = try f.optionalString("signature")
        if let s = signature, !s.isEmpty, !Identifiers.isBase64(s, max: 256) {
            throw .malformed(object: object, reason: "signature is not base64 of at most 256 characters")
        }
        let branch = try f.optionalString("branch_id").map(Self.trimLower)
        let authorKey = try f.optionalString("author_key_id").map(Self.trimLower)
        return Commit(id: id, treeID: tree, parents: parents, timestampMs: ts, branchID: branch,
                      authorKeyID: authorKey, message: nil, signature: .unsigned,
                      messageEnc: messageEnc, rawSignature: signature, authorSignature: authorSignature,
                      attestations: try f.array("attestations"), rawTreeID: tree.rawValue,
                      rawParents: parents.map(\.rawValue), schema: schema)
    }

    /// The commit schemas this client reads: `commit_v1` (sgit, signed) and `commit_v2` (the
    /// sites' web client sg-vault, v0.1.x and v0.2.x: unsigned, the same fields). Both are
    /// decoded by the same rules; the signing bytes carry the schema as stored.
    static let readableSchemas: Set<String> = ["commit_v1", "commit_v2"]

    /// Why a commit of schema `schema` is refused, naming who writes the schemas read here.
    static func schemaRefusal(_ schema: String?) -> String {
        let known = "SiteKeep reads commit_v1 (written by sgit up to 0.26) and commit_v2 (written by the sites' web client sg-vault 0.1.x-0.2.3)"
        guard let schema else { return "it has no schema; \(known)" }
        return "schema is \(VaultError.quoted(schema)), which this SiteKeep cannot read; \(known): "
            + "a newer writer made this commit, so update SiteKeep to read it"
    }

    static func trimLower(_ s: String) -> String {
        var bytes = Array(s.utf8)
        while let f = bytes.first, f == 0x20 || (0x09...0x0d).contains(f) { bytes.removeFirst() }
        while let l = bytes.last, l == 0x20 || (0x09...0x0d).contains(l) { bytes.removeLast() }
        return String(decoding: bytes.map { (0x41...0x5a).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}

/// The small mutable documents (§4.5–§4.7, §2.2), in sgit's written form.
enum DocumentEncoding {
    /// A ref's plaintext: `{"commit_id": "<id>"}`.
    static func ref(_ commit: ObjectID) -> [UInt8] {
        JSONSerializer.bytes(.object([JSONMember(key: "commit_id", value: .string(commit.rawValue))]), style: .python)
    }

    /// The commit a ref's plaintext names (the decoder of ``ref(_:)``; sgit and the web client
    /// write the same document).
    static func commitID(ofRef plain: [UInt8], object: String) throws(VaultError) -> ObjectID {
        let f = try Fields(parsing: plain, object: object)
        guard let id = try f.objectID("commit_id", kind: "commit id") else {
            throw .malformed(object: object, reason: "commit_id is missing")
        }
        return id
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

    /// A fresh branch index (for a vault that had none; its decoder is ``BranchIndex/parse(_:object:)``).
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

    /// The clone branch a `local/config.json` names (the decoder of ``config(myBranchID:previous:)``,
    /// the settings of a clone that make HEAD, §5.3); nil when none. A clone sgit made with
    /// `--pack-store` is refused: its objects are inside packs.
    static func myBranchID(ofConfig bytes: [UInt8]) throws(VaultError) -> String? {
        let object = "local/config.json"
        let f = try Fields(parsing: bytes, object: object)
        var branch: String?
        if let raw = try f.optionalString("my_branch_id") {
            guard let id = Identifiers.branchID(raw) else { throw .invalidID(kind: "branch id", value: raw, in: object) }
            branch = id
        }
        if try f.bool("pack_store", default: false) {
            throw .unsupportedVault(reason: "this clone was made with `sgit clone --pack-store`, which keeps its objects inside packs; SiteKeep reads loose objects (bare/data) only: clone the vault again without --pack-store")
        }
        return branch
    }

    /// One `local/reflog.jsonl` line.
    static func reflogLine(ref: String, old: ObjectID?, new: ObjectID, timestampMs: Int64) -> [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "ref_id", value: .string(ref)), JSONMember(key: "old_commit", value: .string(old?.rawValue)),
            JSONMember(key: "new_commit", value: .string(new.rawValue)), JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
        ]), style: .python)
    }
}

/// The branch index's decoder (§4.6), beside ``DocumentEncoding``'s encoders of its entries.
extension BranchIndex {
    static func parse(_ plaintext: [UInt8], object: String) throws(VaultError) -> BranchIndex {
        let f = try Fields(parsing: plaintext, object: object)
        let schema = try f.optionalString("schema")
        if let schema, schema != "branch_index_v1" {
            throw .malformed(object: object, reason: "schema is \(VaultError.quoted(schema)), expected branch_index_v1")
        }
        let format = try f.optionalInt("format") ?? 1
        let minClient = try f.optionalString("min_client")
        var features: [String] = []
        for v in try f.array("features") {
            guard case .string(let s) = v else { throw .malformed(object: object, reason: "features must hold strings") }
            features.append(s)
        }
        var branches: [Branch] = []
        for (i, b) in try f.array("branches").enumerated() {
            let bf = try Fields(b, object: "\(object) branch \(i)")
            let rawID = try bf.string("branch_id")
            guard let bid = Identifiers.branchID(rawID) else { throw .invalidID(kind: "branch id", value: rawID, in: object) }
            let name = try bf.string("name")
            let type = try bf.optionalString("branch_type") ?? ""
            let rawRef = try bf.string("head_ref_id")
            guard let ref = Identifiers.refID(rawRef) else { throw .invalidID(kind: "ref id", value: rawRef, in: object) }
            var key: String?
            if let rawKey = try bf.optionalString("public_key_id"), !rawKey.isEmpty {
                guard let k = Identifiers.keyID(rawKey) else { throw .invalidID(kind: "key id", value: rawKey, in: object) }
                key = k
            }
            _ = try bf.optionalString("private_key_id")
            _ = try bf.optionalString("creator_branch")
            _ = try bf.optionalString("display_name")
            if let created = bf.value("created_at") {
                switch created {
                case .int, .string, .null: break
                default: throw .malformed(object: object, reason: "created_at must be an integer or string")
                }
            }
            branches.append(Branch(branchID: bid, name: name, type: type, headRefID: ref, publicKeyID: key))
        }
        return BranchIndex(format: Int(format), minClient: minClient, branches: branches, features: features)
    }
}
