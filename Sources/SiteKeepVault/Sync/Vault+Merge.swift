import SiteKeepCustody
import SiteKeepJSON
import SiteKeepSystem

/// What merging a remote head into this device's clone branch did (SGIT-FORMAT.md §6).
public struct MergeOutcome: Sendable, Equatable {
    public enum Kind: String, Sendable { case upToDate = "up-to-date", fastForward = "fast-forward", merged, conflicts }
    public let kind: Kind
    /// The clone branch's head afterwards.
    public let head: ObjectID?
    /// Paths in conflict (nothing was committed; resolve them).
    public let conflicts: [String]
}

/// `local/merge_state.json`, as sgit writes it.
public struct MergeState: Sendable, Equatable {
    public let ours: ObjectID
    public let theirs: ObjectID
    public let lca: ObjectID?
    public let startedAt: Int64
    public var conflicts: [String]
    public var resolved: [String]
}

extension Vault {
    static let mergeStateFile = "local/merge_state.json"
    static let resolutionsFile = "local/sitekeep-merge.json"

    /// The lowest common ancestor (§6): ancestors of both sides, minus those that are proper
    /// ancestors of another common one; any survivor.
    func lowestCommonAncestor(_ a: ObjectID, _ b: ObjectID, index: BranchIndex?) throws(VaultError) -> ObjectID? {
        func ancestors(_ start: ObjectID) throws(VaultError) -> [ObjectID: Int] {
            var depth: [ObjectID: Int] = [start: 0]
            var queue = [start], i = 0
            while i < queue.count, depth.count < options.limits.maxCommits {
                let id = queue[i]; i += 1
                for p in try commit(id, index: index).parents where depth[p] == nil {
                    depth[p] = depth[id]! + 1
                    queue.append(p)
                }
            }
            return depth
        }
        let da = try ancestors(a), db = try ancestors(b)
        let common = Set(da.keys).intersection(db.keys)
        guard !common.isEmpty else { return nil }
        // Every ancestor of a common commit is common, so the common commits that are no
        // proper ancestor of another are exactly those that are nobody's parent among them.
        var dominated = Set<ObjectID>()
        for c in common { for p in try commit(c, index: index).parents { dominated.insert(p) } }
        let survivors = common.subtracting(dominated)
        return survivors.min { (da[$0]!, $0.rawValue) < (da[$1]!, $1.rawValue) }
    }

