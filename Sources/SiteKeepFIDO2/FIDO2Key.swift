internal import CFIDO2Loader
public import SiteKeepSecureMemory
import SiteKeepCrypto

/// A FIDO2 security key, reached through libfido2 (loaded with `dlopen` on first use, so a
/// machine without libfido2 runs SiteKeep and gets ``FIDO2Error/libraryMissing(_:)`` only when a
/// key is asked for).
///
/// A key is named by its libfido2 path (a hidraw node such as `/dev/hidraw3`), or by
/// `soft:/path/to/unix.socket`: a software CTAP2 authenticator reached through libfido2's own
/// transport hooks, so every byte above the carrier (CBOR, the PIN protocol, the hmac-secret key
/// agreement and decryption) goes through the code a plugged key's does.
///
/// Credentials are made non-resident: the credential id (which, on most keys, wraps the
/// credential's key under the key's own master secret) is kept by the caller, as a PRF slot
/// keeps it, so no resident slot of the key (often 25 or fewer) is used, no PIN is needed just
/// to store one, and the key lists nothing to whoever holds it.
///
/// Every call opens the key, does one thing and closes it; calls block until the key answers
/// (a touch waits up to ``timeoutMilliseconds``).
public struct FIDO2Key: Sendable, Hashable {
    /// The environment variable naming the key to use (a path, or `soft:SOCKET`), when set.
    public static let environmentVariable = "SITEKEEP_FIDO2_DEVICE"
    /// The prefix of a software authenticator's path.
    public static let softPrefix = "soft:"

    /// The libfido2 path, or `soft:SOCKET`.
    public let path: String
    /// How long a call waits for the key (a touch included), in milliseconds.
    public var timeoutMilliseconds: Int32

