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
///
/// A FIDO2 slot needs the key's PIN by default (as `systemd-cryptenroll --fido2-with-client-pin`
/// does): a key gives its `hmac-secret` output without user verification to any process that
/// asks, even with no touch (an assertion with `up` false), and the slot's credential id and
/// salt are readable by every program of the user; the output with the PIN (the credential's
/// CredRandomWithUV) is not. A PIN-less slot is made only on request, and its header says so
/// (``SlotInfo/fido2PIN``, authenticated as the whole header is), so unlock asks the key the way
/// the slot was made; slots made before the header said (nil) are asked as they were: with the
/// PIN when the key has one.
public enum FIDO2Slot: SlotKind {
    public static let name = "fido2"
    /// FIDO2 slots are PRF slots (a browser's PRF bytes for the same credential open them too).
    public static let stored = PRFSlot.stored
    public static let unlockInput = SlotUnlockInput.device(flag: "--fido2", pinPrompt: "Security key PIN: ", pin: .whenTheDeviceHasOne,
                                                           note: "Touch the security key when it blinks, to unlock.")
    /// The key counts wrong PINs itself and blocks; there is nothing to guess here.
    public static let underBackoff = false

    /// Opens a PRF slot among `candidates` with the plugged security key: the key is asked,
    /// without a touch, which slot's credential it holds; the first it holds is opened with
    /// its `hmac-secret` for that slot's salt (a touch, and the PIN as the slot's header says:
    /// always for a PIN slot, never for a PIN-less one, when the key has one for a slot that
    /// does not say).
    ///
    /// Not under the unlock back-off: the bytes come from the key, which counts wrong PINs
    /// itself and blocks; there is nothing to guess here.
    /// - Throws: ``CustodyError/fido2(_:)`` (``FIDO2Error/credentialNotOnKey`` when the key
    ///   holds none of them; no touch, a PIN refused), ``CustodyError/unlockFailed`` when the
    ///   key's bytes open nothing (an edited slot).
    public static func open(_ candidates: [SlotCandidate], with pin: borrowing SecretBytes?,
                            opener: borrowing SlotOpener) throws(CustodyError) -> OpenedSlot {
        let key = try opener.custodian.fido2Key()
        for candidate in candidates {
            let header = candidate.header
            guard let rp = header.relyingPartyID,
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
                try key.prfOutput(rp: rp, credentialID: credentialID, evalInput: evalInput, pin: pin,
                                  verification: Custodian.fido2Verification(of: header))
            }
            // The key's bytes for its own credential: a slot they do not open was edited.
            guard let opened = opener.unwrap(candidate, kekInput: output) else { throw .unlockFailed }
            return opened
        }
        throw .fido2(.credentialNotOnKey)
    }

    /// The security key this custodian would ask is there and answers (its info, asked without
    /// a touch or a PIN): a named device that is absent, none plugged in or several are refused
    /// before the user is told to touch one.
    public static func checkDevice(_ opener: borrowing SlotOpener) throws(CustodyError) {
        let key = try opener.custodian.fido2Key()
        _ = try fido2Call { () throws(FIDO2Error) in try key.info() }
    }
}

extension UnlockSecret {
    /// A FIDO2 security key: the PRF slot whose credential the key holds opens with the key's
    /// `hmac-secret` for the slot's salt (a touch; the key's PIN when it has one), the same
    /// bytes a browser's PRF gives for that credential.
    public static func fido2(pin: consuming SecretBytes?) -> UnlockSecret {
        UnlockSecret(FIDO2Slot.self, secret: pin)
    }
}

extension Custodian {
    /// The relying party id of the credentials `slot add fido2` makes. `.invalid` is reserved
    /// (RFC 2606): no origin has it, so no page can name it as its relying party.
    public static let fido2RelyingPartyID = "sitekeep.invalid"

