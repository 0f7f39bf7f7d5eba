/// A software CTAP 2.1 authenticator: authenticatorGetInfo, authenticatorMakeCredential (ES256,
/// packed self attestation, hmac-secret), authenticatorGetAssertion (allowList, up, uv through a
/// pinUvAuthParam, hmac-secret) and authenticatorClientPIN (getPINRetries, getKeyAgreement,
/// setPIN, getPINToken, getPinUvAuthTokenUsingPinWithPermissions), PIN/UV auth protocols one
/// and two. Its state lives in memory for the life of the process (a "power cycle" is a restart).
///
/// User presence is decided by ``touchMode``: a test says whether the next checks are touched
/// or time out (CTAP2_ERR_USER_ACTION_TIMEOUT), and ``presenceAsked`` / ``touches`` count them.
/// Not thread-safe: the server runs one connection at a time.
public final class SoftAuthenticator {
    /// CTAP status codes used here (CTAP 2.1 §8.2).
    public enum Status: UInt8, Sendable {
        case ok = 0x00, invalidCommand = 0x01, invalidParameter = 0x02, invalidLength = 0x03
        case cborUnexpectedType = 0x11, invalidCBOR = 0x12, missingParameter = 0x14
        case unsupportedAlgorithm = 0x26, unsupportedOption = 0x2B, invalidOption = 0x2C
        case keepaliveCancel = 0x2D, noCredentials = 0x2E, userActionTimeout = 0x2F, notAllowed = 0x30
        case pinInvalid = 0x31, pinBlocked = 0x32, pinAuthInvalid = 0x33, pinAuthBlocked = 0x34
        case pinNotSet = 0x35, puatRequired = 0x36, pinPolicyViolation = 0x37, invalidSubcommand = 0x3E
        case unauthorizedPermission = 0x40
    }

    public enum TouchMode: UInt8, Sendable { case touched = 0, notTouched = 1 }

    /// Ways to answer wrongly, for the client's hostile-input tests.
    public enum Hostility: UInt8, Sendable {
        case none = 0
        /// getAssertion answers bytes that are not CBOR.
        case garbageCBOR = 1
        /// getAssertion's hmac-secret output is 48 bytes instead of 32.
        case hmacSecretWrongLength = 2
        /// getAssertion's answer is cut in half.
        case truncatedCBOR = 3
        /// getAssertion signs with a key that is not the credential's.
        case badSignature = 4
        /// getAssertion names another relying party in its authenticator data.
        case wrongRPIDHash = 5
        /// getAssertion claims no user presence (UP flag clear) after a touch.
        case noPresenceFlag = 6
        /// getAssertion's frame claims 4096 bytes (more than a client's buffer), sends 10 and hangs up.
        case lyingLength = 7
    }

    struct Credential {
        let id: [UInt8]
        let rpIDHash: [UInt8]
        let userID: [UInt8]
        let key: P256Key
        let hmacSecret: Bool
        let credRandomWithUV: [UInt8]
        let credRandomWithoutUV: [UInt8]
        let resident: Bool
    }

    public static let aaguid: [UInt8] = Array("SiteKeepSoftFIDO".utf8)   // 16 bytes
    static let maxRetries = 8

    public var touchMode: TouchMode = .touched
    public var hostility: Hostility = .none
    /// How long a presence check waits before it times out when not touched, in milliseconds.
    public var noTouchMilliseconds: Int32
    /// The PIN/UV auth protocols listed in getInfo, in order of preference.
    let pinProtocols: [PINProtocol]
    /// User-presence checks asked for, and touches given.
    public private(set) var presenceAsked = 0
    public private(set) var touches = 0

    var credentials: [[UInt8]: Credential] = [:]
    var pinHash: [UInt8]?
    var pinRetries = maxRetries
    var consecutiveMismatches = 0
    var keyAgreement = P256Key()
    var pinToken = SoftCrypto.random(32)
    var tokenPermissions: UInt8 = 0
    var tokenRPID: String?
    var tokenUsable = false
    var signCount: UInt32 = 0

    /// Whether getInfo lists hmac-secret and makeCredential honours it (off: a key without it).
    let hasHMACSecret: Bool

    public init(pinProtocols: [Int] = [2, 1], noTouchMilliseconds: Int32 = 300, hasHMACSecret: Bool = true) {
        self.pinProtocols = pinProtocols.compactMap(PINProtocol.init(rawValue:))
        self.noTouchMilliseconds = noTouchMilliseconds
        self.hasHMACSecret = hasHMACSecret
    }

