public import SiteKeepCustody
import SiteKeepSystem
import SiteKeepCrypto
import Synchronization

/// Where a vault's fetched objects are fetched again from (issue 50): a fetched object is a
/// cache of the remote, written without an `fsync` of its own, so one a power loss left
/// missing, empty or torn is read again from the remote instead of failing the read.
///
/// The library of a store that knows the vault's remotes gives each vault one
/// (``VaultLibrary/setRefetch(_:)``); a vault without one reports a damaged fetched object
/// with what to run.
public struct ObjectRefetch: Sendable {
    /// Opens the remote the objects of the vault with these keys, in this folder, came from,
    /// and gives its name (`origin`). Called only when an object must be fetched again.
    public let open: @Sendable (_ keys: SgitKeys, _ root: String) throws(VaultError) -> (name: String, store: any VaultObjectStore)
    /// Told one line for each object fetched again (the daemon's or the CLI's log).
    public let log: @Sendable (String) -> Void

    public init(open: @escaping @Sendable (_ keys: SgitKeys, _ root: String) throws(VaultError) -> (name: String, store: any VaultObjectStore),
                log: @escaping @Sendable (String) -> Void) {
        self.open = open
        self.log = log
    }
}

/// One damaged or missing object `vault fsck` found.
public struct FsckProblem: Sendable, Equatable {
    /// `bare/data/obj-cas-imm-…`.
    public let object: String
    /// `commit`, `tree` or `blob`.
    public let kind: String
    /// What is wrong with it (`missing`, `torn or changed: …`).
    public let damage: String
    /// Whether it came from the remote (a cache entry, refetchable); false: written on this
    /// machine and not pushed, never fetched again.
    public let fetched: Bool
    /// Whether `--repair` fetched it again and it is whole now.
    public let repaired: Bool
    /// Why it was not repaired, when it was not.
    public let reason: String?
}

/// What `vault fsck` found.
public struct FsckReport: Sendable, Equatable {
    /// Objects checked (every one reachable from the refs whose bytes could be read).
    public var commits = 0, trees = 0, blobs = 0
    /// The damaged and missing objects, each once.
    public var problems: [FsckProblem] = []
    /// No damaged object left (none found, or every one repaired).
    public var isHealthy: Bool { problems.allSatisfy(\.repaired) }
}

extension Vault {
    /// The name messages give this vault: its name in the store, else its folder.
    var displayName: String { trust.vaultName ?? root }

    /// Sets where damaged fetched objects are fetched again from (nil: nowhere).
    public func setRefetch(_ refetch: ObjectRefetch?) { refetchSource.withLock { $0 = refetch } }

    /// Reads `bare/data/<id>` and checks its id, without any repair.
    func readStoredObject(_ id: ObjectID, limit: Int) throws(VaultError) -> [UInt8] {
        switch try FileAccess.read(bare + "/data/" + id.rawValue, limit: limit, object: id.fileID) {
        case .missing: throw .missingObject(object: id.fileID)
        case .bytes(let b):
            let digest = String(Hex.encode(SHA256.hash(b)).prefix(id.width))
            guard digest.utf8.elementsEqual(id.hex.utf8) else {
                throw .idMismatch(object: id.fileID, actual: "obj-cas-imm-" + digest)
            }
            return b
        }
    }

    /// What a failed read of an object says about it, when it is damage a refetch could mend
    /// (the file missing, or bytes that do not hash to its id); nil for any other failure.
    static func damage(_ error: VaultError) -> String? {
        switch error {
        case .missingObject: "missing"
        case .idMismatch(_, let actual): "torn or changed (its bytes hash to \(actual))"
        default: nil
        }
    }

    /// The read path's repair: `id` is damaged (`damage`). When it came from the remote (it is
    /// reachable from the ref that records the remote's head), it is fetched again, checked and
    /// stored; when it was written here and not pushed, it is reported and never fetched.
    func repairOnRead(_ id: ObjectID, limit: Int, damage: String) throws(VaultError) -> [UInt8] {
        guard try isFetched(id) else {
            throw .damagedLocalObject(vault: displayName, object: id.fileID, damage: damage)
        }
        // The walk that answered may have fetched it again already (a commit or tree on its way).
        if let whole = try? readStoredObject(id, limit: limit) { return whole }
        return try refetch(id, limit: limit, damage: damage)
    }

