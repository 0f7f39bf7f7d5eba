public import SiteKeepCrypto

/// One way to unlock the master key, as a LUKS2 keyslot type or an age recipient type is: how
/// its input is checked and becomes the key-encryption key (KEK) of a slot, which header fields
/// its slots carry, how a slot of it opens, what `slot list` and `doctor` say about it, and how
/// the command line and the control wire name its input.
///
/// A kind is a caseless type in its own file under `Slots/` (``PassphraseSlot``, ``PRFSlot``,
/// ``FIDO2Slot``, ``RecoverySlot``, ``TPM2Slot``). ``SlotKinds`` lists them; every path that
/// unlocks, lists slots, reads an unlock input or carries one over the control wire asks that
/// list instead of switching on the kinds. Adding a kind is one new file and one more entry in
/// ``SlotKinds/standard``.
///
/// What every kind shares stays in one place, outside the kinds: the one place that chooses the
/// candidate slots (``Custodian/candidateSlots(of:slotID:includingDamaged:)``), the one place
/// that unwraps the master key from a slot (``SlotOpener/unwrap(_:kekInput:)``), the unlock
/// back-off for secrets software can guess (``underBackoff``), and the audit log. A kind never
/// holds the master key: ``OpenedSlot`` keeps it out of reach of the kind's code.
///
/// ```swift
/// enum PRFSlot: SlotKind {
///     static let name = "prf"
///     static let stored = StoredSlotKind(name: "prf", code: 2, kdf: .hkdfSHA256(info: "sitekeep.slot.prf.v1"), ...)
///     static let unlockInput = SlotUnlockInput.secret(option: "--prf-file", prompt: nil)
/// }
/// ```
package protocol SlotKind: Sendable {
    /// The kind's name: the `KIND` of `slot add`, the unlock method on the control wire
    /// (`passphrase`, `prf`, `fido2`, `recovery`, `tpm2`).
    static var name: String { get }

    /// The slots this kind opens, as their headers name them: its own for most kinds; a kind
    /// that opens another kind's slots names that kind's (``FIDO2Slot`` opens PRF slots).
    static var stored: StoredSlotKind { get }

    /// How the command line gives this kind's unlock input (the CLI reads it; custody only
    /// names the option, the flag and the prompt).
    static var unlockInput: SlotUnlockInput { get }

    /// Whether a wrong input is tried by software alone, so it counts in SiteKeep's unlock
    /// back-off and a damaged slot fails exactly as a wrong input does (passphrases, PRF bytes,
    /// recovery codes). False for hardware that counts wrong PINs itself (a TPM, a security key).
    static var underBackoff: Bool { get }

    /// Checks the unlock secret as given and turns it into what ``open(_:with:opener:)`` takes
    /// (a recovery code's text into its 16 bytes, PRF bytes checked for length), before any
    /// slot is tried and outside the back-off. The default passes the secret on.
    /// - Throws: ``CustodyError/invalidArgument(_:)``, ``CustodyError/recoveryCodeMistyped(_:)``.
    static func prepare(_ secret: consuming SecretBytes?) throws(CustodyError) -> SecretBytes?

    /// Opens one of `candidates` (the slots ``stored`` names, chosen by the generic path) with
    /// `input`, unwrapping through `opener`. The default tries `input` as each candidate's KEK
    /// input and throws ``CustodyError/unlockFailed`` when none opens.
    static func open(_ candidates: [SlotCandidate], with input: borrowing SecretBytes?,
                     opener: borrowing SlotOpener) throws(CustodyError) -> OpenedSlot

    /// Adds the kind's public facts of `header` to `info` (what `slot list` and `doctor` show):
    /// never key material. Called for the kind whose ``stored`` kind the header names. The
    /// default adds nothing.
    static func describe(_ header: SlotHeader, into info: inout SlotInfo)

    /// Checks, before anything is asked of the user (a PIN, a touch), that the device this kind
    /// reads its input from can be asked now, without asking it for the input (a device kind:
    /// the security key is there, the TPM answers). The default checks nothing.
    /// - Throws: the device's error, naming what is missing and what to do.
    static func checkDevice(_ opener: borrowing SlotOpener) throws(CustodyError)
}

extension SlotKind {
    /// Passes the secret on unchanged.
    package static func prepare(_ secret: consuming SecretBytes?) throws(CustodyError) -> SecretBytes? { secret }

    /// Tries `input` as the KEK input of each candidate in turn.
    package static func open(_ candidates: [SlotCandidate], with input: borrowing SecretBytes?,
                            opener: borrowing SlotOpener) throws(CustodyError) -> OpenedSlot {
        switch input {
        case .some(let bytes):
            for candidate in candidates {
                if let opened = opener.unwrap(candidate, kekInput: bytes) { return opened }
            }
        case .none:
            break
        }
        throw .unlockFailed
    }

    /// Adds nothing.
    package static func describe(_ header: SlotHeader, into info: inout SlotInfo) {}

    /// Checks nothing: the kind asks no device.
    package static func checkDevice(_ opener: borrowing SlotOpener) throws(CustodyError) {}
}

