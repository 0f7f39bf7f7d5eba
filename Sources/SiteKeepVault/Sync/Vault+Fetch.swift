import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem
import Synchronization

/// What a remote holds for the vault's named branch `current`.
struct RemoteState {
    /// The index's stored bytes (for write-if-match) and its decrypted JSON.
    var indexBytes: [UInt8]?
    var index: JSONValue?
    var parsedIndex: BranchIndex?
    /// The named ref's file id, stored bytes, and the commit it names.
    var namedRefID: String
    var refBytes: [UInt8]?
    var head: ObjectID?
}

/// The blob ids a fetch's parallel reads have delivered.
private final class ArrivedIDs: Sendable {
    let ids = Mutex<Set<String>>([])
}

/// What a fetch brought.
public struct FetchReport: Sendable, Equatable {
    public var commits = 0, trees = 0, blobs = 0, keys = 0
    /// Reads of objects asked of the remote (one per level of the walk; a remote splits each
    /// into requests of its own size).
    public var batches = 0
    public var objects: Int { commits + trees + blobs }
}

extension Vault {
    /// Reads the remote's branch index and named ref `current` (§5.3, §7.1).
    func remoteState(_ remote: any VaultObjectStore) throws(VaultError) -> RemoteState {
        let indexID = "bare/indexes/" + (try keys.branchIndexFileID)
        let first = try remote.read([indexID, "bare/refs/" + keys.namedRefFileID])
        var state = RemoteState(namedRefID: "bare/refs/" + (try keys.namedRefFileID))
        if let bytes = first[indexID] {
            let plain = try decryptRemote(bytes, object: "\(remote.label) \(indexID)")
            state.indexBytes = bytes
            do { state.index = try JSONParser.parse(plain, limits: .document) } catch {
                throw .malformed(object: "\(remote.label) \(indexID)", reason: "not valid JSON")
            }
            state.parsedIndex = try BranchIndex.parse(plain, object: "\(remote.label) \(indexID)")
            if let named = state.parsedIndex?.branches.first(where: { $0.type == "named" && $0.name == "current" }) {
                state.namedRefID = "bare/refs/" + named.headRefID
            }
        }
        let refBytes = state.namedRefID == "bare/refs/" + (try keys.namedRefFileID) ? first[state.namedRefID]
            : try remote.read([state.namedRefID])[state.namedRefID]
        if let refBytes {
            state.refBytes = refBytes
            state.head = try parseRef(try decryptRemote(refBytes, object: "\(remote.label) \(state.namedRefID)"), object: state.namedRefID)
        }
        return state
    }

    func decryptRemote(_ bytes: [UInt8], object: String) throws(VaultError) -> [UInt8] {
        do { return try Envelope.openV1(bytes, key: keys.readKey) } catch { throw .decryptionFailed(object: object) }
    }

    func parseRef(_ plain: [UInt8], object: String) throws(VaultError) -> ObjectID {
        try DocumentEncoding.commitID(ofRef: plain, object: object)
    }

    /// Fetches every commit, tree and blob reachable from `head` that this folder lacks, in
    /// batches, and stores them — only after every id matched its bytes, every object
    /// decrypted and parsed, and every new commit's signature verified under a key `trust`
    /// admits. Objects already held are never fetched (ids are immutable): the walk stops at
    /// a commit or tree already present, which the store's order makes safe (children are
    /// stored before what refers to them, so a present object has its closure).
    ///
    /// Arriving objects are written and fsynced in the background as they come
    /// (``IncomingFiles``), while the remote serves the next batch, and renamed into place at
    /// the end; the blobs' ids are checked on the threads that read them.
    ///
    /// A pack vault's objects (feature `packs`, §7.3) come from the packs this clone has not
    /// absorbed, through a ``PackedRemote``, and are verified the same way; the packs are
    /// recorded as absorbed once their objects are stored.
    func fetch(_ head: ObjectID, from remote: any VaultObjectStore, state: RemoteState, trust: any SignerTrust) throws(VaultError) -> (FetchReport, [(keyID: String, publicKey: [UInt8])]) {
        let local = LocalObjectStore(vaultRoot: root)
        let incoming = try IncomingFiles(into: local)
        do {
            let packed = (state.parsedIndex?.features.contains(Self.packsFeature) ?? false) && !local.hasObject(head)
                ? try PackedRemote(remote: remote, head: head, absorbed: try absorbedPacks(), limits: options.limits) : nil
            let (report, signers, ranks) = try fetchObjects(head, from: packed ?? remote, local: local, state: state, trust: trust, into: incoming)
            try incoming.commit(ranks: ranks)
            if let packed { try recordAbsorbed(packed.taken) }
            return (report, signers)
        } catch {
            incoming.abandon()
            throw error
        }
    }

