import Foundation
import Synchronization
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepCustody

/// libFuzzer entry point: slot headers, the keyring items outside input can rewrite. The input
/// is a slot header; it is stored as the one slot item of a store (behind the `u16` length,
/// followed by a 72-byte wrapped master key) in an in-memory keyring, and the custodian reads
/// it back through its public API (`listSlots`, `damagedSlotIDs`). Whatever the bytes: no
/// crash, and a slot that is listed never carries Argon2id parameters past the ceiling.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSlotHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size <= 8192 else { return 0 }
    let header = Array(UnsafeBufferPointer(start: data, count: size))
    let blob = [UInt8(truncatingIfNeeded: header.count >> 8), UInt8(truncatingIfNeeded: header.count)] + header + [UInt8](repeating: 0x5a, count: 72)
    let h = Harness.shared
    h.keyring.items.withLock { $0 = [KeyringItemID(store: h.custodian.storeID, kind: Custodian.ItemKind.slot, id: "0011223344556677"): blob] }
    let slots: [SlotInfo]
    let damaged: [String]
    do {
        slots = try h.custodian.listSlots()
        damaged = try h.custodian.damagedSlotIDs()
    } catch {
        trap("reading a damaged slot failed instead of reporting it damaged")
    }
    guard slots.count + damaged.count == 1 else { trap("a slot item was neither listed nor damaged") }
    for s in slots {
        if let p = s.argon2Parameters {
            guard p.iterations >= 2, p.iterations <= 10, p.memoryKiB >= 19 * 1024, p.memoryKiB <= 1 << 20,
                  p.iterations * p.memoryKiB <= 4 << 20 else { trap("Argon2id parameters outside the floor or ceiling listed") }
            guard s.kind == .passphrase else { trap("Argon2id on a non-passphrase slot") }
        } else if s.kind == .passphrase {
            trap("a passphrase slot without Argon2id")
        }
        guard s.label.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else { trap("control characters in a label") }
    }
    return 0
}

/// One custodian over an in-memory keyring, in a private temporary home.
final class Harness: Sendable {
    static let shared = Harness()
    let keyring = MemoryKeyring()
    let custodian: Custodian
    private init() {
        let home = FileManager.default.temporaryDirectory.path + "/sitekeep-fuzz-slot-\(getpid())"
        do {
            custodian = try Custodian(home: StoreHome(path: home), keyring: keyring,
                                      configuration: CustodianConfiguration(autoLockTimer: false))
        } catch {
            fatalError("FuzzSlotHeader: cannot open a custodian in \(home): \(error)")
        }
        atexit { _ = try? FileManager.default.removeItem(atPath: FileManager.default.temporaryDirectory.path + "/sitekeep-fuzz-slot-\(getpid())") }
    }
}

/// A keyring in memory.
final class MemoryKeyring: KeyringBackend {
    let items = Mutex<[KeyringItemID: [UInt8]]>([:])
    var kind: KeyringKind { .file }
    var location: String { "memory" }
    func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) { items.withLock { $0[item] = blob } }
    func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        guard let b = items.withLock({ $0[item] }) else { throw .itemMissing(item) }
        return b
    }
    func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool { items.withLock { $0.removeValue(forKey: item) != nil } }
    func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        items.withLock { $0.keys.filter { $0.store == store && (kind == nil || $0.kind == kind) } }
    }
}

/// A broken invariant: stop so libFuzzer records the input.
func trap(_ what: StaticString) -> Never {
    fatalError("FuzzSlotHeader invariant broken: \(what)")
}