    /// Fetches `id` again from the vault's remote, checks its bytes against its id, and stores
    /// it in place of the damaged file.
    func refetch(_ id: ObjectID, limit: Int, damage: String) throws(VaultError) -> [UInt8] {
        guard let source = refetchSource.withLock({ $0 }) else {
            throw .damagedFetchedObject(vault: displayName, object: id.fileID, damage: damage,
                                        reason: "no remote is known for this vault here")
        }
        let remote: (name: String, store: any VaultObjectStore)
        let got: [String: [UInt8]]
        do {
            remote = try source.open(try keys, root)
            got = try remote.store.read([id.fileID])
        } catch {
            throw .damagedFetchedObject(vault: displayName, object: id.fileID, damage: damage,
                                        reason: "its remote could not be read: \(error.description)")
        }
        guard let bytes = got[id.fileID] else {
            throw .damagedFetchedObject(vault: displayName, object: id.fileID, damage: damage,
                                        reason: "the remote \(remote.name) (\(remote.store.label)) does not have it")
        }
        guard bytes.count <= limit, FileIDs.matches(id.fileID, bytes) else {
            // A remote that answers other bytes is refused: nothing is stored, the read fails.
            throw .damagedFetchedObject(vault: displayName, object: id.fileID, damage: damage,
                                        reason: "the remote \(remote.name) (\(remote.store.label)) answered bytes that do not hash to its id; refused, nothing was stored")
        }
        try FileAccess.makeFolders(bare + "/data")
        try FileAccess.writeDurably(bytes, to: bare + "/data/" + id.rawValue, syncFolder: false, tempFolder: local + "/tmp")
        source.log("vault \(displayName): \(id.fileID) was \(damage); fetched it again from \(remote.name) (\(remote.store.label))")
        return bytes
    }

    /// The ref that records the remote's head as this clone last saw it (the named branch
    /// `current`): what a pull fetched and a push published. Nil when there is none.
    func remoteTrackingHead() throws(VaultError) -> ObjectID? {
        let index = try resolveHead().index
        let named = index?.branches.first(where: { $0.type == "named" && $0.name == "current" })?.headRefID
        let refID: String
        if let named { refID = named } else { refID = try keys.namedRefFileID }
        return try readRef("bare/refs/" + refID)
    }

    /// Whether `id` came from the remote: it is in the closure of the remote's head as last seen.
    /// Every object a pull fetched or a push published is; an object written here and not
    /// pushed (a local commit, its trees and blobs) is not. The closure is walked once per head
    /// (kept while the head stays), fetching again any damaged object it meets on the way.
    func isFetched(_ id: ObjectID) throws(VaultError) -> Bool {
        guard let head = try remoteTrackingHead() else { return false }
        if let memo = fetchedClosure.withLock({ $0 }), memo.head == head { return memo.ids.contains(id) }
        var ids = Set<ObjectID>()
        try walk(from: [head], skipping: [], readBlobs: false, into: &ids) { id, limit throws(VaultError) in
            do throws(VaultError) { return try readStoredObject(id, limit: limit) } catch {
                guard let damage = Self.damage(error) else { throw error }
                return try refetch(id, limit: limit, damage: damage)
            }
        }
        fetchedClosure.withLock { $0 = (head, ids) }
        return ids.contains(id)
    }

