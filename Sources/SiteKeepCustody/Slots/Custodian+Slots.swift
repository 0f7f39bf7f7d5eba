import SiteKeepNames
public import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepSystem
import SiteKeepTPM

// The generic slot path: what every kind of ``SlotKind`` shares. Writing a slot, reading the
// slots, the one place that chooses candidate slots, the one place that unwraps the master key
// from a slot, and the unlock that consults the kind an ``UnlockSecret`` names. Nothing here
// switches on the kinds: each kind's own file (``PassphraseSlot``, ``PRFSlot``, ...) says
// what differs.

/// The kind-specific fields of a new slot's header (what its kind's ``StoredSlotKind`` allows).
struct NewSlotFields {
    var argon2: Argon2id.Parameters? = nil
    var relyingPartyID: String? = nil
    var credentialID: String? = nil
    var prfEvalInput: String? = nil
    var tpmObject: SealedObject? = nil
    var tpmPIN: Bool = false
    var tpmPCRs: PCRSelection = .none
    var fido2PIN: Bool? = nil
}

extension Custodian {
    /// The key-encryption key of a slot, from its header and the KEK input of its kind: the
    /// KDF the header's kind names, under the header's salt.
    static func deriveKEK(header: SlotHeader, input: borrowing SecretBytes) throws(CryptoError) -> SecretBytes {
        switch header.kind.kdf {
        case .argon2id:
            guard let params = header.argon2 else { throw .parametersOutOfRange("no Argon2id parameters") }
            return try Argon2id.deriveKey(password: input, salt: header.salt, parameters: params)
        case .hkdfSHA256(let info):
            return try HKDF.deriveKey(inputKeyMaterial: input, salt: header.salt, info: Array(info.utf8))
        }
    }

    static func newSlotID() -> String { Hex.encode(SecureRandom.bytes(count: 8)) }

