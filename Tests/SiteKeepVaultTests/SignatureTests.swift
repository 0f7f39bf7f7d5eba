import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault

@Suite("Signatures made with the clone's own key; vaults without an index", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct SignatureTests {
    /// The clone branch's private key, from `local/<public_key_id>.pem` (test only).
    func cloneBranch(_ vault: Vault) throws -> Branch { try #require(try vault.resolveHead().branch) }

    func cloneKey(_ root: String, _ branch: Branch) throws -> P256.Signing.PrivateKey {
        let keyID = try #require(branch.publicKeyID)
        let pem = try [UInt8](Data(contentsOf: URL(fileURLWithPath: root + "/.sg_vault/local/\(keyID).pem")))
        return try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: pem))
    }

    func install(_ plain: [UInt8], root: String, keys: SgitKeys, refFile: String) throws -> ObjectID {
        let stored = try Envelope.sealV1(plain, key: keys.readKey, iv: SecureRandom.bytes(count: 12))
        let id = try #require(ObjectID("obj-cas-imm-" + Hex.encode(SHA256.hash(stored)).prefix(12)))
        try Data(stored).write(to: URL(fileURLWithPath: root + "/.sg_vault/bare/data/" + id.rawValue))
        let ref = try Envelope.sealV1(Array(#"{"commit_id": "\#(id.rawValue)"}"#.utf8), key: keys.readKey, iv: SecureRandom.bytes(count: 12))
        try Data(ref).write(to: URL(fileURLWithPath: root + "/.sg_vault/" + refFile))
        return id
    }

    @Test("legacy form (no author_key_id): Python-style bytes with signature null, key from the index branch")
    func legacySignature() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let vault = try Vault.open(path: root, keys: f.plainKeys)
        let refFile = try vault.resolveHead().refFile
        let real = try #require(try vault.log(limit: 1).first)
        let branch = try cloneBranch(vault)
        let key = try cloneKey(root, branch)
        var members: [JSONMember] = [
            JSONMember(key: "schema", value: "commit_v1"),
            JSONMember(key: "tree_id", value: .string(real.treeID.rawValue)),
            JSONMember(key: "message_enc", value: .null),
            JSONMember(key: "branch_id", value: .string(branch.branchID)),
            JSONMember(key: "signature", value: .null),
            JSONMember(key: "author_key_id", value: .null),
            JSONMember(key: "author_signature", value: .null),
            JSONMember(key: "parents", value: .array(real.parents.map { .string($0.rawValue) })),
            JSONMember(key: "timestamp_ms", value: .int(real.timestampMs + 5)),
            JSONMember(key: "attestations", value: []),
        ]
        let sig = try key.signature(for: JSONSerializer.bytes(.object(members), style: .python)).rawRepresentation
        members[4] = JSONMember(key: "signature", value: .string(Base64.encode(sig)))
        _ = try install(JSONSerializer.bytes(.object(members), style: .python), root: root, keys: f.plainKeys, refFile: refFile)
        #expect(try Vault.open(path: root, keys: f.plainKeys).status().headSignature == .verified)

        // The same signature over a commit claiming another branch's key: bad.
        let other = try #require(try vault.resolveHead().index?.branches.first { $0.branchID != branch.branchID })
        members[3] = JSONMember(key: "branch_id", value: .string(other.branchID))
        let forged = try install(JSONSerializer.bytes(.object(members), style: .python), root: root, keys: f.plainKeys, refFile: refFile)
        #expect(throws: VaultError.badSignature(commit: forged.fileID, reason: "its signature does not verify under key of its branch")) {
            try Vault.open(path: root, keys: f.plainKeys)
        }
    }

    @Test("canonical form: a commit SiteKeep signs with the clone key verifies, and sgit accepts it")
    func canonicalSelfSigned() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let vault = try Vault.open(path: root, keys: f.plainKeys)
        let refFile = try vault.resolveHead().refFile
        let real = try #require(try vault.log(limit: 1).first)
        let branch = try cloneBranch(vault)
        let key = try cloneKey(root, branch)
        let msg = Base64.encode(try Envelope.sealV1(Array("made by SiteKeep \u{e9}".utf8), key: f.plainKeys.readKey, iv: SecureRandom.bytes(count: 12)))
        var members: [JSONMember] = [
            JSONMember(key: "schema", value: "commit_v1"),
            JSONMember(key: "tree_id", value: .string(real.treeID.rawValue)),
            JSONMember(key: "message_enc", value: .string(msg)),
            JSONMember(key: "branch_id", value: .string(branch.branchID)),
            JSONMember(key: "author_key_id", value: .string(branch.publicKeyID)),
            JSONMember(key: "author_signature", value: .null),
            JSONMember(key: "parents", value: .array([.string(real.id.rawValue)])),
            JSONMember(key: "timestamp_ms", value: .int(real.timestampMs + 7)),
            JSONMember(key: "attestations", value: []),
        ]
        let sig = try key.signature(for: JSONSerializer.bytes(.object(members), style: .canonical)).rawRepresentation
        members.insert(JSONMember(key: "signature", value: .string(Base64.encode(sig))), at: 4)
        let id = try install(JSONSerializer.bytes(.object(members), style: .python), root: root, keys: f.plainKeys, refFile: refFile)
        let reopened = try Vault.open(path: root, keys: f.plainKeys)
        #expect(try reopened.status().headSignature == .verified)
        #expect(try reopened.log(limit: 1).first?.message == "made by SiteKeep \u{e9}")
        let report = try reopened.verify()
        #expect(report.isClean && report.verified == 4)
        // sgit agrees: its own verifier counts the SiteKeep-signed commit as verified.
        let out = try Interop.must(f.sgit, ["check", "verify"], cwd: root, home: f.home)
        #expect(String(decoding: out.stdout, as: UTF8.self).contains("4 verified"))
        let log = try Interop.must(f.sgit, ["history", "log"], cwd: root, home: f.home)
        #expect(String(decoding: log.stdout, as: UTF8.self).contains(String(id.hex.prefix(12))))
    }

    @Test("a vault without an index: HEAD is the HMAC-derived named ref of `current`")
    func noIndex() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.removeItem(atPath: root + "/.sg_vault/bare/indexes/" + f.plainKeys.branchIndexFileID)
        let v = try Vault.open(path: root, keys: f.plainKeys)
        let s = try v.status()
        #expect(s.branchName == "current" && s.branchID == nil && s.format == 1)
        #expect(s.headSignature == .verified)     // init carries author_key_id; its key file is in bare/keys
        #expect(try v.log().map(\.message) == ["init"])
    }
}
