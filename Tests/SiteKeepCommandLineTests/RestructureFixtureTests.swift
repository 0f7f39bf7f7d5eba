import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepVault
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The stored formats survive the issue-13 restructure: a store written by main before it
/// (`Fixtures/stores/before-restructure`, made by `tools/make-fixture-before-restructure` at the
/// commit its README names) opens with this build: the passphrase unlocks it, the partitions
/// give their values back, the team key signs, and the vault's record and objects read.
@Suite struct RestructureFixtureTests {
    static let passphrase = "before restructure pass phrase"

    /// A private copy of the fixture with the modes the store insists on (git keeps none).
    final class Copy: @unchecked Sendable {
        let dir: URL
        var home: String { dir.appendingPathComponent("home").path }
        var vault: String { dir.appendingPathComponent("vault").path }
        var passFile: String { dir.appendingPathComponent("pass.txt").path }

        let source: URL

        init(_ fixture: String = "before-restructure", parts: [String] = ["home", "vault"]) throws {
            source = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/" + fixture)
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-restructure-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            for part in parts {
                try FileManager.default.copyItem(at: source.appendingPathComponent(part), to: dir.appendingPathComponent(part))
            }
            let fm = FileManager.default
            for root in parts.map({ dir.appendingPathComponent($0).path }) {
                chmod(root, 0o700)
                for sub in try fm.subpathsOfDirectory(atPath: root) {
                    var isDir: ObjCBool = false
                    let path = root + "/" + sub
                    _ = fm.fileExists(atPath: path, isDirectory: &isDir)
                    chmod(path, isDir.boolValue ? 0o700 : 0o600)
                }
            }
            try Data((RestructureFixtureTests.passphrase + "\n").utf8).write(to: URL(fileURLWithPath: passFile))
        }
        deinit { try? FileManager.default.removeItem(at: dir) }

        func run(_ args: [String]) async -> (status: Int32, out: String, err: String) {
            await runTool(args + ["--home", home])
        }
    }

    @Test func valuesAndTheTeamKeyReadThroughTheCommandLine() async throws {
        let copy = try Copy()
        let sites = await copy.run(["site", "list", "--json"])
        #expect(sites.status == 0, "\(sites.err)")
        let names = try JSONParser.parse(sites.out).arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(Set(names) == ["Promptugal", "Drafts"])

        let schedule = await copy.run(["site", "storage", "get", "https://promptugal.news", "nr.schedule.v1"])
        #expect(schedule.status == 0, "\(schedule.err)")
        #expect(schedule.out.trimmingCharacters(in: .newlines) == #"{"v":1,"picks":[{"id":"talk-42","at":1796000000000}]}"#)
        let theme = await copy.run(["site", "storage", "get", "https://promptugal.news", "reader.theme"])
        #expect(theme.status == 0 && theme.out.trimmingCharacters(in: .newlines) == "dark", "\(theme.err)")
        // The when-unlocked site's key is under the master key: the passphrase opens it.
        let draft = await copy.run(["site", "storage", "get", "https://drafts.example", "draft.1", "--passphrase-file", copy.passFile])
        #expect(draft.status == 0 && draft.out.trimmingCharacters(in: .newlines) == "a sealed draft", "\(draft.err)")
        let wrong = copy.dir.appendingPathComponent("wrong.txt")
        try Data("not the pass phrase\n".utf8).write(to: wrong)
        let refused = await copy.run(["site", "storage", "get", "https://drafts.example", "draft.1", "--passphrase-file", wrong.path])
        #expect(refused.status != 0 && !refused.out.contains("a sealed draft"))

        let keys = await copy.run(["team", "list", "--json"])
        #expect(keys.status == 0, "\(keys.err)")
        let summit = try #require(try JSONParser.parse(keys.out).arrayValue?.first { $0["id"]?.stringValue == "summit" })
        let publicKey = try Base64.decode(try #require(summit["publicKey"]?.stringValue))
        let message = copy.dir.appendingPathComponent("message.txt")
        try Data("signed after the restructure".utf8).write(to: message)
        let signed = await copy.run(["team", "sign", "summit", "--message-file", message.path, "--passphrase-file", copy.passFile, "--json"])
        #expect(signed.status == 0, "\(signed.err)")
        let signature = try Base64.decode(try #require(try JSONParser.parse(signed.out)["signature"]?.stringValue))
        #expect(SignatureVerifier.isValid(signature, for: Array("signed after the restructure".utf8), publicKey: publicKey, algorithm: .ed25519))

        let log = await copy.run(["log", "verify"])
        #expect(log.status == 0, "the audit chain written before the restructure must verify: \(log.err)")
    }

    /// The vault record (with its custody tag) and the vault's objects, both sgit's and the
    /// commit SiteKeep wrote, read with this build. The record names the folder where the
    /// fixture was made, so the objects are opened at the copy with the record's keys.
    @Test func theVaultRecordAndObjectsRead() throws {
        let copy = try Copy()
        let home = StoreHome(path: copy.home)
        let custodian = try Custodian(home: home, keyring: FileKeyring(home: home))
        defer { custodian.lock() }
        try custodian.unlock(.passphrase(SecretBytes(copying: Array(Self.passphrase.utf8))))
        let registry = VaultRegistry(file: copy.home + "/vaults.json")
        let keyStore = CustodianVaultKeyStore(custodian: custodian, registry: registry)
        let record = try registry.record(named: "notes")
        #expect(record.vaultID == "fixture2026" && !record.readOnly && record.siteID == nil)
        #expect(record.signers?.count == 2)
        let tag = try #require(record.tag)
        #expect(try keyStore.isValidRecordTag(tag, for: record.taggedBytes), "the record's tag, made by the old code, must check")

        let vault = try Vault.open(path: copy.vault, keys: keyStore.keys(forVault: "notes"))
        #expect(try vault.read(path: "notes/sgit.md") == Array("made by sgit\n".utf8))
        #expect(try vault.read(path: "notes/sitekeep.md") == Array("written by sitekeep\n".utf8))
        let report = try vault.verify()
        #expect(report.commits >= 2 && report.bad == 0, "\(report)")
    }

    /// The tabs and reading rows and the export document: a partition rebuilt by the code before
    /// the domain types moved into SiteKeepCore (`Fixtures/stores/before-domain-move`) checks
    /// clean, and `site export` prints what the old code printed, byte for byte (storage keys
    /// that differ only in normal form, a part-read id in NFC, tabs with quotes in a title).
    @Test func tabsReadingAndTheExportDocumentReadAsTheOldCodeWroteThem() async throws {
        let copy = try Copy("before-domain-move", parts: ["home"])
        let check = await copy.run(["site", "check", "https://promptugal.news"])
        #expect(check.status == 0, "\(check.err)")
        let export = await copy.run(["site", "export", "https://promptugal.news"])
        #expect(export.status == 0, "\(export.err)")
        let expected = try String(contentsOf: copy.source.appendingPathComponent("export.json"), encoding: .utf8)
        #expect(Array(export.out.utf8) == Array(expected.utf8), "\(export.out)")
    }
}
