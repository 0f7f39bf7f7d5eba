public import SiteKeepCrypto
public import SiteKeepKeyring
public import SiteKeepTPM
public import SiteKeepFIDO2
import SiteKeepNames

/// The one error type of the custody layer.
///
/// Descriptions name what went wrong and what to do, and never contain key material,
/// passphrases, recovery codes or PRF bytes. A failed unlock is one opaque case whatever the
/// reason (wrong secret, damaged or edited slot, slot from another store).
public enum CustodyError: Error, Sendable, Equatable {
    /// The store has no unlock slot yet.
    case notInitialized
    /// `initialize` was called on a store that already has slots.
    case alreadyInitialized
    /// The operation needs the master key and SiteKeep is locked (or auto-locked).
    case locked
    /// The unlock secret did not open any slot (wrong secret, or a damaged or edited slot).
    case unlockFailed
    /// Too many failed unlocks: the next attempt is allowed after this many seconds.
    case backingOff(secondsRemaining: Int)
    /// A recovery code that cannot be right (typo caught by its checksum before any KDF ran).
    case recoveryCodeMistyped(String)
    /// No slot of the kind the unlock secret needs.
    case noSlotOfKind(StoredSlotKind)
    /// A device unlock (`--fido2`, `--tpm2`: `flag`) was asked of a store with no slot that
    /// kind (`kind`) opens; found before any PIN is asked or touch requested.
    case noDeviceSlot(kind: String, flag: String)
    /// No slot with this id.
    case slotNotFound(String)
    /// The only remaining slot cannot be removed.
    case lastSlot
    /// A slot header that is not a valid SiteKeep slot header (outside input).
    case invalidSlotHeader(String)
    /// No key with this id.
    case keyNotFound(String)
    /// A key with this id exists already.
    case keyExists(String)
    /// A key id outside `[a-z0-9][a-z0-9._-]{0,63}`.
    case invalidKeyID(String)
    /// The key has no such version.
    case versionNotFound(keyID: String, version: Int)
    /// The version is retired: it verifies but no longer signs.
    case versionVerifyOnly(keyID: String, version: Int)
    /// Imported key material that is not a usable key.
    case invalidKeyMaterial(String)
    /// A `...#key=<base64url>` link that is not valid.
    case invalidKeyLink(String)
    /// A stored key record or wrapped item that is damaged.
    case damagedItem(String)
    /// A caller argument out of range.
    case invalidArgument(String)
    /// The user did not approve the presence request.
    case presenceDenied
    /// The presence prompt did not answer within the limit.
    case presenceTimedOut(seconds: Int)
    /// The presence proof is older than its lifetime.
    case presenceExpired(ageSeconds: Int)
    /// The presence proof was given for another site.
    case presenceWrongSite
    /// The presence proof was given for another operation or another key.
    case presenceWrongUse
    /// The presence proof was given before SiteKeep was last unlocked.
    case presenceBeforeUnlock
    /// No way to ask for presence (no askpass program, no passphrase slot).
    case presenceUnavailable(String)
    /// A key use or a change of who can unlock or what is trusted came without the approval it
    /// needs (a presence proof, or the current secret); the text says what to give.
    case presenceRequired(String)
    /// The key's own policy does not allow this use (its SSH policy, or an SSH login request
    /// asked of anything but the ssh-agent socket); the text says why and how to change it.
    case policyRefused(String)
    /// The store home has looser permissions than SiteKeep requires, or is not usable.
    case insecureHome(String)
    /// A file-system failure in the store home.
    case io(String)
    /// A keyring failure.
    case keyring(KeyringError)
    /// A cryptographic failure that is not an unlock failure.
    case crypto(CryptoError)
    /// A TPM 2.0 slot could not be used: no TPM or no access to it, tpm2-tss missing, the PIN
    /// refused or the TPM locked out, the PCRs changed (the text names the remedy).
    case tpm(TPMError)
    /// A FIDO2 security key could not be used: none plugged in, its PIN refused, not touched in
    /// time, or it does not hold the credential (the text names the remedy).
    case fido2(FIDO2Error)
    /// `slot add fido2` was asked for a slot that needs the key's PIN (the default) from a key
    /// with no PIN set: without one, any program of the user could ask the plugged key for the
    /// slot's bytes with no touch.
    case fido2KeyHasNoPIN
}

/// Runs a FIDO2-layer call, turning its error into ``CustodyError/fido2(_:)``.
func fido2Call<R: ~Copyable>(_ body: () throws(FIDO2Error) -> R) throws(CustodyError) -> R {
    do { return try body() } catch { throw .fido2(error) }
}

