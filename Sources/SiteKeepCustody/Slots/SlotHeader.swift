public import SiteKeepCrypto
public import SiteKeepTPM

/// The public facts of an unlock slot (what `sitekeep slot list` prints). Nothing here is secret.
public struct SlotInfo: Sendable, Equatable {
    /// The slot's id (16 hex characters).
    public let id: String
    /// Its kind, as its header names it (a FIDO2 slot is a PRF slot).
    public let kind: StoredSlotKind
    /// A user-chosen label (may be empty).
    public let label: String
    /// Creation time, seconds since the Unix epoch.
    public let created: Int64
    /// The KDF and its parameters, e.g. `Argon2id(t=3, m=65536 KiB, p=1)` or `HKDF-SHA256`.
    public let kdf: String
    /// The Argon2id parameters of a passphrase slot.
    public let argon2Parameters: Argon2id.Parameters?
    /// PRF slots: the WebAuthn relying party id the passkey belongs to.
    public let relyingPartyID: String?
    /// PRF slots: the credential id (base64url), to name the passkey to use.
    public let credentialID: String?
    /// PRF slots: the PRF eval input (base64url) the page passes as `prf.eval.first`.
    public let prfEvalInput: String?
    /// PRF slots: the CTAP2 hmac-secret salt (hex) for that eval input, for
    /// `fido2-assert -G -h` (`sitekeep prf salt`).
    public let hmacSecretSalt: String?
    /// TPM 2.0 slots: whether the TPM asks for a PIN.
    public var tpmPIN: Bool? = nil
    /// TPM 2.0 slots: the SHA-256 PCRs the sealed key is bound to (empty: none).
    public var tpmPCRs: [Int]? = nil
    /// FIDO2 slots: true when the slot's bytes are the key's output with its PIN (the default
    /// of `slot add fido2`), false when made without on request (`--no-pin`: any program of
    /// the user can ask the plugged key for them with no touch); nil for a PRF slot that does
    /// not say (made before SiteKeep recorded it, or by `slot add prf`).
    public var fido2PIN: Bool? = nil
    /// What `slot list` prints in its DETAILS column (the kind's ``SlotKind/describe(_:into:)``
    /// sets it; empty when the kind says nothing more).
    public var details: String = ""
}

/// The kind-specific fields of a slot header, by their tags (which come after the common
/// fields' and only grow: a new kind's new field takes a new tag after the last, so the
/// headers of the older kinds encode to the same bytes as before). A ``StoredSlotKind`` says
/// which of them its slots carry.
public enum SlotHeaderField: UInt8, Sendable, Hashable {
    /// PRF slots: the WebAuthn relying party id.
    case relyingPartyID = 11
    /// PRF slots: the credential id (base64url).
    case credentialID
    /// PRF slots: the PRF eval input (base64url).
    case prfEvalInput
    /// TPM 2.0 slots: the sealed object's marshalled TPM2B_PUBLIC.
    case tpmPublic
    /// TPM 2.0 slots: the sealed object's marshalled TPM2B_PRIVATE.
    case tpmPrivate
    /// TPM 2.0 slots: whether the sealed object's authorization is a PIN.
    case tpmPIN
    /// TPM 2.0 slots: the SHA-256 PCR selection of its policy.
    case tpmPCRs
    /// PRF slots made by `slot add fido2`: whether the key's output was asked with its PIN.
    case fido2PIN
}

/// A slot header: everything about a slot except the wrapped master key. Serialised
/// canonically, and those exact bytes are the AEAD associated data of the wrapped master key,
/// so any change to the header (parameters, salt, kind, ids, store) makes unwrapping fail.
/// Nothing in it is secret (the salt is public input to the KDF).
///
/// Encoding (version 1): `"SKSH"` then fields as `tag(u8) length(u16 BE) value`, tags strictly
/// increasing, exactly the fields the kind requires. Parsing is strict and bounded: the header
/// comes from the keyring, which is outside input. Which KDF and which kind-specific fields a
/// header must have, its kind says (``StoredSlotKind``).
public struct SlotHeader: Sendable, Equatable {
    static let version: UInt8 = 1
    static let magic: [UInt8] = Array("SKSH".utf8)
    static let maximumEncodedCount = 4096
    static let saltByteCount = 16

