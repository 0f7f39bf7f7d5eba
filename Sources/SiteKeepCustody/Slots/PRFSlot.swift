public import SiteKeepCrypto

/// PRF slots: 32 bytes of WebAuthn PRF (or CTAP2 hmac-secret) output through HKDF-SHA256.
/// The header names the passkey (relying party, credential id) and the PRF eval input the
/// bytes were made with, so SiteKeep can say which passkey to use; a slot made by
/// `slot add fido2` also records whether the key's PIN was asked (``FIDO2Slot``).
public enum PRFSlot: SlotKind {
    public static let name = "prf"
    public static let stored = StoredSlotKind(name: "prf", code: 2, kdf: .hkdfSHA256(info: "sitekeep.slot.prf.v1"),
                                              requiredFields: [.relyingPartyID, .credentialID, .prfEvalInput],
                                              optionalFields: [.fido2PIN])
    public static let unlockInput = SlotUnlockInput.secret(option: "--prf-file", prompt: nil)
    public static let underBackoff = true

    /// Checks that there are exactly ``WebAuthnPRF/outputByteCount`` bytes.
    package static func prepare(_ secret: consuming SecretBytes?) throws(CustodyError) -> SecretBytes? {
        switch consume secret {
        case .some(let bytes):
            guard bytes.count == WebAuthnPRF.outputByteCount else {
                throw .invalidArgument("PRF output must be \(WebAuthnPRF.outputByteCount) bytes, got \(bytes.count)")
            }
            return bytes
        case .none:
            throw .invalidArgument("PRF output must be \(WebAuthnPRF.outputByteCount) bytes, got 0")
        }
    }

    /// The passkey: relying party, credential id, eval input and its hmac-secret salt, whether
    /// a FIDO2 slot asks the key's PIN; the DETAILS text `passkey <id> at <rp>`.
    public static func describe(_ header: SlotHeader, into info: inout SlotInfo) {
        info = SlotInfo(id: info.id, kind: info.kind, label: info.label, created: info.created, kdf: info.kdf,
                        argon2Parameters: info.argon2Parameters, relyingPartyID: header.relyingPartyID,
                        credentialID: header.credentialID, prfEvalInput: header.prfEvalInput,
                        hmacSecretSalt: header.prfEvalInput.flatMap { try? Base64.decode($0, variant: .urlSafeNoPadding) }
                            .map { Hex.encode(WebAuthnPRF.hmacSecretSalt(forEvalInput: $0)) },
                        fido2PIN: header.fido2PIN)
        info.details = header.relyingPartyID.map { "passkey \(header.credentialID ?? "?") at \($0)"
            + (header.fido2PIN.map { $0 ? ", key's PIN" : ", no PIN" } ?? "") } ?? ""
    }
}

extension StoredSlotKind {
    /// A PRF slot (``PRFSlot``; FIDO2 slots are PRF slots too).
    public static let prf = PRFSlot.stored
}

extension UnlockSecret {
    /// 32 bytes of WebAuthn PRF / CTAP2 hmac-secret output.
    public static func prf(_ bytes: consuming SecretBytes) -> UnlockSecret {
        UnlockSecret(PRFSlot.self, secret: bytes)
    }
}

extension Custodian {
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
        let info = try writeSlot(kind: .prf, label: label, master: master,
                                 fields: NewSlotFields(relyingPartyID: relyingPartyID, credentialID: credentialID, prfEvalInput: prfEvalInput),
                                 kekInput: prfOutput)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
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
