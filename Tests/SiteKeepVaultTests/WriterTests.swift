import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault

/// A P-256 signer in memory, for unit tests of the writer (the product signs with custody's
/// device key: ``DeviceCommitSigner``, tested through the CLI).
final class TestSigner: CommitSigner, @unchecked Sendable {
    let key: P256.Signing.PrivateKey
    init() throws { key = try P256.Signing.PrivateKey() }
    func publicKeyDER() throws(VaultError) -> [UInt8] { key.publicKey.derRepresentation }
    func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8] {
        do { return try key.signature(for: message).rawRepresentation } catch { throw .signingFailed("\(error)") }
    }
}

/// What the real sgit says about a folder, after SiteKeep wrote to it.
struct SgitCheck {
    let ls: [(path: String, size: Int, blob: String)]
    let fsck: String
    let verify: String
    let status: String
    let log: [String]

    static func run(_ f: SgitFixture, _ dir: String) throws -> SgitCheck {
        let ls = try Interop.must(f.sgit, ["ls", "--json"], cwd: dir, home: f.home)
        guard case .array(let rows)? = try? JSONParser.parse(ls.stdout) else { throw FixtureFailure(description: "sgit ls --json printed no array") }
        let items = rows.compactMap { r -> (String, Int, String)? in
            guard let p = r["path"]?.stringValue, let s = r["size"]?.intValue, let b = r["blob_id"]?.stringValue else { return nil }
            return (p, Int(s), b)
        }
        let fsck = try Interop.run(f.sgit, ["check", "fsck"], cwd: dir, home: f.home)
        let verify = try Interop.run(f.sgit, ["check", "verify"], cwd: dir, home: f.home)
        let status = try Interop.run(f.sgit, ["status"], cwd: dir, home: f.home)
        let log = try Interop.must(f.sgit, ["history", "log"], cwd: dir, home: f.home)
        return SgitCheck(ls: items,
                         fsck: "exit \(fsck.status): " + String(decoding: fsck.stdout, as: UTF8.self) + fsck.stderr,
                         verify: "exit \(verify.status): " + String(decoding: verify.stdout, as: UTF8.self) + verify.stderr,
                         status: String(decoding: status.stdout, as: UTF8.self) + status.stderr,
                         log: String(decoding: log.stdout, as: UTF8.self).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
    }

    func cat(_ f: SgitFixture, _ dir: String, _ path: String) throws -> [UInt8] {
        try Interop.must(f.sgit, ["cat", path], cwd: dir, home: f.home).stdout
    }
}

@Suite("Writing vaults that sgit reads", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct WriterTests {
    func path(_ s: String) throws -> VaultPath { try VaultPath(validating: s) }

    @Test("a SiteKeep commit (add, modify, delete, move) reads byte for byte in sgit; fsck, verify and status pass")
    func sgitReadsEveryByte() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.plainPath)
        let vault = try Vault.open(path: dir, keys: f.plainKeys)
        let signer = try TestSigner()
        let before = try vault.status()
        let r = try vault.commit([
            (try path("docs/added.txt"), .write(Array("added by SiteKeep\n".utf8))),
            (try path("docs/a.txt"), .write(Array("changed by SiteKeep\n".utf8))),
            (try path("empty.bin"), .remove),
            (try path("notes/new/deep.md"), .write(Array("# deep\n".utf8))),
        ], message: "SiteKeep: add, modify, delete", signer: signer)
        let commit = try #require(r.commit)
        #expect(r.parent == before.headCommit)
        let big = try #require(try vault.list(path: "big.bin").first)
        let r2 = try vault.commit([
            (try path("moved/big.bin"), .entry(FlatFile(blobID: big.blobID, size: big.size, contentHash: big.contentHash ?? "",
                                                        contentType: big.contentType ?? "", large: big.large))),
            (try path("big.bin"), .remove),
        ], message: "SiteKeep: move", signer: signer)
        #expect(r2.workingCopySkipped == [])

        let s = try vault.status()
        #expect(s.headCommit == r2.commit && s.headSignature == .verified)
        #expect(s.branchID != before.branchID, "SiteKeep writes on its own clone branch")
        let mine = try vault.list()
        let check = try SgitCheck.run(f, dir)
        #expect(check.ls.map(\.path) == mine.map(\.path.string))
        #expect(check.ls.map(\.blob) == mine.map(\.blobID.rawValue))
        #expect(check.ls.map(\.size) == mine.map(\.size))
        for e in mine {
            #expect(try check.cat(f, dir, e.path.string) == (try vault.read(path: e.path.string)), "sgit cat \(e.path)")
        }
        #expect(try check.cat(f, dir, "docs/a.txt") == Array("changed by SiteKeep\n".utf8))
        #expect(try vault.list(path: "moved/big.bin").first?.blobID == big.blobID, "a move keeps the blob")
        #expect(!mine.contains { $0.path.string == "empty.bin" || $0.path.string == "big.bin" })
        #expect(check.fsck.hasPrefix("exit 0") && check.fsck.contains("Vault OK"), "\(check.fsck)")
        #expect(check.verify.hasPrefix("exit 0") && check.verify.contains("5 verified") && check.verify.contains("0 bad"), "\(check.verify)")
        #expect(check.log.first?.hasPrefix(String(r2.commit!.hex.prefix(12))) == true, "\(check.log)")
        #expect(check.log.contains { $0.hasPrefix(String(commit.hex.prefix(12))) })
        #expect(!check.status.lowercased().contains("modified") && !check.status.lowercased().contains("deleted"), "working copy in step: \(check.status)")
        #expect(try String(contentsOfFile: dir + "/docs/a.txt", encoding: .utf8) == "changed by SiteKeep\n")
        #expect(!FileManager.default.fileExists(atPath: dir + "/big.bin"))
        #expect(try vault.verify().isClean)
    }