    /// The key at `path`.
    public init(path: String, timeoutMilliseconds: Int32 = 30_000) {
        self.path = path
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// The key to use: the one `SITEKEEP_FIDO2_DEVICE` names in `environment`, else the one
    /// plugged key.
    /// - Throws: ``FIDO2Error/noKey``, ``FIDO2Error/severalKeys(paths:)``, ``FIDO2Error/libraryMissing(_:)``.
    public static func chosen(environment: [String: String]) throws(FIDO2Error) -> FIDO2Key {
        if let named = environment[environmentVariable], !named.isEmpty { return FIDO2Key(path: named) }
        let keys = try plugged()
        guard let first = keys.first else { throw .noKey }
        guard keys.count == 1 else { throw .severalKeys(paths: keys.map(\.path)) }
        return FIDO2Key(path: first.path)
    }

    /// The security keys plugged in (libfido2's manifest of HID keys; a software authenticator
    /// is never listed).
    public static func plugged() throws(FIDO2Error) -> [FIDO2KeyDescription] {
        let max = 16
        var devices = [sk_fido2_device](repeating: sk_fido2_device(), count: max)
        var found = 0
        var status = sk_fido2_status()
        let kind = devices.withUnsafeMutableBufferPointer { sk_fido2_list($0.baseAddress, max, &found, &status) }
        try check(kind, status)
        return devices.prefix(found).map { d in
            var d = d
            return FIDO2KeyDescription(path: text(&d.path), manufacturer: text(&d.manufacturer), product: text(&d.product))
        }
    }

    /// What the key is and supports.
    public func info() throws(FIDO2Error) -> FIDO2KeyInfo {
        var info = sk_fido2_info()
        var status = sk_fido2_status()
        try Self.check(sk_fido2_get_info(path, timeoutMilliseconds, &info, &status), status)
        return FIDO2KeyInfo(isFIDO2: info.fido2 != 0, supportsPIN: info.supports_pin != 0, hasPIN: info.has_pin != 0,
                            hasHMACSecret: info.hmac_secret != 0, pinProtocol: Int(info.pin_protocol))
    }

    /// Makes a non-resident ES256 credential with `hmac-secret` for `rp`: the key asks for a
    /// touch, and verifies the user with `pin` when it has one (a key with a PIN refuses without
    /// it: ``FIDO2Error/pinRequired``).
    /// - Parameters:
    ///   - rp: The relying party id (a domain name, as WebAuthn's).
    ///   - userID: 1 to 64 bytes naming the user to the key.
    ///   - pin: The key's PIN, UTF-8, 4 to 63 bytes; nil for a key without one.
    /// - Returns: The credential id and its public key.
    public func makeCredential(rp: String, userID: [UInt8], pin: borrowing SecretBytes? = nil) throws(FIDO2Error) -> FIDO2Credential {
        try Self.checkRP(rp)
        guard (1...64).contains(userID.count) else { throw .invalidArgument("the user id must be 1 to 64 bytes, got \(userID.count)") }
        var id = [UInt8](repeating: 0, count: FIDO2Credential.maximumIDLength)
        var idLength = 0
        var publicKey = [UInt8](repeating: 0, count: 64)
        var status = sk_fido2_status()
        let kind = try Self.withPIN(pin) { (p: UnsafePointer<CChar>?) -> Int32 in
            sk_fido2_make_credential(path, rp, userID, userID.count, p, timeoutMilliseconds,
                                     &id, id.count, &idLength, &publicKey, &status)
        }
        try Self.check(kind, status)
        return FIDO2Credential(relyingPartyID: rp, id: Array(id.prefix(idLength)), publicKey: publicKey)
    }

    /// Whether an `hmac-secret` is asked with the key's PIN (user verification). A key's output
    /// with verification differs from its output without (CTAP 2.1 keeps two secrets per
    /// credential, CredRandomWithUV and CredRandomWithoutUV), and a key gives the output without
    /// verification to any process that asks, even with no touch: only the output with the PIN
    /// is out of reach of a program that does not know the PIN.
    public enum UserVerification: Sendable, Hashable {
        /// With the PIN when the key has one, without when it has none (how FIDO2 slots were
        /// asked before they recorded which kind they are).
        case whenTheKeyHasAPIN
        /// Always with the PIN: none given is ``FIDO2Error/pinRequired``, a key without one
        /// ``FIDO2Error/pinNotSet``.
        case withPIN
        /// Never, even from a key that has a PIN now (a PIN-less slot's bytes); a PIN given is
        /// not sent.
        case withoutPIN
    }

    /// The credential's `hmac-secret` output for `salt`: 32 bytes in guarded memory, the same
    /// each time for the same credential, salt and verification. The key asks for a touch (user
    /// presence) and verifies the user with `pin` as `verification` says (a key's output with
    /// user verification differs from its output without, as CTAP 2.1 says, so by default a key
    /// with a PIN is always asked with it: ``FIDO2Error/pinRequired`` otherwise).
    /// - Parameters:
    ///   - salt: 32 bytes. For a WebAuthn PRF eval input, ``WebAuthnPRF/hmacSecretSalt(forEvalInput:)``
    ///     (or ``prfOutput(rp:credentialID:evalInput:pin:verification:)``).
    ///   - verification: Whether the PIN is used (``UserVerification``).
    ///
    /// The answer's presence (and, with a PIN, verification) flags are checked; its signature is
    /// not (no public key is passed): a key that lies can only give bytes that unwrap nothing.
    public func hmacSecret(rp: String, credentialID: [UInt8], salt: [UInt8], pin: borrowing SecretBytes? = nil,
                           verification: UserVerification = .whenTheKeyHasAPIN) throws(FIDO2Error) -> SecretBytes {
        try Self.checkRP(rp)
        try Self.checkCredentialID(credentialID)
        guard salt.count == 32 else { throw .invalidArgument("the hmac-secret salt must be 32 bytes, got \(salt.count)") }
        if verification == .withPIN {
            switch pin { case .none: throw .pinRequired; case .some: break }
        }
        if verification == .withoutPIN { return try assertHMACSecret(rp: rp, credentialID: credentialID, salt: salt, pin: nil, withoutPIN: true) }
        return try assertHMACSecret(rp: rp, credentialID: credentialID, salt: salt, pin: pin, withoutPIN: false)
    }

    /// One touched assertion with hmac-secret (``hmacSecret(rp:credentialID:salt:pin:verification:)``).
    private func assertHMACSecret(rp: String, credentialID: [UInt8], salt: [UInt8], pin: borrowing SecretBytes?,
                                  withoutPIN: Bool) throws(FIDO2Error) -> SecretBytes {
        let challenge = SecureRandom.bytes(count: 32)
        var authData = [UInt8](repeating: 0, count: 1024)
        var signature = [UInt8](repeating: 0, count: 80)
        var authLength = 0, sigLength = 0
        var status = sk_fido2_status()
        var kind: Int32 = 0
        // The output is written by libfido2's copy straight into guarded memory (and wiped there
        // by the C layer when the call fails).
        let output = try Self.withPIN(pin) { (p: UnsafePointer<CChar>?) throws(FIDO2Error) -> SecretBytes in
            do {
                return try SecretBytes(count: 32, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    kind = sk_fido2_assert(path, rp, credentialID, credentialID.count, challenge, salt, p, withoutPIN ? 1 : 0, timeoutMilliseconds,
                                           out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                           &authData, authData.count, &authLength, &signature, signature.count, &sigLength, &status)
                })
            } catch {
                throw .failed("guarded memory for the hmac-secret output: \(error)")
            }
        }
        try Self.check(kind, status)
        return output
    }