    /// The slot's kind.
    public internal(set) var kind: StoredSlotKind
    /// The slot's id (16 hex characters).
    public internal(set) var slotID: String
    /// The store the slot belongs to.
    public internal(set) var storeID: String
    /// Creation time, seconds since the Unix epoch.
    public internal(set) var created: Int64
    /// The user's label.
    public internal(set) var label: String
    /// Argon2id slots: the parameters.
    public internal(set) var argon2: Argon2id.Parameters?
    /// The KDF's salt (16 bytes; public).
    public internal(set) var salt: [UInt8]
    /// PRF slots: the WebAuthn relying party id.
    public internal(set) var relyingPartyID: String?
    /// PRF slots: the credential id (base64url).
    public internal(set) var credentialID: String?
    /// PRF slots: the PRF eval input (base64url).
    public internal(set) var prfEvalInput: String?
    /// TPM 2.0 slots: the sealed object (marshalled TPM2B_PUBLIC and TPM2B_PRIVATE).
    public internal(set) var tpmObject: SealedObject? = nil
    /// TPM 2.0 slots: whether the sealed object's authorization is a PIN.
    public internal(set) var tpmPIN: Bool = false
    /// TPM 2.0 slots: the PCR policy's selection (SHA-256 bank; none: no policy).
    public internal(set) var tpmPCRs: PCRSelection = .none
    /// PRF slots made by `slot add fido2`: whether the key's output was asked with its PIN
    /// (nil: not recorded, as in slots made before it was, whose headers stay as they were).
    public internal(set) var fido2PIN: Bool? = nil

    // Tags only grow: a new kind's fields get new tags after the old ones, so the headers of
    // the older kinds encode to the same bytes as before.
    private enum Tag: UInt8 {
        case version = 1, kind, slotID, storeID, created, label, kdf, iterations, memoryKiB, salt
        case relyingPartyID, credentialID, prfEvalInput
        case tpmPublic, tpmPrivate, tpmPIN, tpmPCRs
        case fido2PIN
    }
    /// The longest marshalled TPM2B_PUBLIC / TPM2B_PRIVATE a header takes.
    static let maximumTPMBlobCount = 1024
    private static let kdfArgon2id: UInt8 = 1
    private static let kdfHKDF: UInt8 = 2

    /// The public facts `slot list` shows, as the standard kinds describe them.
    var info: SlotInfo { slotInfo(kinds: .standard) }

    /// The public facts `slot list` shows: the common ones, then what the kind that owns the
    /// header's kind adds (``SlotKind/describe(_:into:)``).
    func slotInfo(kinds: SlotKinds) -> SlotInfo {
        var info = SlotInfo(id: slotID, kind: kind, label: label, created: created,
                            kdf: argon2.map(\.description) ?? "HKDF-SHA256",
                            argon2Parameters: argon2, relyingPartyID: nil, credentialID: nil,
                            prfEvalInput: nil, hmacSecretSalt: nil)
        kinds.owner(of: kind)?.describe(self, into: &info)
        return info
    }