    /// Asks for user presence. `waitForCancel` waits up to the given time for a CTAPHID CANCEL
    /// and says whether one came.
    func presence(waitForCancel: (Int32) -> Bool) -> Status {
        presenceAsked += 1
        switch touchMode {
        case .touched:
            touches += 1
            return .ok
        case .notTouched:
            return waitForCancel(noTouchMilliseconds) ? .keepaliveCancel : .userActionTimeout
        }
    }

    /// One authenticator command (the CTAPHID CBOR payload): status byte, then the CBOR answer.
    public func handle(_ message: [UInt8], waitForCancel: (Int32) -> Bool) -> [UInt8] {
        guard let command = message.first else { return [Status.invalidLength.rawValue] }
        let body = Array(message.dropFirst())
        var params: CBOR = .map([])
        if !body.isEmpty {
            do { params = try CBOR.decode(body, maxDepth: 6) } catch { return [Status.invalidCBOR.rawValue] }
            guard params.isMap else { return [Status.cborUnexpectedType.rawValue] }
        }
        let result: Result<CBOR?, StatusError>
        switch command {
        case 0x04: result = .success(getInfo())
        case 0x01: result = makeCredential(params, waitForCancel: waitForCancel)
        case 0x02: result = getAssertion(params, waitForCancel: waitForCancel)
        case 0x06: result = clientPIN(params)
        default: result = .failure(StatusError(.invalidCommand))
        }
        switch result {
        case .success(let answer?):
            var bytes = [Status.ok.rawValue] + answer.encoded
            if command == 0x02 {
                if hostility == .garbageCBOR { bytes = [0, 0xff, 0xff, 0xff, 0x1f] }
                if hostility == .truncatedCBOR { bytes = Array(bytes.prefix(bytes.count / 2)) }
            }
            return bytes
        case .success(nil): return [Status.ok.rawValue]
        case .failure(let e): return [e.status.rawValue]
        }
    }

    struct StatusError: Error {
        let status: Status
        init(_ status: Status) { self.status = status }
    }

    // MARK: authenticatorGetInfo

    func getInfo() -> CBOR {
        var options: [CBOR.Pair] = [.init(.text("rk"), .bool(true)), .init(.text("up"), .bool(true)),
                                    .init(.text("plat"), .bool(false))]
        if !pinProtocols.isEmpty {
            options.append(.init(.text("clientPin"), .bool(pinHash != nil)))
            options.append(.init(.text("pinUvAuthToken"), .bool(true)))
        }
        return .map([
            .init(.int(1), .array([.text("FIDO_2_0"), .text("FIDO_2_1")])),
            .init(.int(2), .array(hasHMACSecret ? [.text("hmac-secret")] : [])),
            .init(.int(3), .bytes(Self.aaguid)),
            .init(.int(4), .map(options)),
            .init(.int(5), .int(1200)),
            .init(.int(6), .array(pinProtocols.map { .int($0.rawValue) })),
        ])
    }

    // MARK: Helpers

    func bytes(_ v: CBOR?, _ count: ClosedRange<Int>? = nil) -> Result<[UInt8], StatusError> {
        guard let v else { return .failure(StatusError(.missingParameter)) }
        guard let b = v.bytesValue else { return .failure(StatusError(.cborUnexpectedType)) }
        if let count, !count.contains(b.count) { return .failure(StatusError(.invalidLength)) }
        return .success(b)
    }

    func pinProtocol(_ v: CBOR?) -> Result<PINProtocol, StatusError> {
        guard let v else { return .failure(StatusError(.missingParameter)) }
        guard let n = v.intValue else { return .failure(StatusError(.cborUnexpectedType)) }
        guard let p = PINProtocol(rawValue: n), pinProtocols.contains(p) else { return .failure(StatusError(.invalidParameter)) }
        return .success(p)
    }

    /// The shared secret with the platform's COSE key (its keyAgreement parameter).
    func sharedSecret(_ platformKey: CBOR?, _ p: PINProtocol) -> Result<[UInt8], StatusError> {
        guard let k = platformKey else { return .failure(StatusError(.missingParameter)) }
        guard k.isMap, k[int: 1]?.intValue == 2, k[int: -1]?.intValue == 1,
              let x = k[int: -2]?.bytesValue, let y = k[int: -3]?.bytesValue,
              let z = keyAgreement.ecdh(peerX: x, y: y) else { return .failure(StatusError(.invalidParameter)) }
        return .success(p.kdf(z))
    }

