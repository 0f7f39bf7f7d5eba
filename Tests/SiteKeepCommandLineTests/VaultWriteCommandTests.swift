import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// `vault write|rm|mv` through the real command line: commits signed with the device key held
/// in custody, read back by the real sgit.
@Suite struct VaultWriteCommandTests {
    func sh(_ script: String) -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try? p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func writeRemoveAndMoveAreSignedByTheDeviceKeyAndSgitReadsThem() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let vault = store.dir.appendingPathComponent("vault").path
        #expect(ChildProcess.run(sgit, ["init", vault, "--vault-key", "write test phrase:wtest123"]) == 0)
        try FileManager.default.createDirectory(atPath: vault + "/docs", withIntermediateDirectories: true)
        try Data("one\n".utf8).write(to: URL(fileURLWithPath: vault + "/docs/a.txt"))
        #expect(sh("cd '\(vault)' && HOME='\(store.dir.path)' '\(sgit)' commit -m one").0 == 0)
        let key = try store.file("vault.key", Array("write test phrase:wtest123".utf8))
        #expect(await store.run(["vault", "add", "w", "--path", vault, "--key-file", key, "--passphrase-file", store.passFile]).status == 0)

        let src = try store.file("plan.md", Array("# plan\n".utf8))
        let w = await store.run(["vault", "write", "w", "notes/plan.md", "--file", src, "-m", "add the plan", "--passphrase-file", store.passFile, "--json"])
        #expect(w.status == 0, "\(w.err)")
        let commit = try #require(try JSONParser.parse(w.out)["commit"]?.stringValue)
        let viaStdin = await store.run(["vault", "write", "w", "docs/a.txt", "--passphrase-file", store.passFile], stdin: Array("two\n".utf8))
        #expect(viaStdin.status == 0, "\(viaStdin.err)")
        #expect(viaStdin.out.contains("Committed obj-cas-imm-"))
        let same = await store.run(["vault", "write", "w", "docs/a.txt", "--passphrase-file", store.passFile], stdin: Array("two\n".utf8))
        #expect(same.status == 0 && same.out.contains("Nothing to commit"), "\(same.out)")
        #expect(await store.run(["vault", "mv", "w", "docs/a.txt", "docs/b.txt", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["vault", "rm", "w", "notes/plan.md", "--passphrase-file", store.passFile]).status == 0)
        let missing = await store.run(["vault", "rm", "w", "notes/plan.md", "--passphrase-file", store.passFile])
        #expect(missing.status == 1 && missing.err.contains("no file or folder"), "\(missing.err)")

        // `vault status` lists this device's own branch key as its own, trusted key: never as a
        // NEW, untrusted signer beside a HEAD it calls trusted (issue 33).
        let text = await store.run(["vault", "status", "w", "--passphrase-file", store.passFile])
        #expect(text.status == 0, "\(text.err)")
        #expect(text.out.contains("signature  verified, trusted"), "\(text.out)")
        #expect(!text.out.contains("NEW") && !text.out.contains("not trusted"), "\(text.out)")
        let ownLines = text.out.split(separator: "\n").filter { $0.contains("this device's own key (trusted") }
        #expect(ownLines.count == 1, "one signer line for the device key: \(text.out)")
        let json = try JSONParser.parse(await store.run(["vault", "status", "w", "--passphrase-file", store.passFile, "--json"]).out)
        let states = (json["signers"]?.arrayValue ?? []).compactMap { $0["state"]?.stringValue }
        #expect(states.sorted() == ["own", "pinned", "pinned"], "\(states)")
        #expect(json["headTrust"] == .string("trusted"))

        let log = await store.run(["vault", "log", "w", "--passphrase-file", store.passFile, "--json"])
        let commits = try #require(try JSONParser.parse(log.out).arrayValue)
        #expect(commits.count == 6, "init, sgit's commit and four of ours")
        #expect(commits.allSatisfy { $0["signature"]?.stringValue == "verified" })
        #expect(commits.map { $0["message"]?.stringValue ?? "" }.prefix(3) == ["Commit: 0 added, 0 modified, 1 deleted", "Move docs/a.txt to docs/b.txt", "Commit: 0 added, 1 modified, 0 deleted"])
        #expect(commits.contains { $0["id"]?.stringValue == commit })

        // The real sgit reads the result and checks it.
        let env = "cd '\(vault)' && HOME='\(store.dir.path)' '\(sgit)'"
        #expect(sh("\(env) cat docs/b.txt").1 == "two\n")
        #expect(sh("\(env) ls").1.contains("docs/b.txt"))
        let fsck = sh("\(env) check fsck")
        #expect(fsck.0 == 0 && fsck.1.contains("Vault OK"), "\(fsck.1)")
        let verify = sh("\(env) check verify")
        #expect(verify.0 == 0 && verify.1.contains("6 verified") && verify.1.contains("0 bad"), "\(verify.1)")
        let status = sh("\(env) status")
        #expect(!status.1.lowercased().contains("modified"), "\(status.1)")
        // No private key was written next to sgit's: the device key stays in custody.
        let pems = try FileManager.default.contentsOfDirectory(atPath: vault + "/.sg_vault/local").filter { $0.hasSuffix(".pem") }
        #expect(pems.count == 1, "only sgit's own clone key: \(pems)")
    }
}
