public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON

/// What a pull did.
public struct PullOutcome: Sendable, Equatable {
    /// The remote's named head, nil when the remote has no commits.
    public let remoteHead: ObjectID?
    public let fetched: FetchReport
    /// nil when there was nothing to merge.
    public let merge: MergeOutcome?
    /// The head this folder last saw on the remote's named branch, when the remote's new head
    /// does not contain it: a writer moved the ref without compare-and-swap (the sites' web client
    /// does on every push) and dropped it there. It is still in this clone branch, so the merge
    /// brings it back and the next push publishes it again.
    public var droppedByRemote: ObjectID? = nil
    /// True when the remote held nothing at all under the vault's id (no branch index, no ref):
    /// a vault it has never seen, so a clone of it starts empty. A remote holding refs this
    /// key does not open is never this: the clone fails with ``VaultError/wrongKeyForRemote(vaultID:remote:)``.
    public var remoteHeldNothing = false
}

/// What a push did.
public struct PushOutcome: Sendable, Equatable {
    /// The head now on the remote's named branch.
    public let head: ObjectID?
    /// Objects uploaded (blobs, trees, commits).
    public let objects: Int
    /// Whether the remote already had it.
    public let upToDate: Bool
    public init(head: ObjectID?, objects: Int, upToDate: Bool) {
        self.head = head
        self.objects = objects
        self.upToDate = upToDate
    }
}

extension Vault {
    /// Pulls the remote's named branch `current` (§5.3, §7.1): reads its ref; when new, fetches
    /// only the commits, trees and blobs not held here, every id and signature verified (see
    /// ``SignerTrust``), stores them, merges the remote's branch index into the local one, and
    /// merges the remote head into this device's clone branch if the vault's trust rule serves
    /// it. A head signed by a signer the store has not pinned is stored but not merged: the pull
    /// throws ``VaultError/unverifiedCommit(commit:trust:vault:requiredByVault:)`` (a new signer,
    /// its fingerprint, the `vault trust` command) and HEAD stays where it was; `vault status`
    /// then lists the signer as new, and a pull after `vault trust` merges it.
    public func pull(from remote: any VaultObjectStore, signer: any CommitSigner,
                     trust: any SignerTrust = BranchIndexSignerTrust()) throws(VaultError) -> PullOutcome {
        let state = try remoteState(remote)
        guard let head = state.head else { return PullOutcome(remoteHead: nil, fetched: FetchReport(), merge: nil) }
        let lastSeen = try? readRef(state.namedRefID)
        let (report, signers) = try fetch(head, from: remote, state: state, trust: trust)
        var dropped: ObjectID?
        if let lastSeen, lastSeen != head, LocalObjectStore(vaultRoot: root).hasObject(lastSeen),
           try lowestCommonAncestor(lastSeen, head, index: try resolveHead().index) != lastSeen {
            dropped = lastSeen
        }
        try adoptRemoteIndex(state, remote: remote)
        if let ref = state.refBytes {
            try FileAccess.writeDurably(ref, to: sgVault + "/" + state.namedRefID, tempFolder: tempFolder)
        }
        trust.pin(signers, vaultID: vaultID)
        let outcome = try merge(theirs: head, signer: signer)
        return PullOutcome(remoteHead: head, fetched: report, merge: outcome, droppedByRemote: dropped)
    }