    /// Checks a pinUvAuthParam over `message` with the current token and its permission.
    func verifyToken(_ param: CBOR?, using protocolParameter: CBOR?, message: [UInt8], permission: UInt8, rpID: String) -> Result<Bool, StatusError> {
        guard let param else { return .success(false) }
        guard let auth = param.bytesValue else { return .failure(StatusError(.cborUnexpectedType)) }
        let p: PINProtocol
        switch pinProtocol(protocolParameter) { case .success(let v): p = v; case .failure(let e): return .failure(e) }
        guard pinHash != nil else { return .failure(StatusError(.pinNotSet)) }
        guard tokenUsable, p.verify(pinToken, message, auth) else { return .failure(StatusError(.pinAuthInvalid)) }
        guard tokenPermissions & permission != 0 else { return .failure(StatusError(.unauthorizedPermission)) }
        if let bound = tokenRPID, bound != rpID { return .failure(StatusError(.unauthorizedPermission)) }
        tokenRPID = rpID
        return .success(true)
    }

    static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xff), UInt8((v >> 8) & 0xff), UInt8(v & 0xff)] }

    // MARK: authenticatorMakeCredential

    func makeCredential(_ p: CBOR, waitForCancel: (Int32) -> Bool) -> Result<CBOR?, StatusError> {
        do {
            let cdh = try bytes(p[int: 1], 32...32).get()
            guard let rp = p[int: 2], rp.isMap, let rpID = rp[text: "id"]?.textValue else { throw StatusError(.missingParameter) }
            guard let user = p[int: 3], user.isMap, let userID = user[text: "id"]?.bytesValue, (1...64).contains(userID.count) else {
                throw StatusError(.missingParameter)
            }
            guard let algs = p[int: 4]?.arrayValue else { throw StatusError(.missingParameter) }
            guard algs.contains(where: { $0[text: "alg"]?.intValue == -7 && $0[text: "type"]?.textValue == "public-key" }) else {
                throw StatusError(.unsupportedAlgorithm)
            }
            let options = p[int: 7]
            if options?[text: "uv"]?.boolValue == true { throw StatusError(.invalidOption) }
            let resident = options?[text: "rk"]?.boolValue ?? false
            let uv = try verifyToken(p[int: 8], using: p[int: 9], message: cdh, permission: 0x01, rpID: rpID).get()
            if pinHash != nil && !uv { throw StatusError(.puatRequired) }
            let rpIDHash = SoftCrypto.sha256(Array(rpID.utf8))
            if let exclude = p[int: 5]?.arrayValue {
                for item in exclude {
                    if let id = item[text: "id"]?.bytesValue, credentials[id]?.rpIDHash == rpIDHash {
                        _ = presence(waitForCancel: waitForCancel)
                        throw StatusError(.invalidParameter)
                    }
                }
            }
            let wantsHMAC = hasHMACSecret && p[int: 6]?[text: "hmac-secret"]?.boolValue == true
            let touched = presence(waitForCancel: waitForCancel)
            guard touched == .ok else { throw StatusError(touched) }

            let key = P256Key()
            let credential = Credential(id: SoftCrypto.random(48), rpIDHash: rpIDHash, userID: userID, key: key, hmacSecret: wantsHMAC,
                                        credRandomWithUV: SoftCrypto.random(32), credRandomWithoutUV: SoftCrypto.random(32), resident: resident)
            credentials[credential.id] = credential
            signCount += 1
            var flags: UInt8 = 0x01 | 0x40
            if uv { flags |= 0x04 }
            if wantsHMAC { flags |= 0x80 }
            var authData = rpIDHash + [flags] + Self.be32(signCount)
            authData += Self.aaguid + [UInt8(credential.id.count >> 8), UInt8(credential.id.count & 0xff)] + credential.id
            authData += key.coseKey(alg: -7).encoded
            if wantsHMAC { authData += CBOR.map([.init(.text("hmac-secret"), .bool(true))]).encoded }
            let signature = key.sign(authData + cdh)
            return .success(.map([
                .init(.int(1), .text("packed")),
                .init(.int(2), .bytes(authData)),
                .init(.int(3), .map([.init(.text("alg"), .int(-7)), .init(.text("sig"), .bytes(signature))])),
            ]))
        } catch let e as StatusError {
            return .failure(e)
        } catch {
            return .failure(StatusError(.invalidParameter))
        }
    }

    // MARK: authenticatorGetAssertion

    func getAssertion(_ p: CBOR, waitForCancel: (Int32) -> Bool) -> Result<CBOR?, StatusError> {
        do {
            guard let rpID = p[int: 1]?.textValue else { throw StatusError(.missingParameter) }
            let cdh = try bytes(p[int: 2], 32...32).get()
            let options = p[int: 5]
            if options?[text: "uv"]?.boolValue == true { throw StatusError(.invalidOption) }
            if options?[text: "rk"] != nil { throw StatusError(.unsupportedOption) }
            let up = options?[text: "up"]?.boolValue ?? true
            let uv = try verifyToken(p[int: 6], using: p[int: 7], message: cdh, permission: 0x02, rpID: rpID).get()
            let rpIDHash = SoftCrypto.sha256(Array(rpID.utf8))
            let credential: Credential
            var fromAllowList = true
            if let allow = p[int: 3]?.arrayValue, !allow.isEmpty {
                guard let found = allow.lazy.compactMap({ $0[text: "id"]?.bytesValue }).compactMap({ self.credentials[$0] })
                    .first(where: { $0.rpIDHash == rpIDHash }) else { throw StatusError(.noCredentials) }
                credential = found
            } else {
                guard let found = credentials.values.filter({ $0.resident && $0.rpIDHash == rpIDHash }).first else { throw StatusError(.noCredentials) }
                credential = found
                fromAllowList = false
            }
            if up {
                let touched = presence(waitForCancel: waitForCancel)
                guard touched == .ok else { throw StatusError(touched) }
            }
            var extensions: [CBOR.Pair] = []
            if let h = p[int: 4]?[text: "hmac-secret"], credential.hmacSecret {
                let pp: PINProtocol = h[int: 4] == nil ? .one : try pinProtocol(h[int: 4]).get()
                let shared = try sharedSecret(h[int: 1], pp).get()
                let saltEnc = try bytes(h[int: 2]).get()
                let saltAuth = try bytes(h[int: 3]).get()
                guard pp.verify(shared, saltEnc, saltAuth) else { throw StatusError(.pinAuthInvalid) }
                guard let salts = pp.decrypt(shared, saltEnc), salts.count == 32 || salts.count == 64 else { throw StatusError(.invalidLength) }
                let credRandom = uv ? credential.credRandomWithUV : credential.credRandomWithoutUV
                var output = SoftCrypto.hmac(key: credRandom, Array(salts[0..<32]))
                if salts.count == 64 { output += SoftCrypto.hmac(key: credRandom, Array(salts[32..<64])) }
                if hostility == .hmacSecretWrongLength { output += [UInt8](repeating: 0x41, count: 16) }
                guard let encrypted = pp.encrypt(shared, output) else { throw StatusError(.invalidParameter) }
                extensions.append(.init(.text("hmac-secret"), .bytes(encrypted)))
            }
            signCount += 1
            var flags: UInt8 = 0
            if up && hostility != .noPresenceFlag { flags |= 0x01 }
            if uv { flags |= 0x04 }
            if !extensions.isEmpty { flags |= 0x80 }
            let hash = hostility == .wrongRPIDHash ? SoftCrypto.sha256(Array("elsewhere.example".utf8)) : rpIDHash
            var authData = hash + [flags] + Self.be32(signCount)
            if !extensions.isEmpty { authData += CBOR.map(extensions).encoded }
            let signer = hostility == .badSignature ? P256Key() : credential.key
            let signature = signer.sign(authData + cdh)
            var answer: [CBOR.Pair] = [
                .init(.int(1), .map([.init(.text("id"), .bytes(credential.id)), .init(.text("type"), .text("public-key"))])),
                .init(.int(2), .bytes(authData)),
                .init(.int(3), .bytes(signature)),
            ]
            if !fromAllowList {
                answer.append(.init(.int(4), .map([.init(.text("id"), .bytes(credential.userID))])))
                answer.append(.init(.int(5), .int(1)))
            }
            return .success(.map(answer))
        } catch let e as StatusError {
            return .failure(e)
        } catch {
            return .failure(StatusError(.invalidParameter))
        }
    }

    // MARK: authenticatorClientPIN

    func clientPIN(_ p: CBOR) -> Result<CBOR?, StatusError> {
        do {
            guard let sub = p[int: 2]?.intValue else { throw StatusError(.missingParameter) }
            switch sub {
            case 0x01:   // getPINRetries
                return .success(.map([.init(.int(3), .int(pinRetries))]))
            case 0x02:   // getKeyAgreement
                _ = try pinProtocol(p[int: 1]).get()
                return .success(.map([.init(.int(1), keyAgreement.coseKey(alg: -25))]))
            case 0x03:   // setPIN
                let pp = try pinProtocol(p[int: 1]).get()
                guard pinHash == nil else { throw StatusError(.notAllowed) }
                let shared = try sharedSecret(p[int: 3], pp).get()
                let auth = try bytes(p[int: 4]).get()
                let newPinEnc = try bytes(p[int: 5]).get()
                guard pp.verify(shared, newPinEnc, auth) else { throw StatusError(.pinAuthInvalid) }
                guard let padded = pp.decrypt(shared, newPinEnc), padded.count >= 64 else { throw StatusError(.invalidParameter) }
                let pin = Array(padded.prefix(while: { $0 != 0 }))
                guard let text = String(validating: pin, as: UTF8.self), text.count >= 4, pin.count <= 63 else {
                    throw StatusError(.pinPolicyViolation)
                }
                pinHash = Array(SoftCrypto.sha256(pin).prefix(16))
                pinRetries = Self.maxRetries
                return .success(nil)
            case 0x05, 0x09:   // getPINToken, getPinUvAuthTokenUsingPinWithPermissions
                let pp = try pinProtocol(p[int: 1]).get()
                var permissions: UInt8 = 0x01 | 0x02
                if sub == 0x09 {
                    guard let perm = p[int: 9]?.intValue else { throw StatusError(.missingParameter) }
                    guard perm != 0, perm <= 0xff else { throw StatusError(.invalidParameter) }
                    permissions = UInt8(perm)
                } else if p[int: 9] != nil || p[int: 10] != nil {
                    throw StatusError(.invalidParameter)
                }
                let shared = try sharedSecret(p[int: 3], pp).get()
                let pinHashEnc = try bytes(p[int: 6]).get()
                guard let stored = pinHash else { throw StatusError(.pinNotSet) }
                guard pinRetries > 0 else { throw StatusError(.pinBlocked) }
                guard consecutiveMismatches < 3 else { throw StatusError(.pinAuthBlocked) }
                pinRetries -= 1
                guard let given = pp.decrypt(shared, pinHashEnc), given.count == 16,
                      SoftCrypto.constantTimeEqual(given, stored) else {
                    keyAgreement = P256Key()
                    consecutiveMismatches += 1
                    if pinRetries == 0 { throw StatusError(.pinBlocked) }
                    if consecutiveMismatches >= 3 { throw StatusError(.pinAuthBlocked) }
                    throw StatusError(.pinInvalid)
                }
                pinRetries = Self.maxRetries
                consecutiveMismatches = 0
                pinToken = SoftCrypto.random(32)
                tokenUsable = true
                tokenPermissions = permissions
                tokenRPID = sub == 0x09 ? p[int: 10]?.textValue : nil
                guard let encrypted = pp.encrypt(shared, pinToken) else { throw StatusError(.invalidParameter) }
                return .success(.map([.init(.int(2), .bytes(encrypted))]))
            default:
                throw StatusError(.invalidSubcommand)
            }
        } catch let e as StatusError {
            return .failure(e)
        } catch {
            return .failure(StatusError(.invalidParameter))
        }
    }

    // MARK: Test hooks

    /// The WebAuthn PRF output for `evalInput`, computed here from the credential's CredRandom
    /// without hmac-secret's transport (no key agreement, no salt encryption): what a browser's
    /// PRF extension would hand a page, for checking the client's salt derivation against.
    public func prfOutput(credentialID: [UInt8], evalInput: [UInt8], userVerified: Bool) -> [UInt8]? {
        guard let c = credentials[credentialID], c.hmacSecret else { return nil }
        let salt = SoftCrypto.sha256(Array("WebAuthn PRF".utf8) + [0] + evalInput)
        return SoftCrypto.hmac(key: userVerified ? c.credRandomWithUV : c.credRandomWithoutUV, salt)
    }
}
