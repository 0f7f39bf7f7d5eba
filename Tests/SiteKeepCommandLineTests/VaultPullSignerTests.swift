import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// A signer that arrives through a pull from the real vault server (tools/test starts it) is new
/// until `sitekeep vault trust` (issue 32, defect 5): the server's token and the read key prove
/// nothing about a write key, so a pull never pins.
@Suite(.serialized) struct VaultPullSignerTests {
    static var server: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER"] }
    static var token: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"] }

    /// `script` under /bin/sh; its status and its output and errors together.
    func sh(_ script: String) -> (Int32, String) {
        let r = ChildProcess.capture("/bin/sh", ["-c", script + " 2>&1"])
        return (r.status, r.out)
    }

    func cat(_ store: CLIStore, _ path: String) async -> (status: Int32, text: String, err: String) {
        let r = await store.run(["vault", "cat", "mine", path, "--passphrase-file", store.passFile, "--json"])
        let b64 = (try? JSONParser.parse(r.out)["dataBase64"]?.stringValue) ?? nil
        return (r.status, String(decoding: b64.flatMap { Data(base64Encoded: $0) } ?? Data(), as: UTF8.self), r.err)
    }

    /// sgit clone A pushes; SiteKeep clones (A's signers pinned: the first look). A second sgit
    /// clone B, with its own signing key, commits and pushes. SiteKeep's pull reports B (key id,
    /// fingerprint, the trust command), serves nothing B signed and shows B as new in `vault
    /// status`; after `vault trust`, a pull serves B's commit.
    @Test func aSignerArrivingThroughAPullIsNewUntilTrusted() async throws {
        let url = try #require(Self.server, "run through tools/test: it starts the real vault server")
        let token = try #require(Self.token)
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let id = "skpin" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyText = "pull signer phrase \(UUID().uuidString.prefix(6)):\(id)"
        let a = store.dir.appendingPathComponent("a").path, b = store.dir.appendingPathComponent("b").path
        let env = "HOME='\(store.dir.path)'"
        let remote = "--base-url \(url) --token \(token)"
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", keyText]) == 0)
        try Data("from a\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        let pushA = sh("cd '\(a)' && \(env) '\(sgit)' commit -m one && \(env) '\(sgit)' push \(remote)")
        #expect(pushA.0 == 0, "\(pushA.1)")

        let unlock = ["--passphrase-file", store.passFile]
        let keyFile = try store.file("vault.key", Array(keyText.utf8))
        let tokenFile = try store.file("token.txt", Array((token + "\n").utf8))
        let clone = await store.run(["vault", "clone", url, "mine", "--key-file", keyFile, "--token-file", tokenFile, "--json"] + unlock)
        #expect(clone.status == 0, "\(clone.err)")
        #expect(await cat(store, "hello.txt").text == "from a\n")
        let pinnedAtClone = Set((try JSONParser.parse(await store.run(["vault", "status", "mine", "--json"] + unlock).out)["signers"]?.arrayValue ?? [])
            .filter { $0["state"] == "pinned" }.compactMap { $0["keyId"]?.stringValue })
        #expect(!pinnedAtClone.isEmpty)

        // Clone B: its own clone branch and signing key; a commit; a push through the server.
        let pushB = sh("\(env) '\(sgit)' clone '\(keyText)' '\(b)' \(remote) && cd '\(b)' && printf 'from b\\n' > b.txt && "
            + "printf 'b was here\\n' > hello.txt && \(env) '\(sgit)' commit -m 'b one' && \(env) '\(sgit)' push \(remote)")
        #expect(pushB.0 == 0, "\(pushB.1)")

        // The pull reports B and serves nothing B signed.
        let pulled = await store.run(["vault", "pull", "mine", "--json"] + unlock)
        #expect(pulled.status == 1, "a pull that brings a signer nobody trusted fails: \(pulled.out) \(pulled.err)")
        let error = try JSONParser.parse(pulled.err)["error"]
        #expect(error?["code"] == "vault_unverified", "\(pulled.err)")
        let message = error?["message"]?.stringValue ?? ""
        let status = try JSONParser.parse(await store.run(["vault", "status", "mine", "--json"] + unlock).out)
        let signers = status["signers"]?.arrayValue ?? []
        let newOnes = signers.filter { $0["state"] == "new" }
        #expect(newOnes.count == 1, "vault status shows B as new, not pinned: \(signers)")
        let bKey = try #require(newOnes.first?["keyId"]?.stringValue)
        let bFingerprint = try #require(newOnes.first?["sha256"]?.stringValue)
        #expect(!pinnedAtClone.contains(bKey))
        #expect(message.contains(bKey) && message.contains(bFingerprint) && message.contains("new signer")
                && message.contains("sitekeep vault trust mine \(bKey)"), "\(message)")
        #expect(status["headServed"] == true, "HEAD stays at the last commit a pinned signer made")
        #expect(await cat(store, "hello.txt").text == "from a\n", "B's change is not served")
        #expect(await cat(store, "b.txt").status != 0, "B's file is not served")
        let human = await store.run(["vault", "status", "mine"] + unlock)
        #expect(human.out.contains("NEW") && human.out.contains("sitekeep vault trust mine \(bKey)"), "\(human.out)")
        // Pulling again changes nothing: B's commit is stored but still not merged.
        #expect(await store.run(["vault", "pull", "mine"] + unlock).status == 1)
        #expect(await cat(store, "b.txt").status != 0)

        // The user trusts B (their own clone): the next pull serves B's commit.
        let trusted = await store.run(["vault", "trust", "mine", bKey] + unlock)
        #expect(trusted.status == 0, "\(trusted.err)")
        let after = await store.run(["vault", "pull", "mine", "--json"] + unlock)
        #expect(after.status == 0, "\(after.err)")
        #expect(await cat(store, "b.txt").text == "from b\n")
        #expect(await cat(store, "hello.txt").text == "b was here\n")
        let final = try JSONParser.parse(await store.run(["vault", "status", "mine", "--json"] + unlock).out)
        let bPin = (final["signers"]?.arrayValue ?? []).first { $0["keyId"]?.stringValue == bKey }
        #expect(bPin?["state"] == "pinned" && bPin?["pinnedBy"] == "user", "\(String(describing: bPin))")
        #expect(await store.run(["vault", "verify", "mine"] + unlock).status == 0)
    }
}