    /// Merges `theirs` (the named branch's head, already fetched) into this device's clone
    /// branch: up to date, fast-forward, a clean merge commit, or conflicts left for
    /// `resolve` (with `PATH.conflict` and `merge_state.json` as sgit writes them).
    func merge(theirs: ObjectID, signer: any CommitSigner) throws(VaultError) -> MergeOutcome {
        try FileAccess.makeFolders(local)
        let lock = try FileAccess.lock(local + "/sitekeep.lock")
        defer { withExtendedLifetime(lock) {} }
        if FileAccess.exists(sgVault + "/" + Self.mergeStateFile) {
            throw .mergeState("a merge is in progress: resolve its conflicts (`sitekeep vault resolve`) or abort it (`sitekeep vault merge-abort`) before pulling again")
        }
        var head = try resolveHead()
        let clone = try ensureCloneBranch(head: head, signer: signer, checkout: true)
        head = try resolveHead()
        _ = try trustedCommit(theirs, head: head)
        guard let ours = head.commitID else {
            try moveRef(clone.headRefID, from: nil, to: theirs)
            return MergeOutcome(kind: .fastForward, head: theirs, conflicts: [])
        }
        if ours == theirs { return MergeOutcome(kind: .upToDate, head: ours, conflicts: []) }
        let lca = try lowestCommonAncestor(ours, theirs, index: head.index)
        if lca == theirs { return MergeOutcome(kind: .upToDate, head: ours, conflicts: []) }
        if lca == ours {
            let before = clone.checkout ? try flatMap(try commit(ours, index: head.index).treeID) : [:]
            try moveRef(clone.headRefID, from: ours, to: theirs)
            if clone.checkout { syncWorkingCopy(from: before, to: try flatMap(try commit(theirs, index: head.index).treeID)) }
            return MergeOutcome(kind: .fastForward, head: theirs, conflicts: [])
        }
        let (merged, conflicts, oursMap) = try threeWay(ours: ours, theirs: theirs, lca: lca, index: head.index)
        if !conflicts.isEmpty {
            let theirsMap = try flatMap(try commit(theirs, index: head.index).treeID)
            for path in conflicts {
                guard let t = theirsMap[path], (try? prepareParents(of: path)) == true,
                      let bytes = try? blob(t.blobID, size: t.size, contentHash: t.contentHash, path: path) else { continue }
                try? FileAccess.writeDurably(bytes, to: root + "/" + path.string + ".conflict", mode: 0o644, tempFolder: tempFolder)
            }
            let state = MergeState(ours: ours, theirs: theirs, lca: lca, startedAt: Clocks.wallMilliseconds(),
                                   conflicts: conflicts.map(\.string), resolved: [])
            try writeMergeState(state)
            return MergeOutcome(kind: .conflicts, head: ours, conflicts: state.conflicts)
        }
        let id = try commitMerged(merged, ours: ours, theirs: theirs, clone: clone, index: head.index, signer: signer)
        if clone.checkout { syncWorkingCopy(from: oursMap, to: merged) }
        return MergeOutcome(kind: .merged, head: id, conflicts: [])
    }

    /// The merged flat map, the conflicting paths (ours kept there, or theirs for a
    /// delete/modify), and ours' map.
    func threeWay(ours: ObjectID, theirs: ObjectID, lca: ObjectID?, index: BranchIndex?) throws(VaultError)
        -> ([VaultPath: FlatFile], [VaultPath], [VaultPath: FlatFile]) {
        let base = try lca.map { id throws(VaultError) in try flatMap(try commit(id, index: index).treeID) } ?? [:]
        let o = try flatMap(try commit(ours, index: index).treeID)
        let t = try flatMap(try commit(theirs, index: index).treeID)
        var merged: [VaultPath: FlatFile] = [:]
        var conflicts: [VaultPath] = []
        let head = try resolveHead()
        let width = head.index?.format == 2 ? 32 : 12
        let deflate = head.index?.features.contains("blob-deflate") ?? false
        for path in Set(base.keys).union(o.keys).union(t.keys).sorted() {
            let b = base[path], ov = o[path], tv = t[path]
            let oChanged = ov?.blobID != b?.blobID, tChanged = tv?.blobID != b?.blobID
            switch (b != nil, ov != nil, tv != nil) {
            case (true, true, true), (false, true, true):
                if !tChanged || ov!.blobID == tv!.blobID { merged[path] = ov }
                else if !oChanged { merged[path] = tv }
                else if let picks = try mergePicks(path, ov!, tv!, width: width, deflate: deflate) { merged[path] = picks }
                else { merged[path] = ov; conflicts.append(path) }
            case (false, false, true): merged[path] = tv
            case (false, true, false): merged[path] = ov
            case (true, true, false): if oChanged { merged[path] = ov; conflicts.append(path) }
            case (true, false, true): if tChanged { merged[path] = tv; conflicts.append(path) }
            default: break
            }
        }
        return (merged, conflicts, o)
    }

