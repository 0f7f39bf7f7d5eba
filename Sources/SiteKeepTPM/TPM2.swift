#if canImport(Glibc)
import Glibc
#endif
internal import CTPMLoader
public import SiteKeepSecureMemory

/// Where the TPM 2.0 is reached: a tpm2-tss TCTI configuration string.
///
/// `device:/dev/tpmrm0` (the kernel's resource manager) unless `SITEKEEP_TPM_TCTI` names
/// another, such as `swtpm:host=127.0.0.1,port=2321` for a software TPM. Not stored with a
/// slot: the same sealed object opens through whichever TCTI reaches the TPM that sealed it.
public struct TPMConnection: Sendable, Equatable, CustomStringConvertible {
    /// The kernel resource manager's device.
    public static let defaultTCTI = "device:/dev/tpmrm0"
    /// The environment variable that overrides ``defaultTCTI``.
    public static let environmentVariable = "SITEKEEP_TPM_TCTI"

    /// The TCTI configuration string, as `Tss2_TctiLdr_Initialize` takes it.
    public let tcti: String

    /// A connection through `tcti`.
    public init(tcti: String) { self.tcti = tcti }

    /// `SITEKEEP_TPM_TCTI` from `environment` (this process's when nil), else ``defaultTCTI``.
    public static func configured(environment: [String: String]? = nil) -> TPMConnection {
        let value: String?
        if let environment { value = environment[environmentVariable] } else { value = getenv(environmentVariable).map { String(cString: $0) } }
        guard let value, !value.isEmpty else { return TPMConnection(tcti: defaultTCTI) }
        return TPMConnection(tcti: value)
    }

    public var description: String { tcti }

    /// The device path of a `device` TCTI, for messages.
    var devicePath: String? {
        guard tcti == "device" || tcti.hasPrefix("device:") else { return nil }
        let rest = tcti.dropFirst("device".count).drop { $0 == ":" }
        return rest.isEmpty ? "/dev/tpmrm0" : String(rest)
    }
}

/// A set of SHA-256 PCRs (0 to 23) a sealed object's policy covers.
public struct PCRSelection: Sendable, Hashable, CustomStringConvertible {
    /// Bit n set: PCR n.
    public let mask: UInt32

    /// No PCRs: no policy.
    public static let none = PCRSelection(uncheckedMask: 0)

    init(uncheckedMask: UInt32) { mask = uncheckedMask }

    /// The selection of `mask` (bit n: PCR n).
    /// - Throws: ``TPMError/invalidPCRs(_:)`` for a bit above 23.
    public init(mask: UInt32) throws(TPMError) {
        guard mask < 1 << 24 else { throw .invalidPCRs("PCRs are numbered 0 to 23") }
        self.mask = mask
    }

    /// The selection of `indices`.
    public init(indices: [Int]) throws(TPMError) {
        var m: UInt32 = 0
        for i in indices {
            guard (0...23).contains(i) else { throw .invalidPCRs("PCR \(i) does not exist; PCRs are numbered 0 to 23") }
            m |= 1 << UInt32(i)
        }
        mask = m
    }

    /// Parses a comma-separated list such as `0,7` (or `7`).
    public init(parsing text: String) throws(TPMError) {
        var indices: [Int] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let trimmed = String(part.filter { $0 != " " && $0 != "\t" })
            guard let i = Int(trimmed) else { throw .invalidPCRs("'\(trimmed.prefix(20))' is not a PCR number (give a list like 0,7)") }
            indices.append(i)
        }
        try self.init(indices: indices)
    }

    /// The PCR numbers, ascending.
    public var indices: [Int] { (0..<24).filter { mask & (1 << UInt32($0)) != 0 } }
    public var isEmpty: Bool { mask == 0 }
    /// `0,7`, or `none`.
    public var description: String { isEmpty ? "none" : indices.map(String.init).joined(separator: ",") }
}

/// A sealed object as the TPM returned it: the marshalled `TPM2B_PUBLIC` and `TPM2B_PRIVATE`.
/// Not secret (the private part is encrypted by the TPM's storage key), and useless on any
/// other TPM.
public struct SealedObject: Sendable, Equatable {
    /// The marshalled TPM2B_PUBLIC.
    public var publicBlob: [UInt8]
    /// The marshalled TPM2B_PRIVATE.
    public var privateBlob: [UInt8]

    public init(publicBlob: [UInt8], privateBlob: [UInt8]) {
        self.publicBlob = publicBlob
        self.privateBlob = privateBlob
    }
}

