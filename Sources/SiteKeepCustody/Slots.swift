import SiteKeepNames
public import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepSystem
import SiteKeepTPM

/// Argon2id parameters for new passphrase slots.
public enum PassphraseKDF: Sendable {
    /// The most memory calibration picks (256 MiB); beyond that it adds passes.
    public static let calibrationMemoryCeilingKiB = 256 * 1024

    /// Picks Argon2id parameters so one derivation takes about `target` on this machine, never
    /// below ``Argon2id/Parameters/minimum``. Memory grows first (t = 3, or t = 2 on machines
    /// too slow for 19 MiB at t = 3) up to ``calibrationMemoryCeilingKiB``, then passes.
    ///
    /// Measures rather than extrapolates: time per KiB grows with memory (page faults, cache),
    /// so it derives at the candidate parameters and rescales, up to four times, until a
    /// derivation lands within 20 % of `target`. Takes about two to three targets' time.
    public static func calibrate(target: Duration = .milliseconds(500)) throws(CustodyError) -> Argon2id.Parameters {
        let password = try cryptoCall { () throws(CryptoError) in try SecretBytes(randomCount: 16) }
        let salt = SecureRandom.bytes(count: Argon2id.saltByteCount)
        let targetNs = Double(PresenceProof.nanoseconds(target))
        func measure(_ p: Argon2id.Parameters) throws(CustodyError) -> Double {
            let start = Clocks.monotonicNow()
            _ = try cryptoCall { () throws(CryptoError) in try Argon2id.deriveKey(password: password, salt: salt, parameters: p) }
            return max(Double(PresenceProof.nanoseconds(Clocks.monotonicNow() - start)), 1)
        }
        func parameters(work: Double) -> Argon2id.Parameters {
            var t = 3
            var m = Int(work / 3)
            if m < Argon2id.Parameters.minimumMemoryKiB { t = 2; m = Int(work / 2) }
            if m > calibrationMemoryCeilingKiB {
                m = calibrationMemoryCeilingKiB
                t = min(Argon2id.Parameters.maximumIterations, max(3, Int((work / Double(m)).rounded())))
            }
            m = max(Argon2id.Parameters.minimumMemoryKiB, (m / 1024) * 1024)
            while t * m > Argon2id.Parameters.maximumWorkKiB { t -= 1 }
            return (try? Argon2id.Parameters(iterations: max(t, Argon2id.Parameters.minimumIterations), memoryKiB: m)) ?? .minimum
        }
        var candidate = Argon2id.Parameters.minimum
        for _ in 0..<5 {
            let elapsed = try measure(candidate)
            let ratio = targetNs / elapsed
            if ratio >= 0.8 && ratio <= 1.25 { return candidate }
            if ratio < 1, candidate == .minimum { return candidate }
            let work = Double(candidate.iterations * candidate.memoryKiB) * min(max(ratio, 0.25), 8)
            let next = parameters(work: work)
            if next == candidate { return candidate }
            candidate = next
        }
        return candidate
    }
}

/// The input to a slot's key-encryption-key derivation.
enum KEKInput: ~Copyable {
    case passphrase(SecretBytes)
    case prf(SecretBytes)
    /// The 16 decoded bytes of a recovery code.
    case recoveryCode(SecretBytes)
    /// The 32 bytes a TPM 2.0 slot's sealed object unsealed to.
    case tpm2(SecretBytes)
}

extension Custodian {
    func calibrated(_ given: Argon2id.Parameters?) throws(CustodyError) -> Argon2id.Parameters {
        if let given { return given }
        return try PassphraseKDF.calibrate()
    }

    static let prfInfo = Array("sitekeep.slot.prf.v1".utf8)
    static let recoveryInfo = Array("sitekeep.slot.recovery.v1".utf8)
    static let tpm2Info = Array("sitekeep.slot.tpm2.v1".utf8)
    /// The TPM authorization value of a PIN: HKDF-SHA256 under the slot's salt, so the value
    /// the TPM stores is 32 bytes whatever the PIN's length and differs between slots.
    static let tpm2PINInfo = Array("sitekeep.slot.tpm2.pin.v1".utf8)

    /// The key-encryption key of a slot, from its header and the unlock input.
    static func deriveKEK(header: SlotHeader, input: borrowing KEKInput) throws(CryptoError) -> SecretBytes {
        switch input {
        case .passphrase(let p):
            guard let params = header.argon2 else { throw .parametersOutOfRange("no Argon2id parameters") }
            return try Argon2id.deriveKey(password: p, salt: header.salt, parameters: params)
        case .prf(let bytes):
            return try HKDF.deriveKey(inputKeyMaterial: bytes, salt: header.salt, info: prfInfo)
        case .recoveryCode(let data):
            return try HKDF.deriveKey(inputKeyMaterial: data, salt: header.salt, info: recoveryInfo)
        case .tpm2(let bytes):
            return try HKDF.deriveKey(inputKeyMaterial: bytes, salt: header.salt, info: tpm2Info)
        }
    }

