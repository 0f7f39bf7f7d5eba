import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepVault
import SiteKeepTesting

/// The stand-in SG/Send server (`tools/lib/sgit-standin-server.py`) on loopback, started with
/// the Python of sgit's virtualenv and stopped by pid.
final class StandInServer {
    let process: Process
    let url: String

    init(dataDir: String, sgit: String) throws {
        let python = URL(fileURLWithPath: sgit).deletingLastPathComponent().appendingPathComponent("python").path
        let script = Interop.packageRoot.appendingPathComponent("tools/lib/sgit-standin-server.py").path
        let portFile = dataDir + ".port"
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, dataDir, portFile]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var port: String?
        for _ in 0..<200 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), !text.isEmpty { port = text; break }
            usleep(25_000)
        }
        guard let port else {
            process.terminate()
            throw FixtureFailure(description: "the stand-in server (\(script)) did not start")
        }
        url = "http://127.0.0.1:\(port)"
    }

    func stop() {
        // SIGKILL: children of the test runner may inherit SIGTERM ignored.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A second sgit clone that pushed through the server: its key reached the branch index
/// through a push that needed the write key. SiteKeep reports it as a new signer (exactly as it
/// would a forged one: the folder cannot tell them apart) and serves it once trusted.
@Suite("A second sgit clone, pushed through the server", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct SecondCloneTests {
    @Test("clone B pushes, clone A pulls (fast-forward to B's commit): B is a new signer until trusted, then A reads and verifies clean")
    func pinnedSecondCloneWorks() throws {
        let f = try SgitFixture.get()
        let base = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: base) }
        let server = try StandInServer(dataDir: base + "/server", sgit: f.sgit)
        defer { server.stop() }
        let keyText = "two clones pass:twocl001"
        let a = base + "/a", b = base + "/b"
        try Interop.must(f.sgit, ["init", "a", "--vault-key", keyText, "--base-url", server.url], cwd: base, home: f.home)
        try Data("from a\n".utf8).write(to: URL(fileURLWithPath: a + "/a.txt"))
        try Interop.must(f.sgit, ["commit", "-m", "a one"], cwd: a, home: f.home)
        try Interop.must(f.sgit, ["push", "--base-url", server.url], cwd: a, home: f.home)

        // SiteKeep registers clone A: the signers its index lists now are pinned.
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let library = VaultLibrary(registry: VaultRegistry(file: dir + "/vaults.json"), keyStore: InMemoryVaultKeyStore())
        try library.add(name: "a", path: a, keyText: SecretBytes(copying: Array(keyText.utf8)), siteID: "site-a")
        #expect(try library.vault(named: "a").read(path: "a.txt") == Array("from a\n".utf8))

        // Clone B (its own clone branch and signing key), a commit, a push through the server.
        try Interop.must(f.sgit, ["clone", keyText, "b", "--base-url", server.url], cwd: base, home: f.home)
        try Data("from b\n".utf8).write(to: URL(fileURLWithPath: b + "/b.txt"))
        try Interop.must(f.sgit, ["commit", "-m", "b one"], cwd: b, home: f.home)
        try Interop.must(f.sgit, ["push"], cwd: b, home: f.home)
        try Interop.must(f.sgit, ["pull"], cwd: a, home: f.home)
        let sgitVerify = try Interop.must(f.sgit, ["check", "verify"], cwd: a, home: f.home)
        #expect(String(decoding: sgitVerify.stdout, as: UTF8.self).contains("0 bad"))

        let bKey = try #require(try Vault.open(path: b, keys: SgitFixture.keys(keyText)).resolveHead().branch?.publicKeyID)
        let v = try library.vault(named: "a")
        let e = #expect(throws: VaultError.self) { try v.read(path: "b.txt") }
        guard case .unverifiedCommit(_, .newSigner(let key, _), "a", false)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(key == bKey)
        let status = try v.status()
        #expect(!status.headServed && status.headTrust?.signer == bKey)
        #expect(status.signers.first { $0.keyID == bKey }?.state == .new, "vault status reports B as a new signer")
        #expect(!(try v.verify().isClean))

        // The user trusts B (it is their own clone): A reads B's work and verifies clean.
        #expect(try library.trust(vault: "a", keyID: bKey).alreadyPinned == false)
        let fresh = VaultLibrary(registry: library.registry, keyStore: library.keyStore)
        for l in [library, fresh] {
            let vault = try l.vault(named: "a")
            #expect(try vault.read(path: "b.txt") == Array("from b\n".utf8))
            #expect(try vault.read(path: "a.txt") == Array("from a\n".utf8))
            let report = try vault.verify()
            #expect(report.isClean && report.trusted == report.commits, "\(report.problems)")
        }
        // And A's own next commit on top keeps working: both clones' keys are pinned.
        try Data("again from a\n".utf8).write(to: URL(fileURLWithPath: a + "/a.txt"))
        try Interop.must(f.sgit, ["commit", "-m", "a two"], cwd: a, home: f.home)
        #expect(try fresh.vault(named: "a").read(path: "a.txt") == Array("again from a\n".utf8))
    }
}
