import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault

/// What an attacker who holds a vault's read key and can write its folder can do, and nothing
/// more: every file below is written under the read key alone (no write key, no server, no
/// signing key of the vault's own clones).
enum Forgery {
    /// Stores `plaintext` as a new object (random IV) and returns its id.
    static func store(_ plaintext: [UInt8], root: String, keys: SgitKeys) throws -> ObjectID {
        let stored = try Envelope.sealV1(plaintext, key: keys.readKey, iv: SecureRandom.bytes(count: 12))
        let id = try #require(ObjectID("obj-cas-imm-" + Hex.encode(SHA256.hash(stored)).prefix(12)))
        try Data(stored).write(to: URL(fileURLWithPath: root + "/.sg_vault/bare/data/" + id.rawValue))
        return id
    }

    /// Points the ref file `refFile` (relative to `.sg_vault`) at `commit`.
    static func moveRef(_ refFile: String, to commit: ObjectID, root: String, keys: SgitKeys) throws {
        let ref = Array(#"{"commit_id": "\#(commit.rawValue)"}"#.utf8)
        try Data(try Envelope.sealV1(ref, key: keys.readKey, iv: SecureRandom.bytes(count: 12)))
            .write(to: URL(fileURLWithPath: root + "/.sg_vault/" + refFile))
    }

    /// Rewrites the branch index's JSON (decrypted, changed, encrypted again).
    static func rewriteIndex(root: String, keys: SgitKeys, _ change: (inout [JSONMember]) throws -> Void) throws {
        let file = root + "/.sg_vault/bare/indexes/" + keys.branchIndexFileID
        let plain = try Envelope.openV1(try [UInt8](Data(contentsOf: URL(fileURLWithPath: file))), key: keys.readKey)
        guard case .object(var members) = try JSONParser.parse(plain) else { throw FixtureFailure(description: "the index is not an object") }
        try change(&members)
        try Data(try Envelope.sealV1(JSONSerializer.bytes(.object(members), style: .python), key: keys.readKey, iv: SecureRandom.bytes(count: 12)))
            .write(to: URL(fileURLWithPath: file))
    }

    /// Sets the index's `features` (and optionally `min_client`).
    static func setFeatures(_ features: [String], minClient: String? = nil, root: String, keys: SgitKeys) throws {
        try rewriteIndex(root: root, keys: keys) { m in
            m.removeAll { $0.key == "features" || $0.key == "min_client" }
            m.append(JSONMember(key: "features", value: .array(features.map { .string($0) })))
            m.append(JSONMember(key: "min_client", value: .string(minClient)))
        }
    }

    /// A canonical-form commit (§4.4) signed by `key` as `keyID` of `branchID`.
    static func signedCommit(tree: ObjectID, parents: [ObjectID], branchID: String, keyID: String, message: String,
                             timestampMs: Int64, key: borrowing P256.Signing.PrivateKey, keys: SgitKeys) throws -> [UInt8] {
        let msg = Base64.encode(try Envelope.sealV1(Array(message.utf8), key: keys.readKey, iv: SecureRandom.bytes(count: 12)))
        var members: [JSONMember] = [
            JSONMember(key: "schema", value: "commit_v1"),
            JSONMember(key: "tree_id", value: .string(tree.rawValue)),
            JSONMember(key: "message_enc", value: .string(msg)),
            JSONMember(key: "branch_id", value: .string(branchID)),
            JSONMember(key: "author_key_id", value: .string(keyID)),
            JSONMember(key: "author_signature", value: .null),
            JSONMember(key: "parents", value: .array(parents.map { .string($0.rawValue) })),
            JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
            JSONMember(key: "attestations", value: []),
        ]
        let sig = try key.signature(for: JSONSerializer.bytes(.object(members), style: .canonical)).rawRepresentation
        members.insert(JSONMember(key: "signature", value: .string(Base64.encode(sig))), at: 4)
        return JSONSerializer.bytes(.object(members), style: .python)
    }

    /// An unsigned commit on top of HEAD.
    static func unsignedCommit(tree: ObjectID, parents: [ObjectID], branchID: String?, timestampMs: Int64) -> [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "schema", value: "commit_v1"),
            JSONMember(key: "tree_id", value: .string(tree.rawValue)),
            JSONMember(key: "message_enc", value: .null),
            JSONMember(key: "branch_id", value: .string(branchID)),
            JSONMember(key: "signature", value: .null),
            JSONMember(key: "author_key_id", value: .null),
            JSONMember(key: "author_signature", value: .null),
            JSONMember(key: "parents", value: .array(parents.map { .string($0.rawValue) })),
            JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
            JSONMember(key: "attestations", value: []),
        ]), style: .python)
    }

    /// What a forgery left behind.
    struct Forged { let commit: ObjectID; let keyID: String; let fingerprint: String }

    /// The attack on signatures: a fresh P-256 key, its public key written as `bare/keys/<id>`
    /// (or over the key file of `reusing`, an id already listed), a branch entry for it added to
    /// the index (unless `listInIndex` is false or the id is reused), and a new HEAD signed by it
    /// whose tree is the tree of HEAD's first parent (the vault's previous content).
    static func forgeSignedHead(root: String, keys: SgitKeys, reusing: String? = nil, listInIndex: Bool = true) throws -> Forged {
        let vault = try Vault.load(path: root, keys: keys, options: VaultOptions())
        let head = try vault.resolveHead()
        let headCommit = try vault.commit(try #require(head.commitID), index: head.index)
        let older = try vault.commit(try #require(headCommit.parents.first), index: head.index)
        let key = try P256.Signing.PrivateKey()
        let keyID = reusing ?? "key-rnd-imm-" + Hex.encode(SecureRandom.bytes(count: 8))
        let keyFile = #"{"type": "public", "pem": \#(JSONSerializer.string(.string(key.publicKey.pemRepresentation)))}"#
        try Data(try Envelope.sealV1(Array(keyFile.utf8), key: keys.readKey, iv: SecureRandom.bytes(count: 12)))
            .write(to: URL(fileURLWithPath: root + "/.sg_vault/bare/keys/" + keyID))
        var branchID = headCommit.branchID ?? ""
        if reusing == nil && listInIndex {
            branchID = "branch-clone-" + Hex.encode(SecureRandom.bytes(count: 8))
            let ref = "ref-pid-snw-" + Hex.encode(SecureRandom.bytes(count: 6))
            try rewriteIndex(root: root, keys: keys) { m in
                guard let i = m.firstIndex(where: { $0.key == "branches" }), case .array(var branches) = m[i].value else { return }
                branches.append(.object([
                    JSONMember(key: "branch_id", value: .string(branchID)), JSONMember(key: "name", value: "local"),
                    JSONMember(key: "branch_type", value: "clone"), JSONMember(key: "head_ref_id", value: .string(ref)),
                    JSONMember(key: "public_key_id", value: .string(keyID)), JSONMember(key: "private_key_id", value: .null),
                    JSONMember(key: "created_at", value: .int(headCommit.timestampMs + 1)),
                    JSONMember(key: "creator_branch", value: .null), JSONMember(key: "display_name", value: .null),
                ]))
                m[i] = JSONMember(key: "branches", value: .array(branches))
            }
        }
        let plain = try signedCommit(tree: older.treeID, parents: [headCommit.id], branchID: branchID, keyID: keyID,
                                     message: "forged", timestampMs: headCommit.timestampMs + 10, key: key, keys: keys)
        let id = try store(plain, root: root, keys: keys)
        try moveRef(head.refFile, to: id, root: root, keys: keys)
        return Forged(commit: id, keyID: keyID, fingerprint: Hex.encode(SHA256.hash(key.publicKey.derRepresentation)))
    }

    /// An unsigned HEAD on top of HEAD, with the tree of HEAD's first parent.
    static func forgeUnsignedHead(root: String, keys: SgitKeys) throws -> ObjectID {
        let vault = try Vault.load(path: root, keys: keys, options: VaultOptions())
        let head = try vault.resolveHead()
        let headCommit = try vault.commit(try #require(head.commitID), index: head.index)
        let older = try vault.commit(try #require(headCommit.parents.first), index: head.index)
        let id = try store(unsignedCommit(tree: older.treeID, parents: [headCommit.id], branchID: headCommit.branchID,
                                          timestampMs: headCommit.timestampMs + 10), root: root, keys: keys)
        try moveRef(head.refFile, to: id, root: root, keys: keys)
        return id
    }
}
