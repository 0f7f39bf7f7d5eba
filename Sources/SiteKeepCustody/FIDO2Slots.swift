public import SiteKeepCrypto
import SiteKeepFIDO2
internal import SiteKeepSystem

/// FIDO2 slots: a PRF slot whose 32 bytes come from a security key's `hmac-secret`, asked
/// through libfido2 (``FIDO2Key``) instead of by hand.
///
/// `slot add fido2` makes a non-resident credential with `hmac-secret` on the key, for the
/// relying party ``fido2RelyingPartyID`` (a name no web page can claim, so no site can ask the
/// key for the same bytes), and writes an ordinary PRF slot: relying party, credential id and a
/// random eval input in the header, the key's WebAuthn PRF output for that input as its secret.
/// Since the PRF output of a credential *is* its `hmac-secret` for SHA-256("WebAuthn PRF" ‖ 0 ‖
/// input), `--prf-file` with bytes a browser gave and `--fido2` open the same slots: a passkey
/// made in a browser on a roaming key opens with `unlock --fido2` too.
extension Custodian {
    /// The relying party id of the credentials `slot add fido2` makes. `.invalid` is reserved
    /// (RFC 2606): no origin has it, so no page can name it as its relying party.
    public static let fido2RelyingPartyID = "sitekeep.invalid"

    /// The security key to use now (``CustodianConfiguration/fido2Key``, else the one
    /// `SITEKEEP_FIDO2_DEVICE` names, else the one plugged in).
    /// - Throws: ``CustodyError/fido2(_:)``: no key, several keys, libfido2 missing.
    func fido2Key() throws(CustodyError) -> FIDO2Key {
        if let configured = configuration.fido2Key { return configured }
        return try fido2Call { () throws(FIDO2Error) in try FIDO2Key.chosen(environment: ProcessEnvironment.current()) }
    }

    /// Adds a FIDO2 slot, authorised by `current` (a secret that opens a slot now): the key
    /// makes a credential (a touch; `pin` verifies the user when the key has a PIN), then gives
    /// its PRF output for a random eval input (a second touch), which the slot is written with.
    /// Nothing is written unless both answered.
    /// - Throws: ``CustodyError/fido2(_:)`` when the key cannot be reached, refuses the PIN,
    ///   is not touched in time or lacks `hmac-secret`; the errors of checking `current`.
    public func addFIDO2Slot(pin: consuming SecretBytes?, label: String = "fido2",
                             current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        let master = try authorizedMaster(current, op: .slotAdd)
        let key = try fido2Key()
        let rp = Self.fido2RelyingPartyID
        let evalInput = SecureRandom.bytes(count: 32)
        let output: SecretBytes
        let credential: FIDO2Credential
        do throws(FIDO2Error) {
            credential = try key.makeCredential(rp: rp, userID: Array(storeID.utf8.prefix(64)), pin: pin)
            output = try key.prfOutput(rp: rp, credentialID: credential.id, evalInput: evalInput, pin: pin)
        } catch {
            logQuietly(KeyUseContext(op: .slotAdd), key: nil, result: "failed")
            throw .fido2(error)
        }
        let info = try writeSlot(kind: .prf, label: label, master: master, relyingPartyID: rp,
                                 credentialID: Base64.encode(credential.id, variant: .urlSafeNoPadding),
                                 prfEvalInput: Base64.encode(evalInput, variant: .urlSafeNoPadding), secret: .prf(output))
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    /// Opens a PRF slot (any, or `slotID`) with the plugged security key: the key is asked,
    /// without a touch, which slot's credential it holds; the first it holds is opened with
    /// its `hmac-secret` for that slot's salt (a touch, and the PIN when the key has one).
    ///
    /// Not under the unlock back-off: the bytes come from the key, which counts wrong PINs
    /// itself and blocks; there is nothing to guess here.
    /// - Throws: ``CustodyError/noSlotOfKind(_:)`` (no PRF slot), ``CustodyError/fido2(_:)``
    ///   (``FIDO2Error/credentialNotOnKey`` when the key holds none of them; no touch, a
    ///   PIN refused), ``CustodyError/unlockFailed`` when the key's bytes open nothing (an
    ///   edited slot).
    func openFIDO2Slot(slotID: String?, pin: borrowing SecretBytes?) throws(CustodyError) -> OpenedSlot {
        let candidates = try candidateSlots(of: .prf, slotID: slotID)
        let key = try fido2Key()
        for slot in candidates {
            guard let header = slot.header, let blob = slot.blob, header.storeID == storeID, header.slotID == slot.id,
                  let rp = header.relyingPartyID,
                  let credentialID = header.credentialID.flatMap({ try? Base64.decode($0, variant: .urlSafeNoPadding) }),
                  let evalInput = header.prfEvalInput.flatMap({ try? Base64.decode($0, variant: .urlSafeNoPadding) }),
                  (1...FIDO2Credential.maximumIDLength).contains(credentialID.count) else { continue }
            // A slot whose relying party or credential id no key could take (an edited header)
            // is skipped, as a damaged slot is; the key's own failures end the attempt.
            let held: Bool
            do throws(FIDO2Error) { held = try key.holds(rp: rp, credentialID: credentialID) } catch {
                if case .invalidArgument = error { continue }
                throw .fido2(error)
            }
            guard held else { continue }
            let output = try fido2Call { () throws(FIDO2Error) in
                try key.prfOutput(rp: rp, credentialID: credentialID, evalInput: evalInput, pin: pin)
            }
            // The key's bytes for its own credential: a slot they do not open was edited.
            guard let opened = Self.unwrapMaster(blob, header: header, input: .prf(output)) else { throw .unlockFailed }
            return opened
        }
        throw .fido2(.credentialNotOnKey)
    }
}
