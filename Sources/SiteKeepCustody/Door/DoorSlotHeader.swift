import SiteKeepCrypto
import SiteKeepSystem

/// A door slot's header: everything about the slot but the wrapped key-set key, in one fixed
/// 78-byte form (docs/door.md, "Door slot"), whose exact bytes are the associated data of the
/// wrap, so a changed kind, salt, store or slot id fails to unwrap. Nothing in it is secret.
///
/// `"SKDS"` ‖ version (1) ‖ kind (1: recovery, 2: prf) ‖ salt (16) ‖ store id (32 lowercase
/// hex, ASCII) ‖ slot id (16 lowercase hex, ASCII) ‖ created (seconds since the epoch, i64 BE).
struct DoorSlotHeader: Sendable, Equatable {
    static let magic = Array("SKDS".utf8)
    static let version: UInt8 = 1
    static let byteCount = 4 + 1 + 1 + 16 + 32 + 16 + 8
    /// The prefix of the wrap's associated data.
    static let adPrefix = Array("sitekeep.door.slot.v1\0".utf8)
    /// The length of a slot file: the header and the wrapped 32-byte key-set key.
    static let slotFileByteCount = byteCount + XChaCha20Poly1305.overheadByteCount + 32

    let kind: DoorSlotKind
    let salt: [UInt8]
    let storeID: String
    let slotID: String
    let created: Int64

    func encoded() -> [UInt8] {
        var out = Self.magic
        out.append(Self.version)
        out.append(kind.rawValue)
        out += salt
        out += Array(storeID.utf8)
        out += Array(slotID.utf8)
        let c = UInt64(bitPattern: created)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((c >> UInt64(shift)) & 0xff)) }
        return out
    }

    /// Parses the header at the start of a slot file, strictly.
    /// - Throws: ``CustodyError/damagedItem(_:)`` naming what is wrong.
    static func parse(_ bytes: [UInt8]) throws(CustodyError) -> DoorSlotHeader {
        guard bytes.count >= byteCount, Array(bytes.prefix(4)) == magic else {
            throw .damagedItem("door slot: not a SiteKeep door slot")
        }
        guard bytes[4] == version else { throw .damagedItem("door slot: version \(bytes[4]) is not supported; upgrade SiteKeep") }
        guard let kind = DoorSlotKind(rawValue: bytes[5]) else { throw .damagedItem("door slot: unknown kind \(bytes[5])") }
        let salt = Array(bytes[6..<22])
        func hexText(_ range: Range<Int>) throws(CustodyError) -> String {
            let part = Array(bytes[range])
            guard part.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw .damagedItem("door slot: an id is not lowercase hex")
            }
            return String(decoding: part, as: UTF8.self)
        }
        let storeID = try hexText(22..<54)
        let slotID = try hexText(54..<70)
        let created = Int64(bitPattern: bytes[70..<78].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        return DoorSlotHeader(kind: kind, salt: salt, storeID: storeID, slotID: slotID, created: created)
    }

    func associatedData() -> [UInt8] { Self.adPrefix + encoded() }
}
