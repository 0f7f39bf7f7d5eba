import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
@testable import SiteKeepVault

/// Strict parsing of trees and the index, on data encrypted under a real vault's read key.
@Suite("Strict trees and index", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct StrictnessTests {
    func enc(_ text: String, _ keys: SgitKeys) throws -> String {
        let p = Array(text.utf8)
        return Base64.encode(try Envelope.sealV1(p, key: keys.readKey, iv: Envelope.deterministicIV(for: p, key: keys.readKey)))
    }

    func entry(_ keys: SgitKeys, name: String, blob: JSONValue = "obj-cas-imm-1facd3c9372f", large: JSONValue = false,
               size: String = "6") throws -> JSONValue {
        .object([
            JSONMember(key: "blob_id", value: blob), JSONMember(key: "tree_id", value: .null),
            JSONMember(key: "name_enc", value: .string(try enc(name, keys))),
            JSONMember(key: "size_enc", value: .string(try enc(size, keys))),
            JSONMember(key: "content_hash_enc", value: .string(try enc("5891b5b522d5", keys))),
            JSONMember(key: "content_type_enc", value: .string(try enc("text/plain", keys))),
            JSONMember(key: "large", value: large),
        ])
    }

    func tree(_ entries: [JSONValue]) -> [UInt8] {
        JSONSerializer.bytes(.object([JSONMember(key: "schema", value: "tree_v1"), JSONMember(key: "entries", value: .array(entries))]), style: .python)
    }

    @Test("tree entries: wrong types, unsafe names, duplicate names, bad ids are refused; NFC/NFD are distinct")
    func trees() throws {
        let f = try SgitFixture.get()
        let v = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        let id = try #require(ObjectID("obj-cas-imm-000000000000"))
        let k = f.plainKeys
        let ok = try v.parseTree(tree([try entry(k, name: SgitFixture.nfc), try entry(k, name: SgitFixture.nfd)]), id: id)
        #expect(ok.entries.count == 2)
        #expect(ok.entry(named: Array(SgitFixture.nfd.utf8))?.name.utf8.elementsEqual(SgitFixture.nfd.utf8) == true)
        let bad: [(String, [JSONValue])] = [
            ("large 0", [try entry(k, name: "a", large: 0)]),
            ("blob id number", [try entry(k, name: "a", blob: 5)]),
            ("blob id traversal", [try entry(k, name: "a", blob: "obj-cas-imm-../../../x")]),
            ("slash in name", [try entry(k, name: "a/b")]),
            ("dot-dot name", [try entry(k, name: "..")]),
            ("duplicate", [try entry(k, name: "a"), try entry(k, name: "a")]),
            ("size not decimal", [try entry(k, name: "a", size: "6.0")]),
        ]
        for (what, entries) in bad {
            #expect(throws: VaultError.self, "\(what)") { try v.parseTree(tree(entries), id: id) }
        }
        // entries not an array; schema wrong
        #expect(throws: VaultError.self) { try v.parseTree(Array(#"{"schema": "tree_v1", "entries": {}}"#.utf8), id: id) }
        #expect(throws: VaultError.self) { try v.parseTree(Array(#"{"schema": "commit_v1", "entries": []}"#.utf8), id: id) }
        // name_enc under another key: named as a decryption failure of that tree's field.
        let other = try SgitFixture.keys("2479e29c0460eb7891581ead6ae29903592ab0684c911e98a535235cf3da0912:abcd1234")
        let e = #expect(throws: VaultError.self) { try v.parseTree(tree([try entry(other, name: "a")]), id: id) }
        #expect(e == .decryptionFailed(object: "tree bare/data/obj-cas-imm-000000000000 field name_enc"))
    }

    func rewriteIndex(_ root: String, _ keys: SgitKeys, _ change: (String) -> String) throws {
        let file = root + "/.sg_vault/bare/indexes/" + keys.branchIndexFileID
        let stored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: file)))
        let plain = String(decoding: try Envelope.openV1(stored, key: keys.readKey), as: UTF8.self)
        let changed = change(plain)
        #expect(changed != plain)
        try Data(try Envelope.sealV1(Array(changed.utf8), key: keys.readKey, iv: SecureRandom.bytes(count: 12))).write(to: URL(fileURLWithPath: file))
    }

    @Test("index: a newer min_client is refused; a wrong JSON type refuses the index; unknown fields are ignored")
    func index() throws {
        let f = try SgitFixture.get()
        let root = try f.copy(f.plainPath)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try rewriteIndex(root, f.plainKeys) { $0.replacingOccurrences(of: #""min_client": null"#, with: #""min_client": "0.99.0", "future": {"x": 1}"#) }
        let e = #expect(throws: VaultError.self) { try Vault.open(path: root, keys: f.plainKeys) }
        #expect(e?.description.contains("0.99.0") == true)
        try rewriteIndex(root, f.plainKeys) { $0.replacingOccurrences(of: #""min_client": "0.99.0""#, with: #""min_client": "0.26.0""#) }
        #expect(try Vault.open(path: root, keys: f.plainKeys).status().format == 1, "an equal min_client and unknown fields are fine")
        try rewriteIndex(root, f.plainKeys) { $0.replacingOccurrences(of: #""format": null"#, with: #""format": "2""#) }
        let e2 = #expect(throws: VaultError.self) { try Vault.open(path: root, keys: f.plainKeys) }
        guard case .malformed(let object, let reason)? = e2 else { Issue.record("got \(String(describing: e2))"); return }
        #expect(object.hasPrefix("bare/indexes/idx-pid-muw-") && reason.contains("format"))
    }
}

@Suite("Robustness", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct RobustnessTests {
    @Test("mutated commit and tree plaintexts never crash the parsers")
    func mutations() throws {
        let f = try SgitFixture.get()
        let v = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        let head = try #require(try v.log(limit: 1).first)
        let commitPlain = try v.decryptObject(try v.readObject(head.id, limit: 1 << 20), id: head.id, kind: "commit", inflateLimit: 1 << 20)
        let treePlain = try v.decryptObject(try v.readObject(head.treeID, limit: 1 << 20), id: head.treeID, kind: "tree", inflateLimit: 1 << 20)
        var rng = SystemRandomNumberGenerator()
        var refused = 0
        for i in 0..<1500 {
            var bytes = i % 2 == 0 ? commitPlain : treePlain
            for _ in 0..<(1 + Int.random(in: 0..<4, using: &rng)) {
                let at = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
                case 1: bytes.remove(at: at)
                default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: at)
                }
            }
            do {
                if i % 2 == 0 { _ = try Commit.parse(bytes, id: head.id) } else { _ = try v.parseTree(bytes, id: head.treeID) }
            } catch { refused += 1 }
        }
        #expect(refused > 1000)
    }

    @Test("concurrent reads from one open vault are byte-identical")
    func concurrentReads() async throws {
        let f = try SgitFixture.get()
        let v = try Vault.open(path: f.plainPath, keys: f.plainKeys)
        // Keyed by UTF-8 bytes: a String-keyed dictionary would merge the NFC and NFD names.
        let expected = Dictionary(uniqueKeysWithValues: f.plainView.items.map { (Array($0.path.utf8), $0.bytes) })
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for t in 0..<8 {
                group.addTask {
                    var ok = true
                    for (i, item) in f.plainView.items.enumerated() where (i + t) % 2 == 0 {
                        let bytes = try v.read(path: item.path)
                        ok = ok && bytes == expected[Array(item.path.utf8)]
                    }
                    return ok
                }
            }
            for try await ok in group { #expect(ok) }
        }
    }
}
