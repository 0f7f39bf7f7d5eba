import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 47, item 4: a wrong vault key never looks like an empty vault. Against the real vault
/// server (tools/test starts it): a key whose passphrase is mistyped, for a vault id the server
/// holds, fails with "wrong vault key" and leaves nothing (no folder, no registration, no
/// remote); the right key clones; a vault id the server has never seen clones empty and says so.
@Suite struct VaultCloneWrongKeyTests {
    static var server: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER"] }
    static var token: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"] }

    @Test func aMistypedKeyFailsAndWritesNothingTheRightKeyClonesAnUnknownVaultClonesEmptyWithANote() async throws {
        let url = try #require(Self.server, "run through tools/test: it starts the real vault server")
        let token = try #require(Self.token)
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let id = "skwk" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(12))
        let passphrase = "right phrase \(UUID().uuidString.prefix(6).lowercased())"
        let a = store.dir.appendingPathComponent("a").path
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", "\(passphrase):\(id)"]) == 0)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        let env = ["HOME": store.dir.path, "NO_COLOR": "1"]
        let commit = ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && \"$1\" commit -m one && exec \"$1\" push --base-url \"$2\" --token \"$3\"", a, sgit, url, token],
                                          environment: env)
        #expect(commit.status == 0, "sgit commit/push: \(commit.err)")
        let tokenFile = try store.file("token.txt", Array((token + "\n").utf8))

        // The passphrase mistyped, the vault id right: the server holds the vault, the key opens none of it.
        let wrongKey = try store.file("wrong.key", Array("right phrasE\(passphrase.dropFirst(12)):\(id)".utf8))
        let wrong = await store.run(["vault", "clone", url, "mine", "--key-file", wrongKey, "--token-file", tokenFile,
                                     "--passphrase-file", store.passFile])
        #expect(wrong.status == 1, "\(wrong.out)")
        #expect(wrong.err.contains("wrong vault key") && wrong.err.contains("holds vault \(id)") && wrong.err.contains("nothing was written"), "\(wrong.err)")
        #expect(!wrong.err.contains(passphrase.dropFirst(12)), "no part of the key in the message")
        #expect(!FileManager.default.fileExists(atPath: store.home + "/vaults/mine"), "no folder left behind")
        let list = await store.run(["vault", "list", "--json"])
        #expect(!list.out.contains("\"mine\""), "nothing registered: \(list.out)")
        let remotes = (try? String(contentsOfFile: store.home + "/vault-remotes.json", encoding: .utf8)) ?? ""
        #expect(!remotes.contains("\"mine\""), "no remote recorded: \(remotes)")

        // The right key clones what sgit pushed.
        let rightKey = try store.file("right.key", Array("\(passphrase):\(id)".utf8))
        let right = await store.run(["vault", "clone", url, "mine", "--key-file", rightKey, "--token-file", tokenFile,
                                     "--passphrase-file", store.passFile, "--json"])
        #expect(right.status == 0, "\(right.err)")
        let cloned = try JSONParser.parse(right.out)
        #expect(cloned["remoteHeldNothing"] == .bool(false) && cloned["objects"] != .int(0), "\(right.out)")

        // A vault id the server has never seen: an empty clone, and a note saying why.
        let fresh = "skwn" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(12))
        let freshKey = try store.file("fresh.key", Array("\(passphrase):\(fresh)".utf8))
        let empty = await store.run(["vault", "clone", url, "fresh", "--key-file", freshKey, "--token-file", tokenFile,
                                     "--passphrase-file", store.passFile])
        #expect(empty.status == 0, "\(empty.err)")
        #expect(empty.out.contains("0 commits") && empty.out.contains("holds nothing under vault id \(fresh)")
                && empty.out.contains("check the vault id"), "\(empty.out)")
    }
}