/// The TPM's dictionary-attack state (TPM2_GetCapability, `TPM_PT_LOCKOUT_*`).
public struct LockoutStatus: Sendable, Equatable, CustomStringConvertible {
    /// Failed authorizations counted now (`TPM_PT_LOCKOUT_COUNTER`).
    public var failedTries: Int
    /// Failures that start the lock-out (`TPM_PT_MAX_AUTH_FAIL`).
    public var maxTries: Int
    /// Seconds after which one failure is forgotten (`TPM_PT_LOCKOUT_INTERVAL`).
    public var recoverySeconds: Int
    /// Seconds the lockout authorization itself is blocked after a failure (`TPM_PT_LOCKOUT_RECOVERY`).
    public var lockoutRecoverySeconds: Int
    /// Whether the TPM refuses DA-protected authorizations now.
    public var inLockout: Bool

    public var description: String {
        "\(failedTries) of \(maxTries) failed tries counted, one forgotten every \(recoverySeconds) s" + (inLockout ? ", locked out" : "")
    }
}

/// The TPM layer's errors. Descriptions name the remedy and never hold a PIN or sealed bytes.
public enum TPMError: Error, Sendable, Equatable, CustomStringConvertible {
    /// tpm2-tss is not installed (the text names the library).
    case libraryMissing(String)
    /// The TPM device does not exist.
    case noDevice(path: String)
    /// The device exists and this user may not open it.
    case noAccess(path: String)
    /// The TCTI could not be opened (a software TPM not running, a bad configuration).
    case unreachable(tcti: String, detail: String)
    /// The PIN was wrong; the TPM counted the failure.
    case wrongPIN(LockoutStatus?)
    /// The TPM is in dictionary-attack lock-out.
    case lockedOut(LockoutStatus?)
    /// The object's PCR policy failed: the machine's measured state changed.
    case pcrsChanged(PCRSelection)
    /// The sealed object does not parse or does not load on this TPM (edited, or another TPM's).
    case badObject(String)
    /// A PIN is needed and none was given (nothing was sent to the TPM).
    case pinRequired
    /// A PCR list out of range.
    case invalidPCRs(String)
    /// Any other TPM or tpm2-tss failure (the text is tss2-rc's).
    case failed(String)

    public var description: String {
        switch self {
        case .libraryMissing(let why):
            return why
        case .noDevice(let path):
            return "no TPM: \(path) does not exist (this machine has no TPM 2.0, or it is off in the firmware settings); "
                + "name another with 'sitekeep config set tpm-tcti swtpm:host=127.0.0.1,port=2321' (or \(TPMConnection.environmentVariable) for one run)"
        case .noAccess(let path):
            return "no access to the TPM at \(path): it belongs to the group 'tss'; join it with 'sudo usermod -aG tss $USER' and log in again"
        case let .unreachable(tcti, detail):
            return "cannot reach the TPM through '\(tcti)': \(detail)"
        case .wrongPIN(let status):
            let left = status.map { s -> String in
                let remaining = max(s.maxTries - s.failedTries, 0)
                return "; the TPM allows \(remaining) more failure\(remaining == 1 ? "" : "s") before it locks out (one is forgotten every \(s.recoverySeconds) s)"
            } ?? ""
            return "the TPM refused the PIN" + left
        case .lockedOut(let status):
            let when = status.map { s -> String in
                s.recoverySeconds > 0
                    ? "; it forgets one failure every \(s.recoverySeconds) s, so try again in about \(s.recoverySeconds) s (\(s.failedTries) of \(s.maxTries) failures counted)"
                    : "; this TPM does not recover by itself: its owner must clear the lock-out (tpm2_dictionarylockout --clear-lockout)"
            } ?? ""
            return "the TPM is locked out after too many wrong PINs (its dictionary-attack protection)" + when
                + "; meanwhile unlock with another slot"
        case .pcrsChanged(let pcrs):
            return "the TPM refused to unseal: this machine's measured boot state (PCR \(pcrs)) changed since the slot was made "
                + "(a firmware, boot loader or Secure Boot change); unlock with another slot, then remove this one and add it again"
        case .badObject(let why):
            return "the TPM slot's sealed object is unusable here: \(why) (a slot made on another TPM, after a TPM clear, or edited)"
        case .pinRequired:
            return "this TPM slot has a PIN: give it with --pin-file PATH or --pin"
        case .invalidPCRs(let why):
            return "invalid PCR list: \(why)"
        case .failed(let why):
            return "TPM error: \(why)"
        }
    }
}

