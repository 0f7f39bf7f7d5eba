#if canImport(Glibc)
import Glibc
#endif
import SiteKeepNames
public import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepSystem

/// The three files a door vault holds (docs/door.md): one slot, the sealed master key and the
/// sealed key set. Ciphertext and one public header; what the vault server stores, under the
/// sgit layer's own encryption.
public struct DoorFiles: Sendable, Equatable {
    /// `door/slot`: the slot header and the key-set key wrapped under the slot's KEK.
    public let slot: [UInt8]
    /// `door/master`: the store's master key sealed under the key-set key.
    public let master: [UInt8]
    /// `door/keyset`: the key set sealed under the key-set key.
    public let keySet: [UInt8]
    /// The vault paths of the three files, in that order.
    public static let paths = ["door/slot", "door/master", "door/keyset"]

    /// The three files as a door vault holds them.
    public init(slot: [UInt8], master: [UInt8], keySet: [UInt8]) {
        self.slot = slot
        self.master = master
        self.keySet = keySet
    }
}

/// What a door holds, opened with its secret: the store id, the record files, and (out of
/// reach outside custody) the master key and the keyring items, for
/// ``Custodian/initialize(from:passphrase:parameters:recoverySlot:)``. Wiped when dropped.
public struct OpenedDoor: ~Copyable {
    /// The store id of the store that wrote the door (the restored store takes it).
    public let storeID: String
    /// The slot's id.
    public let slotID: String
    /// The record files the door carries, by name (``Custodian/doorCarriedFiles``).
    public let files: [String: [UInt8]]
    /// How many keyring items it carries, by kind (`team-key`: 3).
    public let itemCounts: [String: Int]
    let master: SecretBytes
    let items: [DoorKeySet.Item]
}

@available(*, unavailable)
extension OpenedDoor: Sendable {}

extension OpName {
    /// The key set sealed for a door.
    public static let doorSeal = OpName(known: "door.seal")
    /// A store made from a door.
    public static let doorRestore = OpName(known: "door.restore")
}

extension Custodian {
    /// The files of the home a door carries.
    public static var doorCarriedFiles: [String] { DoorKeySet.carriedFiles }

    static let doorMasterAD = "sitekeep.door.master.v1\0"
    static let doorKeySetAD = "sitekeep.door.keyset.v1\0"

