public import SiteKeepCrypto
import SiteKeepTPM

/// TPM 2.0 slots: the slot's 32-byte key is sealed to this machine's TPM (``TPM2``), which
/// checks the PIN (and counts wrong ones toward its dictionary-attack lock-out) and, when the
/// slot names PCRs, the measured boot state. The header keeps the sealed object's blobs, whether
/// there is a PIN and the PCR selection; where the TPM is reached is configuration
/// (``CustodianConfiguration/tpmConnection``), not part of the slot.
public enum TPM2Slot: SlotKind {
    public static let name = "tpm2"
    public static let stored = StoredSlotKind(name: "tpm2", code: 4, kdf: .hkdfSHA256(info: "sitekeep.slot.tpm2.v1"),
                                              requiredFields: [.tpmPublic, .tpmPrivate, .tpmPIN, .tpmPCRs])
    public static let unlockInput = SlotUnlockInput.device(flag: "--tpm2", pinPrompt: "TPM PIN: ", pin: .whenGiven, note: nil)
    /// The TPM rate-limits PINs itself.
    public static let underBackoff = false

    /// The TPM authorization value of a PIN: HKDF-SHA256 under the slot's salt, so the value
    /// the TPM stores is 32 bytes whatever the PIN's length and differs between slots.
    static let pinInfo = Array("sitekeep.slot.tpm2.pin.v1".utf8)

    /// Opens a TPM 2.0 slot among `candidates`: the TPM unseals each candidate's key with the
    /// PIN's authorization value (a slot without a PIN ignores it).
    ///
    /// Not under the unlock back-off: the TPM rate-limits PINs itself. A slot that has a PIN is
    /// not tried without one (nothing reaches the TPM, nothing is counted). Errors of reaching
    /// the TPM and its lock-out end the attempt at once; a wrong PIN, changed PCRs or an
    /// unusable sealed object let the next candidate try, and are reported when none opens
    /// (an unusable object, or a header edited after sealing, as ``CustodyError/unlockFailed``).
    public static func open(_ candidates: [SlotCandidate], with pin: borrowing SecretBytes?,
                            opener: borrowing SlotOpener) throws(CustodyError) -> OpenedSlot {
        let connection = opener.custodian.tpmConnection
        var refusal: TPMError? = nil
        for candidate in candidates {
            let header = candidate.header
            guard let object = header.tpmObject else { continue }
            let auth: TPMAuthValue
            if header.tpmPIN {
                switch pin {
                case .some(let p): auth = try Custodian.tpmAuth(pin: p, salt: header.salt)
                case .none:
                    if refusal == nil { refusal = .pinRequired }
                    continue
                }
            } else {
                auth = .empty
            }
            let unsealed: SecretBytes
            do throws(TPMError) {
                unsealed = try TPM2.unseal(object, auth: auth, pcrs: header.tpmPCRs, connection: connection)
            } catch {
                switch error {
                case .wrongPIN, .pcrsChanged, .badObject, .pinRequired:
                    if case .badObject = error, refusal != nil {} else { refusal = error }
                    continue
                default:
                    throw .tpm(error)
                }
            }
            if let opened = opener.unwrap(candidate, kekInput: unsealed) { return opened }
        }
        switch refusal {
        case .none, .badObject: throw .unlockFailed
        case .some(let e): throw .tpm(e)
        }
    }

    /// The TPM this custodian's connection names answers (its lock-out counters are read: no
    /// PIN, nothing counted), before a PIN is asked for it.
    public static func checkDevice(_ opener: borrowing SlotOpener) throws(CustodyError) {
        let connection = opener.custodian.tpmConnection
        _ = try tpmCall { () throws(TPMError) in try TPM2.lockoutStatus(connection: connection) }
    }

    /// Whether the TPM asks for a PIN, and the PCRs the sealed key is bound to.
    public static func describe(_ header: SlotHeader, into info: inout SlotInfo) {
        info.tpmPIN = header.tpmPIN
        info.tpmPCRs = header.tpmPCRs.indices
        // The plain listing says it too, not only --json: what unlock will ask, what can refuse it.
        let pcrs = header.tpmPCRs.indices
        info.details = (header.tpmPIN ? "TPM PIN" : "no PIN") + (pcrs.isEmpty ? ", no PCRs" : ", PCRs " + pcrs.map(String.init).joined(separator: ","))
    }
}

extension StoredSlotKind {
    /// A TPM 2.0 slot (``TPM2Slot``).
    public static let tpm2 = TPM2Slot.stored
}

extension UnlockSecret {
    /// A TPM 2.0 slot: the TPM unseals its key, with the PIN when the slot has one (the TPM
    /// checks it, under its own dictionary-attack lock-out).
    public static func tpm2(pin: consuming SecretBytes?) -> UnlockSecret {
        UnlockSecret(TPM2Slot.self, secret: pin)
    }
}

extension Custodian {
    /// The TPM authorization value for `pin` in the slot with `salt`.
    static func tpmAuth(pin: borrowing SecretBytes, salt: [UInt8]) throws(CustodyError) -> TPMAuthValue {
        .value(try cryptoCall { () throws(CryptoError) -> SecretBytes in
            try HKDF.deriveKey(inputKeyMaterial: pin, salt: salt, info: TPM2Slot.pinInfo)
        })
    }

    /// Adds a TPM 2.0 slot, authorised by `current` (a secret that opens a slot now): 32 random
    /// bytes are sealed to the TPM with `pin` as its authorization (none: the TPM alone opens it)
    /// and, when `pcrs` is not empty, a policy on those SHA-256 PCRs' current values; the slot's
    /// key is derived from them. The sealed object is unsealed once before the slot is written.
    /// - Throws: ``CustodyError/tpm(_:)`` when the TPM cannot be reached or refuses,
    ///   ``CustodyError/invalidArgument(_:)`` for a PCR out of 0...23, and the errors of
    ///   checking `current`.
    public func addTPM2Slot(pin: consuming SecretBytes?, pcrs: [Int] = [], label: String = "tpm2",
                            current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        let selection: PCRSelection
        do throws(TPMError) { selection = try PCRSelection(indices: pcrs) } catch { throw .invalidArgument(error.description) }
        let master = try authorizedMaster(current, op: .slotAdd)
        let salt = SecureRandom.bytes(count: SlotHeader.saltByteCount)
        let hasPIN: Bool
        let auth: TPMAuthValue
        switch consume pin {
        case .some(let p): hasPIN = true; auth = try Self.tpmAuth(pin: p, salt: salt)
        case .none: hasPIN = false; auth = .empty
        }
        let connection = tpmConnection
        let key = try cryptoCall { () throws(CryptoError) in try SecretBytes(randomCount: 32) }
        let object: SealedObject
        do throws(TPMError) {
            object = try TPM2.seal(key, auth: auth, pcrs: selection, connection: connection)
            let back = try TPM2.unseal(object, auth: auth, pcrs: selection, connection: connection)
            guard back.constantTimeEquals(key) else { throw .failed("the TPM unsealed other bytes than it sealed") }
        } catch {
            throw .tpm(error)
        }
        let info = try writeSlot(kind: .tpm2, label: label, master: master, salt: salt,
                                 fields: NewSlotFields(tpmObject: object, tpmPIN: hasPIN, tpmPCRs: selection), kekInput: key)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }
}
