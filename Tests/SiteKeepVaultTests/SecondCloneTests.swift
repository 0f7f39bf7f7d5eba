import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepVault
import SiteKeepTestSupport

/// The real vault server tools/test started on loopback (SG/Send's app, disk storage): its URL
/// and access token by environment, and a vault id no other test uses.
enum RealVaultServer {
    static func url() throws -> String {
        guard let u = ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER"], !u.isEmpty else {
            throw FixtureFailure(description: "SITEKEEP_TEST_VAULT_SERVER is not set: run the tests through tools/test, which starts the real vault server (sgraph-ai-app-send in .venv-server)")
        }
        return u
    }

    static func token() throws -> String {
        guard let t = ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"], !t.isEmpty else {
            throw FixtureFailure(description: "SITEKEEP_TEST_VAULT_TOKEN is not set: run the tests through tools/test")
        }
        return t
    }

    static func freshVaultID() -> String { "sk" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(14)) }
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
        let url = try RealVaultServer.url(), token = try RealVaultServer.token()
        let keyText = "two clones pass:\(RealVaultServer.freshVaultID())"
        let a = base + "/a", b = base + "/b"
        try Interop.must(f.sgit, ["init", "a", "--vault-key", keyText], cwd: base, home: f.home)
        try Data("from a\n".utf8).write(to: URL(fileURLWithPath: a + "/a.txt"))
        try Interop.must(f.sgit, ["commit", "-m", "a one"], cwd: a, home: f.home)
        try Interop.must(f.sgit, ["push", "--base-url", url, "--token", token], cwd: a, home: f.home)

        // SiteKeep registers clone A: the signers its index lists now are pinned.
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let library = VaultLibrary(registry: VaultRegistry(file: dir + "/vaults.json"), keyStore: InMemoryVaultKeyStore())
        try library.add(name: "a", path: a, keyText: SecretBytes(copying: Array(keyText.utf8)), siteID: "site-a")
        #expect(try library.vault(named: "a").read(path: "a.txt") == Array("from a\n".utf8))

        // Clone B (its own clone branch and signing key), a commit, a push through the server.
        try Interop.must(f.sgit, ["clone", keyText, "b", "--base-url", url, "--token", token], cwd: base, home: f.home)
        try Data("from b\n".utf8).write(to: URL(fileURLWithPath: b + "/b.txt"))
        try Interop.must(f.sgit, ["commit", "-m", "b one"], cwd: b, home: f.home)
        try Interop.must(f.sgit, ["push", "--base-url", url, "--token", token], cwd: b, home: f.home)
        try Interop.must(f.sgit, ["pull", "--base-url", url, "--token", token], cwd: a, home: f.home)
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
