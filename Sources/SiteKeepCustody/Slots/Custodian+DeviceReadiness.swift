/// Whether a device unlock can be tried now, asked before any PIN or touch (issue 47): a user
/// told to touch a security key that is not there, or to type the PIN of a slot the store does
/// not have, waits for nothing.
extension Custodian {
    /// Checks that an unlock by `method` (a slot kind's name, as the control wire names it:
    /// `fido2`, `tpm2`) can be tried in this process now: the store has a slot the kind opens,
    /// and the kind's device answers (``SlotKind/checkDevice(_:)``: the security key this
    /// custodian would ask is there, the TPM its connection names is reached). Nothing is asked
    /// of the user and no key is touched. Kinds with no device pass.
    ///
    /// The daemon asks this of its own custodian (its environment and settings name its
    /// devices), a command with no daemon of its own.
    /// - Throws: ``CustodyError/noDeviceSlot(kind:flag:)``, ``CustodyError/fido2(_:)`` (no key
    ///   plugged in or named, several, libfido2 missing), ``CustodyError/tpm(_:)`` (no TPM, no
    ///   access, not reached), ``CustodyError/invalidArgument(_:)`` for an unknown method.
    public func checkUnlockDevice(method: String) throws(CustodyError) {
        guard let kind = configuration.slotKinds.named(method) else {
            throw .invalidArgument("no unlock method '\(method.prefix(40))'")
        }
        let input = kind.unlockInput
        guard case .device(let flag, _, _, _) = input else { return }
        guard try loadSlots().contains(where: { $0.header?.kind == kind.stored }) else {
            throw .noDeviceSlot(kind: kind.name, flag: flag)
        }
        try kind.checkDevice(SlotOpener(custodian: self))
    }
}
