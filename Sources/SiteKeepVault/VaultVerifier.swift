internal import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import Synchronization

/// A problem found by ``Vault/verify()``.
public struct VerificationProblem: Sendable, Equatable, CustomStringConvertible {
    /// The object (`bare/data/obj-cas-imm-…`, a ref, a path).
    public let object: String
    /// The failure, as the matching ``VaultError`` describes it.
    public let error: VaultError
    public var description: String { error.description }
}

/// What ``Vault/verify()`` found walking every commit from HEAD.
public struct VerificationReport: Sendable, Equatable {
    /// The HEAD commit walked from.
    public var head: ObjectID?
    /// Distinct commits, trees and blobs checked.
    public var commits = 0, trees = 0, blobs = 0
    /// Signature outcomes over all commits.
    public var verified = 0, bad = 0, unsigned = 0, noKey = 0
    /// Trust outcomes over all commits: signed by a trusted signer; signed by a key the index
    /// does not list; signed by a listed key that is not pinned; signed under a pinned id whose
    /// key file changed.
    public var trusted = 0, notInIndex = 0, newSigners = 0, keyChanged = 0
    /// Commits not trusted but accepted: by `--allow-unsigned`, or from before the vault's
    /// `signed-since-` anchor (its history from before it required signatures).
    public var allowed = 0, beforeAnchor = 0
    /// Every failure, naming its object; an untrusted commit that is not accepted is one.
    public var problems: [VerificationProblem] = []
    /// No problem and no bad signature.
    public var isClean: Bool { problems.isEmpty && bad == 0 }
}

// `vault verify`: the whole-history check (moved out of Vault.swift unchanged).
extension Vault {
    /// Walks every commit reachable from HEAD (all parents) and everything they reference,
    /// reading each object afresh from disk: every id, every decryption, every tree entry's
    /// size and content hash, every signature, and judges every commit by the trust rule (see
    /// ``judge(_:head:into:)``). Damage and untrusted commits are reported, not thrown; only
    /// failures to find HEAD at all throw.
    public func verify() throws(VaultError) -> VerificationReport {
        let head = try resolveHead()
        var report = VerificationReport(head: head.commitID)
        var commitQueue: [ObjectID] = head.commitID.map { [$0] } ?? []
        var seenCommits = Set<ObjectID>(), seenTrees = Set<ObjectID>(), seenBlobs = Set<ObjectID>()
        func problem(_ object: String, _ error: VaultError) { report.problems.append(VerificationProblem(object: object, error: error)) }
        var walked: [Commit] = []
        while let id = commitQueue.popLast() {
            guard seenCommits.insert(id).inserted else { continue }
            guard seenCommits.count <= options.limits.maxCommits else { break }
            let c: Commit
            do { c = try commit(id, index: head.index, useCache: false) } catch {
                problem(id.fileID, error)
                continue
            }
            report.commits += 1
            switch c.signature {
            case .verified: report.verified += 1
            case .bad: report.bad += 1; problem(id.fileID, .badSignature(commit: id.fileID, reason: "its signature does not verify"))
            case .unsigned: report.unsigned += 1
            case .noKey: report.noKey += 1
            }
            walked.append(c)
            commitQueue.append(contentsOf: c.parents)
            var treeQueue: [(ObjectID, VaultPath, Int)] = [(c.treeID, .root, 0)]
            while let (tid, prefix, depth) = treeQueue.popLast() {
                guard seenTrees.insert(tid).inserted else { continue }
                let t: Tree
                do { t = try tree(tid, useCache: false) } catch { problem(tid.fileID, error); continue }
                report.trees += 1
                for e in t.entries {
                    let full = prefix.appending(e.name)
                    switch e.kind {
                    case .folder(let sub):
                        if depth + 1 > options.limits.maxTreeDepth {
                            problem(sub.fileID, .malformed(object: "tree \(sub.fileID)", reason: "folders nest too deep"))
                        } else {
                            treeQueue.append((sub, full, depth + 1))
                        }
                    case .file(let bid):
                        guard seenBlobs.insert(bid).inserted else { continue }
                        do {
                            _ = try blob(bid, size: e.size, contentHash: e.contentHash, path: full, useCache: false)
                            report.blobs += 1
                        } catch { problem(bid.fileID, error) }
                    }
                }
            }
        }
        judge(walked, head: head, into: &report)
        return report
    }

    /// Judges every walked commit by the trust rule: HEAD as reads do; an older commit may also
    /// be covered by the vault's `signed-since-` anchor (when its index lists
    /// `signatures-required`, the anchor commit and its ancestors are the history from before the
    /// policy). Each commit that is not served becomes a problem.
    func judge(_ walked: [Commit], head: Head, into report: inout VerificationReport) {
        let trust = self.trust
        var beforeAnchor = Set<ObjectID>()
        if let index = head.index, index.signaturesRequired, let anchor = index.signedSince {
            let byID = Dictionary(walked.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            var queue = walked.filter { $0.id != head.commitID && $0.id.hex.hasPrefix(anchor) }.map(\.id)
            while let id = queue.popLast() {
                guard beforeAnchor.insert(id).inserted, let c = byID[id] else { continue }
                queue.append(contentsOf: c.parents)
            }
        }
        for c in walked {
            let t = evaluate(c, index: head.index, trust: trust)
            switch t {
            case .trusted: report.trusted += 1
            case .notInIndex: report.notInIndex += 1
            case .newSigner: report.newSigners += 1
            case .keyChanged: report.keyChanged += 1
            case .bad, .unsigned, .unknownKey: break
            }
            if case .bad = t { continue }            // already a problem
            let isHead = c.id == head.commitID
            let exempt = isHead ? headExempt(c.id, index: head.index, trust: trust) : beforeAnchor.contains(c.id)
            if let byVault = Self.refusal(t, index: head.index, trust: trust, exempt: exempt) {
                report.problems.append(VerificationProblem(object: c.id.fileID, error: .unverifiedCommit(
                    commit: c.id.fileID, trust: t, vault: trust.vaultName, requiredByVault: byVault)))
            } else if case .trusted = t {
            } else if exempt {
                report.beforeAnchor += 1
            } else {
                report.allowed += 1
            }
        }
    }
}
