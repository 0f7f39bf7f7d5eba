import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepSystem
@testable import SiteKeepVault
import SiteKeepTestSupport

func temporaryDirectory() throws -> String {
    let p = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-vt-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
    return p
}

@Suite("Vault library (the CLI's calls) and bridge replies", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct LibraryTests {
    @Test("add derives once and verifies the key; list, ls, cat, log, status, remove")
    func lifecycle() throws {
        let f = try SgitFixture.get()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = InMemoryVaultKeyStore()
        let lib = VaultLibrary(registry: VaultRegistry(file: dir + "/vaults.json"), keyStore: store)
        let status = try lib.add(name: "notes", path: f.plainPath + "/", keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)))
        #expect(status.vaultID == "itest01")
        let added = try #require(try lib.records().first)
        #expect(try lib.records().count == 1)
        #expect(added.name == "notes" && added.path == f.plainPath && added.vaultID == "itest01" && !added.readOnly)
        #expect(added.siteID == nil && !added.allowUnsigned && added.tag?.count == 32)
        #expect(added.signers?.count == 2 && added.signers?.allSatisfy { $0.source == .vaultAdd } == true, "the index's named and clone keys")
        var st = stat()
        #expect(stat(dir + "/vaults.json", &st) == 0 && st.st_mode & 0o777 == 0o600)
        let registryText = try String(contentsOfFile: dir + "/vaults.json", encoding: .utf8)
        #expect(!registryText.contains("interop pass"), "the registry holds no key")

        // A second library over the same registry and key store opens without deriving.
        let lib2 = VaultLibrary(registry: VaultRegistry(file: dir + "/vaults.json"), keyStore: store)
        let v = try lib2.vault(named: "notes")
        #expect(try v.read(path: "docs/a.txt") == Array("hello again\n".utf8))
        #expect(try v.list(path: "docs").count == 3)
        #expect(try v.log().count == 3)

        #expect(throws: VaultError.vaultExists(name: "notes")) {
            try lib.add(name: "notes", path: f.plainPath, keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)))
        }
        #expect(throws: VaultError.invalidVaultName("../x")) {
            try lib.add(name: "../x", path: f.plainPath, keyText: SecretBytes(copying: Array(SgitFixture.plainKeyText.utf8)))
        }
        // A wrong key is refused at add, and nothing is recorded.
        let wrong = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff:itest01"
        #expect(throws: VaultError.wrongKey(vaultID: "itest01")) {
            try lib.add(name: "bad", path: f.plainPath, keyText: SecretBytes(copying: Array(wrong.utf8)))
        }
        #expect(throws: VaultError.unknownVault(name: "bad")) { try store.keys(forVault: "bad") }
        #expect(try lib.records().map(\.name) == ["notes"])

        try lib.remove(name: "notes")
        #expect(try lib.records().isEmpty)
        #expect(throws: VaultError.unknownVault(name: "notes")) { try store.keys(forVault: "notes") }
        #expect(throws: VaultError.unknownVault(name: "notes")) { try lib.remove(name: "notes") }
    }
}