    /// Both sides changed a file with a merge rule of its own (the picks, merged by id; the
    /// inbox's read marks, by their union): merge into a new blob.
    func mergePicks(_ path: VaultPath, _ o: FlatFile, _ t: FlatFile, width: Int, deflate: Bool) throws(VaultError) -> FlatFile? {
        let rule: ([UInt8], [UInt8]) -> [UInt8]?
        if PicksMerge.paths.contains(path.string) { rule = PicksMerge.merge } else if path.string == InboxReadMarksMerge.path { rule = InboxReadMarksMerge.merge } else { return nil }
        let ob = try blob(o.blobID, size: o.size, contentHash: o.contentHash, path: path)
        let tb = try blob(t.blobID, size: t.size, contentHash: t.contentHash, path: path)
        guard let bytes = rule(ob, tb) else { return nil }
        let stored = try BlobEncoding.seal(bytes, key: keys.readKey, deflate: deflate)
        let id = try LocalObjectStore(vaultRoot: root).putObject(stored, width: width)
        return FlatFile(blobID: id, size: bytes.count, contentHash: ObjectIDs.contentHash(bytes), contentType: o.contentType,
                        large: stored.count > 4 << 20)
    }

    /// Builds the merged trees and a two-parent commit, and moves the clone ref to it.
    func commitMerged(_ merged: [VaultPath: FlatFile], ours: ObjectID, theirs: ObjectID, clone: CloneBranch, index: BranchIndex?,
                      signer: any CommitSigner) throws(VaultError) -> ObjectID {
        let width = index?.format == 2 ? 32 : 12
        let store = LocalObjectStore(vaultRoot: root)
        let builder = TreeBuilder(vault: self, store: store, width: width, deflate: index?.features.contains("blob-deflate") ?? false)
        let tree = try builder.rebuild(merged)
        let id = try writeCommit(tree: tree, parents: [ours, theirs], message: "Merge current into local", clone: clone,
                                 signer: signer, store: store, width: width)
        try FileAccess.syncFolder(bare + "/data")
        try moveRef(clone.headRefID, from: ours, to: id)
        return id
    }

    /// Replaces working-copy files that still hold what `before` recorded with what `after` records.
    func syncWorkingCopy(from before: [VaultPath: FlatFile], to after: [VaultPath: FlatFile]) {
        var changes: [(VaultPath, VaultChange)] = []
        for (p, f) in after where before[p]?.blobID != f.blobID { changes.append((p, .entry(f))) }
        for p in before.keys where after[p] == nil { changes.append((p, .remove)) }
        _ = updateWorkingCopy(before: before, changes: changes, newTree: ObjectIDs.of([], width: 12))
    }

    // MARK: merge state

    func writeMergeState(_ s: MergeState) throws(VaultError) {
        let doc = JSONValue.object([
            JSONMember(key: "schema_version", value: 1),
            JSONMember(key: "ours_commit_id", value: .string(s.ours.rawValue)),
            JSONMember(key: "theirs_commit_id", value: .string(s.theirs.rawValue)),
            JSONMember(key: "lca_id", value: .string(s.lca?.rawValue)),
            JSONMember(key: "started_at", value: .int(s.startedAt)),
            JSONMember(key: "conflict_paths", value: .array(s.conflicts.map { .string($0) })),
            JSONMember(key: "resolved_paths", value: .array(s.resolved.map { .string($0) })),
        ])
        try FileAccess.writeDurably(JSONSerializer.bytes(doc, style: .pretty), to: sgVault + "/" + Self.mergeStateFile, tempFolder: tempFolder)
    }

    /// The merge in progress, if any.
    public func mergeState() throws(VaultError) -> MergeState? {
        guard let bytes = try readSmall(Self.mergeStateFile) else { return nil }
        let f = try Fields(parsing: bytes, object: Self.mergeStateFile)
        guard let o = try f.objectID("ours_commit_id", kind: "commit id"), let t = try f.objectID("theirs_commit_id", kind: "commit id") else {
            throw .malformed(object: Self.mergeStateFile, reason: "ours_commit_id or theirs_commit_id is missing")
        }
        return MergeState(ours: o, theirs: t, lca: try f.objectID("lca_id", kind: "commit id"), startedAt: try f.optionalInt("started_at") ?? 0,
                          conflicts: try f.array("conflict_paths").compactMap(\.stringValue),
                          resolved: try f.array("resolved_paths").compactMap(\.stringValue))
    }

