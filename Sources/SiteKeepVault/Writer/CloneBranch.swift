import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem

/// This SiteKeep's clone branch in a vault folder (SGIT-FORMAT.md §5.3): a `branch-clone-…`
/// entry in the branch index whose public key (`bare/keys/key-rnd-imm-…`) is the device key's,
/// recorded in `local/sitekeep.json` (no secret: ids and the public key only).
///
/// A folder sgit made has sgit's own clone branch as HEAD. The first SiteKeep write adopts the
/// folder: a new clone branch starting at the current HEAD commit, then `local/config.json`
/// names it as `my_branch_id`, so sgit reading the folder sees every commit SiteKeep makes.
/// sgit's own key file stays where it was.
struct CloneBranch: Equatable {
    var branchID: String
    var headRefID: String
    var publicKeyID: String
    var publicKeyDER: [UInt8]
    /// Whether SiteKeep keeps the plaintext working copy in step (folders sgit checked out).
    var checkout: Bool
    /// Whether the branch and its key are on the remote's branch index yet.
    var registered: Bool

    static let file = "local/sitekeep.json"

    var json: JSONValue {
        .object([
            JSONMember(key: "schema", value: "sitekeep_clone_v1"),
            JSONMember(key: "branch_id", value: .string(branchID)),
            JSONMember(key: "head_ref_id", value: .string(headRefID)),
            JSONMember(key: "public_key_id", value: .string(publicKeyID)),
            JSONMember(key: "public_key", value: .string(Base64.encode(publicKeyDER))),
            JSONMember(key: "checkout", value: .bool(checkout)),
            JSONMember(key: "registered", value: .bool(registered)),
        ])
    }

    static func parse(_ bytes: [UInt8]) throws(VaultError) -> CloneBranch {
        let f = try Fields(parsing: bytes, object: file)
        guard try f.optionalString("schema") == "sitekeep_clone_v1" else { throw .malformed(object: file, reason: "schema is not sitekeep_clone_v1") }
        let rawBranch = try f.string("branch_id"), rawRef = try f.string("head_ref_id"), rawKey = try f.string("public_key_id")
        guard let b = Identifiers.branchID(rawBranch), let r = Identifiers.refID(rawRef), let k = Identifiers.keyID(rawKey),
              let der = try? Base64.decode(try f.string("public_key")) else {
            throw .malformed(object: file, reason: "an id or the public key is not valid")
        }
        return CloneBranch(branchID: b, headRefID: r, publicKeyID: k, publicKeyDER: der,
                           checkout: try f.bool("checkout", default: false), registered: try f.bool("registered", default: false))
    }
}

extension Vault {
    var sgVault: String { root + "/.sg_vault" }
    /// Where durable writes stage their temp files (same file system as the vault).
    var tempFolder: String { root + "/.sg_vault/local/tmp" }

    func readCloneBranch() throws(VaultError) -> CloneBranch? {
        guard let bytes = try readSmall(CloneBranch.file) else { return nil }
        return try CloneBranch.parse(bytes)
    }

    func writeCloneBranch(_ c: CloneBranch) throws(VaultError) {
        try FileAccess.writeDurably(JSONSerializer.bytes(c.json, style: .pretty), to: sgVault + "/" + CloneBranch.file, tempFolder: tempFolder)
    }

    /// The decrypted index as JSON (nil when the vault has none), for rewriting it with every
    /// unknown member preserved.
    func rawIndex() throws(VaultError) -> JSONValue? {
        let file = "bare/indexes/" + (try keys.branchIndexFileID)
        guard let bytes = try readSmall(file) else { return nil }
        do { return try JSONParser.parse(try decryptSmall(bytes, object: file), limits: .document) } catch {
            throw .malformed(object: file, reason: "not valid JSON (\(error))")
        }
    }

