internal import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import Synchronization

// The vault's reading API: status, signers, listings, file contents and the log (moved out of
// Vault.swift unchanged; the object and HEAD plumbing they build on stays there).

/// A signer of HEAD's recent history that the branch index does not list, with the commits it
/// signed there (``Vault/unlistedHistorySigners()``).
public struct HistorySigner: Sendable, Equatable {
    /// `key-rnd-imm-…`.
    public let keyID: String
    /// Lower-case hex of SHA-256 over the public key's SPKI DER (64 characters).
    public let fingerprint: String
    /// The commits it signed within HEAD's last ``Vault/recentSignerCommits``, breadth-first
    /// from HEAD.
    public let commits: [ObjectID]
}
extension Vault {
    /// The vault's id, HEAD, branch, format, read-only state, HEAD's signature and trust, and
    /// every signer with where it stands. Reports an untrusted HEAD instead of throwing (a bad
    /// signature too), so `vault status` can say what is wrong.
    /// - Parameter historySigners: also list the signers of HEAD's last
    ///   ``recentSignerCommits`` commits that the branch index does not list (a walk of the
    ///   history: for `vault status` and `vault trust`, not for the sync and bridge paths that
    ///   want HEAD only).
    public func status(historySigners: Bool = false) throws(VaultError) -> VaultStatus {
        let head = try resolveHead()
        let trust = self.trust
        var c: Commit?
        var headTrust: CommitTrust?
        var refusal: VaultError?
        if let id = head.commitID {
            let commit = try self.commit(id, index: head.index)
            c = commit
            headTrust = evaluate(commit, index: head.index, trust: trust)
            do { try judge(commit, index: head.index, exempt: headExempt(id, index: head.index, trust: trust)) } catch { refusal = error }
        }
        var pinned = false
        if case .pinned = trust.signers { pinned = true }
        return VaultStatus(vaultID: vaultID, headCommit: head.commitID, branchName: head.branchName,
                           branchID: head.branch?.branchID, format: head.index?.format == 2 ? 2 : 1,
                           features: head.index?.features ?? [],
                           isReadOnly: try keys.isReadOnly || head.readOnlyClone,
                           headSignature: c?.signature, headTrust: headTrust, headServed: refusal == nil, headRefusal: refusal,
                           headTimestampMs: c?.timestampMs, headMessage: refusal == nil ? c?.message : nil,
                           signers: try signers(head: head, headCommit: c, trust: trust, history: historySigners), allowUnsigned: trust.allowUnsigned,
                           pinned: pinned, signaturesRequired: head.index?.signaturesRequired ?? false,
                           signedSince: head.index?.signedSince)
    }

    /// Throws unless reads would serve HEAD now (what every read checks first).
    public func requireServedHead() throws(VaultError) {
        let head = try resolveHead()
        if let id = head.commitID { _ = try trustedCommit(id, head: head) }
    }

    /// Every key the branch index lists (without an index: HEAD's signer) and where it stands
    /// against the pins: what `vault add` pins, what `vault status` shows.
    func signers(head: Head, headCommit: Commit?, trust: VaultTrust, history: Bool) throws(VaultError) -> [SignerState] {
        var order: [String] = []
        var branches: [String: [String]] = [:]
        if let index = head.index {
            for b in index.branches {
                guard let key = b.publicKeyID else { continue }
                if branches[key] == nil { order.append(key) }
                branches[key, default: []].append("\(b.name) (\(b.branchID))")
            }
        } else if let key = headCommit?.signerKeyID {
            order = [key]
            branches[key] = ["HEAD's signer (the vault has no branch index)"]
        }
        // Pinned signers the index no longer lists (the sites' web client rewrites the index to
        // one unkeyed entry on every push): still signers of this vault, by their pins.
        if case .pinned(let pins) = trust.signers {
            for p in pins where branches[p.keyID] == nil {
                order.append(p.keyID)
                branches[p.keyID] = ["pinned; the branch index does not list it"]
            }
        }
        // Signers of recent history the index does not list (a clone made after such a rewrite):
        // shown, so that the user can see and trust them (`vault trust` takes what is listed here).
        if history, let headID = head.commitID, head.index != nil {
            for key in try recentSigners(from: headID, index: head.index, limit: Self.recentSignerCommits) where branches[key] == nil {
                order.append(key)
                branches[key] = ["signs commits of HEAD's history; the branch index does not list it"]
            }
        }
        return try order.map { key throws(VaultError) -> SignerState in
            let fingerprint = try publicKey(key, useCache: true).map(Self.fingerprint)
            let pin = trust.pin(for: key)
            let state: SignerState.State
            if let fingerprint {
                // The same order as ``evaluate(_:index:trust:)`` judges a commit: a changed pin
                // first, then a pin, then this device's own key (trusted without a pin), else new.
                if let pin { state = pin.fingerprint == fingerprint ? .pinned : .keyChanged }
                else { state = trust.ownKeys.contains(fingerprint) ? .own : .new }
            } else {
                state = .missingKeyFile
            }
            return SignerState(keyID: key, branches: branches[key] ?? [], fingerprint: fingerprint, pin: pin, state: state)
        }
    }