/// Runs a TPM-layer call, turning its error into ``CustodyError/tpm(_:)``.
func tpmCall<R: ~Copyable>(_ body: () throws(TPMError) -> R) throws(CustodyError) -> R {
    do { return try body() } catch { throw .tpm(error) }
}

/// Runs a crypto-layer call, turning its error into ``CustodyError/crypto(_:)``.
func cryptoCall<R: ~Copyable>(_ body: () throws(CryptoError) -> R) throws(CustodyError) -> R {
    do { return try body() } catch { throw .crypto(error) }
}

extension CustodyError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .notInitialized:
            "this SiteKeep store has no unlock slot; run 'sitekeep init' first (or check --home and --keyring)"
        case .alreadyInitialized:
            "this SiteKeep store is already initialised; use 'sitekeep slot add' to add another way to unlock it"
        case .locked:
            "SiteKeep is locked; run 'sitekeep unlock' and try again"
        case .unlockFailed:
            "could not unlock: wrong passphrase, PRF output or recovery code, or a damaged slot; check the secret and try again"
        case .backingOff(let s):
            "too many failed unlock attempts; wait \(s) s before trying again"
        case .recoveryCodeMistyped(let why):
            "that recovery code is mistyped (\(why)); type it again exactly as it was shown, groups separated by '-'"
        case .noSlotOfKind(let kind):
            "this store has no \(kind.name) slot; use another unlock method or 'sitekeep slot list'"
        case let .noDeviceSlot(kind, flag):
            "this store has no \(kind) slot, so \(flag) opens nothing; unlock another way (the passphrase, --recovery-file), "
                + "then add one with 'sitekeep slot add \(kind)'"
        case .slotNotFound(let id):
            "no unlock slot '\(id)'; see 'sitekeep slot list'"
        case .lastSlot:
            "refusing to remove the last unlock slot: the store would become unopenable; add another slot first"
        case .invalidSlotHeader(let why):
            "invalid slot header: \(why)"
        case .keyNotFound(let id):
            "no key '\(id)'; see 'sitekeep team list'"
        case .keyExists(let id):
            "a key '\(id)' exists already; choose another id, or rotate or delete it"
        case .invalidKeyID(let id):
            "invalid key id '\(id.prefix(80))': use \(KeyID.rule)"
        case let .versionNotFound(id, v):
            "key '\(id)' has no version \(v); see 'sitekeep team list'"
        case let .versionVerifyOnly(id, v):
            "version \(v) of key '\(id)' was rotated out and only verifies; sign with the current version"
        case .invalidKeyMaterial(let why):
            "not a usable key: \(why)"
        case .invalidKeyLink(let why):
            "invalid key link: \(why); expected a link ending in '#key=<43 base64url characters>'"
        case .damagedItem(let why):
            "a stored key item is damaged: \(why); restore the keyring from a backup or re-import the key"
        case .invalidArgument(let why):
            "invalid argument: \(why)"
        case .presenceDenied:
            "the request was not approved"
        case .presenceTimedOut(let s):
            "no answer to the presence prompt within \(s) s; try again"
        case .presenceExpired(let age):
            "the presence confirmation is \(age) s old and has expired; confirm again"
        case .presenceWrongSite:
            "the presence confirmation was given for another site; confirm again for this one"
        case .presenceWrongUse:
            "the presence confirmation was given for another operation or key; confirm again for this one"
        case .presenceBeforeUnlock:
            "the presence confirmation was given before SiteKeep was last unlocked; confirm again"
        case .presenceUnavailable(let why):
            "cannot ask for presence: \(why)"
        case .presenceRequired(let why):
            "approval required: \(why)"
        case .policyRefused(let why):
            "refused by the key's policy: \(why)"
        case .insecureHome(let why):
            "refusing the SiteKeep home: \(why)"
        case .io(let why):
            "SiteKeep store file error: \(why)"
        case .keyring(let e):
            e.description
        case .crypto(let e):
            e.description
        case .tpm(let e):
            e.description
        case .fido2(.credentialNotOnKey):
            "the security key holds none of this store's FIDO2 or passkey credentials (another key, or it was reset); "
                + "plug in the key the slot was made with, or unlock another way ('sitekeep slot list')"
        case .fido2(let e):
            e.description
        case .fido2KeyHasNoPIN:
            "the security key has no PIN, and a FIDO2 slot needs one: without it any program of yours can ask the plugged key "
                + "for the slot's key with no touch; set a PIN first ('fido2-token -S /dev/hidrawN', or your browser's "
                + "security key settings) and run 'sitekeep slot add fido2' again, giving it with --pin-file or --pin "
                + "(or, knowingly, add a PIN-less slot with --no-pin: as strong as your login while the key is plugged in)"
        }
    }
}