    /// The walk of ``fetch(_:from:state:trust:)``: every object checked and added to `incoming`
    /// as it comes (commits, then trees with the blobs they name read alongside), the key files
    /// last; the ranks it returns order the renames.
    private func fetchObjects(_ head: ObjectID, from remote: any VaultObjectStore, local: LocalObjectStore, state: RemoteState,
                              trust: any SignerTrust, into incoming: IncomingFiles)
        throws(VaultError) -> (FetchReport, [(keyID: String, publicKey: [UInt8])], ranks: [String: Int]) {
        var report = FetchReport()
        var seen = Set<ObjectID>()
        var prefetched: [String: [UInt8]] = [:]   // file id → bytes read along with the first commits

        // One read of every id of a level: the remote splits it into its own batches (the
        // server's, several in flight), so a level of 1,000 blobs is not 20 requests in a row.
        func fetchBatch(_ ids: [ObjectID], kind: String, alongWith extra: [String] = []) throws(VaultError) -> [ObjectID: [UInt8]] {
            var out: [ObjectID: [UInt8]] = [:]
            out.reserveCapacity(ids.count)
            guard !ids.isEmpty else { return out }
            report.batches += 1
            let got = try remote.read(ids.map(\.fileID) + extra)
            for f in extra { if let bytes = got[f] { prefetched[f] = bytes } }
            for id in ids {
                guard let bytes = got[id.fileID] else { throw Self.missing(kind, id, on: remote) }
                guard FileIDs.matches(id.fileID, bytes) else {
                    throw .idMismatch(object: "\(remote.label) \(id.fileID)", actual: ObjectIDs.of(bytes, width: id.width).rawValue)
                }
                out[id] = bytes
            }
            return out
        }

        // The key files the remote index lists and this folder lacks, read with the first
        // commits: the signature check needs some of them, a clone all of them, and each
        // request saved is a round trip to a server that answers one request at a time.
        var keyPrefetch = Set((state.parsedIndex?.branches ?? []).compactMap(\.publicKeyID)).sorted()
            .map { "bare/keys/" + $0 }.filter { !FileAccess.exists(sgVault + "/" + $0) }
        if keyPrefetch.count > Self.prefetchedKeysLimit { keyPrefetch = [] }

        // Commits, breadth-first.
        var commits: [Commit] = []
        var frontier = local.hasObject(head) ? [] : [head]
        seen.insert(head)
        while !frontier.isEmpty {
            let got = try fetchBatch(frontier, kind: "commit", alongWith: keyPrefetch)
            keyPrefetch = []
            var next: [ObjectID] = []
            for id in frontier {
                let stored = got[id]!
                let c = try decodeCommit(stored, id: id)
                commits.append(c)
                try incoming.add(id.fileID, stored)
                report.commits += 1
                guard commits.count <= options.limits.maxCommits else { throw .tooLarge(object: "history of \(head.fileID)", size: commits.count, limit: options.limits.maxCommits) }
                for p in c.parents where !seen.contains(p) && !local.hasObject(p) {
                    seen.insert(p)
                    next.append(p)
                }
            }
            frontier = next
        }

        // Signatures of every new commit, against keys the trust admits.
        var (signers, keyFiles) = try verifyArriving(commits, remote: remote, state: state, trust: trust, prefetched: prefetched, report: &report)
        // The prefetched keys no commit needed are stored too, when they are public key files
        // (what a clone keeps of every branch); any other is left for the caller to read again.
        let stored = Set(keyFiles.map(\.fileID))
        for (fileID, bytes) in prefetched.sorted(by: { $0.key < $1.key }) where !stored.contains(fileID) {
            guard (try? publicKeyFile(bytes, object: "\(remote.label) \(fileID)")) != nil else { continue }
            keyFiles.append(StoredFile(fileID: fileID, bytes: bytes))
            report.keys += 1
        }

        // Blobs: asked for while the trees are still being decoded (a full batch at a time, as
        // soon as it is known), each part checked and queued for writing on the thread that
        // read it.
        let arrived = ArrivedIDs()
        let label = remote.label
        let blobReads = PipelinedReads(from: remote) { part throws(VaultError) in
            var mine: [String] = []
            for (fileID, bytes) in part {
                guard let id = FileIDs.objectID(of: fileID), ObjectIDs.of(bytes, width: id.width) == id else {
                    let width = FileIDs.objectID(of: fileID)?.width ?? 12
                    throw .idMismatch(object: "\(label) \(fileID)", actual: ObjectIDs.of(bytes, width: width).rawValue)
                }
                try incoming.add(fileID, bytes)
                mine.append(fileID)
            }
            arrived.ids.withLock { $0.formUnion(mine) }
        }
        var blobs: [ObjectID] = []
        // Each new tree's new subtrees, for the order objects are stored in (``fetchRanks``).
        var subtrees: [ObjectID: [ObjectID]] = [:]
        do {
            // Trees, breadth-first, a few at a time decoded on two threads; each group's new
            // blobs queued for reading before the next group is decoded.
            var treeFrontier: [ObjectID] = []
            for c in commits where !seen.contains(c.treeID) && !local.hasObject(c.treeID) {
                seen.insert(c.treeID)
                treeFrontier.append(c.treeID)
            }
            var newTrees = Set(treeFrontier)
            while !treeFrontier.isEmpty {
                let got = try fetchBatch(treeFrontier, kind: "tree")
                let level = treeFrontier
                var next: [ObjectID] = []
                for group in stride(from: 0, to: level.count, by: Self.treeDecodeGroup) {
                    let ids = Array(level[group..<min(group + Self.treeDecodeGroup, level.count)])
                    let decoded = SystemThread.map(ids.count, width: 2) { i in
                        Result { () throws(VaultError) -> Tree in
                            let plain = try self.decryptObject(got[ids[i]]!, id: ids[i], kind: "tree", inflateLimit: self.options.limits.maxTreeBytes)
                            return try self.parseTree(plain, id: ids[i])
                        }
                    }
                    var newBlobs: [String] = []
                    for (i, id) in ids.enumerated() {
                        let t = try decoded[i].get()
                        try incoming.add(id.fileID, got[id]!)
                        report.trees += 1
                        var subs: [ObjectID] = []
                        for e in t.entries {
                            switch e.kind {
                            case .folder(let sub):
                                if newTrees.contains(sub) { subs.append(sub) }
                                else if !seen.contains(sub) && !local.hasObject(sub) {
                                    seen.insert(sub)
                                    newTrees.insert(sub)
                                    next.append(sub)
                                    subs.append(sub)
                                }
                            case .file(let b):
                                if !seen.contains(b) && !local.hasObject(b) {
                                    seen.insert(b)
                                    blobs.append(b)
                                    newBlobs.append(b.fileID)
                                }
                            }
                        }
                        subtrees[id] = subs
                    }
                    blobReads.add(newBlobs)
                }
                treeFrontier = next
            }
            try blobReads.finish()
        } catch {
            blobReads.cancel()
            throw error
        }
        if !blobs.isEmpty { report.batches += 1 }
        report.blobs += blobs.count
        let got = arrived.ids.withLock { $0 }
        for b in blobs where !got.contains(b.fileID) { throw Self.missing("blob", b, on: remote) }
        if let extra = got.subtracting(blobs.map(\.fileID)).min() {
            throw .malformed(object: "\(remote.label) \(extra)", reason: "the remote answered a file that was not asked for")
        }
        for k in keyFiles { try incoming.add(k.fileID, k.bytes) }
        let parents = Dictionary(commits.map { ($0.id, $0.parents) }, uniquingKeysWith: { a, _ in a })
        return (report, signers, Self.fetchRanks(parents: parents, subtrees: subtrees, blobs: blobs))
    }