/// The authorization value of a sealed object: empty, or bytes (at most 32) in guarded memory.
public enum TPMAuthValue: ~Copyable {
    /// No PIN.
    case empty
    /// A value derived from a PIN (at most 32 bytes).
    case value(SecretBytes)

    /// Whether there is a value.
    public var isSet: Bool {
        switch self { case .empty: false; case .value: true }
    }

    func withBytes<R: ~Copyable>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch self {
        case .empty: return body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .value(let v): return v.withUnsafeBytes { body($0) }
        }
    }
}

/// TPM 2.0 sealing through tpm2-tss's ESAPI (loaded with dlopen on first use; see CTPMLoader).
///
/// Each call opens the TCTI, recreates the owner hierarchy's ECC P-256 storage primary (the TCG
/// template, deterministic), does its work in sessions salted by that primary with parameter
/// encryption, flushes every handle and closes. Nothing is left loaded in the TPM.
public enum TPM2 {
    /// The most bytes ``seal(_:auth:pcrs:connection:)`` seals.
    public static let maximumSealedCount = 128
    /// The longest authorization value.
    public static let maximumAuthCount = 32

    /// Seals `secret` to the TPM: only this TPM, with `auth` and (when `pcrs` is not empty)
    /// these PCRs at their current values, unseals it.
    public static func seal(_ secret: borrowing SecretBytes, auth: borrowing TPMAuthValue, pcrs: PCRSelection,
                            connection: TPMConnection) throws(TPMError) -> SealedObject {
        guard (1...maximumSealedCount).contains(secret.count) else { throw .failed("sealed data must be 1 to \(maximumSealedCount) bytes") }
        let tpm = try Context(connection)
        var pub = [UInt8](repeating: 0, count: 1024)
        var priv = [UInt8](repeating: 0, count: 1024)
        var pubCount = pub.count, privCount = priv.count
        var status = sk_tpm_status()
        let code = auth.withBytes { a in
            secret.withUnsafeBytes { s in
                pub.withUnsafeMutableBufferPointer { p in
                    priv.withUnsafeMutableBufferPointer { q in
                        sk_tpm_seal(tpm.handle, s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count,
                                    a.baseAddress?.assumingMemoryBound(to: UInt8.self), a.count, pcrs.mask,
                                    p.baseAddress, &pubCount, q.baseAddress, &privCount, &status)
                    }
                }
            }
        }
        guard code == Int32(SK_TPM_OK) else { throw tpm.error(status, pcrs: pcrs) }
        return SealedObject(publicBlob: Array(pub.prefix(pubCount)), privateBlob: Array(priv.prefix(privCount)))
    }

