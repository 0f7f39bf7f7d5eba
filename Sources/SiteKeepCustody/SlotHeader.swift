public import SiteKeepCrypto
import SiteKeepTPM

/// The kinds of unlock slot.
public enum SlotKind: String, Sendable, CaseIterable {
    /// A passphrase through Argon2id.
    case passphrase
    /// 32 bytes of WebAuthn PRF (or CTAP2 hmac-secret) output through HKDF-SHA256.
    case prf
    /// A random 128-bit recovery code through HKDF-SHA256.
    case recovery
    /// 32 random bytes sealed to this machine's TPM 2.0 (a PIN checked by the TPM, optionally
    /// PCRs), unsealed through HKDF-SHA256.
    case tpm2

    var code: UInt8 {
        switch self { case .passphrase: 1; case .prf: 2; case .recovery: 3; case .tpm2: 4 }
    }
}

/// The public facts of an unlock slot (what `sitekeep slot list` prints). Nothing here is secret.
public struct SlotInfo: Sendable, Equatable {
    /// The slot's id (16 hex characters).
    public let id: String
    /// Its kind.
    public let kind: SlotKind
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
}

/// A slot header: everything about a slot except the wrapped master key. Serialised
/// canonically, and those exact bytes are the AEAD associated data of the wrapped master key,
/// so any change to the header (parameters, salt, kind, ids, store) makes unwrapping fail.
///
/// Encoding (version 1): `"SKSH"` then fields as `tag(u8) length(u16 BE) value`, tags strictly
/// increasing, exactly the fields the kind requires. Parsing is strict and bounded: the header
/// comes from the keyring, which is outside input.
struct SlotHeader: Equatable {
    static let version: UInt8 = 1
    static let magic: [UInt8] = Array("SKSH".utf8)
    static let maximumEncodedCount = 4096
    static let saltByteCount = 16

    var kind: SlotKind
    var slotID: String
    var storeID: String
    var created: Int64
    var label: String
    var argon2: Argon2id.Parameters?
    var salt: [UInt8]
    var relyingPartyID: String?
    var credentialID: String?
    var prfEvalInput: String?
    /// TPM 2.0 slots: the sealed object (marshalled TPM2B_PUBLIC and TPM2B_PRIVATE).
    var tpmObject: SealedObject? = nil
    /// TPM 2.0 slots: whether the sealed object's authorization is a PIN.
    var tpmPIN: Bool = false
    /// TPM 2.0 slots: the PCR policy's selection (SHA-256 bank; none: no policy).
    var tpmPCRs: PCRSelection = .none
    /// PRF slots made by `slot add fido2`: whether the key's output was asked with its PIN
    /// (nil: not recorded, as in slots made before it was, whose headers stay as they were).
    var fido2PIN: Bool? = nil

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

    var info: SlotInfo {
        SlotInfo(id: slotID, kind: kind, label: label, created: created,
                 kdf: argon2.map(\.description) ?? "HKDF-SHA256",
                 argon2Parameters: argon2, relyingPartyID: relyingPartyID, credentialID: credentialID,
                 prfEvalInput: prfEvalInput,
                 hmacSecretSalt: prfEvalInput.flatMap { try? Base64.decode($0, variant: .urlSafeNoPadding) }
                    .map { Hex.encode(WebAuthnPRF.hmacSecretSalt(forEvalInput: $0)) },
                 tpmPIN: kind == .tpm2 ? tpmPIN : nil, tpmPCRs: kind == .tpm2 ? tpmPCRs.indices : nil,
                 fido2PIN: kind == .prf ? fido2PIN : nil)
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
    static func parse(_ bytes: [UInt8]) throws(CustodyError) -> SlotHeader {
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
            let v = try require(tag)
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
        guard kindByte.count == 1, let kind = SlotKind.allCases.first(where: { $0.code == kindByte[0] }) else {
            throw .invalidSlotHeader("unknown slot kind")
        }
        let slotID = try text(.slotID, max: 64)
        let storeID = try text(.storeID, max: 64)
        let created = Int64(bitPattern: try integer(.created, bytes: 8))
        let label = try text(.label, max: 64, allowEmpty: true)
        let kdf = try require(.kdf)
        var argon2: Argon2id.Parameters? = nil
        switch kind {
        case .passphrase:
            guard kdf == [kdfArgon2id] else { throw .invalidSlotHeader("a passphrase slot must use Argon2id") }
            let t = try integer(.iterations, bytes: 4), m = try integer(.memoryKiB, bytes: 4)
            do { argon2 = try Argon2id.Parameters(iterations: Int(t), memoryKiB: Int(m)) } catch {
                throw .invalidSlotHeader("Argon2id parameters refused: \(error)")
            }
        case .prf, .recovery, .tpm2:
            guard kdf == [kdfHKDF] else { throw .invalidSlotHeader("a \(kind.rawValue) slot must use HKDF-SHA256") }
        }
        let salt = try require(.salt)
        guard salt.count == saltByteCount else { throw .invalidSlotHeader("salt must be \(saltByteCount) bytes") }
        var rp: String? = nil, cred: String? = nil, eval: String? = nil, fido2PIN: Bool? = nil
        if kind == .prf {
            rp = try text(.relyingPartyID, max: 253)
            cred = try text(.credentialID, max: 1400)
            eval = try text(.prfEvalInput, max: 1400)
            // Optional: absent in the slots made before it was recorded.
            if let pin = fields.removeValue(forKey: .fido2PIN) {
                guard pin == [0] || pin == [1] else { throw .invalidSlotHeader("field fido2PIN must be 0 or 1") }
                fido2PIN = pin == [1]
            }
        }
        var tpmObject: SealedObject? = nil, tpmPIN = false, tpmPCRs = PCRSelection.none
        if kind == .tpm2 {
            let pub = try require(.tpmPublic), priv = try require(.tpmPrivate)
            guard (1...maximumTPMBlobCount).contains(pub.count), (1...maximumTPMBlobCount).contains(priv.count) else {
                throw .invalidSlotHeader("a TPM object blob has a bad length")
            }
            tpmObject = SealedObject(publicBlob: pub, privateBlob: priv)
            let pin = try require(.tpmPIN)
            guard pin == [0] || pin == [1] else { throw .invalidSlotHeader("field tpmPIN must be 0 or 1") }
            tpmPIN = pin == [1]
            let mask = try integer(.tpmPCRs, bytes: 3)
            do throws(TPMError) { tpmPCRs = try PCRSelection(mask: UInt32(mask)) } catch {
                throw .invalidSlotHeader("field tpmPCRs is out of range")
            }
        }
        guard fields.isEmpty else { throw .invalidSlotHeader("field \(fields.keys.first.map { "\($0)" } ?? "?") does not belong in a \(kind.rawValue) slot") }
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
struct SlotBlob {
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