    /// Seals a small document (ref, index, key file) under the read key with a random IV.
    func sealSmall(_ plaintext: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try Envelope.sealV1(plaintext, key: keys.readKey, iv: SecureRandom.bytes(count: 12)) } catch {
            throw .io(path: "vault", reason: "encryption failed: \(error)")
        }
    }

    func writeSmall(_ relative: String, plaintext: [UInt8]) throws(VaultError) {
        let path = sgVault + "/" + relative
        try FileAccess.makeFolders(AtomicFile.folder(of: path))
        try FileAccess.writeDurably(try sealSmall(plaintext), to: path, tempFolder: tempFolder)
    }

    /// SiteKeep's clone branch for this folder, made (and the folder adopted) when there is none
    /// yet, or when HEAD is another clone's branch, or the recorded key is not `signer`'s.
    ///
    /// Order, so a crash at any step leaves HEAD at the last good commit for both tools: key
    /// file, the new branch's ref (at the current HEAD commit), the index naming the branch,
    /// `local/sitekeep.json`, and last `local/config.json` switching HEAD to it.
    func ensureCloneBranch(head: Head, signer: any CommitSigner, checkout: Bool) throws(VaultError) -> CloneBranch {
        let der = try signer.publicKeyDER()
        if let mine = try readCloneBranch(), mine.publicKeyDER == der, head.branch?.branchID == mine.branchID {
            return mine
        }
        let pem: String
        do { pem = try P256.Signing.PublicKey(derRepresentation: der).pemRepresentation } catch {
            throw .signingFailed("the device public key is not a P-256 key")
        }
        let clone = CloneBranch(branchID: "branch-clone-" + SecureRandomName.hex(16),
                                headRefID: "ref-pid-snw-" + SecureRandomName.hex(12),
                                publicKeyID: "key-rnd-imm-" + SecureRandomName.hex(16),
                                publicKeyDER: der, checkout: checkout, registered: false)
        try writeSmall("bare/keys/" + clone.publicKeyID, plaintext: DocumentEncoding.publicKey(pem: pem))
        if let commit = head.commitID {
            try writeSmall("bare/refs/" + clone.headRefID, plaintext: DocumentEncoding.ref(commit))
        }
        var index = try rawIndex() ?? DocumentEncoding.emptyIndex()
        var named = namedCurrentID(in: index)
        if named == nil {
            // A vault without an index (web-UI vaults): name its `current` branch as sgit does,
            // at the HMAC-derived ref, with a fresh key whose private half is discarded.
            let namedKey: P256.Signing.PrivateKey
            do { namedKey = try P256.Signing.PrivateKey() } catch { throw .signingFailed("key generation failed") }
            let namedKeyID = "key-rnd-imm-" + SecureRandomName.hex(16)
            try writeSmall("bare/keys/" + namedKeyID, plaintext: DocumentEncoding.publicKey(pem: namedKey.publicKey.pemRepresentation))
            let id = "branch-named-" + SecureRandomName.hex(16)
            index = DocumentEncoding.index(index, appending: DocumentEncoding.branch(
                id: id, name: "current", type: "named", headRef: try keys.namedRefFileID, publicKeyID: namedKeyID,
                createdAt: Clocks.wallMilliseconds(), creator: nil))
            named = id
        }
        index = DocumentEncoding.index(index, appending: DocumentEncoding.branch(
            id: clone.branchID, name: "local", type: "clone", headRef: clone.headRefID, publicKeyID: clone.publicKeyID,
            createdAt: Clocks.wallMilliseconds(), creator: named))
        try writeSmall("bare/indexes/" + (try keys.branchIndexFileID), plaintext: JSONSerializer.bytes(index, style: .python))
        try writeCloneBranch(clone)
        let previous: JSONValue? = try readSmall("local/config.json").flatMap { try? JSONParser.parse($0, limits: .document) }
        try FileAccess.writeDurably(DocumentEncoding.config(myBranchID: clone.branchID, previous: previous),
                                    to: sgVault + "/local/config.json", tempFolder: tempFolder)
        return clone
    }

    /// The id of the named branch `current` in a raw index.
    func namedCurrentID(in index: JSONValue) -> String? {
        for b in index["branches"]?.arrayValue ?? [] where b["branch_type"]?.stringValue == "named" && b["name"]?.stringValue == "current" {
            if let id = b["branch_id"]?.stringValue { return Identifiers.branchID(id) }
        }
        return nil
    }

}

#if canImport(Glibc)
import Glibc
#endif
