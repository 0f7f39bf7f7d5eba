import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepTestSupport
@testable import SiteKeepVault

/// A vault belongs to one site (threat T41): the bridge's look-ups reach only the calling
/// site's vaults, and a vault of another site is indistinguishable from one that does not exist.
@Suite("Vault ownership", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct OwnershipTests {
    static let siteA = "6f1c1a52-0d35-4a36-9a4e-3a9d2a1b0c01", siteB = "0b9e7f40-2c11-4d7e-8f3a-5c6d7e8f9a02"

    @Test("a site reaches only its own vaults: another site's vault, a CLI-only vault and an unknown name throw the same error")
    func siteSeesOnlyItsVaults() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath, siteID: Self.siteA)
        defer { r.remove() }
        try r.library.add(name: "b-notes", path: r.root, keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)), siteID: Self.siteB)
        try r.library.add(name: "cli-only", path: r.root, keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)))
        for library in [r.library, r.fresh] {
            #expect(try library.vault(named: "notes", forSite: Self.siteA).read(path: "docs/a.txt") == Array("hello again\n".utf8))
            for name in ["b-notes", "cli-only", "no-such-vault"] {
                let e = #expect(throws: VaultError.unknownVault(name: name)) { try library.vault(named: name, forSite: Self.siteA) }
                #expect(e?.description == VaultError.unknownVault(name: name).description)
            }
            #expect(throws: VaultError.unknownVault(name: "notes")) { try library.vault(named: "notes", forSite: Self.siteB) }
            #expect(try library.defaultVaultName(forSite: Self.siteA) == "notes")
            #expect(try library.defaultVaultName(forSite: Self.siteB) == "b-notes")
            #expect(try library.defaultVaultName(forSite: "a-site-with-no-vault") == nil)
            // The CLI reaches every vault, whoever owns it.
            #expect(try library.vault(named: "b-notes").read(path: "docs/a.txt") == Array("hello again\n".utf8))
        }
        // A site with several vaults means the one named `default`.
        try r.library.add(name: "default", path: r.root, keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)), siteID: Self.siteA)
        #expect(try r.library.defaultVaultName(forSite: Self.siteA) == "default")
        // Giving a vault to another site moves it, for a library that already had it open too.
        try r.library.assign(vault: "notes", siteID: Self.siteB)
        #expect(throws: VaultError.unknownVault(name: "notes")) { try r.library.vault(named: "notes", forSite: Self.siteA) }
        #expect(try r.fresh.vault(named: "notes", forSite: Self.siteB).list().count == 8)
        try r.library.assign(vault: "notes", siteID: nil)
        #expect(throws: VaultError.unknownVault(name: "notes")) { try r.fresh.vault(named: "notes", forSite: Self.siteB) }
    }

    @Test("a record edited without the master key (owner moved to another site) is refused, and unreachable from the bridge")
    func editedRecordIsRefused() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath, siteID: Self.siteA)
        defer { r.remove() }
        let file = r.dir + "/vaults.json"
        let text = try String(contentsOfFile: file, encoding: .utf8)
        for (edit, what) in [(text.replacingOccurrences(of: Self.siteA, with: Self.siteB), "owner"),
                             (text.replacingOccurrences(of: #""allow_unsigned": false"#, with: #""allow_unsigned": true"#), "policy")] {
            #expect(edit != text, "\(what)")
            try edit.write(toFile: file, atomically: true, encoding: .utf8)
            for library in [r.fresh, r.library] {
                #expect(throws: VaultError.unknownVault(name: "notes"), "\(what)") { try library.vault(named: "notes", forSite: Self.siteB) }
                #expect(throws: VaultError.recordNotAuthentic(name: "notes"), "\(what)") { try library.open("notes") }
            }
        }
        // Removing the tag makes it a record from before owners: owned by no site.
        let untagged = text.replacingOccurrences(of: #""tag": "[0-9a-f]{64}""#, with: #""removed": "x""#, options: .regularExpression)
        #expect(untagged != text)
        try untagged.write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try r.fresh.records().first?.siteID == nil)
        #expect(throws: VaultError.unknownVault(name: "notes")) { try r.fresh.vault(named: "notes", forSite: Self.siteA) }
    }

    @Test("a vaults.json written by the code before owners stays readable: CLI only, pinned at first use, then assignable")
    func oldRegistryStaysReadable() throws {
        let f = try SgitFixture.get()
        let fixture = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/vaults-before-site-owners.json")
        let old = try [UInt8](Data(contentsOf: fixture))
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/vaults.json"
        try Data(old).write(to: URL(fileURLWithPath: file))
        let registry = VaultRegistry(file: file)
        let records = try registry.records()
        #expect(records.map(\.name) == ["notes", "notes-ro"])
        #expect(records.map(\.readOnly) == [false, true])
        #expect(records.allSatisfy { $0.isLegacy && $0.siteID == nil && $0.signers == nil && !$0.allowUnsigned })
        // Written back unchanged, the file is byte-for-byte what the old code wrote.
        try registry.update(records[0])
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: file))) == old)

        // The same records, pointing at a real vault (the fixture's folder is gone).
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let text = String(decoding: old, as: UTF8.self).replacingOccurrences(of: "/tmp/fx/notes", with: root)
            .replacingOccurrences(of: "fixt0001", with: "itest01")
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let store = InMemoryVaultKeyStore()
        try store.store(f.plainKeys, forVault: "notes")
        try store.store(f.readOnlyKeys, forVault: "notes-ro")
        let library = VaultLibrary(registry: registry, keyStore: store)
        #expect(throws: VaultError.unknownVault(name: "notes")) { try library.vault(named: "notes", forSite: Self.siteA) }
        let opened = try library.open("notes")
        #expect(opened.pinnedAtFirstUse.count == 2 && opened.pinnedAtFirstUse.allSatisfy { $0.source == .firstUse })
        #expect(try opened.vault.read(path: "docs/a.txt") == Array("hello again\n".utf8))
        let migrated = try registry.record(named: "notes")
        #expect(!migrated.isLegacy && migrated.siteID == nil && migrated.signers == opened.pinnedAtFirstUse)
        #expect(try library.open("notes").pinnedAtFirstUse.isEmpty, "pinned once")
        #expect(try registry.record(named: "notes-ro").isLegacy, "the other record is left as it was")
        #expect(throws: VaultError.unknownVault(name: "notes")) { try library.vault(named: "notes", forSite: Self.siteA) }
        try library.assign(vault: "notes", siteID: Self.siteA)
        #expect(try library.vault(named: "notes", forSite: Self.siteA).read(path: "docs/a.txt") == Array("hello again\n".utf8))
        #expect(try library.open("notes-ro").vault.status().isReadOnly)
    }
}
