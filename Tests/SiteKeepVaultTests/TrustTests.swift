import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault
import SiteKeepTestSupport

/// A registered copy of a fixture vault: its library (keys in memory, registry in a temp dir).
struct RegisteredVault {
    let root: String
    let dir: String
    let library: VaultLibrary
    let name = "notes"

    init(_ fixturePath: String, keyText: String = SgitFixture.plainKeyText, siteID: String? = nil, allowUnsigned: Bool = false) throws {
        let f = try SgitFixture.get()
        root = try f.copy(fixturePath)
        dir = try temporaryDirectory()
        library = VaultLibrary(registry: VaultRegistry(file: dir + "/vaults.json"), keyStore: InMemoryVaultKeyStore())
        try library.add(name: name, path: root, keyText: SecretBytes(copying: Array(keyText.utf8)), siteID: siteID, allowUnsigned: allowUnsigned)
    }

    /// A second library over the same registry and key store (a fresh process: no cache).
    var fresh: VaultLibrary { VaultLibrary(registry: library.registry, keyStore: library.keyStore) }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// The trust rule (threat T15): with only the read key and write access to the folder, nobody
/// can make SiteKeep serve a HEAD of their own.
@Suite("Signer trust: which HEADs are served", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct TrustTests {
    let older = Array("hello\n".utf8), current = Array("hello again\n".utf8)

    @Test("an unsigned HEAD written with the read key is refused by cat, status and verify; allowUnsigned serves it")
    func unsignedHeadIsRefused() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath)
        defer { r.remove() }
        let forged = try Forgery.forgeUnsignedHead(root: r.root, keys: f.plainKeys)
        for library in [r.library, r.fresh] {
            let v = try library.vault(named: r.name)
            let e = #expect(throws: VaultError.unverifiedCommit(commit: forged.fileID, trust: .unsigned, vault: "notes", requiredByVault: false)) {
                try v.read(path: "docs/a.txt")
            }
            #expect(e?.description.contains("sitekeep vault policy notes --allow-unsigned") == true)
            #expect(throws: VaultError.self) { try v.list() }
            #expect(throws: VaultError.self) { try v.log() }
            let s = try v.status()
            #expect(!s.headServed && s.headTrust == .unsigned && s.headMessage == nil)
            let report = try v.verify()
            #expect(!report.isClean && report.problems.map(\.object) == [forged.fileID])
        }
        try r.library.setAllowUnsigned(true, vault: r.name)
        let v = try r.fresh.vault(named: r.name)
        #expect(try v.read(path: "docs/a.txt") == older, "served: the store allows unsigned commits")
        #expect(try v.status().allowUnsigned)
        let report = try v.verify()
        #expect(report.isClean && report.allowed == 1 && report.trusted == 3)
    }

    @Test("a signer added with the read key only (key file + index entry) is refused as a new signer, naming commit and key")
    func forgedSignerIsRefused() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath)
        defer { r.remove() }
        let forged = try Forgery.forgeSignedHead(root: r.root, keys: f.plainKeys)
        // The forgery is a well-formed, correctly signed commit: a reader that trusts any listed
        // signer would serve it.
        #expect(try Vault.open(path: r.root, keys: f.plainKeys).read(path: "docs/a.txt") == older)
        for library in [r.library, r.fresh] {
            let v = try library.vault(named: r.name)
            let expected = VaultError.unverifiedCommit(commit: forged.commit.fileID, trust: .newSigner(keyID: forged.keyID, fingerprint: forged.fingerprint),
                                                       vault: "notes", requiredByVault: false)
            let e = #expect(throws: expected) { try v.read(path: "docs/a.txt") }
            #expect(e?.description.contains(forged.commit.fileID) == true && e?.description.contains(forged.keyID) == true)
            #expect(e?.description.contains("sitekeep vault trust notes \(forged.keyID)") == true)
            let s = try v.status()
            #expect(!s.headServed)
            #expect(s.signers.first { $0.keyID == forged.keyID }?.state == .new, "status reports the new signer")
            #expect(s.signers.filter { $0.state == .pinned }.count == 2)
            let report = try v.verify()
            #expect(!report.isClean && report.newSigners == 1 && report.problems.map(\.object) == [forged.commit.fileID])
        }
        // Even allowUnsigned refuses nothing more than it says: it serves the new signer.
        try r.library.setAllowUnsigned(true, vault: r.name)
        #expect(try r.fresh.vault(named: r.name).read(path: "docs/a.txt") == older)
    }

    @Test("a signer not in the branch index is refused, even with no pins at all")
    func signerNotInIndexIsRefused() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let forged = try Forgery.forgeSignedHead(root: root, keys: f.plainKeys, listInIndex: false)
        #expect(throws: VaultError.unverifiedCommit(commit: forged.commit.fileID, trust: .notInIndex(keyID: forged.keyID), vault: nil, requiredByVault: false)) {
            try Vault.open(path: root, keys: f.plainKeys)
        }
    }

    @Test("a pinned key id whose key file was replaced is refused as key-changed, and cannot be trusted")
    func replacedKeyFileIsRefused() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath)
        defer { r.remove() }
        let cloneKey = try #require(try r.library.vault(named: r.name).status().signers.first { $0.branches.contains { $0.hasPrefix("local ") } })
        let forged = try Forgery.forgeSignedHead(root: r.root, keys: f.plainKeys, reusing: cloneKey.keyID)
        let v = try r.fresh.vault(named: r.name)
        let pinned = try #require(cloneKey.fingerprint)
        #expect(throws: VaultError.unverifiedCommit(commit: forged.commit.fileID, trust: .keyChanged(keyID: cloneKey.keyID, fingerprint: forged.fingerprint, pinned: pinned),
                                                    vault: "notes", requiredByVault: false)) {
            try v.read(path: "docs/a.txt")
        }
        #expect(try v.status().signers.first { $0.keyID == cloneKey.keyID }?.state == .keyChanged)
        #expect(throws: VaultError.pinConflict(vault: "notes", keyID: cloneKey.keyID, pinned: pinned, found: forged.fingerprint)) {
            try r.fresh.trust(vault: r.name, keyID: cloneKey.keyID)
        }
        try r.library.setAllowUnsigned(true, vault: r.name)
        #expect(throws: VaultError.self, "allowUnsigned still refuses a replaced key") { try r.fresh.vault(named: r.name).read(path: "docs/a.txt") }
    }

    @Test("pins live in the store: trusting a signer serves its HEAD; vault trust refuses a key the index does not list")
    func trustingASigner() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath)
        defer { r.remove() }
        let forged = try Forgery.forgeSignedHead(root: r.root, keys: f.plainKeys)
        #expect(throws: VaultError.signerNotListed(vault: "notes", keyID: "key-rnd-imm-00000000deadbeef")) {
            try r.library.trust(vault: r.name, keyID: "key-rnd-imm-00000000deadbeef")
        }
        let before = try folderSnapshot(r.root)
        let (pin, already) = try r.library.trust(vault: r.name, keyID: forged.keyID)
        #expect(try folderSnapshot(r.root) == before, "the pin is kept in the store, nothing is written into the vault folder")
        let registryText = try String(contentsOfFile: r.dir + "/vaults.json", encoding: .utf8)
        #expect(registryText.contains(forged.keyID) && registryText.contains(forged.fingerprint))
        #expect(!already && pin.fingerprint == forged.fingerprint && pin.source == .user)
        #expect(try r.library.trust(vault: r.name, keyID: forged.keyID).alreadyPinned)
        #expect(try r.fresh.vault(named: r.name).read(path: "docs/a.txt") == older)
        #expect(try r.library.vault(named: r.name).verify().isClean)
    }

    @Test("signatures-required (and its signed-since anchor) is honoured even where unsigned commits are allowed")
    func signaturesRequiredIsHonoured() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath, allowUnsigned: true)
        defer { r.remove() }
        let first = try r.library.vault(named: r.name).log()[1]
        // The vault requires signatures since its first content commit.
        try Forgery.setFeatures(["signatures-required", "signed-since-" + String(first.id.hex.prefix(12))], root: r.root, keys: f.plainKeys)
        let forged = try Forgery.forgeUnsignedHead(root: r.root, keys: f.plainKeys)
        let e = #expect(throws: VaultError.unverifiedCommit(commit: forged.fileID, trust: .unsigned, vault: "notes", requiredByVault: true)) {
            try r.fresh.vault(named: r.name).read(path: "docs/a.txt")
        }
        #expect(e?.description.contains("signatures-required") == true)
        #expect(try r.fresh.vault(named: r.name).status().signaturesRequired)
        let report = try r.fresh.vault(named: r.name).verify()
        #expect(!report.isClean && report.problems.map(\.object) == [forged.fileID])
        // Without the vault's policy the same HEAD is served (the store allows unsigned commits).
        try Forgery.setFeatures([], root: r.root, keys: f.plainKeys)
        #expect(try r.fresh.vault(named: r.name).read(path: "docs/a.txt") == older)
    }

    @Test("verify exempts commits up to the signed-since anchor, never HEAD")
    func anchorExemptsOldHistoryOnly() throws {
        let f = try SgitFixture.get()
        let r = try RegisteredVault(f.plainPath)
        defer { r.remove() }
        let v = try r.library.vault(named: r.name)
        let history = try v.log()
        // Rebuild history as a vault that turned the policy on late: an unsigned commit under the
        // anchor, then a signed HEAD by the clone's real key on top.
        let headBefore = history[0]
        let unsigned = try Forgery.store(Forgery.unsignedCommit(tree: headBefore.treeID, parents: [headBefore.id], branchID: headBefore.branchID,
                                                                timestampMs: headBefore.timestampMs + 1), root: r.root, keys: f.plainKeys)
        let head = try v.resolveHead()
        let keyID = try #require(head.branch?.publicKeyID)
        let pem = try [UInt8](Data(contentsOf: URL(fileURLWithPath: r.root + "/.sg_vault/local/\(keyID).pem")))
        let key = try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: pem))
        let signed = try Forgery.store(Forgery.signedCommit(tree: headBefore.treeID, parents: [unsigned], branchID: try #require(head.branch?.branchID),
                                                            keyID: keyID, message: "signed again", timestampMs: headBefore.timestampMs + 2,
                                                            key: key, keys: f.plainKeys), root: r.root, keys: f.plainKeys)
        try Forgery.moveRef(head.refFile, to: signed, root: r.root, keys: f.plainKeys)
        #expect(try r.fresh.vault(named: r.name).read(path: "docs/a.txt") == current, "HEAD is signed by a pinned signer")
        let without = try r.fresh.vault(named: r.name).verify()
        #expect(!without.isClean && without.problems.map(\.object) == [unsigned.fileID], "without the vault's policy the unsigned commit counts")
        try Forgery.setFeatures(["signatures-required", "signed-since-" + String(unsigned.hex.prefix(24))], root: r.root, keys: f.plainKeys)
        let with = try r.fresh.vault(named: r.name).verify()
        #expect(with.isClean && with.beforeAnchor == 1, "\(with.problems)")
        // An anchor naming HEAD itself exempts nothing for HEAD.
        let forgedHead = try Forgery.forgeUnsignedHead(root: r.root, keys: f.plainKeys)
        try Forgery.setFeatures(["signatures-required", "signed-since-" + String(forgedHead.hex.prefix(12))], root: r.root, keys: f.plainKeys)
        #expect(throws: VaultError.self) { try r.fresh.vault(named: r.name).read(path: "docs/a.txt") }
        #expect(try r.fresh.vault(named: r.name).verify().problems.map(\.object).contains(forgedHead.fileID))
    }

    @Test("min_client above 0.26.0, a feature SiteKeep does not implement and a --pack-store clone are refused, naming what is asked and what is implemented")
    func formatGate() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Forgery.setFeatures([], minClient: "0.27.0", root: root, keys: f.plainKeys)
        let e = #expect(throws: VaultError.self) { try Vault.open(path: root, keys: f.plainKeys) }
        guard case .unsupportedVault(let reason)? = e else { Issue.record("got \(String(describing: e))"); return }
        #expect(reason.contains("\"0.27.0\"") && reason.contains("0.26.0"))
        try Forgery.setFeatures(["ids-128", "packs", "blob-deflate", "pack-indexes", "signatures-required", "signed-since-0123456789abcdef01234567"],
                                minClient: "0.26.0", root: root, keys: f.plainKeys)
        #expect(try Vault.open(path: root, keys: f.plainKeys).status().signaturesRequired, "every 0.26.0 feature SiteKeep implements is accepted")
        try Forgery.setFeatures(["ids-128", "zstd-blobs"], root: root, keys: f.plainKeys)
        let e2 = #expect(throws: VaultError.self) { try Vault.open(path: root, keys: f.plainKeys) }
        #expect(e2?.description.contains("\"zstd-blobs\"") == true && e2?.description.contains("blob-deflate: sgz1 blobs") == true)
        try Forgery.setFeatures(["signed-since-0"], root: root, keys: f.plainKeys)
        #expect(throws: VaultError.self, "a malformed anchor is a feature SiteKeep does not know") { try Vault.open(path: root, keys: f.plainKeys) }
        try Forgery.setFeatures([], root: root, keys: f.plainKeys)
        let config = root + "/.sg_vault/local/config.json"
        let text = try String(contentsOfFile: config, encoding: .utf8)
        try text.replacingOccurrences(of: #""pack_store": false"#, with: #""pack_store": true"#).write(toFile: config, atomically: true, encoding: .utf8)
        let e3 = #expect(throws: VaultError.self) { try Vault.open(path: root, keys: f.plainKeys) }
        #expect(e3?.description.contains("--pack-store") == true)
    }
}

/// Every file under `root/.sg_vault` with its bytes.
func folderSnapshot(_ root: String) throws -> [String: Data] {
    var out: [String: Data] = [:]
    let base = root + "/.sg_vault"
    for case let rel as String in FileManager.default.enumerator(atPath: base) ?? FileManager.DirectoryEnumerator() {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: base + "/" + rel, isDirectory: &isDir), !isDir.boolValue {
            out[rel] = try Data(contentsOf: URL(fileURLWithPath: base + "/" + rel))
        }
    }
    return out
}
