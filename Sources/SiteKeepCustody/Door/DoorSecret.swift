public import SiteKeepCrypto
import SiteKeepSystem

/// The kind of secret a door slot opens with: the high-entropy ones only (docs/door.md).
public enum DoorSlotKind: UInt8, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// A recovery code (its 16 bytes, checksum checked: ``RecoveryCode``).
    case recovery = 1
    /// 32 bytes of a passkey's PRF or a FIDO2 key's hmac-secret output.
    case prf = 2

    /// `recovery` or `prf`.
    public var description: String { self == .recovery ? "recovery" : "prf" }

    /// The info string of the HKDF that turns the secret into the door's root (docs/door.md).
    var rootInfo: String { "sitekeep.door.root.\(self).v1" }
    /// The info string of the HKDF that turns the secret into a door slot's KEK.
    var kekInfo: String { "sitekeep.door.slot.\(self).v1" }
}

/// The secret that finds, opens and (with `door enable`) makes a door: its kind and its bytes
/// in guarded memory (a recovery code's 16 bytes, 32 PRF bytes). Noncopyable and wiped when
/// dropped; it never leaves custody in any form but the derivations docs/door.md names.
public struct DoorSecret: ~Copyable {
    /// The kind.
    public let kind: DoorSlotKind
    let bytes: SecretBytes

    /// The salt of the HKDF that derives the door's root from the secret (docs/door.md).
    static let rootSalt = Array("sitekeep.door.v1".utf8)

    init(kind: DoorSlotKind, bytes: consuming SecretBytes) {
        self.kind = kind
        self.bytes = bytes
    }

    /// A recovery code as typed (case, `-` and spaces do not matter).
    /// - Throws: ``CustodyError/recoveryCodeMistyped(_:)`` when its length or checksum is wrong.
    public static func recoveryCode(_ typed: consuming SecretBytes) throws(CustodyError) -> DoorSecret {
        DoorSecret(kind: .recovery, bytes: try RecoveryCode.parse(typed))
    }

    /// 32 bytes of PRF (hmac-secret) output.
    /// - Throws: ``CustodyError/invalidArgument(_:)`` for another length.
    public static func prf(_ bytes: consuming SecretBytes) throws(CustodyError) -> DoorSecret {
        guard bytes.count == WebAuthnPRF.outputByteCount else {
            throw .invalidArgument("PRF output must be \(WebAuthnPRF.outputByteCount) bytes, got \(bytes.count)")
        }
        return DoorSecret(kind: .prf, bytes: bytes)
    }

    /// A new recovery code, for a door of its own: the code (show it once) and the secret.
    public static func newRecoveryCode() throws(CustodyError) -> NewDoorRecoveryCode {
        let generated = try RecoveryCode.generate()
        let code = generated.code
        let secret: SecretBytes
        do { secret = try generated.secret.duplicate() } catch { throw .crypto(error) }
        return NewDoorRecoveryCode(code: code, secret: DoorSecret(kind: .recovery, bytes: secret))
    }

    /// The door's root key: HKDF-SHA256(secret, salt "sitekeep.door.v1", info
    /// "sitekeep.door.root.<kind>.v1").
    func root() throws(CryptoError) -> SecretBytes {
        try HKDF.deriveKey(inputKeyMaterial: bytes, salt: Self.rootSalt, info: Array(kind.rootInfo.utf8))
    }

    /// Where the door is and how its sgit layer opens: the vault id (24 lowercase hex
    /// characters: the first 12 bytes of HKDF(root, info "sitekeep.door.vault-id.v1")) and the
    /// sgit keys of the vault key `skdoor-<hex of HKDF(root, info
    /// "sitekeep.door.vault-passphrase.v1")>:<vault id>` (SGIT-FORMAT.md §1.2: PBKDF2, so the
    /// door also opens in `sgit` given that key). Costs two PBKDF2 runs.
    /// - Throws: ``CustodyError/crypto(_:)``.
    public func vaultKeys(lockScope: LockScope = LockScope()) throws(CustodyError) -> SgitKeys {
        do {
            let root = try self.root()
            let idBytes = try HKDF.deriveKey(inputKeyMaterial: root, info: Array("sitekeep.door.vault-id.v1".utf8), outputByteCount: 12)
            let vaultID = idBytes.withUnsafeBytes { Hex.encode(Array($0)) }
            let passphrase = try HKDF.deriveKey(inputKeyMaterial: root, info: Array("sitekeep.door.vault-passphrase.v1".utf8))
            var text = Array("skdoor-".utf8)
            let digits = Array("0123456789abcdef".utf8)
            passphrase.withUnsafeBytes { raw in
                for b in raw { text.append(digits[Int(b >> 4)]); text.append(digits[Int(b & 0x0f)]) }
            }
            text += Array(":\(vaultID)".utf8)
            let keyText = try SecretBytes(consumingAndZeroing: &text)
            do {
                return try SgitKeys.derive(fromKeyText: keyText, lockScope: lockScope)
            } catch {
                throw CustodyError.invalidArgument("the door's vault key did not derive: \(error)")
            }
        } catch let e as CryptoError {
            throw .crypto(e)
        } catch let e as CustodyError {
            throw e
        } catch {
            throw .invalidArgument("the door's vault key did not derive")
        }
    }

    /// A door slot's key-encryption key: HKDF-SHA256(secret, salt = the slot header's salt,
    /// info "sitekeep.door.slot.<kind>.v1").
    func kek(salt: [UInt8]) throws(CryptoError) -> SecretBytes {
        try HKDF.deriveKey(inputKeyMaterial: bytes, salt: salt, info: Array(kind.kekInfo.utf8))
    }
}

@available(*, unavailable)
extension DoorSecret: Sendable {}

/// A recovery code minted for a door (`door enable --new-recovery`): show ``code`` once.
public struct NewDoorRecoveryCode: ~Copyable {
    /// The code, to show once.
    public let code: RecoveryCode
    /// The secret it is.
    public let secret: DoorSecret

    /// Hands the secret on.
    public consuming func take() -> DoorSecret { secret }
}

@available(*, unavailable)
extension NewDoorRecoveryCode: Sendable {}