    /// How many commits back from HEAD ``signers(head:headCommit:trust:history:)`` looks for signers the
    /// branch index does not list.
    static let recentSignerCommits = 64

    /// The keys (in first-seen order) that signed commits within `limit` commits of `head`,
    /// breadth-first; commits that fail to read end the walk there.
    func recentSigners(from head: ObjectID, index: BranchIndex?, limit: Int) throws(VaultError) -> [String] {
        signedCommitsByKey(from: head, index: index, limit: limit).map { $0.keyID }
    }

    /// ``recentSigners(from:index:limit:)`` with the commits each key signed (breadth-first
    /// from `head`, so newest first along each path).
    func signedCommitsByKey(from head: ObjectID, index: BranchIndex?, limit: Int) -> [(keyID: String, commits: [ObjectID])] {
        var keys: [String] = [], signed: [String: [ObjectID]] = [:]
        var seen: Set<ObjectID> = [head], queue = [head], at = 0
        while at < queue.count, at < limit {
            let id = queue[at]
            at += 1
            guard let c = try? commit(id, index: index) else { continue }
            if c.signature == .verified, let k = c.signerKeyID {
                if signed[k] == nil { keys.append(k) }
                signed[k, default: []].append(id)
            }
            for p in c.parents where seen.insert(p).inserted { queue.append(p) }
        }
        return keys.map { (keyID: $0, commits: signed[$0] ?? []) }
    }

    /// The signers of HEAD's last ``recentSignerCommits`` commits that the branch index does not
    /// list (the sites' web client rewrites it to one unkeyed entry on every push), each with
    /// its public key's fingerprint and the commits it signed there: what a registration pins
    /// from the history at first use, shown to the user by `vault clone`.
    public func unlistedHistorySigners() throws(VaultError) -> [HistorySigner] {
        let head = try resolveHead()
        guard let headID = head.commitID else { return [] }
        var out: [HistorySigner] = []
        for s in signedCommitsByKey(from: headID, index: head.index, limit: Self.recentSignerCommits)
        where head.index?.lists(s.keyID) != true {
            guard let der = try publicKey(s.keyID, useCache: true) else { continue }
            out.append(HistorySigner(keyID: s.keyID, fingerprint: Self.fingerprint(der), commits: s.commits))
        }
        return out
    }

    /// The signers a registration trusts so far: every listed signer whose key file is present,
    /// with its current public key (`vault add`, and the first use of a vault registered before pins).
    public func currentSigners(source: SignerPin.Source) throws(VaultError) -> [SignerPin] {
        let head = try resolveHead()
        let c = try head.commitID.map { id throws(VaultError) in try commit(id, index: head.index) }
        return try signers(head: head, headCommit: c, trust: VaultTrust(), history: true).compactMap { s in
            s.fingerprint.map { SignerPin(keyID: s.keyID, fingerprint: $0, source: source) }
        }
    }

    enum Node { case file(TreeEntry, VaultPath), folder(Tree, VaultPath) }

