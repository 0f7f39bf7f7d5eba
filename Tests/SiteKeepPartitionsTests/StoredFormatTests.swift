import Foundation
import Testing
import SiteKeepCustody
@testable import SiteKeepPartitions
import SiteKeepVocabulary

/// The stored form of a row, rebuilt here from the storage key alone, independently of
/// `PartitionCore`: the row key is HMAC-SHA256 under the "row-key" subkey of
/// `len(namespace) ‖ namespace ‖ len(name) ‖ name`; the value is XChaCha20-Poly1305
/// `nonce ‖ ciphertext ‖ tag` of `len(name) ‖ name ‖ value` with associated data
/// `"SKP1" ‖ len(site) ‖ site ‖ len(namespace) ‖ namespace ‖ len(row key) ‖ row key`
/// (lengths 4-byte big-endian). Files written before any change to the write path must keep
/// opening, and files written after it must be readable by the code that came before.
@Suite struct StoredFormatTests {
    static func lp(_ bytes: [UInt8]) -> [UInt8] {
        let n = UInt32(bytes.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + bytes
    }

    struct Reference {
        let key: SymmetricKeyHandle
        let rowKey: SymmetricKeyHandle
        let site: String

        init(key: SymmetricKeyHandle, site: String) throws {
            self.key = key
            self.rowKey = try key.deriveSubkey(info: Array("row-key".utf8))
            self.site = site
        }

        func storedKey(_ ns: PartitionNamespace, _ name: String) -> [UInt8] {
            rowKey.authenticationCode(for: lp(Array(ns.rawValue.utf8)) + lp(Array(name.utf8)))
        }

        func associatedData(_ ns: PartitionNamespace, _ storedKey: [UInt8]) -> [UInt8] {
            Array("SKP1".utf8) + lp(Array(site.utf8)) + lp(Array(ns.rawValue.utf8)) + lp(storedKey)
        }

        func seal(_ ns: PartitionNamespace, _ name: String, _ value: [UInt8]) throws -> [UInt8] {
            try key.seal(lp(Array(name.utf8)) + value, authenticating: associatedData(ns, storedKey(ns, name)))
        }

        /// Opens a raw row and returns (name, value).
        func open(_ ns: PartitionNamespace, _ row: RawRow) throws -> (String, [UInt8]) {
            let plain = try key.open(row.sealedValue, authenticating: associatedData(ns, row.storedKey))
            let n = Int(plain[0]) << 24 | Int(plain[1]) << 16 | Int(plain[2]) << 8 | Int(plain[3])
            return (String(decoding: plain[4..<(4 + n)], as: UTF8.self), Array(plain[(4 + n)...]))
        }
    }

    func setUp(_ dir: TempDir) throws -> (Partition, Reference) {
        let keys = MemoryKeyProvider()
        let reg = try makeRegistry(dir, keys: keys)
        let site = try reg.add(displayName: "A", origins: ["https://a.example"], appBound: true)
        let p = try reg.openPartition(forIdentifier: site.id)
        let key = try keys.storageKey(forSite: site.id.string, protection: site.protection)
        return (p, try Reference(key: key, site: site.id.string))
    }

    static let names = ["k", "", "nul\u{0}key", "ünïcødé", "e\u{301}", "é", String(repeating: "n", count: 1024)]
    static let values = ["v", "", "ünïcødé \u{0} value", String(repeating: "x", count: 100_000)]

    @Test func rowsWrittenByThePartitionMatchTheReferenceForm() throws {
        let dir = TempDir()
        let (p, ref) = try setUp(dir)
        // Single writes (size lookups per row) and a bulk batch (sorted, blind writes).
        for (i, name) in Self.names.enumerated() { try p.storage.setItem(name, Self.values[i % Self.values.count]) }
        let bulk = (0..<100).map { ("bulk-\($0)", "value-\($0)") }
        try p.storage.setItems(bulk)
        for (i, name) in Self.names.enumerated() {
            let row = try #require(try p.rawRow(namespace: .storage, name: name))
            #expect(row.storedKey == ref.storedKey(.storage, name))
            let (n, v) = try ref.open(.storage, row)
            #expect(Array(n.utf8) == Array(name.utf8))
            #expect(v == Array(Self.values[i % Self.values.count].utf8))
        }
        for (name, value) in bulk {
            let row = try #require(try p.rawRow(namespace: .storage, name: name))
            #expect(row.storedKey == ref.storedKey(.storage, name))
            let (n, v) = try ref.open(.storage, row)
            #expect(n == name && v == Array(value.utf8))
        }
        // A caller's namespace has the same row format under its own name.
        let notes = PartitionNamespace("notes", code: 9)
        try p.rows(notes).update([("article", Array("{}".utf8))])
        let row = try #require(try p.rawRow(namespace: notes, name: "article"))
        #expect(row.storedKey == ref.storedKey(notes, "article"))
        #expect(try ref.open(notes, row) == ("article", Array("{}".utf8)))
        // Canonically equivalent names are different rows (keys are bytes).
        #expect(try p.storage.getItem("e\u{301}") != nil && p.storage.getItem("é") != nil)
        #expect(try p.rawRow(namespace: .storage, name: "e\u{301}")?.storedKey != p.rawRow(namespace: .storage, name: "é")?.storedKey)
    }

    @Test func rowsSealedByTheReferenceFormOpen() throws {
        let dir = TempDir()
        let (p, ref) = try setUp(dir)
        for (i, name) in Self.names.enumerated() {
            let value = Self.values[i % Self.values.count]
            try p.writeRawRow(namespace: .storage, name: name, sealedValue: try ref.seal(.storage, name, Array(value.utf8)))
        }
        for (i, name) in Self.names.enumerated() {
            #expect(try p.storage.getItem(name) == Self.values[i % Self.values.count])
        }
        // (Swift dictionaries key by canonical equivalence: "e\u{301}" and "é" are one key there.)
        let distinct = Self.names.filter { $0 != "é" }
        let many = try p.storage.getItems(distinct + ["absent"])
        #expect(many.count == distinct.count)
        for (i, name) in Self.names.enumerated() where name != "é" { #expect(many[name] == Self.values[i % Self.values.count]) }
        #expect(try p.storage.keys() == Self.names.sorted())
        try p.verify()

        // A row sealed under another namespace's or another name's associated data does not open.
        try p.writeRawRow(namespace: .storage, name: "k", sealedValue: try ref.seal(PartitionNamespace("reading", code: 3), "k", Array("v".utf8)))
        #expect(throws: PartitionError.damaged(site: p.site.string, reason: .authenticationFailed(namespace: "storage"))) {
            try p.storage.getItem("k")
        }
        // The right row key but a different name inside the plaintext does not open either.
        let k = ref.storedKey(.storage, "k")
        let forged = try ref.key.seal(StoredFormatTests.lp(Array("j".utf8)) + Array("v".utf8), authenticating: ref.associatedData(.storage, k))
        try p.writeRawRow(namespace: .storage, name: "k", sealedValue: forged)
        #expect(throws: PartitionError.damaged(site: p.site.string, reason: .authenticationFailed(namespace: "storage"))) {
            try p.storage.getItem("k")
        }
        #expect(throws: PartitionError.self) { try p.storage.getItems(["k"]) }
        // Truncated, empty and too-short sealed values are damage, never a value.
        for bad in [[], Array(forged.prefix(39)), Array(forged.prefix(40)), Array(forged.prefix(43))] as [[UInt8]] {
            try p.writeRawRow(namespace: .storage, name: "k", sealedValue: bad)
            #expect(throws: PartitionError.damaged(site: p.site.string, reason: .authenticationFailed(namespace: "storage"))) {
                try p.storage.getItem("k")
            }
        }
        // A value that is not UTF-8 is damage for the string API.
        try p.writeRawRow(namespace: .storage, name: "k", sealedValue: try ref.seal(.storage, "k", [0xF0, 0x9F, 0x98]))
        #expect(throws: PartitionError.damaged(site: p.site.string, reason: .authenticationFailed(namespace: "storage"))) {
            try p.storage.getItem("k")
        }
    }
}