    /// Seals this store's key set for a door opened by `secret`, authorised by `current` (a
    /// secret that opens one of this store's slots now, as a slot change is: a door is one more
    /// way to the keys).
    ///
    /// A fresh random key-set key seals the master key and the key set (the keyring items
    /// ``DoorKeySet`` carries, as stored, and the record files of the home); it is wrapped under
    /// the KEK `secret` derives with a fresh salt, bound to the slot header. Nothing here leaves
    /// in the clear. Logged as `door.seal`.
    /// - Throws: the errors of checking `current`; ``CustodyError/io(_:)`` reading a file.
    public func sealDoor(for secret: borrowing DoorSecret, current: consuming UnlockSecret) throws(CustodyError) -> DoorFiles {
        let master = try authorizedMaster(current, op: .doorSeal)
        let set = try currentDoorKeySet()
        let header = DoorSlotHeader(kind: secret.kind, salt: SecureRandom.bytes(count: 16), storeID: storeID,
                                    slotID: Self.newSlotID(), created: configuration.wallClockSeconds())
        var plain = set.encoded()
        defer { SecureMemory.zero(&plain) }
        let files = try cr { () throws(CryptoError) -> DoorFiles in
            let keySetKey = try SecretBytes(randomCount: 32)
            let kek = try secret.kek(salt: header.salt)
            let slot = header.encoded() + (try XChaCha20Poly1305.sealSecret(keySetKey, using: kek, authenticating: header.associatedData()))
            let sealedMaster = try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
                try XChaCha20Poly1305.sealSecret(m, using: keySetKey, authenticating: Array((Self.doorMasterAD + storeID).utf8))
            }
            let sealedSet = try XChaCha20Poly1305.seal(plain, using: keySetKey, authenticating: Array((Self.doorKeySetAD + storeID).utf8))
            return DoorFiles(slot: slot, master: sealedMaster, keySet: sealedSet)
        }
        try log(KeyUseContext(op: .doorSeal), key: "door/\(header.slotID)", result: "ok")
        return files
    }

    /// What a door would carry now: the carried keyring items (sorted) and the carried files.
    func currentDoorKeySet() throws(CustodyError) -> DoorKeySet {
        var set = DoorKeySet()
        for kind in DoorKeySet.carriedKinds {
            let all = try kr { () throws(KeyringError) in try keyring.loadAll(store: storeID, kind: kind.rawValue) }
            for (id, blob) in all.sorted(by: { $0.id.id < $1.id.id }) { set.items.append(DoorKeySet.Item(kind: kind, id: id.id, blob: blob)) }
        }
        for name in DoorKeySet.carriedFiles {
            if let bytes = try Files.readIfExists(directory.file(name), limit: 64 << 20) { set.files.append((name, bytes)) }
        }
        return set
    }

    /// SHA-256 (hex) of the key set a door would carry now (its plaintext form): `door status`
    /// compares it with the one pushed. Works while locked (the items are read as stored).
    public func doorKeySetDigest() throws(CustodyError) -> String {
        var plain = try currentDoorKeySet().encoded()
        defer { SecureMemory.zero(&plain) }
        return Hex.encode(SHA256.hash(plain))
    }

    /// Opens a door's files with its secret: the slot's key-set key, then the master key and the
    /// key set, each bound to the store id the slot header names. Needs no store.
    /// - Throws: ``CustodyError/unlockFailed`` when the secret does not open the slot (a wrong
    ///   secret, or another door's slot); ``CustodyError/damagedItem(_:)`` when a file is not a
    ///   door's or does not open under the key-set key.
    public static func openDoor(_ files: DoorFiles, with secret: borrowing DoorSecret) throws(CustodyError) -> OpenedDoor {
        guard files.slot.count == DoorSlotHeader.slotFileByteCount else { throw .damagedItem("door slot: wrong length \(files.slot.count)") }
        let header = try DoorSlotHeader.parse(files.slot)
        guard header.kind == secret.kind else {
            throw .invalidArgument("this door opens with a \(header.kind == .recovery ? "recovery code (--recovery-file)" : "PRF output (--prf-file)"), not a \(secret.kind == .recovery ? "recovery code" : "PRF output")")
        }
        let keySetKey: SecretBytes
        do {
            let kek = try secret.kek(salt: header.salt)
            keySetKey = try XChaCha20Poly1305.openSecret(Array(files.slot[DoorSlotHeader.byteCount...]), using: kek, authenticating: header.associatedData())
        } catch {
            throw .unlockFailed
        }
        let damaged = CustodyError.damagedItem("the door's master key or key set does not open under its slot's key (a damaged or mixed-up door)")
        guard let master = try? XChaCha20Poly1305.openSecret(files.master, using: keySetKey, authenticating: Array((doorMasterAD + header.storeID).utf8)) else {
            throw damaged
        }
        guard var plain = try? XChaCha20Poly1305.open(files.keySet, using: keySetKey, authenticating: Array((doorKeySetAD + header.storeID).utf8)) else {
            throw damaged
        }
        defer { SecureMemory.zero(&plain) }
        guard master.count == 32 else { throw .damagedItem("the door's master key has the wrong length") }
        let set = try DoorKeySet.parse(plain)
        var files: [String: [UInt8]] = [:]
        for f in set.files { files[f.name] = f.bytes }
        var counts: [String: Int] = [:]
        for i in set.items { counts[i.kind.rawValue, default: 0] += 1 }
        return OpenedDoor(storeID: header.storeID, slotID: header.slotID, files: files, itemCounts: counts, master: master, items: set.items)
    }

    /// Makes this new store from an opened door: the door's master key behind a new passphrase
    /// slot (and, with `recoverySlot`, a recovery slot for the same code), the door's keyring
    /// items as they were, and a new device key for this machine. The home's store id must be
    /// the door's (the keyring items are bound to it). The record files are the caller's to write.
    /// - Throws: ``CustodyError/alreadyInitialized``; ``CustodyError/invalidArgument(_:)`` when
    ///   the store id differs.
    public func initialize(from door: consuming OpenedDoor, passphrase: consuming SecretBytes, parameters: Argon2id.Parameters? = nil,
                           recoverySlot: consuming DoorSecret?) throws(CustodyError) -> InitializationResult {
        guard try !isInitialized() else { throw .alreadyInitialized }
        guard door.storeID == storeID else {
            throw .invalidArgument("this home's store id is \(storeID), the door's is \(door.storeID): restore into a new, empty home")
        }
        unlink(marker.path)
        let params = try calibrated(parameters)
        let master = LockedSecret(try cr { () throws(CryptoError) -> SecretBytes in try door.master.duplicate() })
        let pSlot = try writeSlot(kind: .passphrase, label: "passphrase", master: master,
                                  fields: NewSlotFields(argon2: params), kekInput: passphrase)
        var rSlot: SlotInfo? = nil
        switch consume recoverySlot {
        case .some(let code):
            if code.kind == .recovery {
                let input = try cr { () throws(CryptoError) -> SecretBytes in try code.bytes.duplicate() }
                rSlot = try writeSlot(kind: .recovery, label: "recovery", master: master, kekInput: input)
            }
        case .none:
            break
        }
        for i in door.items {
            try kr { () throws(KeyringError) in
                try keyring.store(i.blob, for: item(i.kind, i.id), label: "SiteKeep \(i.kind.rawValue) \(i.id) (from the door)")
            }
        }
        let dup = try cr { () throws(CryptoError) -> SecretBytes in
            try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in try m.duplicate() }
        }
        becomeUnlocked(dup)
        let device = try createDeviceKey()
        try log(KeyUseContext(op: .doorRestore), key: "door/\(door.slotID)", result: "ok")
        try backoff.save(.zero)
        try auditLog.anchorCurrentHead()
        try marker.write()
        return InitializationResult(passphraseSlot: pSlot, recoverySlot: rSlot, recoveryCode: nil, deviceKey: device)
    }
}