    /// Trees decoded together before their blobs are asked for: small enough that the first
    /// blob read goes out while the rest of the level is decoded.
    static let treeDecodeGroup = 4

    /// The order a fetch stores its files in (``IncomingFiles/commit(ranks:)``): every object
    /// after everything it refers to. Blobs rank 1 (key files and other files 0); a tree ranks
    /// above each of its new subtrees; a commit above every tree and each of its new parents.
    /// Breadth-first discovery order is not enough: a subtree or a parent shared by two paths
    /// of different depths is discovered at the shorter one.
    ///
    /// `parents`: each new commit's parents; `subtrees`: each new tree's subtrees (either may
    /// name objects already stored, which are left out).
    static func fetchRanks(parents: [ObjectID: [ObjectID]], subtrees: [ObjectID: [ObjectID]], blobs: [ObjectID]) -> [String: Int] {
        var ranks: [String: Int] = [:]
        ranks.reserveCapacity(blobs.count + subtrees.count + parents.count)
        for b in blobs { ranks[b.fileID] = 1 }
        let treeHeight = heights(of: Array(subtrees.keys), children: { subtrees[$0]?.filter { subtrees[$0] != nil } ?? [] })
        let treeTop = (treeHeight.values.max() ?? 0) + 2
        for (id, h) in treeHeight { ranks[id.fileID] = 2 + h }
        let commitHeight = heights(of: Array(parents.keys), children: { parents[$0]?.filter { parents[$0] != nil } ?? [] })
        for (id, h) in commitHeight { ranks[id.fileID] = treeTop + 1 + h }
        return ranks
    }