    /// Adds the remote index's branches this folder does not list yet (other clones), keeping
    /// every local entry (this clone's, before it is registered) and every unknown member.
    func adoptRemoteIndex(_ state: RemoteState, remote: any VaultObjectStore) throws(VaultError) {
        guard let remoteIndex = state.index else { return }
        let file = "bare/indexes/" + (try keys.branchIndexFileID)
        guard var localIndex = try rawIndex() else {
            if let bytes = state.indexBytes { try FileAccess.writeDurably(bytes, to: sgVault + "/" + file, tempFolder: tempFolder) }
            return
        }
        let have = Set((localIndex["branches"]?.arrayValue ?? []).compactMap { $0["branch_id"]?.stringValue })
        var added = false
        for b in remoteIndex["branches"]?.arrayValue ?? [] {
            guard let id = b["branch_id"]?.stringValue, !have.contains(id) else { continue }
            localIndex = DocumentEncoding.index(localIndex, appending: b)
            added = true
        }
        // Keep the server's format gate, never lowered (§7.1).
        if case .object(var members) = localIndex {
            for key in ["format", "min_client", "features"] {
                if let v = remoteIndex[key], !v.isNull, (localIndex[key]?.isNull ?? true) || key == "features" {
                    var value = v
                    if key == "features" {
                        let mine = localIndex["features"]?.arrayValue ?? []
                        var all = mine
                        for f in v.arrayValue ?? [] where !all.contains(f) { all.append(f); added = true }
                        value = .array(all)
                        if all.count == mine.count { continue }
                    } else { added = true }
                    if let i = members.firstIndex(where: { $0.key == key }) { members[i] = JSONMember(key: key, value: value) } else { members.append(JSONMember(key: key, value: value)) }
                }
            }
            localIndex = .object(members)
        }
        if added { try writeSmall(file, plaintext: JSONSerializer.bytes(localIndex, style: .python)) }
    }

    /// Pushes this device's clone branch to the remote's named branch `current` (§7.1): the new
    /// objects (blobs, trees, commits; nothing the remote head already reaches), the clone
    /// branch's key and ref and the merged branch index on the first push, then
    /// `write-if-match` on the named ref against the bytes read. A ref that moved meanwhile is
    /// ``VaultError/pullFirst(remote:)``; nothing local changes until the remote accepted.
    public func push(to remote: any VaultObjectStore, signer: any CommitSigner) throws(VaultError) -> PushOutcome {
        guard remote.isWritable else { throw .readOnly(reason: "remote \(remote.label) is read-only (a folder or static host); push to the vault server") }
        try ensureWritable()
        try FileAccess.makeFolders(local)
        let lock = try FileAccess.lock(local + "/sitekeep.lock")
        defer { withExtendedLifetime(lock) {} }
        var head = try resolveHead()
        var clone = try ensureCloneBranch(head: head, signer: signer, checkout: true)
        head = try resolveHead()
        guard let mine = head.commitID else { return PushOutcome(head: nil, objects: 0, upToDate: true) }
        let state = try remoteState(remote)
        // A pack vault's readers find objects only in packs (sgit's clone takes no loose
        // object): loose objects pushed there would break every later clone. Refused until
        // SiteKeep writes packs.
        if (state.parsedIndex?.features ?? head.index?.features ?? []).contains(Self.packsFeature) {
            throw .readOnly(reason: "this is a pack vault (feature packs): SiteKeep reads its packs but cannot write them yet, and loose objects would be invisible to sgit clones; push it with sgit")
        }
        // The remote's index may have lost this clone's branch since it registered: the sites'
        // web client rewrites the index to one unkeyed entry on every push. Registered again
        // then, as sgit's next push restores it, so other clones keep finding this one's key.
        let listed = state.index == nil || (state.parsedIndex?.branches.contains { $0.branchID == clone.branchID } ?? false)
        if state.head == mine, clone.registered, listed { return PushOutcome(head: mine, objects: 0, upToDate: true) }
        var remoteTrees = Set<ObjectID>(), remoteBlobs = Set<ObjectID>(), remoteCommits = Set<ObjectID>()
        if let theirs = state.head {
            guard LocalObjectStore(vaultRoot: root).hasObject(theirs),
                  try lowestCommonAncestor(mine, theirs, index: head.index) == theirs else { throw .pullFirst(remote: remote.label) }
            remoteCommits = try ancestorSet(theirs, index: head.index)
            try reachable(try commit(theirs, index: head.index).treeID, trees: &remoteTrees, blobs: &remoteBlobs)
        }
        // New commits oldest first; their trees and blobs the remote head does not reach.
        var newCommits: [ObjectID] = [], queue = [mine], seen: Set<ObjectID> = [mine]
        while let id = queue.popLast() {
            guard !remoteCommits.contains(id) else { continue }
            newCommits.append(id)
            for p in try commit(id, index: head.index).parents where !seen.contains(p) { seen.insert(p); queue.append(p) }
        }
        var trees: [ObjectID] = [], blobs = Set<ObjectID>()
        var treeSeen = remoteTrees
        for c in newCommits {
            var t = Set<ObjectID>(), b = Set<ObjectID>()
            try reachable(try commit(c, index: head.index).treeID, trees: &t, blobs: &b, skip: treeSeen)
            for id in t where !treeSeen.contains(id) { treeSeen.insert(id); trees.append(id) }
            blobs.formUnion(b.subtracting(remoteBlobs))
        }
        var files: [StoredFile] = []
        func add(_ id: ObjectID) throws(VaultError) {
            files.append(StoredFile(fileID: id.fileID, bytes: try readObject(id, limit: options.limits.maxBlobBytes + 64)))
        }
        for b in blobs.sorted() { try add(b) }
        for t in trees.reversed() { try add(t) }
        for c in newCommits.reversed() { try add(c) }
        try remote.write(files)
        if !clone.registered || !listed {
            try register(clone, remote: remote, state: state)
        }
        // This clone branch's own ref (single writer: a plain write).
        if let ref = try readSmall("bare/refs/" + clone.headRefID) {
            try remote.write([StoredFile(fileID: "bare/refs/" + clone.headRefID, bytes: ref)])
        }
        let newRef = try sealSmall(DocumentEncoding.ref(mine))
        guard try remote.writeIfMatch(fileID: state.namedRefID, bytes: newRef, expected: state.refBytes) else {
            throw .pullFirst(remote: remote.label)
        }
        try FileAccess.writeDurably(newRef, to: sgVault + "/" + state.namedRefID, tempFolder: tempFolder)
        if !clone.registered {
            clone.registered = true
            try writeCloneBranch(clone)
        }
        return PushOutcome(head: mine, objects: files.count, upToDate: false)
    }