    /// Unseals `object` with `auth` (and its PCR policy when `pcrs` is not empty).
    /// - Throws: ``TPMError/wrongPIN(_:)``, ``TPMError/lockedOut(_:)`` (each with the TPM's
    ///   lock-out counters), ``TPMError/pcrsChanged(_:)``, ``TPMError/badObject(_:)``, and the
    ///   errors of reaching the TPM.
    public static func unseal(_ object: SealedObject, auth: borrowing TPMAuthValue, pcrs: PCRSelection,
                              connection: TPMConnection) throws(TPMError) -> SecretBytes {
        let tpm = try Context(connection)
        var status = sk_tpm_status()
        var count = 0
        let result: SecretBytes
        do {
            result = try SecretBytes(count: maximumSealedCount) { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                let code = auth.withBytes { a in
                    object.publicBlob.withUnsafeBufferPointer { p in
                        object.privateBlob.withUnsafeBufferPointer { q in
                            sk_tpm_unseal(tpm.handle, p.baseAddress, p.count, q.baseAddress, q.count,
                                          a.baseAddress?.assumingMemoryBound(to: UInt8.self), a.count, pcrs.mask,
                                          out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &count, &status)
                        }
                    }
                }
                if code != Int32(SK_TPM_OK) { throw .invalidLength(what: "unseal", detail: "refused") }
            }
        } catch {
            if status.code != Int32(SK_TPM_OK) { throw tpm.error(status, pcrs: pcrs) }
            throw .failed("no guarded memory for the unsealed bytes")
        }
        guard count > 0 else { throw .badObject("the sealed data is empty") }
        do {
            return try result.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                try SecretBytes(copying: UnsafeRawBufferPointer(rebasing: raw[0..<count]))
            }
        } catch {
            throw .failed("no guarded memory for the unsealed bytes")
        }
    }

    /// The TPM's dictionary-attack counters.
    public static func lockoutStatus(connection: TPMConnection) throws(TPMError) -> LockoutStatus {
        let tpm = try Context(connection)
        return try tpm.lockoutStatus()
    }

    /// Sets the TPM's dictionary-attack parameters with the empty lockout authorization (a
    /// fresh software TPM's; tests and benchmarks).
    public static func setDictionaryAttackParameters(maxTries: Int, recoverySeconds: Int, lockoutRecoverySeconds: Int,
                                                     connection: TPMConnection) throws(TPMError) {
        let tpm = try Context(connection)
        var status = sk_tpm_status()
        guard sk_tpm_set_dictionary_attack_parameters(tpm.handle, UInt32(clamping: maxTries), UInt32(clamping: recoverySeconds),
                                                      UInt32(clamping: lockoutRecoverySeconds), &status) == Int32(SK_TPM_OK) else {
            throw tpm.error(status, pcrs: .none)
        }
    }

    /// Clears the dictionary-attack counter with the empty lockout authorization (tests).
    public static func resetLockout(connection: TPMConnection) throws(TPMError) {
        let tpm = try Context(connection)
        var status = sk_tpm_status()
        guard sk_tpm_reset_lockout(tpm.handle, &status) == Int32(SK_TPM_OK) else { throw tpm.error(status, pcrs: .none) }
    }

    /// Extends SHA-256 PCR `pcr` with `digest` (32 bytes): what a measured boot does; tests use
    /// the debug PCR 16.
    public static func extendPCR(_ pcr: Int, with digest: [UInt8], connection: TPMConnection) throws(TPMError) {
        guard (0...23).contains(pcr), digest.count == 32 else { throw .invalidPCRs("PCR 0 to 23 and a 32-byte digest") }
        let tpm = try Context(connection)
        var status = sk_tpm_status()
        guard sk_tpm_extend_pcr(tpm.handle, UInt32(pcr), digest, &status) == Int32(SK_TPM_OK) else { throw tpm.error(status, pcrs: .none) }
    }

    /// One open TCTI and ESAPI context, closed when released.
    final class Context {
        let handle: OpaquePointer
        let connection: TPMConnection

        init(_ connection: TPMConnection) throws(TPMError) {
            self.connection = connection
            var status = sk_tpm_status()
            guard let h = connection.tcti.withCString({ sk_tpm_open($0, &status) }) else {
                throw Self.openError(status, connection)
            }
            handle = h
        }

        deinit { sk_tpm_close(handle) }

        static func openError(_ status: sk_tpm_status, _ connection: TPMConnection) -> TPMError {
            let message = Self.message(status)
            switch Int(status.code) {
            case Int(SK_TPM_NO_LIBRARY): return .libraryMissing(message)
            case Int(SK_TPM_NO_DEVICE): return .noDevice(path: connection.devicePath ?? message)
            case Int(SK_TPM_NO_ACCESS): return .noAccess(path: connection.devicePath ?? message)
            default: return .unreachable(tcti: connection.tcti, detail: message)
            }
        }

        static func message(_ status: sk_tpm_status) -> String {
            var copy = status.message
            return withUnsafeBytes(of: &copy) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
        }

        func lockoutStatus() throws(TPMError) -> LockoutStatus {
            var status = sk_tpm_status()
            var out = sk_tpm_lockout()
            guard sk_tpm_lockout_state(handle, &out, &status) == Int32(SK_TPM_OK) else { throw .failed(Self.message(status)) }
            return LockoutStatus(failedTries: Int(out.failed_tries), maxTries: Int(out.max_tries), recoverySeconds: Int(out.recovery_seconds),
                                 lockoutRecoverySeconds: Int(out.lockout_recovery_seconds), inLockout: out.in_lockout != 0)
        }

        func error(_ status: sk_tpm_status, pcrs: PCRSelection) -> TPMError {
            let message = Self.message(status)
            switch Int(status.code) {
            case Int(SK_TPM_NO_LIBRARY): return .libraryMissing(message)
            case Int(SK_TPM_AUTH_FAIL): return .wrongPIN(try? lockoutStatus())
            case Int(SK_TPM_LOCKOUT): return .lockedOut(try? lockoutStatus())
            case Int(SK_TPM_POLICY_FAIL): return .pcrsChanged(pcrs)
            case Int(SK_TPM_BAD_BLOB): return .badObject(message)
            case Int(SK_TPM_UNREACHABLE): return .unreachable(tcti: connection.tcti, detail: message)
            default: return .failed(message)
            }
        }
    }
}
