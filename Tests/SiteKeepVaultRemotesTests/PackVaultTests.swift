import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault
@testable import SiteKeepVaultRemotes

/// A pack vault (`sgit init --packs`): on the real vault server its objects are only zips under
/// `bare/packs/` (no `bare/data/`). SiteKeep's clone and pull unpack them into loose objects as
/// sgit does, each id and signature verified, and record them in `local/packs_absorbed.json`.
@Suite("Pack vaults through the real vault server", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct PackVaultTests {
    @Test("sgit pushes packs; SiteKeep clones and pulls them, reading every byte")
    func cloneAndPullAPackVault() throws {
        let dir = try Scratch("packs")
        let sgit = try Sgit(home: dir.path + "/home")
        let id = VaultServer.freshVaultID(), keyText = "pack vault phrase:\(id)"
        let k = try keys(keyText)
        let url = try VaultServer.url(), token = try VaultServer.token()
        try sgit.must(["init", "p", "--packs", "--vault-key", keyText], in: dir.path)
        try dir.write("p/docs/a.txt", "hello packs\n")
        try dir.write("p/docs/big.txt", String(repeating: "compressible line of text\n", count: 4000))
        try dir.write("p/notes/n.md", "# a note\n")
        try sgit.must(["commit", "-m", "one"], in: dir.path + "/p")
        try sgit.must(["push", "--base-url", url, "--token", token], in: dir.path + "/p")
        try dir.write("p/docs/second.txt", "second push\n")
        try sgit.must(["commit", "-m", "two"], in: dir.path + "/p")
        try sgit.must(["push", "--base-url", url, "--token", token], in: dir.path + "/p")

        let remote = try SGSendRemote(baseURL: url, vaultID: id, credentials: TestCredentials(token: token, keys: k))
        #expect(try remote.list(prefix: "bare/data/").isEmpty, "the server holds no loose objects for a pack vault")
        let packs = try remote.list(prefix: "bare/packs/").compactMap(PackFile.parse)
        #expect(packs.contains { $0.folder == .snapshots } && packs.contains { $0.folder == .commits }, "\(packs)")

        let signer = try MemorySigner()
        let (mine, cloned) = try Vault.clone(from: remote, into: dir.path + "/sk", keys: k, signer: signer)
        #expect(cloned.fetched.commits == 3, "init, one and two: \(cloned.fetched)")
        for e in try mine.list() {
            #expect(try sgit.must(["cat", e.path.string], in: dir.path + "/p").bytes == (try mine.read(path: e.path.string)), "\(e.path)")
        }
        #expect(try mine.list().count == 4)
        #expect(try mine.verify().isClean)
        let absorbed = try mine.absorbedPacks()
        #expect(absorbed == Set(packs.map(\.name)), "every pack taken is recorded as sgit records it: \(absorbed)")

        // sgit pushes a third commit (one more commit pack); the pull takes only that pack.
        try dir.write("p/docs/a.txt", "changed in a pack\n")
        try sgit.must(["commit", "-m", "three"], in: dir.path + "/p")
        try sgit.must(["push", "--base-url", url, "--token", token], in: dir.path + "/p")
        let pulled = try mine.pull(from: remote, signer: signer)
        #expect(pulled.merge?.kind == .fastForward && pulled.fetched.commits == 1 && pulled.fetched.blobs == 1, "\(pulled.fetched)")
        #expect(try mine.read(path: "docs/a.txt") == Array("changed in a pack\n".utf8))
        #expect(try mine.absorbedPacks().count == absorbed.count + 1)
        // Nothing new: no pack is fetched again.
        #expect(try mine.pull(from: remote, signer: signer).fetched.objects == 0)

        // SiteKeep writes no packs yet: a push to a pack vault is refused before anything is
        // sent (loose objects would be invisible to a later sgit clone), and sgit still clones.
        _ = try mine.commit([(try vp("docs/from-sitekeep.txt"), .write(Array("loose from SiteKeep\n".utf8)))], message: "sk", signer: signer)
        let e = #expect(throws: VaultError.self) { try mine.push(to: remote, signer: signer) }
        guard case .readOnly(let reason)? = e else { Issue.record("\(String(describing: e))"); return }
        #expect(reason.contains("pack vault") && reason.contains("sgit"), "\(reason)")
        #expect(try remote.list(prefix: "bare/data/").isEmpty, "nothing loose reached the server")
        try sgit.must(["clone", keyText, "q", "--base-url", url, "--token", token], in: dir.path)
        #expect(try sgit.must(["cat", "docs/a.txt"], in: dir.path + "/q").out == "changed in a pack\n")
        let fsck = try sgit.run(["check", "fsck"], in: dir.path + "/q")
        #expect(fsck.status == 0 && fsck.out.contains("Vault OK"), "\(fsck.out) \(fsck.err)")
    }
}