    static func newSlotID() -> String { Hex.encode(SecureRandom.bytes(count: 8)) }

    /// Writes a new slot wrapping `master` and returns its public facts.
    func writeSlot(kind: SlotKind, label: String, master: LockedSecret, argon2: Argon2id.Parameters? = nil,
                   relyingPartyID: String? = nil, credentialID: String? = nil, prfEvalInput: String? = nil,
                   salt: [UInt8]? = nil, tpmObject: SealedObject? = nil, tpmPIN: Bool = false, tpmPCRs: PCRSelection = .none,
                   fido2PIN: Bool? = nil, secret: consuming KEKInput) throws(CustodyError) -> SlotInfo {
        guard label.utf8.count <= 64, !label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .invalidArgument("a slot label is at most 64 printable bytes")
        }
        let header = SlotHeader(kind: kind, slotID: Self.newSlotID(), storeID: storeID,
                                created: configuration.wallClockSeconds(), label: label, argon2: kind == .passphrase ? argon2 : nil,
                                salt: salt ?? SecureRandom.bytes(count: SlotHeader.saltByteCount),
                                relyingPartyID: relyingPartyID, credentialID: credentialID, prfEvalInput: prfEvalInput,
                                tpmObject: kind == .tpm2 ? tpmObject : nil, tpmPIN: tpmPIN, tpmPCRs: tpmPCRs,
                                fido2PIN: kind == .prf ? fido2PIN : nil)
        let headerBytes = header.encoded()
        // Round-trip through the strict parser, so nothing is written that unlock would refuse.
        guard (try? SlotHeader.parse(headerBytes)) == header else { throw .invalidArgument("slot header fields out of range") }
        let wrapped = try cr { () throws(CryptoError) -> [UInt8] in
            let kek = try Self.deriveKEK(header: header, input: secret)
            return try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
                try XChaCha20Poly1305.sealSecret(m, using: kek, authenticating: header.associatedData())
            }
        }
        let blob = SlotBlob(headerBytes: headerBytes, wrappedMaster: wrapped).encoded()
        try kr { () throws(KeyringError) in
            try keyring.store(blob, for: item(.slot, header.slotID), label: "SiteKeep unlock slot (\(kind.rawValue))")
        }
        return header.info
    }

    struct LoadedSlot {
        var header: SlotHeader?   // nil: damaged
        var blob: SlotBlob?
        var id: String
    }

    func loadSlots() throws(CustodyError) -> [LoadedSlot] {
        // One round trip for every slot (the Secret Service loads them with the search).
        let items = try kr { () throws(KeyringError) in try keyring.loadAll(store: storeID, kind: ItemKind.slot) }
        var out: [LoadedSlot] = []
        for (id, bytes) in items.sorted(by: { $0.id.id < $1.id.id }) {
            let blob = try? SlotBlob.parse(bytes)
            let header = blob.flatMap { try? SlotHeader.parse($0.headerBytes) }
            out.append(LoadedSlot(header: header, blob: blob, id: id.id))
        }
        return out
    }

    /// The public facts of every readable slot (works while locked).
    public func listSlots() throws(CustodyError) -> [SlotInfo] {
        try loadSlots().compactMap { $0.header?.info }.sorted { ($0.created, $0.id) < ($1.created, $1.id) }
    }

    /// Ids of slot items that cannot be parsed (damaged, or written by a newer SiteKeep).
    public func damagedSlotIDs() throws(CustodyError) -> [String] {
        try loadSlots().filter { $0.header == nil }.map(\.id)
    }

    /// Tries the candidate slots; returns the master key and the slot that opened.
    struct OpenedSlot: ~Copyable {
        let master: SecretBytes
        let header: SlotHeader
    }

    func openSlot(kind: SlotKind, slotID: String?, input: borrowing KEKInput) throws(CustodyError) -> OpenedSlot {
        // Damaged slots stay candidates: they fail exactly as a wrong secret does.
        for slot in try candidateSlots(of: kind, slotID: slotID, includingDamaged: true) {
            guard let header = slot.header, let blob = slot.blob, header.storeID == storeID, header.slotID == slot.id else { continue }
            if let opened = Self.unwrapMaster(blob, header: header, input: input) { return opened }
        }
        throw .unlockFailed
    }

    /// The slots of `kind` (and, with `includingDamaged`, those whose header does not parse)
    /// among `slotID` (every slot when nil).
    /// - Throws: ``CustodyError/slotNotFound(_:)``, ``CustodyError/notInitialized`` (no slot),
    ///   ``CustodyError/noSlotOfKind(_:)``.
    func candidateSlots(of kind: SlotKind, slotID: String?, includingDamaged: Bool = false) throws(CustodyError) -> [LoadedSlot] {
        let slots = try loadSlots().filter { slotID == nil || $0.id == slotID }
        guard !slots.isEmpty else { throw slotID.map { .slotNotFound($0) } ?? .notInitialized }
        let candidates = slots.filter { $0.header?.kind == kind || (includingDamaged && $0.header == nil) }
        guard !candidates.isEmpty else { throw .noSlotOfKind(kind) }
        return candidates
    }

    /// The master key `blob` wraps, under the KEK `input` gives with `header`; nil when it does
    /// not open (a wrong secret, an edited header), which every caller treats as one more slot
    /// that did not open.
    static func unwrapMaster(_ blob: SlotBlob, header: SlotHeader, input: borrowing KEKInput) -> OpenedSlot? {
        do {
            let kek = try deriveKEK(header: header, input: input)
            let master = try XChaCha20Poly1305.openSecret(blob.wrappedMaster, using: kek, authenticating: header.associatedData())
            guard master.count == 32 else { return nil }
            return OpenedSlot(master: master, header: header)
        } catch {
            return nil
        }
    }

    /// ``openSlot(kind:slotID:input:)`` as one attempt of the unlock back-off (see ``UnlockBackoff``).
    func openSlotUnderBackoff(kind: SlotKind, slotID: String?, input: borrowing KEKInput) throws(CustodyError) -> OpenedSlot {
        try backoff.attempt(now: configuration.wallClockSeconds) { () throws(CustodyError) -> OpenedSlot in
            try openSlot(kind: kind, slotID: slotID, input: input)
        }
    }

    /// Unlocks with any slot of the matching kind (or the given slot).
    ///
    /// Refused while a back-off from earlier failures runs (the error names the wait). A wrong
    /// secret, a damaged slot, an edited header and a slot from another store all give the
    /// same ``CustodyError/unlockFailed`` and extend the back-off (4th failure 1 s, doubling to
    /// 5 min; kept in the keyring, checked and updated under a lock shared by every process).
    /// A mistyped recovery code is caught by its checksum first.
    public func unlock(_ secret: consuming UnlockSecret, slotID: String? = nil) throws(CustodyError) {
        let opened = try authorize(secret, op: .unlock, slotID: slotID)
        let slotUsed = opened.header.slotID
        becomeUnlocked(opened.master)
        try log(KeyUseContext(op: .unlock), key: slotUsed, result: "ok")
    }

    /// Checks a passphrase against the passphrase slots without changing the lock state
    /// (presence by passphrase re-entry). Subject to, and counted in, the unlock back-off.
    public func verifyPassphrase(_ passphrase: consuming SecretBytes) throws(CustodyError) {
        do {
            _ = try openSlotUnderBackoff(kind: .passphrase, slotID: nil, input: .passphrase(passphrase))
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
    /// made with the master key the slot unwraps.
    func authorize(_ secret: consuming UnlockSecret, op: OpName, slotID: String? = nil) throws(CustodyError) -> OpenedSlot {
        let kind: SlotKind
        let input: KEKInput
        switch consume secret {
        case .passphrase(let p):
            kind = .passphrase; input = .passphrase(p)
        case .prf(let bytes):
            guard bytes.count == WebAuthnPRF.outputByteCount else {
                throw .invalidArgument("PRF output must be \(WebAuthnPRF.outputByteCount) bytes, got \(bytes.count)")
            }
            kind = .prf; input = .prf(bytes)
        case .recoveryCode(let typed):
            kind = .recovery; input = .recoveryCode(try RecoveryCode.parse(typed))
        // Hardware slots are not under SiteKeep's back-off: the TPM and the security key count
        // wrong PINs themselves and lock out (and the key's bytes come after a touch).
        case .tpm2(let pin):
            return try loggingFailure(op: op, slotID: slotID) { () throws(CustodyError) in try openTPM2Slot(slotID: slotID, pin: pin) }
        case .fido2(let pin):
            return try loggingFailure(op: op, slotID: slotID) { () throws(CustodyError) in try openFIDO2Slot(slotID: slotID, pin: pin) }
        }
        do {
            return try openSlotUnderBackoff(kind: kind, slotID: slotID, input: input)
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
    // recovery code or replace the passphrase. The custodian need not be unlocked.

    /// Adds a passphrase slot, authorised by `current` (a secret that opens a slot now).
    public func addPassphraseSlot(_ passphrase: consuming SecretBytes, parameters: Argon2id.Parameters? = nil,
                                  label: String = "passphrase", current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        let master = try authorizedMaster(current, op: .slotAdd)
        let params = try calibrated(parameters)
        let info = try writeSlot(kind: .passphrase, label: label, master: master, argon2: params, secret: .passphrase(passphrase))
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    /// Adds a PRF slot for a passkey, authorised by `current` (a secret that opens a slot now).
    /// - Parameters:
    ///   - prfOutput: The 32 PRF output bytes the passkey gave for `prfEvalInput`.
    ///   - relyingPartyID: The WebAuthn RP id (a domain).
    ///   - credentialID: The credential id, base64url.
    ///   - prfEvalInput: The PRF eval input, base64url.
    public func addPRFSlot(prfOutput: consuming SecretBytes, relyingPartyID: String, credentialID: String,
                           prfEvalInput: String, label: String = "passkey", current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        guard prfOutput.count == WebAuthnPRF.outputByteCount else {
            throw .invalidArgument("PRF output must be \(WebAuthnPRF.outputByteCount) bytes, got \(prfOutput.count)")
        }
        guard (1...253).contains(relyingPartyID.utf8.count),
              relyingPartyID.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2e || $0 == 0x2d }) else {
            throw .invalidArgument("the relying party id must be a lowercase domain name")
        }
        for (name, value, max) in [("credential id", credentialID, 1400), ("PRF eval input", prfEvalInput, 1400)] {
            guard (1...max).contains(value.utf8.count), (try? Base64.decode(value, variant: .urlSafeNoPadding)) != nil else {
                throw .invalidArgument("the \(name) must be base64url without padding")
            }
        }
        let master = try authorizedMaster(current, op: .slotAdd)
        let info = try writeSlot(kind: .prf, label: label, master: master, relyingPartyID: relyingPartyID,
                                 credentialID: credentialID, prfEvalInput: prfEvalInput, secret: .prf(prfOutput))
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    /// Adds a recovery slot, authorised by `current`; its code is returned once and stored nowhere.
    public func addRecoverySlot(label: String = "recovery", current: consuming UnlockSecret) throws(CustodyError) -> NewRecoverySlot {
        let master = try authorizedMaster(current, op: .slotAdd)
        let generated = try RecoveryCode.generate()
        let code = generated.code
        let info = try writeSlot(kind: .recovery, label: label, master: master, secret: .recoveryCode(generated.secret))
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return NewRecoverySlot(slot: info, code: code)
    }

    /// Removes a slot, authorised by `current`. The last slot cannot be removed.
    public func removeSlot(id: String, current: consuming UnlockSecret) throws(CustodyError) {
        let all = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.slot) }
        guard all.contains(where: { $0.id == id }) else { throw .slotNotFound(id) }
        guard all.count > 1 else { throw .lastSlot }
        _ = try authorize(current, op: .slotRemove)
        try kr { () throws(KeyringError) in _ = try keyring.delete(item(.slot, id)) }
        try log(KeyUseContext(op: .slotRemove), key: id, result: "ok")
    }

    /// Replaces a passphrase slot with one for a new passphrase, authorised by `current` (for
    /// a passphrase change, normally the old passphrase): the new slot is written before the
    /// old one is deleted, so a crash in between leaves both usable, never neither.
    public func changePassphrase(slotID: String, to newPassphrase: consuming SecretBytes,
                                 parameters: Argon2id.Parameters? = nil, current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        guard let old = try loadSlots().first(where: { $0.id == slotID }) else { throw .slotNotFound(slotID) }
        guard old.header?.kind == .passphrase else { throw .invalidArgument("slot \(slotID) is not a passphrase slot") }
        let master = try authorizedMaster(current, op: .slotPassphraseChange)
        let params = try calibrated(parameters ?? old.header?.argon2)
        let info = try writeSlot(kind: .passphrase, label: old.header?.label ?? "passphrase", master: master,
                                 argon2: params, secret: .passphrase(newPassphrase))
        try kr { () throws(KeyringError) in _ = try keyring.delete(item(.slot, slotID)) }
        try log(KeyUseContext(op: .slotPassphraseChange), key: info.id, result: "ok")
        return info
    }

    /// The CTAP2 hmac-secret salt (32 bytes) of a PRF slot, for `sitekeep prf salt`.
    public func hmacSecretSalt(slotID: String) throws(CustodyError) -> [UInt8] {
        guard let slot = try listSlots().first(where: { $0.id == slotID }) else { throw .slotNotFound(slotID) }
        guard let eval = slot.prfEvalInput, let input = try? Base64.decode(eval, variant: .urlSafeNoPadding) else {
            throw .invalidArgument("slot \(slotID) is not a PRF slot")
        }
        return WebAuthnPRF.hmacSecretSalt(forEvalInput: input)
    }
}
