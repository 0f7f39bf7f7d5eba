import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepVault

/// A store over a vault folder that reads in pipelined batches and records every read: what a
/// fetch asks of the vault server, without one.
final class RecordingStore: VaultObjectStore, @unchecked Sendable {
    let inner: any VaultObjectStore
    let readPipelining: ReadPipelining?
    let reads = Mutex<[[String]]>([])
    /// Posted at the start of every read.
    let started = DispatchSemaphore(value: 0)
    /// A read naming this id fails (after it is recorded).
    let failOn: String?
    /// Each read waits this long first (so several are in flight together).
    let delayMs: Int

    /// Added to every answer that holds an object (a remote answering more than was asked).
    let extra: StoredFile?

    init(_ inner: any VaultObjectStore, pipelining: ReadPipelining?, failOn: String? = nil, delayMs: Int = 0, extra: StoredFile? = nil) {
        self.inner = inner
        readPipelining = pipelining
        self.failOn = failOn
        self.delayMs = delayMs
        self.extra = extra
    }
    var label: String { "recording \(inner.label)" }
    var isWritable: Bool { false }
    func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        reads.withLock { $0.append(fileIDs) }
        started.signal()
        if delayMs > 0 { usleep(UInt32(delayMs) * 1000) }
        if let failOn, fileIDs.contains(failOn) { throw .remote(remote: label, reason: "refused \(failOn)", transient: true, retryAfterMs: nil) }
        var answer = try inner.read(fileIDs)
        if let extra, answer.keys.contains(where: { $0.hasPrefix("bare/data/") }) { answer[extra.fileID] = extra.bytes }
        return answer
    }
    func list(prefix: String) throws(VaultError) -> [String] { try inner.list(prefix: prefix) }
    func write(_ files: [StoredFile]) throws(VaultError) { throw .readOnly(reason: "test store") }
    func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool { throw .readOnly(reason: "test store") }
}

/// Files by id in memory, for the pipeline's own tests.
struct MemoryFiles: VaultObjectStore {
    let files: [String: [UInt8]]
    var label: String { "memory" }
    var isWritable: Bool { false }
    func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] { files.filter { fileIDs.contains($0.key) } }
    func list(prefix: String) throws(VaultError) -> [String] { files.keys.filter { $0.hasPrefix(prefix) } }
    func write(_ files: [StoredFile]) throws(VaultError) {}
    func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool { false }
}

final class Delivered: Sendable {
    let ids = Mutex<[String]>([])
}

@Suite("A fetch's reads and the order it stores objects in")
struct FetchOrderTests {
    static let ids = (0..<10).map { "f\($0)" }
    static let store = MemoryFiles(files: Dictionary(uniqueKeysWithValues: ids.map { ($0, Array($0.utf8)) }))

    /// Full batches are read while ids are still being added (before `finish`), never more than
    /// the batch size at once; `finish` reads the rest; every id is delivered once.
    @Test func fullBatchesAreReadBeforeTheFetchFinishes() throws {
        let recording = RecordingStore(Self.store, pipelining: ReadPipelining(batch: 3, inFlight: 2))
        let delivered = Delivered()
        let reads = PipelinedReads(from: recording) { part in delivered.ids.withLock { $0.append(contentsOf: part.keys) } }
        reads.add(Array(Self.ids.prefix(2)))
        #expect(recording.reads.withLock { $0.isEmpty }, "no read of a batch that is not full")
        reads.add([Self.ids[2]])
        #expect(recording.started.wait(timeout: .now() + 10) == .success, "the first full batch was read before finish")
        reads.add(Array(Self.ids[3...]))
        try reads.finish()
        let all = recording.reads.withLock { $0 }
        #expect(all.allSatisfy { $0.count <= 3 })
        #expect(all.first == Array(Self.ids.prefix(3)))
        #expect(all.flatMap { $0 }.sorted() == Self.ids.sorted())
        #expect(delivered.ids.withLock { $0 }.sorted() == Self.ids.sorted())
    }

    /// A store without pipelining gets one read of everything, at `finish`.
    @Test func aStoreWithoutPipeliningGetsOneReadAtTheEnd() throws {
        let recording = RecordingStore(Self.store, pipelining: nil)
        let delivered = Delivered()
        let reads = PipelinedReads(from: recording) { part in delivered.ids.withLock { $0.append(contentsOf: part.keys) } }
        for id in Self.ids { reads.add([id]) }
        #expect(recording.reads.withLock { $0.isEmpty })
        try reads.finish()
        #expect(recording.reads.withLock { $0 } == [Self.ids])
        #expect(delivered.ids.withLock { $0 }.sorted() == Self.ids.sorted())
    }