    @Test("trees are sgit's byte for byte: rebuilding sgit's HEAD from its flat map gives its root tree id")
    func treesAreByteExact() throws {
        let f = try SgitFixture.get()
        for (p, keys) in [(f.plainPath, f.plainKeys), (f.packsPath, f.packsKeys)] {
            let vault = try Vault.open(path: p, keys: keys)
            let head = try #require(try vault.status().headCommit)
            let c = try vault.commit(head, index: nil)
            let flat = try vault.flatMap(c.treeID)
            // Build every tree afresh (no stored field reused) into a scratch store.
            let scratch = try f.copy(p)
            let builder = TreeBuilder(vault: vault, store: LocalObjectStore(vaultRoot: scratch), width: c.treeID.width, deflate: false)
            let root = try builder.rebuild(flat)
            #expect(root == c.treeID, "the root tree of \(p) rebuilt from \(flat.count) files")
        }
    }

    @Test("an unchanged folder keeps its tree id; writing identical bytes makes no commit")
    func unchangedFoldersAndNoOp() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.plainPath)
        let vault = try Vault.open(path: dir, keys: f.plainKeys)
        let signer = try TestSigner()
        func folderTree(_ name: String) throws -> ObjectID? {
            let head = try #require(try vault.status().headCommit)
            let root = try vault.tree(try vault.commit(head, index: nil).treeID)
            guard case .folder(let id)? = root.entry(named: Array(name.utf8))?.kind else { return nil }
            return id
        }
        let docs = try folderTree("docs"), other = try folderTree("\u{fc}n\u{ef}")
        _ = try vault.commit([(try path("docs/a.txt"), .write(Array("v2\n".utf8)))], message: "m", signer: signer)
        #expect(try folderTree("docs") != docs)
        #expect(try folderTree("\u{fc}n\u{ef}") == other, "untouched folder, same tree id")
        let head = try vault.status().headCommit
        let same = try vault.commit([(try path("docs/a.txt"), .write(Array("v2\n".utf8)))], message: "again", signer: signer)
        #expect(try same.commit == nil && vault.status().headCommit == head, "identical content: nothing to commit")
    }

    @Test("format-2 blob-deflate vault: 32-hex ids, sgz1 blobs; sgit reads them and fsck passes")
    func packsVaultWrite() throws {
        let f = try SgitFixture.get()
        let dir = try f.copy(f.packsPath)
        let vault = try Vault.open(path: dir, keys: f.packsKeys)
        let text = Array(String(repeating: "compress me please ", count: 500).utf8)
        let r = try vault.commit([(try path("text/sk.txt"), .write(text)), (try path("rand.bin"), .write(SecureRandom.bytes(count: 3000)))],
                                 message: "packs write", signer: try TestSigner())
        #expect(r.commit?.width == 32 && r.tree.width == 32)
        let e = try #require(try vault.list(path: "text/sk.txt").first)
        #expect(e.blobID.width == 32)
        let stored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/.sg_vault/bare/data/" + e.blobID.rawValue)))
        #expect(stored.starts(with: Envelope.sgz1Magic) && stored.count < text.count / 4)
        let rnd = try #require(try vault.list(path: "rand.bin").first)
        let rstored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/.sg_vault/bare/data/" + rnd.blobID.rawValue)))
        #expect(!rstored.starts(with: Envelope.sgz1Magic), "incompressible data stays v1")
        let check = try SgitCheck.run(f, dir)
        #expect(try check.cat(f, dir, "text/sk.txt") == text)
        #expect(check.fsck.hasPrefix("exit 0") && check.fsck.contains("Vault OK"), "\(check.fsck)")
        #expect(check.verify.hasPrefix("exit 0") && check.verify.contains("0 bad"), "\(check.verify)")
    }

    @Test("read-only vaults and reserved names are refused; nothing is written")
    func refusals() throws {
        let f = try SgitFixture.get()
        let ro = try Vault.open(path: try f.copy(f.plainPath), keys: f.readOnlyKeys)
        let e = #expect(throws: VaultError.self) { try ro.commit([(try path("x.txt"), .write([1]))], message: "m", signer: try TestSigner()) }
        if case .readOnly? = e {} else { Issue.record("expected readOnly, got \(String(describing: e))") }
        let clone = try Vault.open(path: try f.copy(f.readOnlyPath), keys: f.readOnlyKeys)
        #expect(throws: VaultError.self) { try clone.commit([(try path("x.txt"), .write([1]))], message: "m", signer: try TestSigner()) }
        let dir = try f.copy(f.plainPath)
        let vault = try Vault.open(path: dir, keys: f.plainKeys)
        let before = try vault.status().headCommit
        for bad in [".sg_vault/local/config.json", "a/.GIT/config", ".sg_vault_old_x/y"] {
            let err = #expect(throws: VaultError.self) { try vault.commit([(try path(bad), .write([1]))], message: "m", signer: try TestSigner()) }
            if case .invalidPath? = err {} else { Issue.record("expected invalidPath for \(bad), got \(String(describing: err))") }
        }
        #expect(throws: VaultError.wrongKind(path: "docs", expected: "file (it is a folder)")) {
            try vault.commit([(try path("docs"), .write([1]))], message: "m", signer: try TestSigner())
        }
        #expect(throws: VaultError.notFound(path: "nope.txt")) {
            try vault.commit([(try path("nope.txt"), .remove)], message: "m", signer: try TestSigner())
        }
        #expect(try vault.status().headCommit == before)
    }
}
