import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem

/// One change to a vault path.
public enum VaultChange: Sendable, Equatable {
    /// Store these bytes at the path (a new file or a new version).
    case write([UInt8])
    /// Remove the file at the path.
    case remove
    /// Put an existing entry at the path (a move keeps the blob; nothing is re-encrypted).
    case entry(FlatFile)
}

/// What a commit did.
public struct CommitResult: Sendable, Equatable {
    /// The new HEAD commit; nil when nothing changed (no commit was made).
    public let commit: ObjectID?
    /// The HEAD before.
    public let parent: ObjectID?
    /// The root tree of the new HEAD.
    public let tree: ObjectID
    /// Paths of the plaintext working copy left alone because they had local edits.
    public let workingCopySkipped: [String]
}

extension Vault {
    /// Commits `changes` on this device's clone branch, signed by `signer` (SGIT-FORMAT.md §5.5).
    ///
    /// Blobs (sgz1 on `blob-deflate` vaults), the rebuilt trees (deterministic: unchanged
    /// folders keep their ids) and the commit are stored durably first; only then does the clone
    /// ref move. A crash before that leaves HEAD where it was, readable by SiteKeep and sgit
    /// (the objects written are unreferenced and harmless). Writers in other SiteKeep processes
    /// wait on `local/sitekeep.lock`.
    /// - Parameter checkoutWhenAdopting: when this is the first SiteKeep write to a folder sgit
    ///   made, keep its plaintext working copy in step (true for `vault add`ed folders).
    /// - Throws: ``VaultError/readOnly(reason:)``, ``VaultError/signingFailed(_:)``,
    ///   ``VaultError/wrongKind(path:expected:)``, ``VaultError/notFound(path:)``, I/O errors.
    public func commit(_ changes: [(VaultPath, VaultChange)], message: String, signer: any CommitSigner,
                       parents extra: [ObjectID] = [], checkoutWhenAdopting: Bool = true) throws(VaultError) -> CommitResult {
        try ensureWritable()
        try FileAccess.makeFolders(local)
        let lock = try FileAccess.lock(local + "/sitekeep.lock")
        defer { withExtendedLifetime(lock) {} }
        FileAccess.removeStaleTemps(in: tempFolder)
        for (path, _) in changes { try Self.checkWritablePath(path) }

        var head = try resolveHead()
        let clone = try ensureCloneBranch(head: head, signer: signer, checkout: checkoutWhenAdopting)
        head = try resolveHead()
        guard head.branch?.branchID == clone.branchID else {
            throw .malformed(object: "local/config.json", reason: "HEAD is not this device's clone branch after adopting the folder")
        }
        let format = head.index?.format == 2 ? 2 : 1
        let deflate = head.index?.features.contains("blob-deflate") ?? false
        var parentTree: ObjectID?
        var before: [VaultPath: FlatFile] = [:]
        if let p = head.commitID {
            let c = try trustedCommit(p, head: head)
            parentTree = c.treeID
            if clone.checkout { before = try flatMap(c.treeID) }
        }
        let store = LocalObjectStore(vaultRoot: root)
        let builder = TreeBuilder(vault: self, store: store, width: format == 2 ? 32 : 12, deflate: deflate)
        let newRoot = try builder.apply(changes, to: parentTree)
        if newRoot == parentTree, extra.isEmpty {
            return CommitResult(commit: nil, parent: head.commitID, tree: newRoot, workingCopySkipped: [])
        }
        let commitID = try writeCommit(tree: newRoot, parents: (head.commitID.map { [$0] } ?? []) + extra, message: message,
                                       clone: clone, signer: signer, store: store, width: format == 2 ? 32 : 12)
        try FileAccess.syncFolder(bare + "/data")
        try moveRef(clone.headRefID, from: head.commitID, to: commitID)
        var skipped: [String] = []
        if clone.checkout { skipped = updateWorkingCopy(before: before, changes: changes, newTree: newRoot) }
        return CommitResult(commit: commitID, parent: head.commitID, tree: newRoot, workingCopySkipped: skipped)
    }

    func ensureWritable() throws(VaultError) {
        if try keys.isReadOnly { throw .readOnly(reason: "only the read key of vault \(vaultID) is known; add the vault with its full vault key to write") }
        if FileAccess.exists(local + "/clone_mode.json") {
            throw .readOnly(reason: "the folder is a read-only clone (local/clone_mode.json)")
        }
    }

    /// Refuses names a working copy must never hold (§5.1): `.sg_vault`, `.sg_vault_new`,
    /// `.sg_vault_old_*`, `.git` in any segment (compared without case and trailing dots/spaces).
    static func checkWritablePath(_ path: VaultPath) throws(VaultError) {
        guard !path.bytes.isEmpty else { throw .wrongKind(path: "", expected: "file") }
        for seg in path.segments {
            var s = String(decoding: seg, as: UTF8.self).lowercased()
            while s.hasSuffix(".") || s.hasSuffix(" ") { s.removeLast() }
            if s == ".sg_vault" || s == ".sg_vault_new" || s.hasPrefix(".sg_vault_old_") || s == ".git" || s == "git~1" {
                throw .invalidPath(path.string, reason: "a segment named \(VaultError.quoted(String(decoding: seg, as: UTF8.self))) is reserved for the vault's own files")
            }
        }
    }

