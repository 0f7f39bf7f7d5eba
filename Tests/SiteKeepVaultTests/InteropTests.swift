import Foundation
import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepVault

/// SiteKeep against vaults the real `sgit` (sgit-ai 0.26.0) wrote.
@Suite("Interop with the sgit CLI", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct InteropTests {
    func check(_ vault: Vault, against view: SgitView) throws {
        let entries = try vault.list()
        #expect(entries.map(\.path.string) == view.items.map(\.path), "same paths, same (byte) order as sgit ls")
        #expect(entries.map(\.blobID.rawValue) == view.items.map(\.blobID))
        #expect(entries.map(\.size) == view.items.map(\.size))
        for item in view.items {
            let bytes = try vault.read(path: item.path)
            #expect(bytes == item.bytes, "\(item.path) reads byte-identically to sgit cat")
            #expect(bytes.count == item.size)
        }
    }

    @Test("format-1 vault: every file lists and reads byte-identically to sgit cat")
    func plainVault() throws {
        let f = try SgitFixture.get()
        let vault = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        try check(vault, against: f.plainView)
        let paths = try vault.list().map(\.path.string)
        #expect(paths.contains(SgitFixture.nfc) && paths.contains(SgitFixture.nfd), "NFC and NFD names are two files")
        #expect(try vault.read(path: SgitFixture.nfc) == Array("composed".utf8))
        #expect(try vault.read(path: SgitFixture.nfd) == Array("decomposed".utf8))
        #expect(try vault.read(path: "empty.bin") == [])
        #expect(try vault.read(path: "big.bin").count == 1 << 20)
        #expect(try vault.read(path: "docs/a.txt") == Array("hello again\n".utf8))
        #expect(!paths.contains("data.json"), "deleted in the second commit")
        #expect(try vault.list().first { $0.path.string == "docs/a.txt" }?.contentType == "text/plain")
    }

    @Test("listing a folder, a file; not found, wrong kind, unsafe paths")
    func listAndErrors() throws {
        let f = try SgitFixture.get()
        let vault = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        #expect(try vault.list(path: "docs").map(\.path.string) == ["docs/a.txt", "docs/new.txt", "docs/sub/deep/d.md"])
        #expect(try vault.list(path: "docs/sub/").map(\.path.string) == ["docs/sub/deep/d.md"])
        #expect(try vault.list(path: "docs/a.txt").map(\.size) == [12])
        #expect(throws: VaultError.notFound(path: "docs/nope")) { try vault.read(path: "docs/nope") }
        #expect(throws: VaultError.notFound(path: "cafe.txt")) { try vault.read(path: "cafe.txt") }
        #expect(throws: VaultError.notFound(path: "docs/a.txt/x")) { try vault.read(path: "docs/a.txt/x") }
        #expect(throws: VaultError.wrongKind(path: "docs", expected: "file")) { try vault.read(path: "docs") }
        for bad in ["../plain/docs/a.txt", "/docs/a.txt", "docs//a.txt", "docs/\u{0}a.txt"] {
            let e = #expect(throws: VaultError.self) { try vault.read(path: bad) }
            if case .invalidPath? = e {} else { Issue.record("expected invalidPath for \(bad.debugDescription), got \(String(describing: e))") }
        }
    }

    @Test("status, log (first parent, messages, signatures) match sgit history log")
    func statusAndLog() throws {
        let f = try SgitFixture.get()
        let vault = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        let s = try vault.status()
        #expect(s.vaultID == "itest01")
        #expect(s.branchName == "local")
        #expect(s.branchID?.hasPrefix("branch-clone-") == true)
        #expect(s.format == 1)
        #expect(!s.isReadOnly)
        #expect(s.headSignature == .verified)
        #expect(s.headMessage == "second: modify, add, delete \u{2713}")
        let log = try vault.log(limit: 10)
        #expect(log.map { String($0.id.hex.prefix(12)) } == f.plainView.historyIDs)
        #expect(log.map(\.message) == ["second: modify, add, delete \u{2713}", "first: files", "init"])
        #expect(log.allSatisfy { $0.signature == .verified })
        #expect(log.first?.id == s.headCommit)
        #expect(try vault.log(limit: 1).count == 1)
    }

    @Test("verify: every id and signature, and the counts sgit check verify reports")
    func verifyAll() throws {
        let f = try SgitFixture.get()
        let report = try Vault.open(path: f.plainPath, keys: f.plainKeys).verify()
        #expect(report.isClean, "\(report.problems)")
        #expect(report.commits == 3 && report.verified == 3 && report.bad == 0)
        #expect(f.plainView.verifyLine.contains("3 verified"), "sgit: \(f.plainView.verifyLine)")
        #expect(report.blobs >= 10)
        #expect(report.trees >= 6)
    }

    @Test("init --packs vault moved to format 2: sgz1 blobs, 12- and 32-hex ids, byte-identical reads")
    func packsVault() throws {
        let f = try SgitFixture.get()
        let vault = try Vault.open(path: f.packsPath, keys: f.packsKeys)
        try check(vault, against: f.packsView)
        let s = try vault.status()
        #expect(s.format == 2, "sgit vault format --set 2 said: \(f.formatSetOutput)")
        #expect(s.features.contains("blob-deflate"))
        #expect(s.headCommit?.width == 32)
        let widths = Set(try vault.list().map(\.blobID.width))
        #expect(widths == [12, 32], "an unchanged blob keeps its format-1 id")
        let lines = try #require(try vault.list(path: "text/lines.txt").first)
        let stored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: f.packsPath + "/.sg_vault/bare/data/" + lines.blobID.rawValue)))
        #expect(stored.starts(with: Envelope.sgz1Magic))
        #expect(stored.count < lines.size / 2)
        let report = try vault.verify()
        #expect(report.isClean && report.commits == 3 && report.verified == 3, "\(report)")
    }

    @Test("read-only clone: HEAD is the named branch of clone_mode.json, with a read key only")
    func readOnlyClone() throws {
        let f = try SgitFixture.get()
        let vault = try Vault.open(path: f.readOnlyPath, keys: f.readOnlyKeys)
        let s = try vault.status()
        #expect(s.isReadOnly)
        #expect(s.branchName == "current")
        #expect(s.headSignature == .verified)
        #expect(try vault.log().map(\.message) == ["init"])   // `current` was never pushed to
        #expect(try vault.list() == [])
        // The full vault opened with only its read key reads everything.
        let ro = try Vault.open(path: f.plainPath, keys: f.readOnlyKeys)
        #expect(try ro.status().isReadOnly)
        try check(ro, against: f.plainView)
    }

    @Test("a wrong vault key is refused clearly, without a secret in the message")
    func wrongKey() throws {
        let f = try SgitFixture.get()
        let wrong = try SgitFixture.keys("ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff:itest01")
        #expect(throws: VaultError.wrongKey(vaultID: "itest01")) { try Vault.open(path: f.plainPath, keys: wrong) }
        let otherID = try SgitFixture.keys("\(f.readKeyHex):other01")
        #expect(throws: VaultError.wrongKey(vaultID: "other01")) { try Vault.open(path: f.plainPath, keys: otherID) }
        #expect(throws: VaultError.vaultIDMismatch(expected: "other01", found: "itest01")) { try Vault.open(path: f.readOnlyPath, keys: otherID) }
        let e = #expect(throws: VaultError.self) { try Vault.open(path: f.plainPath, keys: wrong) }
        #expect(e?.description.contains("wrong vault key") == true)
        #expect(throws: VaultError.notAVault(path: f.dir)) { try Vault.open(path: f.dir, keys: f.plainKeys) }
    }

    @Test("the object cache: a second read of the same tree costs no decryption")
    func cache() throws {
        let f = try SgitFixture.get()
        let counter = VaultCounter()
        let vault = try Vault.open(path: f.plainPath, keys: f.plainKeys, observer: counter)
        _ = try vault.read(path: "docs/sub/deep/d.md")
        let before = (counts: counter.now, held: vault.cacheStatistics)
        _ = try vault.read(path: "docs/sub/deep/d.md")
        let after = (counts: counter.now, held: vault.cacheStatistics)
        #expect(after.counts.cacheMisses == before.counts.cacheMisses, "no object was read from disk again")
        #expect(after.counts.cacheHits > before.counts.cacheHits)
        #expect(after.held.entries == before.held.entries)
        // A tiny budget stays within bounds.
        var opts = VaultOptions()
        opts.cacheBytes = 4096
        let small = try Vault.open(path: f.plainPath, keys: f.plainKeys, options: opts)
        _ = try small.list()
        #expect(small.cacheStatistics.bytes <= 4096)
    }
}