    /// Walks from HEAD's root tree to `path`.
    func resolve(_ path: VaultPath) throws(VaultError) -> Node {
        let head = try resolveHead()
        guard let commitID = head.commitID else {
            if path.bytes.isEmpty { throw .emptyVault }
            throw .notFound(path: path.string)
        }
        let c = try trustedCommit(commitID, head: head)
        var current = try tree(c.treeID)
        var walked = VaultPath.root
        let segments = path.segments
        for (i, segment) in segments.enumerated() {
            guard let e = current.entry(named: segment) else { throw .notFound(path: path.string) }
            walked = walked.appending(e.name)
            switch e.kind {
            case .file:
                guard i == segments.count - 1 else { throw .notFound(path: path.string) }
                return .file(e, walked)
            case .folder(let sub):
                if i + 1 > options.limits.maxTreeDepth { throw .malformed(object: "tree \(sub.fileID)", reason: "folders nest deeper than \(options.limits.maxTreeDepth)") }
                current = try tree(sub)
            }
        }
        return .folder(current, walked)
    }

    /// The files at or below `path` in HEAD (all files when nil or empty), sorted by the UTF-8
    /// bytes of their paths. A path naming a file lists that file.
    public func list(path: String? = nil) throws(VaultError) -> [VaultEntry] {
        let p = try VaultPath(validating: path ?? "")
        let node: Node
        do { node = try resolve(p) } catch .emptyVault { return [] }
        var out: [VaultEntry] = []
        switch node {
        case .file(let e, let full):
            if case .file(let blob) = e.kind { out.append(entry(e, full, blob: blob)) }
        case .folder(let t, let full):
            try flatten(t, prefix: full, depth: 0, into: &out)
        }
        return out.sorted { $0.path < $1.path }
    }

    func entry(_ e: TreeEntry, _ path: VaultPath, blob: ObjectID) -> VaultEntry {
        VaultEntry(path: path, size: e.size ?? 0, contentType: e.contentType, blobID: blob,
                          contentHash: e.contentHash, large: e.large)
    }

    func flatten(_ t: Tree, prefix: VaultPath, depth: Int, into out: inout [VaultEntry]) throws(VaultError) {
        guard depth <= options.limits.maxTreeDepth else {
            throw .malformed(object: "tree \(t.id.fileID)", reason: "folders nest deeper than \(options.limits.maxTreeDepth)")
        }
        for e in t.entries {
            let full = prefix.appending(e.name)
            switch e.kind {
            case .file(let blob):
                guard out.count < options.limits.maxListedEntries else {
                    throw .tooLarge(object: "listing of \(prefix.string.isEmpty ? "/" : prefix.string)", size: out.count + 1, limit: options.limits.maxListedEntries)
                }
                out.append(entry(e, full, blob: blob))
            case .folder(let sub):
                try flatten(try tree(sub), prefix: full, depth: depth + 1, into: &out)
            }
        }
    }

    /// The plaintext of the file at `path` in HEAD, after checking the blob's id, its
    /// decryption and the tree's recorded size and content hash.
    public func read(path: String) throws(VaultError) -> [UInt8] {
        try file(at: path).contents
    }

    /// The entry and plaintext of the file at `path`, resolved from one HEAD.
    public func file(at path: String) throws(VaultError) -> (entry: VaultEntry, contents: [UInt8]) {
        let p = try VaultPath(validating: path)
        guard !p.bytes.isEmpty else { throw .wrongKind(path: path, expected: "file") }
        switch try resolve(p) {
        case .folder: throw .wrongKind(path: path, expected: "file")
        case .file(let e, let full):
            guard case .file(let blob) = e.kind else { throw .wrongKind(path: path, expected: "file") }
            let bytes = try self.blob(blob, size: e.size, contentHash: e.contentHash, path: full)
            return (entry(e, full, blob: blob), bytes)
        }
    }

    /// Up to `limit` commits from HEAD along first parents, newest first, with decrypted
    /// messages, signature status and trust. HEAD must be served (it vouches for its history:
    /// the parent ids it carries are signed); an older commit that is not trusted is shown with
    /// its ``Commit/trust``, one with a bad signature stops the walk with an error.
    public func log(limit: Int = 100) throws(VaultError) -> [Commit] {
        let head = try resolveHead()
        let trust = self.trust
        var out: [Commit] = []
        var next = head.commitID
        while let id = next, out.count < min(limit, options.limits.maxCommits) {
            var c = out.isEmpty ? try trustedCommit(id, head: head) : try commit(id, index: head.index)
            c.trust = evaluate(c, index: head.index, trust: trust)
            if case .bad = c.trust {
                throw .badSignature(commit: id.fileID, reason: "its signature does not verify under key \(c.authorKeyID ?? "of its branch")")
            }
            out.append(c)
            next = c.parents.first
        }
        return out
    }
}