    /// Signs and stores a commit; returns its id.
    func writeCommit(tree: ObjectID, parents: [ObjectID], message: String, clone: CloneBranch, signer: any CommitSigner,
                     store: LocalObjectStore, width: Int) throws(VaultError) -> ObjectID {
        let draft = CommitEncoding.Draft(treeID: tree, parents: parents,
                                         messageEnc: try CommitEncoding.encryptMessage(message, key: keys.readKey),
                                         branchID: clone.branchID, authorKeyID: clone.publicKeyID, timestampMs: Clocks.wallMilliseconds())
        let signature = try signer.sign(draft.signingBytes)
        guard signature.count == 64 else { throw .signingFailed("the signer returned \(signature.count) bytes, not a raw 64-byte P-256 signature") }
        let stored = try sealSmall(draft.plaintext(signature: signature))
        return try store.putObject(stored, width: width)
    }

    /// Points a ref at `new` (durably) and records the move in `local/reflog.jsonl`.
    func moveRef(_ refID: String, from old: ObjectID?, to new: ObjectID) throws(VaultError) {
        try writeSmall("bare/refs/" + refID, plaintext: DocumentEncoding.ref(new))
        try? FileAccess.appendLine(DocumentEncoding.reflogLine(ref: refID, old: old, new: new, timestampMs: Clocks.wallMilliseconds()),
                                   to: local + "/reflog.jsonl")
    }

    /// The flat map of a tree: every file path and what its entry records.
    func flatMap(_ treeID: ObjectID) throws(VaultError) -> [VaultPath: FlatFile] {
        var out: [VaultEntry] = []
        try flatten(try tree(treeID), prefix: .root, depth: 0, into: &out)
        var map: [VaultPath: FlatFile] = [:]
        for e in out {
            map[e.path] = FlatFile(blobID: e.blobID, size: e.size, contentHash: e.contentHash ?? "",
                                   contentType: e.contentType ?? "application/octet-stream", large: e.large)
        }
        return map
    }
}

/// Applies changes to a tree, rewriting only the folders on changed paths (§5.2): entries of
/// untouched folders and files keep their stored fields and ids.
struct TreeBuilder {
    let vault: Vault
    let store: LocalObjectStore
    let width: Int
    let deflate: Bool

    /// Changes grouped by folder.
    final class Node {
        var files: [[UInt8]: (String, VaultChange)] = [:]
        var folders: [[UInt8]: (String, Node)] = [:]
    }

    func apply(_ changes: [(VaultPath, VaultChange)], to rootTree: ObjectID?) throws(VaultError) -> ObjectID {
        let top = Node()
        for (path, change) in changes {
            var node = top
            let segs = path.segments
            for seg in segs.dropLast() {
                let name = String(decoding: seg, as: UTF8.self)
                if let (_, sub) = node.folders[seg] { node = sub } else {
                    let sub = Node()
                    node.folders[seg] = (name, sub)
                    node = sub
                }
            }
            let last = segs[segs.count - 1]
            node.files[last] = (String(decoding: last, as: UTF8.self), change)
        }
        if let id = try rewrite(rootTree, top, prefix: .root, depth: 0) { return id }
        return try storeTree([])
    }

    /// Builds every tree of a flat map afresh (§5.2: deepest folders first, root last), with
    /// each file's recorded metadata. Used by merges, whose result is a flat map.
    func rebuild(_ flat: [VaultPath: FlatFile]) throws(VaultError) -> ObjectID {
        final class Dir { var files: [(String, FlatFile)] = []; var dirs: [[UInt8]: (String, Dir)] = [:] }
        let top = Dir()
        for (path, file) in flat {
            var d = top
            let segs = path.segments
            for seg in segs.dropLast() {
                if let (_, sub) = d.dirs[seg] { d = sub } else {
                    let sub = Dir()
                    d.dirs[seg] = (String(decoding: seg, as: UTF8.self), sub)
                    d = sub
                }
            }
            d.files.append((String(decoding: segs[segs.count - 1], as: UTF8.self), file))
        }
        func build(_ d: Dir) throws(VaultError) -> ObjectID {
            var entries: [TreeEncoding.Entry] = []
            for (name, file) in d.files { entries.append(try fileEntry(name, file, existingName: nil)) }
            for (_, (name, sub)) in d.dirs {
                entries.append(try TreeEncoding.folderEntry(name: name, tree: try build(sub), reuseName: nil, key: vault.keys.readKey))
            }
            return try storeTree(entries)
        }
        return try build(top)
    }