    func encoded() -> [UInt8] {
        var out = Self.magic
        func field(_ tag: Tag, _ value: [UInt8]) {
            out.append(tag.rawValue)
            out.append(UInt8(value.count >> 8)); out.append(UInt8(value.count & 0xff))
            out += value
        }
        func be(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).reversed().map { UInt8((v >> (8 * UInt64($0))) & 0xff) } }
        field(.version, [Self.version])
        field(.kind, [kind.code])
        field(.slotID, Array(slotID.utf8))
        field(.storeID, Array(storeID.utf8))
        field(.created, be(UInt64(bitPattern: created), 8))
        field(.label, Array(label.utf8))
        field(.kdf, [argon2 == nil ? Self.kdfHKDF : Self.kdfArgon2id])
        if let a = argon2 {
            field(.iterations, be(UInt64(a.iterations), 4))
            field(.memoryKiB, be(UInt64(a.memoryKiB), 4))
        }
        field(.salt, salt)
        if let rp = relyingPartyID { field(.relyingPartyID, Array(rp.utf8)) }
        if let c = credentialID { field(.credentialID, Array(c.utf8)) }
        if let p = prfEvalInput { field(.prfEvalInput, Array(p.utf8)) }
        if let object = tpmObject {
            field(.tpmPublic, object.publicBlob)
            field(.tpmPrivate, object.privateBlob)
            field(.tpmPIN, [tpmPIN ? 1 : 0])
            field(.tpmPCRs, be(UInt64(tpmPCRs.mask), 3))
        }
        if let pin = fido2PIN { field(.fido2PIN, [pin ? 1 : 0]) }
        return out
    }

    /// Parses a header strictly: known version and kind, required fields only, bounded sizes,
    /// Argon2id parameters within the crypto layer's floor and ceiling, canonical form.
    /// The kinds `kinds` lists are the ones known; a header of another kind is refused.
    static func parse(_ bytes: [UInt8], kinds: SlotKinds = .standard) throws(CustodyError) -> SlotHeader {
        guard bytes.count <= maximumEncodedCount else { throw .invalidSlotHeader("longer than \(maximumEncodedCount) bytes") }
        guard bytes.count >= magic.count, Array(bytes.prefix(magic.count)) == magic else {
            throw .invalidSlotHeader("not a SiteKeep slot header")
        }
        var fields: [Tag: [UInt8]] = [:]
        var i = magic.count
        var lastTag: UInt8 = 0
        while i < bytes.count {
            guard bytes.count - i >= 3 else { throw .invalidSlotHeader("truncated field") }
            let rawTag = bytes[i]
            let length = Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            i += 3
            guard let tag = Tag(rawValue: rawTag) else { throw .invalidSlotHeader("unknown field \(rawTag)") }
            guard rawTag > lastTag else { throw .invalidSlotHeader("fields out of order or repeated") }
            lastTag = rawTag
            guard length <= bytes.count - i else { throw .invalidSlotHeader("field \(rawTag) runs past the end") }
            fields[tag] = Array(bytes[i..<(i + length)])
            i += length
        }
        func require(_ tag: Tag) throws(CustodyError) -> [UInt8] {
            guard let v = fields.removeValue(forKey: tag) else { throw .invalidSlotHeader("missing field \(tag)") }
            return v
        }
        func text(_ tag: Tag, max: Int, allowEmpty: Bool = false) throws(CustodyError) -> String {
            try checkedText(tag, try require(tag), max: max, allowEmpty: allowEmpty)
        }
        func checkedText(_ tag: Tag, _ v: [UInt8], max: Int, allowEmpty: Bool = false) throws(CustodyError) -> String {
            guard v.count <= max, allowEmpty || !v.isEmpty else { throw .invalidSlotHeader("field \(tag) has a bad length") }
            guard let s = String(validating: v, as: UTF8.self), !s.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                throw .invalidSlotHeader("field \(tag) is not printable UTF-8")
            }
            return s
        }
        func integer(_ tag: Tag, bytes n: Int) throws(CustodyError) -> UInt64 {
            let v = try require(tag)
            guard v.count == n else { throw .invalidSlotHeader("field \(tag) must be \(n) bytes") }
            return v.reduce(0) { $0 << 8 | UInt64($1) }
        }
        let version = try require(.version)
        guard version == [Self.version] else { throw .invalidSlotHeader("unsupported slot version \(version.first.map(String.init) ?? "?"); upgrade SiteKeep") }
        let kindByte = try require(.kind)
        guard kindByte.count == 1, let kind = kinds.stored(code: kindByte[0]) else {
            throw .invalidSlotHeader("unknown slot kind")
        }
        let slotID = try text(.slotID, max: 64)
        let storeID = try text(.storeID, max: 64)
        let created = Int64(bitPattern: try integer(.created, bytes: 8))
        let label = try text(.label, max: 64, allowEmpty: true)
        let kdf = try require(.kdf)
        var argon2: Argon2id.Parameters? = nil
        switch kind.kdf {
        case .argon2id:
            guard kdf == [kdfArgon2id] else { throw .invalidSlotHeader("a \(kind.name) slot must use Argon2id") }
            let t = try integer(.iterations, bytes: 4), m = try integer(.memoryKiB, bytes: 4)
            do { argon2 = try Argon2id.Parameters(iterations: Int(t), memoryKiB: Int(m)) } catch {
                throw .invalidSlotHeader("Argon2id parameters refused: \(error)")
            }
        case .hkdfSHA256:
            guard kdf == [kdfHKDF] else { throw .invalidSlotHeader("a \(kind.name) slot must use HKDF-SHA256") }
        }
        let salt = try require(.salt)
        guard salt.count == saltByteCount else { throw .invalidSlotHeader("salt must be \(saltByteCount) bytes") }
        // The kind's own fields, in tag order: those it requires, and those it may have.
        func own(_ field: SlotHeaderField) throws(CustodyError) -> [UInt8]? {
            guard let tag = Tag(rawValue: field.rawValue) else { return nil }
            if kind.requiredFields.contains(field) { return try require(tag) }
            if kind.optionalFields.contains(field) { return fields.removeValue(forKey: tag) }
            return nil
        }
        func flag(_ tag: Tag, _ v: [UInt8]) throws(CustodyError) -> Bool {
            guard v == [0] || v == [1] else { throw .invalidSlotHeader("field \(tag) must be 0 or 1") }
            return v == [1]
        }
        var rp: String? = nil, cred: String? = nil, eval: String? = nil, fido2PIN: Bool? = nil
        if let v = try own(.relyingPartyID) { rp = try checkedText(.relyingPartyID, v, max: 253) }
        if let v = try own(.credentialID) { cred = try checkedText(.credentialID, v, max: 1400) }
        if let v = try own(.prfEvalInput) { eval = try checkedText(.prfEvalInput, v, max: 1400) }
        var tpmObject: SealedObject? = nil, tpmPIN = false, tpmPCRs = PCRSelection.none
        if let pub = try own(.tpmPublic), let priv = try own(.tpmPrivate) {
            guard (1...maximumTPMBlobCount).contains(pub.count), (1...maximumTPMBlobCount).contains(priv.count) else {
                throw .invalidSlotHeader("a TPM object blob has a bad length")
            }
            tpmObject = SealedObject(publicBlob: pub, privateBlob: priv)
        }
        if let v = try own(.tpmPIN) { tpmPIN = try flag(.tpmPIN, v) }
        if let v = try own(.tpmPCRs) {
            guard v.count == 3 else { throw .invalidSlotHeader("field \(Tag.tpmPCRs) must be 3 bytes") }
            let mask = v.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            do throws(TPMError) { tpmPCRs = try PCRSelection(mask: UInt32(mask)) } catch {
                throw .invalidSlotHeader("field tpmPCRs is out of range")
            }
        }
        // Optional: absent in the PRF slots made before it was recorded.
        if let v = try own(.fido2PIN) { fido2PIN = try flag(.fido2PIN, v) }
        guard fields.isEmpty else { throw .invalidSlotHeader("field \(fields.keys.first.map { "\($0)" } ?? "?") does not belong in a \(kind.name) slot") }
        let header = SlotHeader(kind: kind, slotID: slotID, storeID: storeID, created: created, label: label,
                                argon2: argon2, salt: salt, relyingPartyID: rp, credentialID: cred, prfEvalInput: eval,
                                tpmObject: tpmObject, tpmPIN: tpmPIN, tpmPCRs: tpmPCRs, fido2PIN: fido2PIN)
        guard header.encoded() == bytes else { throw .invalidSlotHeader("not in canonical form") }
        return header
    }

    /// The associated data binding the wrapped master key to this exact header.
    func associatedData() -> [UInt8] { Array("sitekeep.slot.v1\0".utf8) + encoded() }
}

/// A stored slot: `u16 BE header length || header || wrapped master key`.
struct SlotBlob: Sendable {
    var headerBytes: [UInt8]
    var wrappedMaster: [UInt8]

    func encoded() -> [UInt8] {
        [UInt8(headerBytes.count >> 8), UInt8(headerBytes.count & 0xff)] + headerBytes + wrappedMaster
    }

    static let wrappedCount = XChaCha20Poly1305.overheadByteCount + 32

    static func parse(_ blob: [UInt8]) throws(CustodyError) -> SlotBlob {
        guard blob.count >= 2 else { throw .invalidSlotHeader("slot item too short") }
        let n = Int(blob[0]) << 8 | Int(blob[1])
        guard n <= SlotHeader.maximumEncodedCount, blob.count == 2 + n + wrappedCount else {
            throw .invalidSlotHeader("slot item has the wrong length")
        }
        return SlotBlob(headerBytes: Array(blob[2..<(2 + n)]), wrappedMaster: Array(blob[(2 + n)...]))
    }
}