    /// Registers this clone branch on the remote: its key file, and the branch index merged
    /// with the remote's (union of branches, the remote's entries and format gate kept),
    /// written with write-if-match against the bytes read; re-read and retried on a race.
    func register(_ clone: CloneBranch, remote: any VaultObjectStore, state first: RemoteState) throws(VaultError) {
        let indexID = "bare/indexes/" + (try keys.branchIndexFileID)
        guard let localIndex = try rawIndex() else { throw .malformed(object: indexID, reason: "this folder has no branch index") }
        var keyFiles: [StoredFile] = []
        for b in localIndex["branches"]?.arrayValue ?? [] {
            guard let k = b["public_key_id"]?.stringValue, let kid = Identifiers.keyID(k), let bytes = try readSmall("bare/keys/" + kid) else { continue }
            keyFiles.append(StoredFile(fileID: "bare/keys/" + kid, bytes: bytes))
        }
        try remote.write(keyFiles)
        var state = first
        for _ in 0..<5 {
            var merged: JSONValue
            if let remoteIndex = state.index {
                merged = remoteIndex
                let remoteBranches = remoteIndex["branches"]?.arrayValue ?? []
                let have = Set(remoteBranches.compactMap { $0["branch_id"]?.stringValue })
                // One named `current` entry: a remote that has one (the web client's, after its
                // rewrite) keeps it, and the local one is not added beside it.
                let hasCurrent = remoteBranches.contains { $0["branch_type"]?.stringValue == "named" && $0["name"]?.stringValue == "current" }
                for b in localIndex["branches"]?.arrayValue ?? [] {
                    if hasCurrent, b["branch_type"]?.stringValue == "named", b["name"]?.stringValue == "current" { continue }
                    if let id = b["branch_id"]?.stringValue, !have.contains(id) { merged = DocumentEncoding.index(merged, appending: b) }
                }
            } else {
                merged = localIndex
            }
            let bytes = try sealSmall(JSONSerializer.bytes(merged, style: .python))
            if try remote.writeIfMatch(fileID: indexID, bytes: bytes, expected: state.indexBytes) { return }
            state = try remoteState(remote)
        }
        throw .remote(remote: remote.label, reason: "the branch index kept changing while this clone registered; retry", transient: true, retryAfterMs: nil)
    }

    /// Every commit reachable from `id` (all parents).
    func ancestorSet(_ id: ObjectID, index: BranchIndex?) throws(VaultError) -> Set<ObjectID> {
        var seen: Set<ObjectID> = [id], queue = [id]
        while let c = queue.popLast() {
            for p in try commit(c, index: index).parents where !seen.contains(p) { seen.insert(p); queue.append(p) }
        }
        return seen
    }