    /// The WebAuthn PRF output of the credential for `evalInput`: `hmac-secret` with the salt
    /// SHA-256("WebAuthn PRF" ‖ 0x00 ‖ evalInput), exactly what a browser's PRF extension gives a
    /// page for the same credential and input (and what a PRF slot is made with).
    public func prfOutput(rp: String, credentialID: [UInt8], evalInput: [UInt8], pin: borrowing SecretBytes? = nil,
                          verification: UserVerification = .whenTheKeyHasAPIN) throws(FIDO2Error) -> SecretBytes {
        try hmacSecret(rp: rp, credentialID: credentialID, salt: WebAuthnPRF.hmacSecretSalt(forEvalInput: evalInput), pin: pin,
                       verification: verification)
    }

    /// Whether the key holds `credentialID` for `rp`: asked without a touch or the PIN (an
    /// assertion with user presence off and no extension), so finding which slot's credential
    /// a key holds costs the user nothing.
    /// - Throws: the errors of reaching the key; never ``FIDO2Error/credentialNotOnKey`` (false).
    public func holds(rp: String, credentialID: [UInt8]) throws(FIDO2Error) -> Bool {
        try Self.checkRP(rp)
        try Self.checkCredentialID(credentialID)
        var status = sk_fido2_status()
        do {
            try Self.check(sk_fido2_holds(path, rp, credentialID, credentialID.count, timeoutMilliseconds, &status), status)
            return true
        } catch .credentialNotOnKey {
            return false
        }
    }