    /// A read that fails is rethrown by `finish`; an error `deliver` throws too.
    @Test func aFailedReadOrDeliveryIsRethrown() throws {
        let failing = RecordingStore(Self.store, pipelining: ReadPipelining(batch: 2, inFlight: 2), failOn: "f5")
        let reads = PipelinedReads(from: failing) { _ in }
        reads.add(Self.ids)
        #expect(throws: VaultError.self) { try reads.finish() }

        let refusing = PipelinedReads(from: RecordingStore(Self.store, pipelining: ReadPipelining(batch: 4, inFlight: 1))) { part throws(VaultError) in
            if part["f1"] != nil { throw .malformed(object: "f1", reason: "refused by the test") }
        }
        refusing.add(Self.ids)
        let e = #expect(throws: VaultError.self) { try refusing.finish() }
        guard case .malformed("f1", _)? = e else { Issue.record("got \(String(describing: e))"); return }
    }

    /// After `cancel` returns, nothing more is read or delivered.
    @Test func cancelWaitsForTheReadsInFlight() throws {
        let slow = RecordingStore(Self.store, pipelining: ReadPipelining(batch: 1, inFlight: 2), delayMs: 30)
        let delivered = Delivered()
        let reads = PipelinedReads(from: slow) { part in delivered.ids.withLock { $0.append(contentsOf: part.keys) } }
        reads.add(Self.ids)
        #expect(slow.started.wait(timeout: .now() + 10) == .success)
        reads.cancel()
        let (readCount, deliveredCount) = (slow.reads.withLock { $0.count }, delivered.ids.withLock { $0.count })
        usleep(100_000)
        #expect(slow.reads.withLock { $0.count } == readCount && delivered.ids.withLock { $0.count } == deliveredCount)
        #expect(readCount < Self.ids.count, "the batches not yet sent were not sent")
    }

    static func oid(_ n: Int) -> ObjectID { ObjectID("obj-cas-imm-" + String(format: "%012x", n))! }