    /// Collects the trees and blobs reachable from `treeID`, not descending into `skip`.
    func reachable(_ treeID: ObjectID, trees: inout Set<ObjectID>, blobs: inout Set<ObjectID>, skip: Set<ObjectID> = []) throws(VaultError) {
        guard !skip.contains(treeID), trees.insert(treeID).inserted else { return }
        for e in try tree(treeID).entries {
            switch e.kind {
            case .file(let b): blobs.insert(b)
            case .folder(let sub): try reachable(sub, trees: &trees, blobs: &blobs, skip: skip)
            }
        }
    }

    /// Makes a new working vault in `path` from a remote (§7.1 clone): the branch index, the
    /// named head's closure (every id and signature verified), the branch keys, and a new clone
    /// branch of this device at that head. Nothing secret is written: the keys stay in custody,
    /// `local/` holds no vault key and no private key. The result is a folder sgit reads when
    /// given the vault key. A failed clone removes what it made.
    public static func clone(from remote: any VaultObjectStore, into path: String, keys: SgitKeys, signer: any CommitSigner,
                             trust: any SignerTrust = BranchIndexSignerTrust(), options: VaultOptions = VaultOptions()) throws(VaultError) -> (Vault, PullOutcome) {
        var root = path
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        if FileAccess.exists(root) {
            guard FileAccess.isDirectory(root), FileAccess.names(in: root).isEmpty else {
                throw .io(path: root, reason: "already exists and is not an empty folder; clone into a new folder")
            }
        }
        let made = !FileAccess.exists(root)
        do throws(VaultError) {
            for sub in ["bare/data", "bare/refs", "bare/indexes", "bare/keys", "bare/branches", "bare/pending", "local"] {
                try FileAccess.makeFolders(root + "/.sg_vault/" + sub)
            }
            let vault = try Vault.open(path: root, keys: keys, options: options)
            let state = try vault.remoteState(remote)
            // A key that finds neither the index nor the named ref on a remote that holds refs
            // under this vault id is the wrong key (a mistyped passphrase derives other ids),
            // never an empty vault: fail, and the catch below leaves no folder behind.
            let heldNothing = state.indexBytes == nil && state.head == nil
            if heldNothing, !(try remote.list(prefix: "bare/refs/")).isEmpty {
                throw VaultError.wrongKeyForRemote(vaultID: keys.vaultID, remote: remote.label)
            }
            if let bytes = state.indexBytes {
                try FileAccess.writeDurably(bytes, to: root + "/.sg_vault/bare/indexes/" + keys.branchIndexFileID, tempFolder: vault.tempFolder)
            }
            var report = FetchReport()
            if let head = state.head {
                let (r, signers) = try vault.fetch(head, from: remote, state: state, trust: trust)
                report = r
                try FileAccess.writeDurably(state.refBytes!, to: root + "/.sg_vault/" + state.namedRefID, tempFolder: vault.tempFolder)
                trust.pin(signers, vaultID: keys.vaultID)
            }
            // The keys of every branch, so commits of any clone verify here.
            let keyIDs = (state.parsedIndex?.branches ?? []).compactMap(\.publicKeyID).filter { !FileAccess.exists(root + "/.sg_vault/bare/keys/" + $0) }
            if !keyIDs.isEmpty {
                let got = try remote.read(keyIDs.map { "bare/keys/" + $0 })
                var files: [StoredFile] = []
                for (id, bytes) in got {
                    _ = try vault.decryptRemote(bytes, object: "\(remote.label) \(id)")
                    files.append(StoredFile(fileID: id, bytes: bytes))
                }
                try LocalObjectStore(vaultRoot: root).write(files)
            }
            let head = try vault.resolveHead()
            _ = try vault.ensureCloneBranch(head: head, signer: signer, checkout: false)
            let outcome = MergeOutcome(kind: .fastForward, head: state.head, conflicts: [])
            return (vault, PullOutcome(remoteHead: state.head, fetched: report, merge: outcome, remoteHeldNothing: heldNothing))
        } catch {
            if made { removeTree(root) } else { for n in FileAccess.names(in: root) { removeTree(root + "/" + n) } }
            throw error
        }
    }

    static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            for n in FileAccess.names(in: path) { removeTree(path + "/" + n) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