    /// Writes a new slot of `kind` wrapping `master` under the KEK `kekInput` gives, and
    /// returns its public facts. Only the fields `kind` carries are written.
    func writeSlot(kind: StoredSlotKind, label: String, master: LockedSecret, salt: [UInt8]? = nil,
                   fields: NewSlotFields = NewSlotFields(), kekInput: consuming SecretBytes) throws(CustodyError) -> SlotInfo {
        guard label.utf8.count <= 64, !label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .invalidArgument("a slot label is at most 64 printable bytes")
        }
        let carries = kind.requiredFields.union(kind.optionalFields)
        let header = SlotHeader(kind: kind, slotID: Self.newSlotID(), storeID: storeID,
                                created: configuration.wallClockSeconds(), label: label,
                                argon2: kind.kdf == .argon2id ? fields.argon2 : nil,
                                salt: salt ?? SecureRandom.bytes(count: SlotHeader.saltByteCount),
                                relyingPartyID: carries.contains(.relyingPartyID) ? fields.relyingPartyID : nil,
                                credentialID: carries.contains(.credentialID) ? fields.credentialID : nil,
                                prfEvalInput: carries.contains(.prfEvalInput) ? fields.prfEvalInput : nil,
                                tpmObject: carries.contains(.tpmPublic) ? fields.tpmObject : nil,
                                tpmPIN: fields.tpmPIN, tpmPCRs: fields.tpmPCRs,
                                fido2PIN: carries.contains(.fido2PIN) ? fields.fido2PIN : nil)
        let headerBytes = header.encoded()
        // Round-trip through the strict parser, so nothing is written that unlock would refuse.
        guard (try? SlotHeader.parse(headerBytes, kinds: configuration.slotKinds)) == header else {
            throw .invalidArgument("slot header fields out of range")
        }
        let wrapped = try cr { () throws(CryptoError) -> [UInt8] in
            let kek = try Self.deriveKEK(header: header, input: kekInput)
            return try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
                try XChaCha20Poly1305.sealSecret(m, using: kek, authenticating: header.associatedData())
            }
        }
        let blob = SlotBlob(headerBytes: headerBytes, wrappedMaster: wrapped).encoded()
        try kr { () throws(KeyringError) in
            try keyring.store(blob, for: item(.slot, header.slotID), label: "SiteKeep unlock slot (\(kind.name))")
        }
        return header.slotInfo(kinds: configuration.slotKinds)
    }

    /// Adds a slot of `kind` whose KEK comes from `kekInput`, authorised by `current` (a secret
    /// that opens a slot now): the generic way to make a slot of a kind whose header has no
    /// fields of its own (SiteKeep's kinds have their own `add…Slot`, which end here too).
    /// - Throws: ``CustodyError/invalidArgument(_:)`` for a kind this custodian's
    ///   ``CustodianConfiguration/slotKinds`` does not list, or one that opens another kind's
    ///   slots; the errors of checking `current`.
    package func addSlot(_ kind: any SlotKind.Type, kekInput: consuming SecretBytes, label: String,
                        current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        guard configuration.slotKinds.owner(of: kind.stored) != nil, kind.stored.name == kind.name else {
            throw .invalidArgument("this store does not know the slot kind '\(kind.name)'")
        }
        let master = try authorizedMaster(current, op: .slotAdd)
        let info = try writeSlot(kind: kind.stored, label: label, master: master, kekInput: kekInput)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    struct LoadedSlot {
        var header: SlotHeader?   // nil: damaged
        var blob: SlotBlob?
        var id: String
    }

    func loadSlots() throws(CustodyError) -> [LoadedSlot] {
        // One round trip for every slot (the Secret Service loads them with the search).
        let items = try kr { () throws(KeyringError) in try keyring.loadAll(store: storeID, kind: ItemKind.slot) }
        let kinds = configuration.slotKinds
        var out: [LoadedSlot] = []
        for (id, bytes) in items.sorted(by: { $0.id.id < $1.id.id }) {
            let blob = try? SlotBlob.parse(bytes)
            let header = blob.flatMap { try? SlotHeader.parse($0.headerBytes, kinds: kinds) }
            out.append(LoadedSlot(header: header, blob: blob, id: id.id))
        }
        return out
    }

    /// The public facts of every readable slot (works while locked).
    public func listSlots() throws(CustodyError) -> [SlotInfo] {
        let kinds = configuration.slotKinds
        return try loadSlots().compactMap { $0.header?.slotInfo(kinds: kinds) }.sorted { ($0.created, $0.id) < ($1.created, $1.id) }
    }

    /// Ids of slot items that cannot be parsed (damaged, or written by a newer SiteKeep).
    public func damagedSlotIDs() throws(CustodyError) -> [String] {
        try loadSlots().filter { $0.header == nil }.map(\.id)
    }

    /// Opens a slot `kind` opens (any, or `slotID`) with `input` (what ``SlotKind/prepare(_:)``
    /// made of the secret): the candidates are chosen here, the kind tries them.
    func openSlot(_ kind: any SlotKind.Type, slotID: String?, input: borrowing SecretBytes?) throws(CustodyError) -> OpenedSlot {
        // Damaged slots stay candidates of a guessable secret: they fail exactly as a wrong one does.
        let candidates = try candidateSlots(of: kind.stored, slotID: slotID, includingDamaged: kind.underBackoff).compactMap { slot in
            slot.header.flatMap { header in
                slot.blob.flatMap { blob in
                    header.storeID == storeID && header.slotID == slot.id ? SlotCandidate(header: header, blob: blob) : nil
                }
            }
        }
        return try kind.open(candidates, with: input, opener: SlotOpener(custodian: self))
    }

    /// The slots of `kind` (and, with `includingDamaged`, those whose header does not parse)
    /// among `slotID` (every slot when nil).
    /// - Throws: ``CustodyError/slotNotFound(_:)``, ``CustodyError/notInitialized`` (no slot),
    ///   ``CustodyError/noSlotOfKind(_:)``.
    func candidateSlots(of kind: StoredSlotKind, slotID: String?, includingDamaged: Bool = false) throws(CustodyError) -> [LoadedSlot] {
        let slots = try loadSlots().filter { slotID == nil || $0.id == slotID }
        guard !slots.isEmpty else { throw slotID.map { .slotNotFound($0) } ?? .notInitialized }
        let candidates = slots.filter { $0.header?.kind == kind || (includingDamaged && $0.header == nil) }
        guard !candidates.isEmpty else { throw .noSlotOfKind(kind) }
        return candidates
    }

    /// The master key `blob` wraps, under the KEK `input` gives with `header`; nil when it does
    /// not open (a wrong secret, an edited header), which every caller treats as one more slot
    /// that did not open. The one place a slot's master key is unwrapped (kinds reach it
    /// through ``SlotOpener``).
    static func unwrapMaster(_ blob: SlotBlob, header: SlotHeader, input: borrowing SecretBytes) -> OpenedSlot? {
        do {
            let kek = try deriveKEK(header: header, input: input)
            let master = try XChaCha20Poly1305.openSecret(blob.wrappedMaster, using: kek, authenticating: header.associatedData())
            guard master.count == 32 else { return nil }
            return OpenedSlot(master: master, header: header)
        } catch {
            return nil
        }
    }

    /// ``openSlot(_:slotID:input:)`` as one attempt of the unlock back-off (see ``UnlockBackoff``).
    func openSlotUnderBackoff(_ kind: any SlotKind.Type, slotID: String?, input: borrowing SecretBytes?) throws(CustodyError) -> OpenedSlot {
        try backoff.attempt(now: configuration.wallClockSeconds) { () throws(CustodyError) -> OpenedSlot in
            try openSlot(kind, slotID: slotID, input: input)
        }
    }

    /// Unlocks with any slot of the matching kind (or the given slot).
    ///
    /// Refused while a back-off from earlier failures runs (the error names the wait). A wrong
    /// secret, a damaged slot, an edited header and a slot from another store all give the
    /// same ``CustodyError/unlockFailed`` and extend the back-off (4th failure 1 s, doubling to
    /// 5 min; kept in the keyring, checked and updated under a lock shared by every process).
    /// A mistyped recovery code is caught by its checksum first.
    /// - Returns: This unlock as the approval of the command that gave the secret
    ///   (``PresenceApproval/init(secretGiven:)``): it serves while it is the current unlock
    ///   and younger than the presence lifetime.
    @discardableResult
    public func unlock(_ secret: consuming UnlockSecret, slotID: String? = nil) throws(CustodyError) -> GivenSecret {
        let opened = try authorize(secret, op: .unlock, slotID: slotID)
        let slotUsed = opened.header.slotID
        let at = becomeUnlocked(opened.master)
        try log(KeyUseContext(op: .unlock), key: slotUsed, result: "ok")
        return GivenSecret(unlockedAtNanoseconds: at)
    }

    /// Checks a passphrase against the passphrase slots without changing the lock state
    /// (presence by passphrase re-entry). Subject to, and counted in, the unlock back-off.
    public func verifyPassphrase(_ passphrase: consuming SecretBytes) throws(CustodyError) {
        do {
            _ = try openSlotUnderBackoff(PassphraseSlot.self, slotID: nil, input: .some(passphrase))
        } catch .unlockFailed {
            logQuietly(KeyUseContext(op: .presencePassphrase), key: nil, result: "failed")
            throw .unlockFailed
        }
    }

    /// Checks that `secret` (a passphrase, PRF bytes or a recovery code) opens one of this
    /// store's slots, without changing the lock state: the approval a command gives by naming
    /// the current secret for itself. Subject to, and counted in, the unlock back-off; a
    /// failure is logged under `op`.
    /// - Throws: ``CustodyError/unlockFailed``, ``CustodyError/backingOff(secondsRemaining:)``,
    ///   ``CustodyError/recoveryCodeMistyped(_:)``, ``CustodyError/noSlotOfKind(_:)``.
    public func verifySecret(_ secret: consuming UnlockSecret, op: OpName = .presenceSecret) throws(CustodyError) {
        _ = try authorize(secret, op: op)
    }

    /// Opens a slot (any of the secret's kind, or `slotID`) with `secret` under the back-off,
    /// logging a failure under `op`: for an unlock, and for a change of who can unlock, which is
    /// made with the master key the slot unwraps. The kind the secret names checks it first
    /// (``SlotKind/prepare(_:)``) and then tries the candidates.
    func authorize(_ secret: consuming UnlockSecret, op: OpName, slotID: String? = nil) throws(CustodyError) -> OpenedSlot {
        let kind = secret.kind
        guard configuration.slotKinds.named(kind.name) != nil else {
            throw .invalidArgument("this store does not know the slot kind '\(kind.name)'")
        }
        let input = try kind.prepare(secret.take())
        // Hardware kinds are not under SiteKeep's back-off: the TPM and the security key count
        // wrong PINs themselves and lock out (and the key's bytes come after a touch).
        guard kind.underBackoff else {
            return try loggingFailure(op: op, slotID: slotID) { () throws(CustodyError) in try openSlot(kind, slotID: slotID, input: input) }
        }
        do {
            return try openSlotUnderBackoff(kind, slotID: slotID, input: input)
        } catch .backingOff(let wait) {
            logQuietly(KeyUseContext(op: op), key: slotID, result: "backing-off")
            throw .backingOff(secondsRemaining: wait)
        } catch .unlockFailed {
            logQuietly(KeyUseContext(op: op), key: slotID, result: "failed")
            throw .unlockFailed
        }
    }

    /// `open`'s slot, its failure logged under `op` first.
    private func loggingFailure(op: OpName, slotID: String?, _ open: () throws(CustodyError) -> OpenedSlot) throws(CustodyError) -> OpenedSlot {
        do { return try open() } catch {
            logQuietly(KeyUseContext(op: op), key: slotID, result: "failed")
            throw error
        }
    }

    /// The master key a slot change is made with: the one `current` unwraps.
    func authorizedMaster(_ current: consuming UnlockSecret, op: OpName) throws(CustodyError) -> LockedSecret {
        let opened = try authorize(current, op: op)
        return LockedSecret(opened.master)
    }

    // MARK: - Slot management (requires the current secret)
    //
    // Who can unlock changes only with a secret that unlocks now, given for this change (as
    // `cryptsetup luksAddKey` asks for an existing passphrase): an unlocked custodian is not
    // enough, so no other process of the user that reaches an unlocked daemon can mint a
    // recovery code or replace the passphrase. The custodian need not be unlocked. Each kind's
    // file adds its own `add…Slot`.

    /// Removes a slot, authorised by `current`. The last slot cannot be removed.
    public func removeSlot(id: String, current: consuming UnlockSecret) throws(CustodyError) {
        let all = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.slot) }
        guard all.contains(where: { $0.id == id }) else { throw .slotNotFound(id) }
        guard all.count > 1 else { throw .lastSlot }
        _ = try authorize(current, op: .slotRemove)
        try kr { () throws(KeyringError) in _ = try keyring.delete(item(.slot, id)) }
        try log(KeyUseContext(op: .slotRemove), key: id, result: "ok")
    }

}