    /// The rewritten folder's tree id, nil when it ends up empty (sgit stores no empty folder).
    func rewrite(_ treeID: ObjectID?, _ node: Node, prefix: VaultPath, depth: Int) throws(VaultError) -> ObjectID? {
        guard depth <= vault.options.limits.maxTreeDepth else {
            throw .invalidPath(prefix.string, reason: "folders nest deeper than \(vault.options.limits.maxTreeDepth)")
        }
        let old = try treeID.map { id throws(VaultError) in try vault.tree(id) }
        var entries: [[UInt8]: TreeEncoding.Entry] = [:]
        var order: [[UInt8]] = []
        for e in old?.entries ?? [] {
            let entry: TreeEncoding.Entry
            var fields: EncodedFields
            if let enc = e.encoded { fields = enc } else { fields = EncodedFields(name: try TreeEncoding.encryptField(e.name, key: vault.keys.readKey)) }
            switch e.kind {
            case .file(let blob):
                entry = TreeEncoding.Entry(nameBytes: e.nameBytes, target: .blob(blob), fields: fields, large: e.large)
            case .folder(let sub):
                entry = TreeEncoding.Entry(nameBytes: e.nameBytes, target: .tree(sub),
                                           fields: EncodedFields(name: fields.name), large: false)
            }
            entries[e.nameBytes] = entry
            order.append(e.nameBytes)
        }
        var changed = false
        for (nameBytes, (name, change)) in node.files {
            let path = prefix.appending(name)
            let existing = old?.entry(named: nameBytes)
            if case .folder? = existing?.kind { throw .wrongKind(path: path.string, expected: "file (it is a folder)") }
            switch change {
            case .remove:
                guard existing != nil else { throw .notFound(path: path.string) }
                entries[nameBytes] = nil
                changed = true
            case .write(let bytes):
                let hash = ObjectIDs.contentHash(bytes)
                if let existing, case .file(let blob) = existing.kind, existing.contentHash == hash, existing.size == bytes.count {
                    _ = blob   // identical content: keep the entry (sgit never re-encrypts an unchanged file)
                    continue
                }
                let (blobID, storedSize) = try storeBlob(bytes)
                let type = existing?.contentType ?? MimeTypes.guess(fileName: name)
                let file = FlatFile(blobID: blobID, size: bytes.count, contentHash: hash, contentType: type,
                                    large: storedSize > 4 << 20)
                entries[nameBytes] = try fileEntry(name, file, existingName: existing?.encoded?.name)
                changed = true
            case .entry(var file):
                file.contentType = MimeTypes.guess(fileName: name)
                entries[nameBytes] = try fileEntry(name, file, existingName: existing?.encoded?.name)
                changed = true
            }
            if existing == nil { order.append(nameBytes) }
        }
        for (nameBytes, (name, sub)) in node.folders {
            let path = prefix.appending(name)
            let existing = old?.entry(named: nameBytes)
            var subTree: ObjectID?
            switch existing?.kind {
            case .file?: throw .wrongKind(path: path.string, expected: "folder (it is a file)")
            case .folder(let id)?: subTree = id
            case nil: subTree = nil
            }
            let rewritten = try rewrite(subTree, sub, prefix: path, depth: depth + 1)
            if rewritten == subTree { continue }
            changed = true
            if let rewritten {
                entries[nameBytes] = try TreeEncoding.folderEntry(name: name, tree: rewritten, reuseName: existing?.encoded?.name,
                                                                  key: vault.keys.readKey)
                if existing == nil { order.append(nameBytes) }
            } else {
                entries[nameBytes] = nil
            }
        }
        if !changed, let treeID { return treeID }
        let list = order.compactMap { entries[$0] }
        if list.isEmpty, depth > 0 { return nil }
        return try storeTree(list)
    }

    func fileEntry(_ name: String, _ f: FlatFile, existingName: String?) throws(VaultError) -> TreeEncoding.Entry {
        let key = try vault.keys.readKey
        let fields = EncodedFields(name: try TreeEncoding.field(existingName, name, key: key),
                                   size: try TreeEncoding.encryptField(String(f.size), key: key),
                                   contentHash: try TreeEncoding.encryptField(f.contentHash, key: key),
                                   contentType: try TreeEncoding.encryptField(f.contentType, key: key))
        return TreeEncoding.Entry(nameBytes: Array(name.utf8), target: .blob(f.blobID), fields: fields, large: f.large)
    }

    func storeTree(_ entries: [TreeEncoding.Entry]) throws(VaultError) -> ObjectID {
        try store.putObject(try TreeEncoding.seal(entries, key: vault.keys.readKey), width: width)
    }

    /// Encrypts a blob (random IV; sgz1 when the vault deflates and it pays) and stores it;
    /// returns its id and stored size (for the `large` flag).
    func storeBlob(_ plaintext: [UInt8]) throws(VaultError) -> (ObjectID, Int) {
        let stored = try BlobEncoding.seal(plaintext, key: vault.keys.readKey, deflate: deflate)
        return (try store.putObject(stored, width: width), stored.count)
    }
}
