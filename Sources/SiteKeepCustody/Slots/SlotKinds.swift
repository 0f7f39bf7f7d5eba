public import SiteKeepCrypto

/// The registry of slot kinds: the list the unlock paths, the slot listing, the command line
/// and the control wire consult, instead of switching on the kinds.
///
/// ``standard`` holds SiteKeep's kinds; its order is the order the command line names them in
/// (`KIND must be passphrase, prf, fido2, recovery or tpm2`) and the precedence when a command
/// line gives the inputs of several. A custodian uses the registry of its configuration
/// (``CustodianConfiguration/slotKinds``); a test adds a kind of its own with
/// ``init(adding:)``.
public struct SlotKinds: Sendable {
    /// Every kind, in order.
    package let all: [any SlotKind.Type]

    /// SiteKeep's kinds. A new kind is one new file under `Slots/` and one more entry here.
    public static let standard = SlotKinds(checked: [
        PassphraseSlot.self, PRFSlot.self, FIDO2Slot.self, RecoverySlot.self, TPM2Slot.self,
    ])

    init(checked kinds: [any SlotKind.Type]) { all = kinds }

    /// The standard kinds and `extra` after them.
    /// - Throws: ``CustodyError/invalidArgument(_:)`` when two kinds share a name, or two
    ///   stored kinds a header code.
    package init(adding extra: [any SlotKind.Type]) throws(CustodyError) {
        let kinds = Self.standard.all + extra
        var names: Set<String> = [], codes: [UInt8: String] = [:]
        for kind in kinds {
            guard names.insert(kind.name).inserted else { throw .invalidArgument("two slot kinds are named '\(kind.name)'") }
            if let other = codes[kind.stored.code], other != kind.stored.name {
                throw .invalidArgument("slot kinds '\(other)' and '\(kind.stored.name)' share the header code \(kind.stored.code)")
            }
            codes[kind.stored.code] = kind.stored.name
        }
        all = kinds
    }

    /// The names of every kind, in order.
    public var names: [String] { all.map { $0.name } }

    /// The kind named `name` (`slot add KIND`, the control wire's unlock method).
    package func named(_ name: String) -> (any SlotKind.Type)? {
        all.first { $0.name == name }
    }

    /// The stored kind a header's kind byte names, when a kind of this registry stores it.
    public func stored(code: UInt8) -> StoredSlotKind? {
        all.first { $0.stored.code == code }?.stored
    }

    /// The kind whose own slots are of `stored` kind (not one that opens another kind's
    /// slots): the one that describes them.
    package func owner(of stored: StoredSlotKind) -> (any SlotKind.Type)? {
        all.first { $0.stored == stored && $0.name == stored.name }
    }

    /// The kinds whose unlock input the command line picks with an option or flag.
    package func kind(triggeredBy option: String) -> (any SlotKind.Type)? {
        all.first { $0.unlockInput.trigger == option }
    }

    // MARK: The control wire

    /// The unlock secret the control wire carries for `method` (a kind's name): a secret kind's
    /// bytes as they are; a device kind's as one byte, 0 (no PIN) or 1 (the PIN follows), then
    /// the PIN, since the wire carries no empty secret.
    /// - Returns: nil when no kind has that name.
    /// - Throws: ``CustodyError/invalidArgument(_:)`` for a device frame that is not one;
    ///   ``CustodyError/crypto(_:)`` when guarded memory cannot be had.
    public func unlockSecret(method: String, wireBytes: UnsafeRawBufferPointer) throws(CustodyError) -> UnlockSecret? {
        guard let kind = named(method) else { return nil }
        switch kind.unlockInput {
        case .secret:
            return UnlockSecret(kind, secret: try cryptoCall { () throws(CryptoError) in try SecretBytes(copying: wireBytes) })
        case .device:
            let flag = wireBytes.first
            guard flag == 0 || (flag == 1 && wireBytes.count > 1) else { throw .invalidArgument("bad \(method) unlock request") }
            guard flag == 1 else { return UnlockSecret(kind, secret: nil) }
            let pin = try cryptoCall { () throws(CryptoError) in try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: wireBytes[1...])) }
            return UnlockSecret(kind, secret: pin)
        }
    }
}

/// An unlock secret as the control wire carries it: the method (its kind's name) and the bytes.
public struct UnlockWireForm: ~Copyable {
    /// The kind's name.
    public let method: String
    /// The bytes to send (see ``SlotKinds/unlockSecret(method:wireBytes:)``).
    public let bytes: SecretBytes
}

@available(*, unavailable)
extension UnlockWireForm: Sendable {}

extension UnlockSecret {
    /// This secret as the control wire carries it (``SlotKinds/unlockSecret(method:wireBytes:)``
    /// reads it back).
    /// - Throws: ``CustodyError/invalidArgument(_:)`` for a secret kind given no bytes;
    ///   ``CustodyError/crypto(_:)`` when guarded memory cannot be had.
    public consuming func wireForm() throws(CustodyError) -> UnlockWireForm {
        let kind = self.kind
        let secret = take()
        switch kind.unlockInput {
        case .secret:
            switch consume secret {
            case .some(let bytes): return UnlockWireForm(method: kind.name, bytes: bytes)
            case .none: throw .invalidArgument("no \(kind.name) was given")
            }
        case .device:
            switch consume secret {
            case .some(let pin):
                let framed = try cryptoCall { () throws(CryptoError) -> SecretBytes in
                    try pin.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                        try SecretBytes(count: raw.count + 1) { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                            out[0] = 1
                            UnsafeMutableRawBufferPointer(rebasing: out[1...]).copyMemory(from: raw)
                        }
                    }
                }
                return UnlockWireForm(method: kind.name, bytes: framed)
            case .none:
                return UnlockWireForm(method: kind.name, bytes: try cryptoCall { () throws(CryptoError) in try SecretBytes(copying: [0]) })
            }
        }
    }
}