    /// Each node's height in a DAG (0 without children, else 1 + the highest child), computed
    /// without recursion (a history can be thousands of commits deep).
    static func heights(of nodes: [ObjectID], children: (ObjectID) -> [ObjectID]) -> [ObjectID: Int] {
        var height: [ObjectID: Int] = [:]
        height.reserveCapacity(nodes.count)
        for root in nodes where height[root] == nil {
            var stack: [(ObjectID, Bool)] = [(root, false)]
            var onPath = Set<ObjectID>()
            while let (node, expanded) = stack.popLast() {
                if expanded {
                    onPath.remove(node)
                    height[node] = children(node).map { (height[$0] ?? 0) + 1 }.max() ?? 0
                    continue
                }
                guard height[node] == nil, onPath.insert(node).inserted else { continue }
                stack.append((node, true))
                for c in children(node) where height[c] == nil && !onPath.contains(c) { stack.append((c, false)) }
            }
        }
        return height
    }

    /// Key files read with the first commits at most (a vault listing more reads them as needed).
    static let prefetchedKeysLimit = 50

    /// The DER public key of a remote key file: decrypted, and a P-256 public key file.
    func publicKeyFile(_ bytes: [UInt8], object: String) throws(VaultError) -> [UInt8] {
        let plain = try decryptRemote(bytes, object: object)
        let f = try Fields(parsing: plain, object: object)
        guard try f.optionalString("type") == "public", let pem = try f.optionalString("pem"),
              let der = try? P256.Signing.PublicKey(pemRepresentation: pem).derRepresentation else {
            throw .malformed(object: object, reason: "not a P-256 public key file")
        }
        return der
    }

    static func missing(_ kind: String, _ id: ObjectID, on remote: any VaultObjectStore) -> VaultError {
        .remote(remote: remote.label, reason: "\(kind) \(id.fileID) is missing on the remote; its copy is incomplete", transient: false, retryAfterMs: nil)
    }