    /// Every object ranks above everything it refers to, where breadth-first discovery order
    /// would not: a subtree shared by folders at two depths, a parent reached by two paths of
    /// different lengths.
    @Test func everyObjectRanksAboveWhatItRefersTo() throws {
        let (root, a, b, c, x) = (Self.oid(1), Self.oid(2), Self.oid(3), Self.oid(4), Self.oid(5))
        let blob1 = Self.oid(10), blob2 = Self.oid(11)
        // root → a → x, root → b → c → x (x found at depth 2 first, from a)
        let subtrees: [ObjectID: [ObjectID]] = [root: [a, b], a: [x], b: [c], c: [x], x: []]
        // H → A, C; A → P; C → D → P (P found at depth 2, from A, before D)
        let (h, pa, pc, pd, pp, old) = (Self.oid(20), Self.oid(21), Self.oid(22), Self.oid(23), Self.oid(24), Self.oid(99))
        let parents: [ObjectID: [ObjectID]] = [h: [pa, pc], pa: [pp], pc: [pd], pd: [pp], pp: [old]]   // old: already stored
        let ranks = Vault.fetchRanks(parents: parents, subtrees: subtrees, blobs: [blob1, blob2])
        func r(_ id: ObjectID) -> Int { ranks[id.fileID] ?? -1 }
        for (tree, subs) in subtrees { for s in subs { #expect(r(tree) > r(s), "\(tree) above \(s)") } }
        for t in subtrees.keys { #expect(r(t) > r(blob1)) }
        for (commit, ps) in parents {
            for p in ps where parents[p] != nil { #expect(r(commit) > r(p), "\(commit) above \(p)") }
            #expect(subtrees.keys.allSatisfy { r(commit) > r($0) })
        }
        #expect(ranks[old.fileID] == nil)
        #expect(r(c) > r(x) && r(b) > r(c), "x under c, though found first under a")
        #expect(r(pd) > r(pp), "P under D, though found first under A")
    }

    /// A clone through a pipelining store (batches of 2, two in flight) of a vault with the
    /// same folder at two depths reads every file and verifies clean.
    @Test(.enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
    func aPipelinedCloneReadsEveryFile() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.plainPath)
        let upstream = try Vault.open(path: dir, keys: f.plainKeys)
        let signer = try TestSigner()
        let same = Array("the same folder\n".utf8)
        var changes: [(VaultPath, VaultChange)] = []
        for (i, p) in ["x/same/a.txt", "y/z/same/a.txt", "y/z/w/b.txt", "top.txt"].enumerated() {
            changes.append((try VaultPath(validating: p), .write(p.hasSuffix("a.txt") ? same : Array("file \(i)\n".utf8))))
        }
        let made = try upstream.commit(changes, message: "shared folders", signer: signer)
        // What a push would do: the named branch (what a clone takes) moved to that commit.
        let named = try upstream.remoteState(LocalObjectStore(vaultRoot: dir)).namedRefID
        try upstream.moveRef(String(named.dropFirst("bare/refs/".count)), from: nil, to: try #require(made.commit))
        let expected = try upstream.list()
        #expect(expected.count >= 4)

        let recording = RecordingStore(LocalObjectStore(vaultRoot: dir), pipelining: ReadPipelining(batch: 2, inFlight: 2))
        let into = try temporaryDirectory() + "/clone"
        let (clone, outcome) = try Vault.clone(from: recording, into: into, keys: f.plainKeys, signer: try TestSigner())
        #expect(outcome.fetched.blobs > 2)
        for e in expected { #expect(try clone.read(path: e.path.string) == (try upstream.read(path: e.path.string)), "\(e.path)") }
        #expect(try clone.verify().isClean)
        // Every read that asked for a blob asked for at most the store's batch of 2 (one read
        // of every blob at the end, as before pipelining, would be one read of them all).
        let blobIDs = Set(expected.map { $0.blobID.fileID })
        let blobReads = recording.reads.withLock { $0 }.filter { $0.contains(where: blobIDs.contains) }
        #expect(blobReads.count >= 2 && blobReads.allSatisfy { $0.count <= 2 }, "\(blobReads)")

        // A remote that answers an object it was not asked for (its id matches its bytes):
        // the clone is refused and leaves nothing.
        let stray = Array("not asked for\n".utf8)
        let strayID = "bare/data/" + ObjectIDs.of(stray, width: 12).rawValue
        let overeager = RecordingStore(LocalObjectStore(vaultRoot: dir), pipelining: ReadPipelining(batch: 2, inFlight: 2),
                                       extra: StoredFile(fileID: strayID, bytes: stray))
        let refused = try temporaryDirectory() + "/refused"
        let e = #expect(throws: VaultError.self) { try Vault.clone(from: overeager, into: refused, keys: f.plainKeys, signer: try TestSigner()) }
        guard case .malformed(_, let reason)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(reason.contains("not asked for"))
        #expect(!FileManager.default.fileExists(atPath: refused))
    }

    /// A fetch first removes the temporary files killed processes left in `local/tmp` (a clone
    /// or pull killed midway leaves up to one per object, and nothing else ever removed them),
    /// and leaves a running process's files and every other name alone.
    @Test(.enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
    func aFetchRemovesWhatKilledWritersLeftAndNothingElse() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.plainPath)
        let into = try temporaryDirectory() + "/clone"
        let (clone, _) = try Vault.clone(from: LocalObjectStore(vaultRoot: dir), into: into, keys: f.plainKeys, signer: try TestSigner())
        let tmp = into + "/.sg_vault/local/tmp"
        // A process id that no longer runs: a child that has exited and been waited for.
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let dead = child.processIdentifier
        let leftByTheDead = ["\(dead)-7-123.tmp", "\(dead)-8-456.tmp"]
        let others = ["\(getpid())-1-2.tmp", "1-3-4.tmp", "notes.txt", "\(dead)-x-1.tmp", "\(dead)-1-2.tmp.bak", "-1-2.tmp"]
        for name in leftByTheDead + others { try Data("x".utf8).write(to: URL(fileURLWithPath: tmp + "/" + name)) }
        _ = try clone.pull(from: LocalObjectStore(vaultRoot: dir), signer: try TestSigner())
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: tmp)) == Set(others))
        #expect(LocalObjectStore.temporaryFileMaker("\(dead)-7-123.tmp") == dead)
        #expect(LocalObjectStore.temporaryFileMaker("0-1-2.tmp") == nil && LocalObjectStore.temporaryFileMaker("1-2.tmp") == nil)
    }

    /// The sweep works through `local/tmp`'s own descriptor: when `local/tmp` is a symbolic link
    /// to another folder, that folder's files (named like a dead process's) are left alone
    /// (issue 32: the sweep followed the link and removed files outside the vault).
    @Test func theSweepDoesNotFollowALocalTmpThatIsASymbolicLink() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.plainPath)
        let into = try temporaryDirectory() + "/clone"
        let (clone, _) = try Vault.clone(from: LocalObjectStore(vaultRoot: dir), into: into, keys: f.plainKeys, signer: try TestSigner())
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/true")
        try child.run()
        child.waitUntilExit()
        let dead = child.processIdentifier
        let elsewhere = try temporaryDirectory() + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let victim = elsewhere + "/\(dead)-7-123.tmp"
        try Data("not the vault's".utf8).write(to: URL(fileURLWithPath: victim))
        let tmp = into + "/.sg_vault/local/tmp"
        try FileManager.default.removeItem(atPath: tmp)
        try FileManager.default.createSymbolicLink(atPath: tmp, withDestinationPath: elsewhere)
        #expect(LocalObjectStore(vaultRoot: into).sweepTemporaryFiles() == 0)
        FileAccess.removeStaleTemps(in: tmp)
        _ = try? clone.pull(from: LocalObjectStore(vaultRoot: dir), signer: try TestSigner())
        #expect(FileManager.default.fileExists(atPath: victim), "a file outside the vault was removed through the link")
    }
}
