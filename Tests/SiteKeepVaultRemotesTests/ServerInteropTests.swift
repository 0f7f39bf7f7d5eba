import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepVault
@testable import SiteKeepVaultRemotes

/// Two-way interoperability with the real sgit through the real vault server (SG/Send's
/// FastAPI app, started by tools/test on loopback): disk storage, and S3 storage on moto (a
/// mock of the S3 API).
@Suite("Sync with sgit through the real vault server", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct ServerInteropTests {
    func remote(_ keys: SgitKeys, s3: Bool = false) throws -> SGSendRemote {
        try SGSendRemote(baseURL: try VaultServer.url(s3: s3), vaultID: keys.vaultID,
                         credentials: TestCredentials(token: try VaultServer.token(), keys: keys))
    }

    func twoWay(s3: Bool) throws {
        let dir = try Scratch("srv")
        let sgit = try Sgit(home: dir.path + "/home")
        let id = VaultServer.freshVaultID()
        let keyText = "server interop phrase:\(id)"
        let k = try keys(keyText)
        let url = try VaultServer.url(s3: s3), token = try VaultServer.token()

        // sgit makes the vault and pushes it first.
        try sgit.must(["init", "a", "--vault-key", keyText], in: dir.path)
        try dir.write("a/agenda/picks.json", #"{"v":1,"picks":[{"id":"talk-1","at":"2026-12-01T09:00:00Z"}],"removed":[]}"#)
        try dir.write("a/notes/shared.md", "base\n")
        try dir.write("a/docs/readme.txt", "hello\n")
        try sgit.must(["commit", "-m", "base"], in: dir.path + "/a")
        try sgit.must(["push", "--base-url", url, "--token", token], in: dir.path + "/a")

        // SiteKeep clones it (keys in custody: nothing secret in local/).
        let signer = try MemorySigner()
        let (mine, cloned) = try Vault.clone(from: try remote(k, s3: s3), into: dir.path + "/sk", keys: k, signer: signer)
        #expect(cloned.fetched.objects > 0)
        #expect(try mine.read(path: "docs/readme.txt") == Array("hello\n".utf8))
        let local = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/sk/.sg_vault/local")
        #expect(!local.contains("vault_key") && !local.contains { $0.hasSuffix(".pem") } && !local.contains("token"), "\(local)")

        // SiteKeep writes, commits, pushes; sgit clones and reads every byte.
        let big = SecureRandom.bytes(count: s3 ? 11 << 20 : 300_000)
        _ = try mine.commit([(try vp("docs/readme.txt"), .write(Array("hello from SiteKeep\n".utf8))),
                             (try vp("data/blob.bin"), .write(big))], message: "SiteKeep edit", signer: signer)
        let partsBefore = SGSendRemote.presignedPartsUploaded
        let pushed = try mine.push(to: try remote(k, s3: s3), signer: signer)
        #expect(pushed.objects >= 4 && !pushed.upToDate)
        if s3 {
            #expect(SGSendRemote.presignedPartsUploaded - partsBefore == 2, "the 11 MiB blob went up in two presigned parts")
        } else {
            #expect(SGSendRemote.presignedPartsUploaded == partsBefore, "disk storage offers no presigned upload: plain routes")
        }
        #expect(try mine.push(to: try remote(k, s3: s3), signer: signer).upToDate)
        try sgit.must(["clone", keyText, "b", "--base-url", url, "--token", token], in: dir.path)
        let b = dir.path + "/b"
        #expect(try sgit.must(["cat", "docs/readme.txt"], in: b).out == "hello from SiteKeep\n")
        #expect(try sgit.must(["cat", "data/blob.bin"], in: b).bytes == big)
        for e in try mine.list() {
            #expect(try sgit.must(["cat", e.path.string], in: b).bytes == (try mine.read(path: e.path.string)), "\(e.path)")
        }
        let fsck = try sgit.run(["check", "fsck"], in: b)
        #expect(fsck.status == 0 && fsck.out.contains("Vault OK"), "\(fsck.out) \(fsck.err)")
        let verify = try sgit.run(["check", "verify"], in: b)
        #expect(verify.status == 0 && verify.out.contains("0 bad"), "\(verify.out)")

        // sgit commits and pushes; SiteKeep pulls (a fast-forward) and reads it.
        try dir.write("b/docs/from-sgit.txt", "sgit wrote this\n")
        try sgit.must(["commit", "-m", "sgit edit"], in: b)
        try sgit.must(["push", "--base-url", url, "--token", token], in: b)
        let ff = try mine.pull(from: try remote(k, s3: s3), signer: signer)
        #expect(ff.merge?.kind == .fastForward, "\(String(describing: ff.merge))")
        #expect(ff.fetched.commits == 1 && ff.fetched.blobs == 1, "only what is new: \(ff.fetched)")
        #expect(try mine.read(path: "docs/from-sgit.txt") == Array("sgit wrote this\n".utf8))

        // Concurrent edits: picks on both sides merge by id; the other file conflicts.
        try dir.write("b/agenda/picks.json", #"{"v":1,"picks":[{"id":"talk-1","at":"2026-12-01T09:00:00Z"},{"id":"talk-sgit","at":"2026-12-01T10:00:00Z"}],"removed":[]}"#)
        try dir.write("b/notes/shared.md", "sgit's version\n")
        try sgit.must(["commit", "-m", "sgit: pick and note"], in: b)
        try sgit.must(["push", "--base-url", url, "--token", token], in: b)
        _ = try mine.commit([
            (try vp("agenda/picks.json"), .write(Array(#"{"v":1,"picks":[{"id":"talk-sk","at":"2026-12-01T11:00:00Z"}],"removed":[{"id":"talk-1","at":"2026-12-01T11:00:00Z"}]}"#.utf8))),
            (try vp("notes/shared.md"), .write(Array("SiteKeep's version\n".utf8))),
        ], message: "SiteKeep: pick and note", signer: signer)
        #expect(throws: VaultError.pullFirst(remote: url)) { try mine.push(to: try remote(k, s3: s3), signer: signer) }
        let merged = try mine.pull(from: try remote(k, s3: s3), signer: signer)
        #expect(merged.merge?.kind == .conflicts && merged.merge?.conflicts == ["notes/shared.md"], "\(String(describing: merged.merge))")
        #expect(try mine.mergeState()?.conflicts == ["notes/shared.md"])
        let conflictFile = dir.path + "/sk/notes/shared.md.conflict"
        #expect(try String(contentsOfFile: conflictFile, encoding: .utf8) == "sgit's version\n")
        let done = try mine.resolve(path: "notes/shared.md", useTheirs: false, signer: signer)
        #expect(try done.kind == .merged && mine.mergeState() == nil)
        #expect(!FileManager.default.fileExists(atPath: conflictFile))
        let picks = try JSONParser.parse(try mine.read(path: "agenda/picks.json"))
        #expect(picks["picks"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["talk-sgit", "talk-sk"], "union, the later removal of talk-1 wins")
        #expect(picks["removed"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["talk-1"])
        #expect(try mine.read(path: "notes/shared.md") == Array("SiteKeep's version\n".utf8))
        #expect(try mine.log(limit: 1).first?.parents.count == 2)
        _ = try mine.push(to: try remote(k, s3: s3), signer: signer)

        // sgit pulls the merge; then a conflicting sgit edit shows as a conflict in sgit too.
        try sgit.must(["pull", "--base-url", url, "--token", token], in: b)
        #expect(try sgit.must(["cat", "notes/shared.md"], in: b).out == "SiteKeep's version\n")
        let sgitPicks = try JSONParser.parse(Array(try sgit.must(["cat", "agenda/picks.json"], in: b).out.utf8))
        #expect(sgitPicks["picks"]?.arrayValue?.count == 2)
        _ = try mine.commit([(try vp("notes/shared.md"), .write(Array("SiteKeep again\n".utf8)))], message: "again", signer: signer)
        _ = try mine.push(to: try remote(k, s3: s3), signer: signer)
        try dir.write("b/notes/shared.md", "sgit again\n")
        try sgit.must(["commit", "-m", "sgit again"], in: b)
        _ = try sgit.run(["pull", "--base-url", url, "--token", token], in: b)
        #expect(FileManager.default.fileExists(atPath: b + "/notes/shared.md.conflict"), "sgit shows the conflict as PATH.conflict")
        #expect(FileManager.default.fileExists(atPath: b + "/.sg_vault/local/merge_state.json"))
    }

    @Test("disk storage: SiteKeep ⇄ sgit, picks merge by id, other edits conflict in both tools")
    func diskMode() throws { try twoWay(s3: false) }

    @Test("S3 storage on moto (a mock of S3): the same, with an 11 MiB blob through presigned multipart")
    func s3Mode() throws { try twoWay(s3: true) }
}
