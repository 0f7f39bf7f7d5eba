import SiteKeepNames

/// The plaintext of a door's key set (docs/door.md, "Key set"): the store's keyring items a
/// door carries, as stored (wrapped under keys derived from the master key, except the
/// `after-login` site storage keys, which the keyring alone protects) and the store's record
/// files. Sealed as a whole under the key-set key; never written anywhere in this form.
///
/// `"SKKS"` ‖ version (1) ‖ entry count (u32 BE) ‖ entries, each: type (1: keyring item,
/// 2: file) ‖ name length (u16 BE) ‖ name (the item kind, or the file name) ‖ id length
/// (u16 BE) ‖ id (the item id; empty for a file) ‖ length (u32 BE) ‖ bytes.
struct DoorKeySet {
    struct Item { var kind: SiteKeepNames.ItemKind; var id: String; var blob: [UInt8] }

    static let magic = Array("SKKS".utf8)
    static let version: UInt8 = 1
    /// The keyring item kinds a door carries: not the slots (each machine has its own) and not
    /// the device key (each machine enrols its own).
    static let carriedKinds: [SiteKeepNames.ItemKind] = [.teamKey, .vaultKey, .storageKey, .storageKeyWhenUnlocked, .agentKey]
    /// The files of the store's home a door carries (what a restore may write, and nothing else).
    static let carriedFiles = ["sites.json", "vaults.json", "vault-remotes.json", "daemon.json", "append-lanes.json"]

    var items: [Item] = []
    var files: [(name: String, bytes: [UInt8])] = []

    func encoded() -> [UInt8] {
        var out = Self.magic
        out.append(Self.version)
        func u16(_ n: Int) { out.append(UInt8(n >> 8 & 0xff)); out.append(UInt8(n & 0xff)) }
        func u32(_ n: Int) { for s in [24, 16, 8, 0] { out.append(UInt8(n >> s & 0xff)) } }
        u32(items.count + files.count)
        for i in items {
            out.append(1)
            let k = Array(i.kind.rawValue.utf8), d = Array(i.id.utf8)
            u16(k.count); out += k; u16(d.count); out += d; u32(i.blob.count); out += i.blob
        }
        for f in files {
            out.append(2)
            let n = Array(f.name.utf8)
            u16(n.count); out += n; u16(0); u32(f.bytes.count); out += f.bytes
        }
        return out
    }

    /// Parses a key set strictly: known types, carried kinds and files only, bounded lengths.
    /// - Throws: ``CustodyError/damagedItem(_:)``.
    static func parse(_ bytes: [UInt8]) throws(CustodyError) -> DoorKeySet {
        var i = 0
        func take(_ n: Int) throws(CustodyError) -> ArraySlice<UInt8> {
            guard n >= 0, bytes.count - i >= n else { throw .damagedItem("door key set: truncated") }
            defer { i += n }
            return bytes[i..<(i + n)]
        }
        func int(_ n: Int) throws(CustodyError) -> Int { try take(n).reduce(0) { $0 << 8 | Int($1) } }
        guard Array(try take(4)) == magic else { throw .damagedItem("door key set: not a SiteKeep key set") }
        guard try int(1) == Int(version) else { throw .damagedItem("door key set: unsupported version; upgrade SiteKeep") }
        let count = try int(4)
        guard count <= 100_000 else { throw .damagedItem("door key set: too many entries") }
        var set = DoorKeySet()
        for _ in 0..<count {
            let type = try int(1)
            let name = String(decoding: try take(try int(2)), as: UTF8.self)
            let id = String(decoding: try take(try int(2)), as: UTF8.self)
            let body = Array(try take(try int(4)))
            switch type {
            case 1:
                guard let kind = SiteKeepNames.ItemKind(rawValue: name), carriedKinds.contains(kind) else {
                    throw .damagedItem("door key set: an item of kind '\(name.prefix(40))', which a door does not carry")
                }
                try Custodian.validateItemName(id, what: "door key set item")
                set.items.append(Item(kind: kind, id: id, blob: body))
            case 2:
                guard carriedFiles.contains(name), id.isEmpty else {
                    throw .damagedItem("door key set: a file '\(name.prefix(40))', which a door does not carry")
                }
                set.files.append((name, body))
            default:
                throw .damagedItem("door key set: unknown entry type \(type)")
            }
        }
        guard i == bytes.count else { throw .damagedItem("door key set: bytes after the last entry") }
        return set
    }
}