    /// The security key to use now (``CustodianConfiguration/fido2Key``, else the stored
    /// `fido2-device` setting, else the one `SITEKEEP_FIDO2_DEVICE` names, else the one plugged in).
    /// - Throws: ``CustodyError/fido2(_:)``: no key, several keys, libfido2 missing.
    func fido2Key() throws(CustodyError) -> FIDO2Key {
        if let configured = configuration.fido2Key { return configured }
        if let stored = fido2DeviceSetting { return stored }
        return try fido2Call { () throws(FIDO2Error) in try FIDO2Key.chosen(environment: ProcessEnvironment.current()) }
    }

    /// Adds a FIDO2 slot, authorised by `current` (a secret that opens a slot now): the key
    /// makes a credential (a touch; `pin` verifies the user), then gives its PRF output for a
    /// random eval input with its PIN (a second touch), which the slot is written with. Nothing
    /// is written unless both answered.
    ///
    /// The key must have a PIN, and `pin` is it: a key without one is refused before any touch
    /// (``CustodyError/fido2KeyHasNoPIN``, naming how to set one). With `withoutPIN` the slot is
    /// made from the key's output without verification instead, on a key that has no PIN: any
    /// program of the user can then ask the plugged key for it with no touch, so the slot is as
    /// strong as the user's login while the key is plugged in.
    /// - Parameters:
    ///   - pin: The key's PIN (nil only with `withoutPIN`).
    ///   - withoutPIN: Make a PIN-less slot, knowingly.
    /// - Throws: ``CustodyError/fido2KeyHasNoPIN``; ``CustodyError/fido2(_:)`` when the key
    ///   cannot be reached, wants its PIN, refuses it, is not touched in time or lacks
    ///   `hmac-secret`; ``CustodyError/invalidArgument(_:)`` for `withoutPIN` on a key that has
    ///   a PIN, or with a PIN; the errors of checking `current`.
    public func addFIDO2Slot(pin: consuming SecretBytes?, withoutPIN: Bool = false, label: String = "fido2",
                             current: consuming UnlockSecret) throws(CustodyError) -> SlotInfo {
        let master = try authorizedMaster(current, op: .slotAdd)
        let key = try fido2Key()
        let hasPIN = try fido2Call { () throws(FIDO2Error) in try key.info().hasPIN }
        if withoutPIN {
            guard !hasPIN else { throw .invalidArgument("the security key has a PIN, so its slot can need it: leave out --no-pin and give the PIN") }
            switch pin { case .some: throw .invalidArgument("a PIN was given for a PIN-less slot; leave out --no-pin, or the PIN"); case .none: break }
        } else {
            guard hasPIN else { throw .fido2KeyHasNoPIN }
        }
        let rp = Self.fido2RelyingPartyID
        let evalInput = SecureRandom.bytes(count: 32)
        let output: SecretBytes
        let credential: FIDO2Credential
        do throws(FIDO2Error) {
            credential = try key.makeCredential(rp: rp, userID: Array(storeID.utf8.prefix(64)), pin: pin)
            output = try key.prfOutput(rp: rp, credentialID: credential.id, evalInput: evalInput, pin: pin,
                                       verification: withoutPIN ? .withoutPIN : .withPIN)
        } catch {
            logQuietly(KeyUseContext(op: .slotAdd), key: nil, result: "failed")
            throw .fido2(error)
        }
        let info = try writeSlot(kind: .prf, label: label, master: master,
                                 fields: NewSlotFields(relyingPartyID: rp,
                                                       credentialID: Base64.encode(credential.id, variant: .urlSafeNoPadding),
                                                       prfEvalInput: Base64.encode(evalInput, variant: .urlSafeNoPadding),
                                                       fido2PIN: !withoutPIN),
                                 kekInput: output)
        try log(KeyUseContext(op: .slotAdd), key: info.id, result: "ok")
        return info
    }

    /// How a PRF slot's bytes are asked of the key: as its header records, else (a slot made
    /// before it did, or from a browser) with the PIN when the key has one.
    static func fido2Verification(of header: SlotHeader) -> FIDO2Key.UserVerification {
        switch header.fido2PIN {
        case true?: .withPIN
        case false?: .withoutPIN
        case nil: .whenTheKeyHasAPIN
        }
    }
}