    /// Walks the commits, trees and (with `readBlobs`) blobs reachable from `heads`, not
    /// entering `skip`, reading each through `read` (nil: unreadable, not entered); every id met
    /// goes into `seen`.
    func walk(from heads: [ObjectID], skipping skip: Set<ObjectID>, readBlobs: Bool, into seen: inout Set<ObjectID>,
              kinds: ((ObjectID, String) -> Void)? = nil,
              read: (ObjectID, Int) throws(VaultError) -> [UInt8]?) throws(VaultError) {
        let limits = options.limits
        var commits = heads.filter { !skip.contains($0) }
        var trees: [ObjectID] = []
        var visited = 0
        while let c = commits.popLast() {
            guard !skip.contains(c), seen.insert(c).inserted else { continue }
            visited += 1
            guard visited <= limits.maxCommits else { throw .tooLarge(object: "history of \(heads.first?.fileID ?? "")", size: visited, limit: limits.maxCommits) }
            kinds?(c, "commit")
            guard let stored = try read(c, limits.maxCommitBytes) else { continue }
            let commit = try decodeCommit(stored, id: c)
            commits.append(contentsOf: commit.parents)
            trees.append(commit.treeID)
        }
        while let t = trees.popLast() {
            guard !skip.contains(t), seen.insert(t).inserted else { continue }
            kinds?(t, "tree")
            let tree: Tree
            if case .tree(let cached)? = cache.get(t.rawValue), !readBlobs { tree = cached } else {
                guard let stored = try read(t, limits.maxTreeBytes) else { continue }
                tree = try parseTree(try decryptObject(stored, id: t, kind: "tree", inflateLimit: limits.maxTreeBytes), id: t)
            }
            for e in tree.entries {
                switch e.kind {
                case .folder(let sub): trees.append(sub)
                case .file(let b):
                    guard !skip.contains(b), seen.insert(b).inserted else { continue }
                    kinds?(b, "blob")
                    if readBlobs { _ = try read(b, limits.maxBlobBytes + 64) }
                }
            }
        }
    }

    /// `vault fsck`: reads every object reachable from the refs and checks its id. Objects in
    /// the closure of the remote's head (as last seen) are fetched ones: with `repair`, a damaged
    /// or missing one is fetched again (``refetch(_:limit:damage:)``). Objects reachable only
    /// from this clone's own head were written here and not pushed: a damaged one is reported,
    /// never fetched.
    public func fsck(repair: Bool) throws(VaultError) -> FsckReport {
        var report = FsckReport()
        var kindOf: [ObjectID: String] = [:]
        func check(_ id: ObjectID, _ limit: Int, fetched: Bool) throws(VaultError) -> [UInt8]? {
            let kind = kindOf[id] ?? "object"
            do throws(VaultError) {
                let bytes = try readStoredObject(id, limit: limit)
                count(kind)
                return bytes
            } catch {
                guard let damage = Self.damage(error) else { throw error }
                guard fetched, repair else {
                    report.problems.append(FsckProblem(object: id.fileID, kind: kind, damage: damage, fetched: fetched, repaired: false,
                                                       reason: fetched ? nil : "written on this machine and not pushed: no remote has it"))
                    return nil
                }
                do throws(VaultError) {
                    let bytes = try refetch(id, limit: limit, damage: damage)
                    report.problems.append(FsckProblem(object: id.fileID, kind: kind, damage: damage, fetched: true, repaired: true, reason: nil))
                    count(kind)
                    return bytes
                } catch {
                    let why: String
                    if case let .damagedFetchedObject(_, _, _, reason) = error { why = reason } else { why = error.description }
                    report.problems.append(FsckProblem(object: id.fileID, kind: kind, damage: damage, fetched: true, repaired: false, reason: why))
                    return nil
                }
            }
        }
        func count(_ kind: String) {
            switch kind {
            case "commit": report.commits += 1
            case "tree": report.trees += 1
            default: report.blobs += 1
            }
        }
        var fetchedIDs = Set<ObjectID>()
        if let remoteHead = try remoteTrackingHead() {
            try walk(from: [remoteHead], skipping: [], readBlobs: true, into: &fetchedIDs, kinds: { kindOf[$0] = $1 }) { id, limit throws(VaultError) in
                try check(id, limit, fetched: true)
            }
        }
        var localIDs = Set<ObjectID>()
        if let head = try resolveHead().commitID {
            try walk(from: [head], skipping: fetchedIDs, readBlobs: true, into: &localIDs, kinds: { kindOf[$0] = $1 }) { id, limit throws(VaultError) in
                try check(id, limit, fetched: false)
            }
        }
        return report
    }
}