    /// Asks for a touch: an assertion with user presence over a random challenge, whose
    /// signature is checked here against the credential's public key (and its authenticator data
    /// for the relying party and the presence flag). Returns once the key was touched.
    /// - Throws: ``FIDO2Error/noTouch`` when it was not within the time-out,
    ///   ``FIDO2Error/malformedReply(_:)`` when the signature or data do not check.
    public func touch(rp: String, credentialID: [UInt8], publicKey: [UInt8]) throws(FIDO2Error) {
        try Self.checkRP(rp)
        try Self.checkCredentialID(credentialID)
        let key: P256.Signing.PublicKey
        do { key = try P256.Signing.PublicKey(derRepresentation: FIDO2Credential.spki(fromXY: publicKey)) } catch {
            throw .invalidArgument("the credential's public key is not a P-256 x || y of 64 bytes")
        }
        let challenge = SecureRandom.bytes(count: 32)
        var authData = [UInt8](repeating: 0, count: 1024)
        var signature = [UInt8](repeating: 0, count: 80)
        var authLength = 0, sigLength = 0
        var status = sk_fido2_status()
        let kind = sk_fido2_assert(path, rp, credentialID, credentialID.count, challenge, nil, nil, 0, timeoutMilliseconds, nil,
                                   &authData, authData.count, &authLength, &signature, signature.count, &sigLength, &status)
        try Self.check(kind, status)
        let data = Array(authData.prefix(authLength))
        guard data.count >= 37, Array(data.prefix(32)) == SHA256.hash(Array(rp.utf8)) else {
            throw .malformedReply("the authenticator data names another relying party")
        }
        guard data[32] & 0x01 != 0 else { throw .noTouch }
        guard let sig = try? P256.Signing.Signature(derRepresentation: Array(signature.prefix(sigLength))),
              key.isValidSignature(sig, for: data + challenge) else {
            throw .malformedReply("the touch's signature does not verify under the credential's public key")
        }
    }

    /// Sets the key's PIN (`old` nil), or changes it.
    public func setPIN(_ pin: borrowing SecretBytes, old: borrowing SecretBytes? = nil) throws(FIDO2Error) {
        var status = sk_fido2_status()
        let kind = try Self.withPIN(pin) { (new: UnsafePointer<CChar>?) throws(FIDO2Error) -> Int32 in
            try Self.withPIN(old) { (o: UnsafePointer<CChar>?) -> Int32 in sk_fido2_set_pin(path, new, o, timeoutMilliseconds, &status) }
        }
        try Self.check(kind, status)
    }

    /// The PIN tries the key has left before it blocks.
    public func pinRetries() throws(FIDO2Error) -> Int {
        var retries: Int32 = -1
        var status = sk_fido2_status()
        try Self.check(sk_fido2_pin_retries(path, timeoutMilliseconds, &retries, &status), status)
        return Int(retries)
    }

    // MARK: - Boundary

    /// Runs `body` with the PIN as a NUL-terminated string in guarded memory (nil for none).
    static func withPIN<R: ~Copyable>(_ pin: borrowing SecretBytes?, _ body: (UnsafePointer<CChar>?) throws(FIDO2Error) -> R) throws(FIDO2Error) -> R {
        switch pin {
        case .none: return try body(nil)
        case .some(let secret): return try withPIN(secret, body)
        }
    }

    /// Runs `body` with `secret` as a NUL-terminated string in guarded memory.
    static func withPIN<R: ~Copyable>(_ secret: borrowing SecretBytes, _ body: (UnsafePointer<CChar>?) throws(FIDO2Error) -> R) throws(FIDO2Error) -> R {
        guard (4...63).contains(secret.count) else { throw .invalidArgument("a PIN is 4 to 63 bytes, got \(secret.count)") }
        let terminated: SecretBytes
        do {
            terminated = try SecretBytes(count: secret.count + 1, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                secret.withUnsafeBytes { src in out.copyMemory(from: src) }
                out[secret.count] = 0
            })
        } catch {
            throw .failed("guarded memory for the PIN: \(error)")
        }
        let hasNUL = terminated.withUnsafeBytes { $0.prefix(secret.count).contains(0) }
        guard !hasNUL else { throw .invalidArgument("a PIN cannot hold a NUL byte") }
        return try terminated.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(FIDO2Error) -> R in
            try body(bytes.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
    }

    static func checkRP(_ rp: String) throws(FIDO2Error) {
        guard (1...253).contains(rp.utf8.count), !rp.utf8.contains(0) else {
            throw .invalidArgument("the relying party id must be 1 to 253 bytes")
        }
    }

    static func checkCredentialID(_ id: [UInt8]) throws(FIDO2Error) {
        guard (1...FIDO2Credential.maximumIDLength).contains(id.count) else {
            throw .invalidArgument("a credential id is 1 to \(FIDO2Credential.maximumIDLength) bytes, got \(id.count)")
        }
    }

