import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 33: `vault clone URL FOLDER` as git users expect, its arguments checked before any
/// secret is asked for, and vault ids the vault server would refuse (outside 8–24 lowercase
/// letters and digits) refused or warned about before anything is sent.
@Suite struct VaultCloneAndIDTests {
    /// A vault made by the real sgit in `dir` with key text `keyText`, one file committed.
    func sgitVault(_ store: CLIStore, _ dir: String, _ keyText: String) throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        #expect(ChildProcess.run(sgit, ["init", dir, "--vault-key", keyText]) == 0)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: dir + "/hello.txt"))
        let c = ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", dir, sgit, "commit", "-m", "one"],
                                     environment: ["HOME": store.dir.path, "NO_COLOR": "1"])
        #expect(c.status == 0, "sgit commit: \(c.err)")
    }

    @Test func cloneChecksTheURLTheNameAndTheFolderBeforeAskingForAnySecret() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let full = store.dir.appendingPathComponent("full").path
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: URL(fileURLWithPath: full + "/keep.txt"))
        // No passphrase file and no key file: a command that asked first would fail on those.
        let nonEmpty = await store.run(["vault", "clone", "/srv/vault", full])
        #expect(nonEmpty.status != 0 && nonEmpty.err.contains("already exists and is not empty"), "\(nonEmpty.err)")
        #expect(!nonEmpty.err.lowercased().contains("passphrase"), "\(nonEmpty.err)")
        let badURL = await store.run(["vault", "clone", "ftp://host/v", "notes"])
        #expect(badURL.status != 0 && badURL.err.contains("neither an http(s) URL"), "\(badURL.err)")
        let plainHTTP = await store.run(["vault", "clone", "http://send.example", "notes"])
        #expect(plainHTTP.status != 0 && plainHTTP.err.contains("plain http only to loopback"), "\(plainHTTP.err)")
        let badName = await store.run(["vault", "clone", "/srv/vault", "bad name!"])
        #expect(badName.status != 0 && badName.err.contains("invalid vault name"), "\(badName.err)")
        let twoFolders = await store.run(["vault", "clone", "/srv/vault", "./a", "./b"])
        #expect(twoFolders.status == 64, "\(twoFolders.err)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: full) == ["keep.txt"], "nothing was written into the folder")
    }

    /// vault add, too, checks its name and folder before the passphrase or the key is read.
    @Test func addChecksTheNameAndTheFolderBeforeAskingForAnySecret() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let empty = store.dir.appendingPathComponent("empty").path
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        // No passphrase file and no key file: a command that asked first would fail on those.
        let noVault = await store.run(["vault", "add", "notes", "--path", empty])
        #expect(noVault.status != 0 && noVault.err.contains("holds no sgit vault (no .sg_vault folder in it)"), "\(noVault.err)")
        #expect(!noVault.err.lowercased().contains("passphrase"), "\(noVault.err)")
        let badName = await store.run(["vault", "add", "bad name!", "--path", empty])
        #expect(badName.status == 64 && badName.err.contains("is not a vault name"), "\(badName.err)")
    }

    @Test func cloneIntoAFolderPathNamesTheVaultAfterTheFolder() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let source = store.dir.appendingPathComponent("source").path
        try sgitVault(store, source, "folder clone phrase:foldclone1")
        let key = try store.file("v.key", Array("folder clone phrase:foldclone1".utf8))
        let dest = store.dir.appendingPathComponent("copies/notes").path
        let r = await store.run(["vault", "clone", source, dest + "/", "--key-file", key, "--passphrase-file", store.passFile, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let out = try JSONParser.parse(r.out)
        #expect(out["name"] == .string("notes") && out["path"] == .string(dest), "\(r.out)")
        #expect(FileManager.default.fileExists(atPath: dest + "/.sg_vault"))
        // Registered under the folder's name (a folder remote holds sgit's named branch).
        let list = await store.run(["vault", "list", "--json"])
        #expect(list.out.contains("\"notes\"") && list.out.contains(dest), "\(list.out)")
        let log = await store.run(["vault", "log", "notes", "--passphrase-file", store.passFile])
        #expect(log.status == 0, "\(log.err)")
        // NAME then FOLDER, as `git clone URL DIR` with a name of its own.
        let second = store.dir.appendingPathComponent("copies/other").path
        let named = await store.run(["vault", "clone", source, "mine", second, "--key-file", key, "--passphrase-file", store.passFile, "--json"])
        #expect(named.status == 0, "\(named.err)")
        #expect(try JSONParser.parse(named.out)["path"] == .string(second))
    }

    @Test func vaultIDsTheServerRefusesAreRefusedForServersAndWarnedAboutForFolders() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        // Clone from a vault server: refused from the key's id alone, before any request (port
        // 9 answers nothing; a request would fail as a network error instead).
        let short = try store.file("short.key", Array("my notes passphrase:notes01".utf8))
        let clone = await store.run(["vault", "clone", "http://127.0.0.1:9", "notes", "--key-file", short, "--passphrase-file", store.passFile])
        #expect(clone.status != 0, "\(clone.out)")
        #expect(clone.err.contains("\"notes01\" is 7 characters") && clone.err.contains("8 to 24 lowercase letters and digits"), "\(clone.err)")
        #expect(clone.err.contains("notes01vault"), "a valid id is suggested: \(clone.err)")
        #expect(!clone.err.contains("my notes passphrase"), "no secret in the message")
        #expect(!FileManager.default.fileExists(atPath: store.home + "/vaults/notes"), "nothing was cloned")

        // A folder vault with such an id works, with a warning; a server remote for it is refused.
        let dir = store.dir.appendingPathComponent("notes").path
        try sgitVault(store, dir, "my notes passphrase:notes01")
        let add = await store.run(["vault", "add", "notes", "--path", dir, "--key-file", short, "--passphrase-file", store.passFile])
        #expect(add.status == 0, "\(add.err)")
        #expect(add.err.contains("warning:") && add.err.contains("8 to 24 lowercase letters and digits"), "\(add.err)")
        let remote = await store.run(["vault", "remote", "add", "notes", "http://127.0.0.1:9", "--passphrase-file", store.passFile])
        #expect(remote.status != 0 && remote.err.contains("\"notes01\" is 7 characters"), "\(remote.err)")
        #expect(await store.run(["vault", "remote", "list", "notes", "--json"]).out.contains("[]"), "no remote was recorded")

        // An id the server accepts: no warning.
        let good = store.dir.appendingPathComponent("good").path
        try sgitVault(store, good, "my notes passphrase:notes2026")
        let goodKey = try store.file("good.key", Array("my notes passphrase:notes2026".utf8))
        let added = await store.run(["vault", "add", "good", "--path", good, "--key-file", goodKey, "--passphrase-file", store.passFile])
        #expect(added.status == 0 && !added.err.contains("warning"), "\(added.err)")
    }
}