    /// Checks every arriving commit's signature, fetching the key files it needs (stored by the
    /// caller with the objects). Returns the signers used and those key files.
    func verifyArriving(_ commits: [Commit], remote: any VaultObjectStore, state: RemoteState, trust: any SignerTrust,
                        prefetched: [String: [UInt8]] = [:], report: inout FetchReport) throws(VaultError) -> ([(keyID: String, publicKey: [UInt8])], [StoredFile]) {
        let localIndex = try resolveHead().index
        let indexKeys = Set(((state.parsedIndex?.branches ?? []) + (localIndex?.branches ?? [])).compactMap(\.publicKeyID))
        var keysByID: [String: [UInt8]] = [:]
        var keyFiles: [StoredFile] = []
        var needed = Set<String>()
        for c in commits {
            if let k = c.authorKeyID, !k.isEmpty, let id = Identifiers.keyID(k) { needed.insert(id) }
            else if let b = c.branchID, let k = ((state.parsedIndex?.branches ?? []) + (localIndex?.branches ?? [])).first(where: { $0.branchID == b })?.publicKeyID { needed.insert(k) }
        }
        var missing: [String] = []
        for k in needed.sorted() {
            if let der = try publicKey(k, useCache: true) { keysByID[k] = der } else { missing.append(k) }
        }
        if !missing.isEmpty {
            let unread = missing.filter { prefetched["bare/keys/" + $0] == nil }
            var got = prefetched
            if !unread.isEmpty { got.merge(try remote.read(unread.map { "bare/keys/" + $0 })) { a, _ in a } }
            for k in missing {
                guard let bytes = got["bare/keys/" + k] else { continue }
                let der = try publicKeyFile(bytes, object: "\(remote.label) bare/keys/\(k)")
                keysByID[k] = der
                keyFiles.append(StoredFile(fileID: "bare/keys/" + k, bytes: bytes))
                report.keys += 1
            }
        }
        var used: [String: [UInt8]] = [:]
        for c in commits {
            guard let sigText = c.rawSignature, !sigText.isEmpty else {
                if trust.allowsUnsigned { continue }
                throw .unverifiedCommit(commit: "\(remote.label) \(c.id.fileID)", trust: .unsigned, vault: nil, requiredByVault: false)
            }
            let canonical = c.authorKeyID.map { !$0.isEmpty } ?? false
            let keyID = canonical ? Identifiers.keyID(c.authorKeyID!)
                : ((state.parsedIndex?.branches ?? []) + (localIndex?.branches ?? [])).first { $0.branchID == c.branchID }?.publicKeyID
            guard let keyID, let der = keysByID[keyID] else {
                throw .unverifiedCommit(commit: "\(remote.label) \(c.id.fileID)", trust: .unknownKey(keyID: keyID), vault: nil, requiredByVault: false)
            }
            guard let sig = try? Base64.decode(sigText), sig.count == 64,
                  SignatureVerifier.isValid(sig, for: canonical ? c.canonicalSigningBytes : c.legacySigningBytes, publicKey: der, algorithm: .p256) else {
                throw .badSignature(commit: "\(remote.label) \(c.id.fileID)", reason: "its signature does not verify under key \(keyID)")
            }
            guard trust.admits(keyID: keyID, publicKey: der, listedInIndex: indexKeys.contains(keyID), vaultID: vaultID) else {
                let refused: CommitTrust = indexKeys.contains(keyID)
                    ? .newSigner(keyID: keyID, fingerprint: Hex.encode(SHA256.hash(der))) : .notInIndex(keyID: keyID)
                throw .unverifiedCommit(commit: "\(remote.label) \(c.id.fileID)", trust: refused, vault: nil, requiredByVault: false)
            }
            used[keyID] = der
        }
        return (used.sorted { $0.key < $1.key }.map { (keyID: $0.key, publicKey: $0.value) }, keyFiles)
    }
}