    static func text<T>(_ field: inout T) -> String {
        withUnsafeBytes(of: &field) { raw in
            let bytes = raw.prefix(while: { $0 != 0 })
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Turns the C layer's status into a typed error.
    static func check(_ kind: Int32, _ status: sk_fido2_status) throws(FIDO2Error) {
        guard kind != Int32(SK_FIDO2_OK) else { return }
        var s = status
        let message = text(&s.message)
        switch Int(kind) {
        case Int(SK_FIDO2_UNAVAILABLE): throw .libraryMissing(message)
        case Int(SK_FIDO2_NO_DEVICE): throw .unreachable(message)
        case Int(SK_FIDO2_PIN_REQUIRED): throw .pinRequired
        case Int(SK_FIDO2_PIN_INVALID): throw .pinWrong(retriesLeft: status.retries >= 0 ? Int(status.retries) : nil)
        case Int(SK_FIDO2_PIN_BLOCKED): throw .pinBlocked
        case Int(SK_FIDO2_PIN_AUTH_BLOCKED): throw .pinBlockedUntilReplug
        case Int(SK_FIDO2_PIN_NOT_SET): throw .pinNotSet
        case Int(SK_FIDO2_PIN_POLICY): throw .pinPolicy(message)
        case Int(SK_FIDO2_NO_TOUCH): throw .noTouch
        case Int(SK_FIDO2_NO_HMAC_SECRET): throw .noHMACSecret(message)
        case Int(SK_FIDO2_NO_CREDENTIAL): throw .credentialNotOnKey
        case Int(SK_FIDO2_MALFORMED): throw .malformedReply(message)
        case Int(SK_FIDO2_INVALID_ARGUMENT): throw .invalidArgument(message)
        case Int(SK_FIDO2_DENIED): throw .denied(message)
        default: throw .failed(message)
        }
    }
}

/// A plugged key as libfido2 lists it.
public struct FIDO2KeyDescription: Sendable, Hashable {
    /// The path to open it by.
    public let path: String
    /// The manufacturer's name, as the key reports it.
    public let manufacturer: String
    /// The product's name, as the key reports it.
    public let product: String
}

/// What a key supports (CTAPHID INIT and authenticatorGetInfo).
public struct FIDO2KeyInfo: Sendable, Hashable {
    /// The key speaks CTAP2 (not U2F only).
    public let isFIDO2: Bool
    /// The key can have a PIN.
    public let supportsPIN: Bool
    /// A PIN is set.
    public let hasPIN: Bool
    /// The key lists the `hmac-secret` extension.
    public let hasHMACSecret: Bool
    /// The PIN/UV auth protocol libfido2 uses with it (2, 1, or 0 for none).
    public let pinProtocol: Int
}

/// A credential made on a key: what a slot keeps to use it again.
public struct FIDO2Credential: Sendable, Hashable {
    /// The longest credential id accepted (CTAP 2.1 allows up to 1023 bytes).
    public static let maximumIDLength = 1023

    /// The relying party id it was made for.
    public let relyingPartyID: String
    /// The credential id.
    public let id: [UInt8]
    /// Its ES256 public key, x ‖ y (64 bytes).
    public let publicKey: [UInt8]

    /// A credential as made earlier (read back from where it was kept).
    public init(relyingPartyID: String, id: [UInt8], publicKey: [UInt8]) {
        self.relyingPartyID = relyingPartyID
        self.id = id
        self.publicKey = publicKey
    }

    /// The public key as a SubjectPublicKeyInfo DER.
    public var publicKeySPKI: [UInt8] { Self.spki(fromXY: publicKey) }

    /// SubjectPublicKeyInfo DER for an uncompressed P-256 point x ‖ y.
    static func spki(fromXY xy: [UInt8]) -> [UInt8] {
        let prefix: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
                               0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00, 0x04]
        return prefix + xy
    }
}