@Suite("Vault registry without sgit")
struct RegistryTests {
    @Test("records round-trip, atomic 0600 file, names validated, duplicates refused")
    func registry() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reg = VaultRegistry(file: dir + "/r.json")
        #expect(try reg.records().isEmpty)
        try reg.add(VaultRecord(name: "a", path: "/x/\u{e9}", vaultID: "abcd1234", readOnly: true))
        try reg.add(VaultRecord(name: "b.2_x-y", path: "/y", vaultID: "efgh5678", readOnly: false))
        #expect(try reg.records().map(\.name) == ["a", "b.2_x-y"])
        #expect(try reg.record(named: "a").path == "/x/\u{e9}")
        #expect(try reg.record(named: "a").readOnly)
        #expect(throws: VaultError.vaultExists(name: "a")) { try reg.add(VaultRecord(name: "a", path: "/z", vaultID: "abcd1234", readOnly: false)) }
        for bad in ["", ".hidden", "a/b", "a b", String(repeating: "x", count: 65)] {
            #expect(throws: VaultError.invalidVaultName(bad)) { try reg.add(VaultRecord(name: bad, path: "/z", vaultID: "abcd1234", readOnly: false)) }
        }
        try reg.remove(named: "a")
        #expect(try reg.records().map(\.name) == ["b.2_x-y"])
        #expect(!FileManager.default.fileExists(atPath: dir + "/r.json.tmp-\(getpid())"))
        try Data("{\"vaults\": [{\"name\": 5}]}".utf8).write(to: URL(fileURLWithPath: dir + "/r.json"))
        #expect(throws: VaultError.self) { try reg.records() }
    }

    /// With the daemon's watch on its folder, the registry is parsed once and served with no
    /// look at the file, yet every change is seen at the next call, even one made within the
    /// stamps' settle margin (no waiting here at all) or in place with the same size.
    @Test func withAWatchEveryChangeIsSeenAtTheNextCall() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/r.json"
        let counter = VaultCounter()
        let reg = VaultRegistry(file: file, observer: counter)
        reg.follow(try #require(ChangeWatch(folders: [dir])))
        #expect(try reg.records().isEmpty)
        try VaultRegistry(file: file).add(VaultRecord(name: "a", path: "/x", vaultID: "abcd1234", readOnly: true))
        #expect(try reg.records().map(\.name) == ["a"], "created by another process")
        let before = counter.now.registryParses
        for _ in 0..<5 { #expect(try reg.records().map(\.name) == ["a"]) }
        #expect(counter.now.registryParses == before, "served by the watch, unsettled as the file is")
        try VaultRegistry(file: file).add(VaultRecord(name: "b", path: "/y", vaultID: "efgh5678", readOnly: false))
        #expect(try reg.records().map(\.name) == ["a", "b"])
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "abcd1234", with: "abcd9999")
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()
        #expect(try reg.record(named: "a").vaultID == "abcd9999", "an edit in place of the same size")
        try FileManager.default.removeItem(atPath: file)
        #expect(try reg.records().isEmpty)
    }

    /// The daemon's bridge reads the registry on every vault call: a settled file is parsed
    /// once, and any change (another process's registry adding a vault, an edit in place of
    /// the same size) is seen at the next call.
    @Test("a settled registry file is parsed once; every change is seen at the next call")
    func keptWhileUnchanged() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/r.json"
        let counter = VaultCounter()
        let reg = VaultRegistry(file: file, observer: counter)
        try reg.add(VaultRecord(name: "a", path: "/x", vaultID: "abcd1234", readOnly: true))
        usleep(80_000)   // past the settle margin
        let before = counter.now.registryParses
        for _ in 0..<5 { #expect(try reg.records().map(\.name) == ["a"]) }
        #expect(counter.now.registryParses == before + 1, "parsed once while unchanged")
        // Another process's registry (a memo of its own) adds a vault: seen at once.
        try VaultRegistry(file: file).add(VaultRecord(name: "b", path: "/y", vaultID: "efgh5678", readOnly: false))
        #expect(try reg.records().map(\.name) == ["a", "b"])
        // An edit in place, the same size, once the kept copy is settled: seen.
        usleep(80_000)
        _ = try reg.records()
        let kept = counter.now.registryParses
        _ = try reg.records()
        #expect(counter.now.registryParses == kept, "kept again once settled")
        let text = try String(contentsOfFile: file, encoding: .utf8).replacingOccurrences(of: "abcd1234", with: "abcd9999")
        let handle = try #require(FileHandle(forUpdatingAtPath: file))
        try handle.write(contentsOf: Data(text.utf8))
        try handle.close()
        #expect(try reg.record(named: "a").vaultID == "abcd9999")
        // Removed: no records, and a new file is read again.
        try FileManager.default.removeItem(atPath: file)
        #expect(try reg.records().isEmpty)
    }

    @Test("not a vault, and an empty vault folder")
    func notAVault() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let keys = try SgitFixture.keys("2479e29c0460eb7891581ead6ae29903592ab0684c911e98a535235cf3da0912:abcd1234")
        #expect(throws: VaultError.notAVault(path: dir)) { try Vault.open(path: dir, keys: keys) }
        try FileManager.default.createDirectory(atPath: dir + "/.sg_vault/bare/indexes", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/.sg_vault/bare/refs", withIntermediateDirectories: true)
        let v = try Vault.open(path: dir, keys: keys)
        #expect(try v.list() == [])
        #expect(try v.status().headCommit == nil)
        #expect(try v.log() == [])
        #expect(throws: VaultError.notFound(path: "a")) { try v.read(path: "a") }
        #expect(try v.verify().isClean)
    }
}