/// What a slot header says about its kind: the kind's name, the byte that names it on disk,
/// how its KEK is derived and which of the kind-specific header fields its slots carry. Part
/// of the on-disk format: a stored kind's code, KDF and fields never change.
public struct StoredSlotKind: Sendable, Hashable, CustomStringConvertible {
    /// The name `slot list` prints in its KIND column (`prf`).
    public let name: String
    /// The header's kind byte.
    public let code: UInt8
    /// How the slot's KEK is derived from the kind's input.
    public let kdf: SlotKDF
    /// The kind-specific header fields every slot of the kind has.
    public let requiredFields: Set<SlotHeaderField>
    /// The kind-specific header fields its slots may have (absent in older slots).
    public let optionalFields: Set<SlotHeaderField>

    /// A stored kind. `code` must be unique among the kinds of a ``SlotKinds``.
    public init(name: String, code: UInt8, kdf: SlotKDF,
                requiredFields: Set<SlotHeaderField> = [], optionalFields: Set<SlotHeaderField> = []) {
        self.name = name
        self.code = code
        self.kdf = kdf
        self.requiredFields = requiredFields
        self.optionalFields = optionalFields
    }

    /// The name.
    public var description: String { name }
}

/// How a slot's key-encryption key is derived from its kind's input and its header's salt.
public enum SlotKDF: Sendable, Hashable {
    /// Argon2id with the header's parameters (a passphrase: slow on purpose).
    case argon2id
    /// HKDF-SHA256 with this info string (an input that is already a uniformly random key).
    case hkdfSHA256(info: String)
}

/// How the command line gives a kind's unlock input. Custody names the options and prompts;
/// the CLI reads them (from a file, standard input, a terminal prompt) into guarded memory.
public enum SlotUnlockInput: Sendable, Equatable {
    /// A secret read from the file `option` names (`-` for standard input); with a `prompt`,
    /// typed at the terminal when no option is given, which makes this the default method.
    case secret(option: String, prompt: String?)
    /// A device that holds the key, picked by `flag` (`--tpm2`): its optional PIN comes from
    /// `--pin-file` or `--pin`, asked with `pinPrompt`; `pin` says when it is asked unbidden;
    /// `note` is said before the device is asked.
    case device(flag: String, pinPrompt: String, pin: PINRequest, note: String?)

    /// When a device kind's PIN is read.
    public enum PINRequest: Sendable, Equatable {
        /// Only when `--pin-file` or `--pin` asks for it.
        case whenGiven
        /// Also typed at a terminal when the plugged device says it has a PIN (and a slot may
        /// need it), as `fido2-assert` and ssh ask.
        case whenTheDeviceHasOne
    }

    /// The option or flag that picks the kind.
    public var trigger: String {
        switch self {
        case .secret(let option, _): option
        case .device(let flag, _, _, _): flag
        }
    }
}

/// A slot the generic path chose for an unlock: readable, of this store, stored under its own
/// id. Its ``header`` is public; its wrapped master key is reachable only through a
/// ``SlotOpener``.
public struct SlotCandidate: Sendable {
    /// The slot's header.
    public let header: SlotHeader
    let blob: SlotBlob
}

/// The master key a slot unwrapped and the slot's header. Its key is not reachable outside
/// custody: a kind returns it, it never reads it. Wiped when dropped.
public struct OpenedSlot: ~Copyable {
    let master: SecretBytes
    let header: SlotHeader
}

@available(*, unavailable)
extension OpenedSlot: Sendable {}

/// Lent to ``SlotKind/open(_:with:opener:)`` for the one attempt: the single way a kind turns
/// a candidate and its KEK input into an ``OpenedSlot``. Borrowed and noncopyable, so a kind
/// cannot keep it past the attempt (which runs under the back-off when the kind's does).
public struct SlotOpener: ~Copyable {
    let custodian: Custodian

    /// The master key `candidate` wraps, under the KEK its stored kind derives from `kekInput`;
    /// nil when it does not open (a wrong input, an edited header), which the caller treats as
    /// one more slot that did not open.
    public func unwrap(_ candidate: SlotCandidate, kekInput: borrowing SecretBytes) -> OpenedSlot? {
        Custodian.unwrapMaster(candidate.blob, header: candidate.header, input: kekInput)
    }
}

@available(*, unavailable)
extension SlotOpener: Sendable {}

/// The secret that opens an unlock slot: the kind it is for, and its bytes (a passphrase, PRF
/// bytes, a recovery code as typed; for a device kind its PIN, or none). Noncopyable: it stays
/// in guarded memory and is wiped when the unlock call returns.
///
/// Each kind's file adds a factory (`.passphrase(_:)`, `.prf(_:)`, `.recoveryCode(_:)`,
/// `.tpm2(pin:)`, `.fido2(pin:)`).
public struct UnlockSecret: ~Copyable {
    /// The kind this secret opens.
    package let kind: any SlotKind.Type
    let secret: SecretBytes?

    /// A secret for `kind`.
    package init(_ kind: any SlotKind.Type, secret: consuming SecretBytes?) {
        self.kind = kind
        self.secret = secret
    }

    /// The bytes, handed on (for the control wire).
    consuming func take() -> SecretBytes? { secret }
}

@available(*, unavailable)
extension UnlockSecret: Sendable {}
