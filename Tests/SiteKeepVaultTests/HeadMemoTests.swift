import Foundation
import Testing
import Synchronization
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepSystem
import SiteKeepTestSupport
@testable import SiteKeepVault

/// HEAD is resolved once and kept while the files it came from are unchanged (so a daemon's
/// repeated `vault.load` does not decrypt the index and ref again), and is read again at once
/// when another process commits; lock drops it with the keys.
@Suite("The kept HEAD", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct HeadMemoTests {
    /// The fixture's plain vault copied into a folder of its own (removed by the caller), opened
    /// with a counter of what it does.
    static func openedCopy() throws -> (fixture: SgitFixture, dir: String, copy: String, vault: Vault, counter: VaultCounter) {
        let f = try SgitFixture.get()
        let dir = try temporaryDirectory()
        let copy = dir + "/plain"
        try FileManager.default.copyItem(atPath: f.plainPath, toPath: copy)
        let counter = VaultCounter()
        return (f, dir, copy, try Vault.open(path: copy, keys: try SgitFixture.keys(SgitFixture.plainKeyText), observer: counter), counter)
    }

    @Test func headIsKeptUntilAnotherProcessCommitsAndLockDropsIt() throws {
        let (f, dir, copy, vault, counter) = try Self.openedCopy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Files changed in the last few milliseconds are not trusted to show a change: wait.
        usleep(120_000)
        _ = try vault.read(path: "docs/a.txt")
        let resolved = counter.now.headResolutions
        for _ in 0..<5 { #expect(try vault.read(path: "docs/a.txt") == Array("hello again\n".utf8)) }
        #expect(counter.now.headResolutions == resolved, "HEAD was resolved again with nothing changed")

        // The real sgit commits in the same folder: the next read sees the new HEAD.
        try Array("changed by sgit\n".utf8).write(toFile: copy + "/docs/a.txt")
        try Interop.must(f.sgit, ["commit", "-m", "another process"], cwd: copy, home: f.home)
        #expect(try vault.read(path: "docs/a.txt") == Array("changed by sgit\n".utf8))
        #expect(counter.now.headResolutions > resolved)
        // (A HEAD read from files changed within the last 50 ms is not kept: FileStampTests.)
    }

    /// With the daemon's watch, a kept HEAD is served with no look at its files (no stamps taken),
    /// and still every commit of another process is seen at the next read, even one that lands
    /// within the stamps' settle margin (where stamps alone cannot be trusted and are not kept).
    @Test func withAWatchHeadIsServedWithoutLookingAtItsFilesAndEveryCommitIsSeen() throws {
        let (f, dir, copy, vault, counter) = try Self.openedCopy()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let watch = try #require(ChangeWatch(folders: []))
        vault.watch(with: watch)
        _ = try vault.read(path: "docs/a.txt")
        let resolved = counter.now.headResolutions
        let looks = counter.now.keptHeadStamps
        for _ in 0..<5 { #expect(try vault.read(path: "docs/a.txt") == Array("hello again\n".utf8)) }
        #expect(counter.now.headResolutions == resolved, "HEAD was resolved again with nothing changed")
        #expect(counter.now.keptHeadStamps == looks, "the kept HEAD's files were looked at")
        for round in 1...3 {
            // No wait between the read and the commit, nor between the commit and the next read.
            try Array("round \(round)\n".utf8).write(toFile: copy + "/docs/a.txt")
            try Interop.must(f.sgit, ["commit", "-m", "round \(round)"], cwd: copy, home: f.home)
            #expect(try vault.read(path: "docs/a.txt") == Array("round \(round)\n".utf8))
        }
    }

    /// A cached blob keeps the SHA-256 of its plaintext, so a hit is checked against the
    /// entry's recorded size and content hash without hashing again: a tree recording another
    /// hash or size for the same blob is still refused, from the cache as from the disk.
    @Test func aCachedBlobIsStillCheckedAgainstTheEntry() throws {
        let f = try SgitFixture.get()
        let counter = VaultCounter()
        let vault = try Vault.open(path: f.plainPath, keys: try SgitFixture.keys(SgitFixture.plainKeyText), observer: counter)
        let (entry, bytes) = try vault.file(at: "docs/a.txt")
        let hash = try #require(entry.contentHash)
        let path = entry.path
        for useCache in [true, false] {
            #expect(try vault.blob(entry.blobID, size: entry.size, contentHash: hash, path: path, useCache: useCache) == bytes)
            #expect(throws: VaultError.self, "a wrong content hash (cache \(useCache))") {
                try vault.blob(entry.blobID, size: entry.size, contentHash: "000000000000", path: path, useCache: useCache)
            }
            #expect(throws: VaultError.self, "a wrong size (cache \(useCache))") {
                try vault.blob(entry.blobID, size: entry.size + 1, contentHash: hash, path: path, useCache: useCache)
            }
        }
        #expect(counter.now.cacheHits > 0)
    }

    /// The kept HEAD is in the keys' lock scope: a lock wipes it from a vault someone still
    /// holds (the observer is told of each kept HEAD wiped).
    @Test func lockDropsTheKeptHead() throws {
        let (custodian, _, dir) = try VaultLockTests.library()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The library's vault, opened with keys from custody and a counter.
        let keys = try CustodianVaultKeyStore(custodian: custodian, registry: VaultRegistry(file: dir + "/vaults.json")).keys(forVault: "notes")
        let counter = VaultCounter()
        let held = try Vault.open(path: try SgitFixture.get().plainPath, keys: keys, observer: counter)
        usleep(120_000)
        _ = try held.read(path: "docs/a.txt")
        let resolved = counter.now.headResolutions
        _ = try held.read(path: "docs/a.txt")
        #expect(counter.now.headResolutions == resolved, "HEAD is kept between reads")
        #expect(counter.now.keptHeadDrops == 0)
        custodian.lock()
        #expect(counter.now.keptHeadDrops == 1, "a lock leaves the decrypted branch index and HEAD behind")
        #expect(held.isWiped)
    }
}

extension Array where Element == UInt8 {
    fileprivate func write(toFile path: String) throws {
        try Data(self).write(to: URL(fileURLWithPath: path))
    }
}
