import Foundation
import Testing
import SiteKeepCrypto
@testable import SiteKeepVault

/// A pack zip as the test wants it (stored members unless told otherwise), for the parser's
/// edge cases; the real packs sgit writes are read in SiteKeepVaultRemotesTests/PackVaultTests.
struct ZipBuilder {
    struct Member { var name: String; var data: [UInt8]; var method = 0; var flags = 0; var declaredSize: Int? }
    var members: [Member] = []

    static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8((v >> 8) & 0xff)] }
    static func le32(_ v: Int) -> [UInt8] { le16(v & 0xffff) + le16((v >> 16) & 0xffff) }

    func bytes() -> [UInt8] {
        var out: [UInt8] = [], central: [UInt8] = []
        for m in members {
            let offset = out.count, name = Array(m.name.utf8), size = m.declaredSize ?? m.data.count
            out += Self.le32(0x0403_4b50) + Self.le16(20) + Self.le16(m.flags) + Self.le16(m.method) + Self.le16(0) + Self.le16(0x21)
                + Self.le32(0) + Self.le32(size) + Self.le32(size) + Self.le16(name.count) + Self.le16(0) + name + m.data
            central += Self.le32(0x0201_4b50) + Self.le16(20) + Self.le16(20) + Self.le16(m.flags) + Self.le16(m.method) + Self.le16(0)
                + Self.le16(0x21) + Self.le32(0) + Self.le32(size) + Self.le32(size) + Self.le16(name.count) + Self.le16(0)
                + Self.le16(0) + Self.le16(0) + Self.le16(0) + Self.le32(0) + Self.le32(offset) + name
        }
        let cdOffset = out.count
        out += central
        out += Self.le32(0x0605_4b50) + Self.le16(0) + Self.le16(0) + Self.le16(members.count) + Self.le16(members.count)
            + Self.le32(central.count) + Self.le32(cdOffset) + Self.le16(0)
        return out
    }
}

@Suite("Pack zips (feature packs): what sgit writes is read, anything else refused whole")
struct PackArchiveTests {
    func object(_ text: String) -> (ObjectID, [UInt8]) {
        let bytes = Array(text.utf8)
        return (ObjectIDs.of(bytes, width: 12), bytes)
    }

    @Test("stored bare/data members come back with their bytes, in order")
    func readsStoredMembers() throws {
        let a = object("first object"), b = object("second object, longer")
        let zip = ZipBuilder(members: [.init(name: a.0.fileID, data: a.1), .init(name: b.0.fileID, data: b.1)]).bytes()
        let got = try PackArchive.members(zip, object: "test pack")
        #expect(got.map(\.0) == [a.0, b.0])
        #expect(got.map { Array($0.1) } == [a.1, b.1])
        #expect(try PackArchive.members(ZipBuilder().bytes(), object: "empty").isEmpty)
    }

    @Test("deflated, encrypted, foreign, duplicate, overrunning, truncated and non-zip packs are refused")
    func refusesWhatSgitNeverWrites() throws {
        let a = object("an object"), b = object("another")
        let good = ZipBuilder.Member(name: a.0.fileID, data: a.1)
        var cases: [(String, [UInt8])] = [
            ("deflated", ZipBuilder(members: [good, .init(name: b.0.fileID, data: b.1, method: 8)]).bytes()),
            ("encrypted", ZipBuilder(members: [.init(name: a.0.fileID, data: a.1, flags: 1)]).bytes()),
            ("not an object", ZipBuilder(members: [good, .init(name: "bare/refs/ref-pid-muw-0123456789ab", data: b.1)]).bytes()),
            ("escape", ZipBuilder(members: [.init(name: "../../local/vault_key", data: b.1)]).bytes()),
            ("upper case id", ZipBuilder(members: [.init(name: a.0.fileID.uppercased(), data: a.1)]).bytes()),
            ("duplicate", ZipBuilder(members: [good, good]).bytes()),
            ("overrun", ZipBuilder(members: [.init(name: a.0.fileID, data: a.1, declaredSize: 1 << 20)]).bytes()),
            ("not a zip", Array("PK but not really a zip file at all, just text".utf8)),
            ("empty", []),
        ]
        let whole = ZipBuilder(members: [good]).bytes()
        cases.append(("truncated", Array(whole.dropLast(3))))
        cases.append(("cut in the middle", Array(whole.prefix(20)) + Array(whole.suffix(22))))
        for (what, zip) in cases {
            #expect(throws: VaultError.self, "\(what) is refused") { try PackArchive.members(zip, object: "pack \(what)") }
        }
        // The message names the pack and says why.
        let e = #expect(throws: VaultError.self) { try PackArchive.members(cases[0].1, object: "remote bare/packs/commits/x.zip") }
        let text = e.map { "\($0)" } ?? ""
        #expect(text.contains("remote bare/packs/commits/x.zip") && text.contains("compressed"), "\(text)")
    }

    @Test("pack names: the commit and snapshot folders, epoch, commit id and size; nothing else")
    func packNames() throws {
        let p = try #require(PackFile.parse("bare/packs/commits/1796131310__obj-cas-imm-0a0a38fc313d__2471.zip"))
        #expect(p.folder == .commits && p.epoch == 1_796_131_310 && p.commit.rawValue == "obj-cas-imm-0a0a38fc313d" && p.size == 2471)
        #expect(p.name == "1796131310__obj-cas-imm-0a0a38fc313d__2471.zip")
        #expect(PackFile.parse("bare/packs/snapshots/1796131299__obj-cas-imm-0d4eeca0bd35__8255.zip")?.folder == .snapshots)
        for bad in ["bare/packs/archive/1796131310__obj-cas-imm-0a0a38fc313d__2471.zip",
                    "bare/packs/commits/179613131__obj-cas-imm-0a0a38fc313d__2471.zip",
                    "bare/packs/commits/1796131310__obj-cas-imm-0a0a38fc31__2471.zip",
                    "bare/packs/commits/1796131310__obj-cas-imm-0a0a38fc313d__.zip",
                    "bare/packs/commits/1796131310__obj-cas-imm-0a0a38fc313d__2471",
                    "bare/packs/commits/../1796131310__obj-cas-imm-0a0a38fc313d__2471.zip",
                    "bare/packs/indexes/commits/1796131310__obj-cas-imm-0a0a38fc313d__17537.zip"] {
            #expect(PackFile.parse(bad) == nil, "\(bad)")
        }
    }
}