    /// Resolves one conflicting path with ours or theirs (`sgit resolve`); when none is left,
    /// makes the merge commit (parents ours, theirs) and clears the merge state.
    public func resolve(path: String, useTheirs: Bool, signer: any CommitSigner) throws(VaultError) -> MergeOutcome {
        guard var state = try mergeState() else { throw .mergeState("no merge is in progress in this vault") }
        guard state.conflicts.contains(path) else {
            throw .mergeState("\(VaultError.quoted(path)) is not among the merge's conflicts (\(state.conflicts.joined(separator: ", ")))")
        }
        var choices = try resolutions()
        choices[path] = useTheirs ? "theirs" : "ours"
        state.conflicts.removeAll { $0 == path }
        state.resolved.append(path)
        let conflictFile = root + "/" + path + ".conflict"
        if useTheirs, let p = try? VaultPath(validating: path), FileAccess.exists(conflictFile) {
            _ = p
            do { try FileIO.rename(conflictFile, to: root + "/" + path) } catch { try? FileAccess.remove(conflictFile) }
        } else {
            try? FileAccess.remove(conflictFile)
        }
        if !state.conflicts.isEmpty {
            try writeResolutions(choices)
            try writeMergeState(state)
            return MergeOutcome(kind: .conflicts, head: state.ours, conflicts: state.conflicts)
        }
        let lock = try FileAccess.lock(local + "/sitekeep.lock")
        defer { withExtendedLifetime(lock) {} }
        let head = try resolveHead()
        guard head.commitID == state.ours else {
            throw .mergeState("the clone branch moved since the merge began; run `sitekeep vault merge-abort` and pull again")
        }
        let clone = try ensureCloneBranch(head: head, signer: signer, checkout: true)
        var (merged, _, _) = try threeWay(ours: state.ours, theirs: state.theirs, lca: state.lca, index: head.index)
        let theirsMap = try flatMap(try commit(state.theirs, index: head.index).treeID)
        let oursMap = try flatMap(try commit(state.ours, index: head.index).treeID)
        for (p, choice) in choices {
            guard let vp = try? VaultPath(validating: p) else { continue }
            merged[vp] = choice == "theirs" ? theirsMap[vp] : oursMap[vp]
        }
        let id = try commitMerged(merged, ours: state.ours, theirs: state.theirs, clone: clone, index: head.index, signer: signer)
        try FileAccess.remove(sgVault + "/" + Self.mergeStateFile)
        try FileAccess.remove(sgVault + "/" + Self.resolutionsFile)
        return MergeOutcome(kind: .merged, head: id, conflicts: [])
    }

    /// Abandons the merge in progress (`sgit merge-abort`): HEAD stays ours, `.conflict` files go.
    public func mergeAbort() throws(VaultError) {
        guard let state = try mergeState() else { throw .mergeState("no merge is in progress in this vault") }
        for p in state.conflicts { try? FileAccess.remove(root + "/" + p + ".conflict") }
        try FileAccess.remove(sgVault + "/" + Self.mergeStateFile)
        try FileAccess.remove(sgVault + "/" + Self.resolutionsFile)
    }

    func resolutions() throws(VaultError) -> [String: String] {
        guard let bytes = try readSmall(Self.resolutionsFile) else { return [:] }
        let f = try Fields(parsing: bytes, object: Self.resolutionsFile)
        var out: [String: String] = [:]
        for m in f.members { if let v = m.value.stringValue { out[m.key] = v } }
        return out
    }

    func writeResolutions(_ r: [String: String]) throws(VaultError) {
        let doc = JSONValue.object(r.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: .string($0.value)) })
        try FileAccess.writeDurably(JSONSerializer.bytes(doc), to: sgVault + "/" + Self.resolutionsFile, tempFolder: tempFolder)
    }
}

#if canImport(Glibc)
import Glibc
#endif
