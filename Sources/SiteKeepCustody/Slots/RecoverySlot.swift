public import SiteKeepCrypto

/// Recovery slots: a random 128-bit recovery code (``RecoveryCode``), shown once when the slot
/// is made, through HKDF-SHA256. Its checksum catches a mistyped code before any slot is tried.
public enum RecoverySlot: SlotKind {
    public static let name = "recovery"
    public static let stored = StoredSlotKind(name: "recovery", code: 3, kdf: .hkdfSHA256(info: "sitekeep.slot.recovery.v1"))
    public static let unlockInput = SlotUnlockInput.secret(option: "--recovery-file", prompt: nil)
    public static let underBackoff = true

    /// The code's 16 bytes, from the text as typed (case, `-` and spaces do not matter).
    /// - Throws: ``CustodyError/recoveryCodeMistyped(_:)`` when its length or checksum is wrong.
    package static func prepare(_ secret: consuming SecretBytes?) throws(CustodyError) -> SecretBytes? {
        switch consume secret {
        case .some(let typed): return try RecoveryCode.parse(typed)
        case .none: throw .recoveryCodeMistyped("a recovery code has \(RecoveryCode.symbolCount) characters, this has 0")
        }
    }
}

extension StoredSlotKind {
    /// A recovery slot (``RecoverySlot``).
    public static let recovery = RecoverySlot.stored
}

extension UnlockSecret {
    /// A recovery code as typed (case, `-` and spaces do not matter).
    public static func recoveryCode(_ typed: consuming SecretBytes) -> UnlockSecret {
        UnlockSecret(RecoverySlot.self, secret: typed)
    }

    /// A recovery code typed as text.
    public static func recoveryCode(_ text: String) throws(CustodyError) -> UnlockSecret {
        do { return .recoveryCode(try SecretBytes(copying: Array(text.utf8))) } catch { throw .crypto(error) }
    }
}

extension Custodian {
    /// Adds a recovery slot, authorised by `current`; its code is returned once and stored nowhere.
    public func addRecoverySlot(label: String = "recovery", current: consuming UnlockSecret) throws(CustodyError) -> NewRecoverySlot {
        let master = try authorizedMaster(current, op: .slotAdd)
        let generated = try RecoveryCode.generate()
        let code = generated.code
        let info = try writeSlot(kind: .recovery, label: label, master: master, kekInput: generated.secret)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return NewRecoverySlot(slot: info, code: code)
    }
}
