import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepFIDO2
import SiteKeepSoftFIDO2

private let rp = "sitekeep.example"
private let userID = Array("sitekeep-store-1".utf8)

private func pin(_ text: String) throws -> SecretBytes { try SecretBytes(copying: Array(text.utf8)) }

private func bytes(_ s: borrowing SecretBytes) -> [UInt8] { s.withUnsafeBytes { Array($0) } }

/// libfido2 against the software authenticator, as a real process behind libfido2's transport
/// hooks: every byte above the carrier is libfido2's (CBOR, PIN protocol, hmac-secret).
@Suite(.serialized)
struct FIDO2HMACSecretTests {
    @Test(arguments: [["--pin-protocols", "2,1"], ["--pin-protocols", "1"]])
    func sameSaltSameBytesOtherSaltOtherBytesEachTouched(protocols: [String]) throws {
        let soft = try SoftKey(protocols)
        defer { soft.stop() }
        let info = try soft.key.info()
        #expect(info.isFIDO2 && info.hasHMACSecret && !info.hasPIN)
        #expect(info.pinProtocol == (protocols[1] == "1" ? 1 : 2))
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        #expect(credential.publicKey.count == 64 && !credential.id.isEmpty)
        #expect(try soft.control.counts() == (1, 1))

        let salt = SecureRandom.bytes(count: 32)
        let first = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt)
        let again = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt)
        let count = first.count
        #expect(count == 32)
        let same = first.constantTimeEquals(again)
        #expect(same)
        let other = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: SecureRandom.bytes(count: 32))
        let differs = !first.constantTimeEquals(other)
        #expect(differs)
        // Each hmac-secret asked for a touch, and got one.
        #expect(try soft.control.counts() == (4, 4))
        // Another credential of the same key gives other bytes for the same salt.
        let second = try soft.key.makeCredential(rp: rp, userID: userID)
        let secondOutput = try soft.key.hmacSecret(rp: rp, credentialID: second.id, salt: salt)
        let credentialsDiffer = !first.constantTimeEquals(secondOutput)
        #expect(credentialsDiffer)
    }

    @Test(arguments: [["--pin-protocols", "2,1"], ["--pin-protocols", "1"]])
    func aPINVerifiesTheUserAndChangesTheOutput(protocols: [String]) throws {
        let soft = try SoftKey(protocols)
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        let salt = SecureRandom.bytes(count: 32)
        let withoutUV = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt)
        #expect(throws: FIDO2Error.pinNotSet) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("1234")) }

        try soft.key.setPIN(try pin("4821"))
        #expect(try soft.key.info().hasPIN)
        #expect(try soft.key.pinRetries() == 8)
        let withUV = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("4821"))
        let withUVAgain = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("4821"))
        let stable = withUV.constantTimeEquals(withUVAgain)
        #expect(stable)
        // CTAP 2.1: CredRandomWithUV and CredRandomWithoutUV differ, so verification changes the bytes.
        let uvChanges = !withUV.constantTimeEquals(withoutUV)
        #expect(uvChanges)
        // A key with a PIN is always asked with it: without, the bytes would be the other ones.
        #expect(throws: FIDO2Error.pinRequired) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt) }
        #expect(throws: FIDO2Error.pinRequired) { _ = try soft.key.makeCredential(rp: rp, userID: userID) }
        let verified = try soft.key.makeCredential(rp: rp, userID: userID, pin: try pin("4821"))
        _ = try soft.key.hmacSecret(rp: rp, credentialID: verified.id, salt: salt, pin: try pin("4821"))
    }

    /// The software authenticator models real keys (CTAP 2.1 hmac-secret): two CredRandoms per
    /// credential, chosen by whether the user was verified, and an output given to an assertion
    /// with user presence off, with no touch. The attacker's silent assertion (written against
    /// the wire, not through libfido2) gets the bytes without verification, the same as
    /// libfido2's touched assertion without a PIN, and never those with the PIN.
    @Test(arguments: [["--pin-protocols", "2,1"], ["--pin-protocols", "1"]])
    func aSilentAssertionGetsTheOutputWithoutVerificationAndAsksNoTouch(protocols: [String]) throws {
        let soft = try SoftKey(protocols)
        defer { soft.stop() }
        let pinProtocol = protocols[1] == "1" ? 1 : 2
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        let salt = SecureRandom.bytes(count: 32)
        let withoutUV = bytes(try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt))
        let asked = try soft.control.counts().asked
        let silent = try soft.control.silentHMACSecret(rpID: rp, credentialID: credential.id, salt: salt, pinProtocol: pinProtocol)
        #expect(try soft.control.counts().asked == asked, "no touch asked")
        #expect(silent == withoutUV)

        try soft.key.setPIN(try pin("4821"))
        let withUV = bytes(try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("4821")))
        let withoutUVNow = bytes(try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, verification: .withoutPIN))
        let silentNow = try soft.control.silentHMACSecret(rpID: rp, credentialID: credential.id, salt: salt, pinProtocol: pinProtocol)
        #expect(withUV != withoutUV, "CredRandomWithUV is not CredRandomWithoutUV")
        #expect(silentNow == withoutUV && withoutUVNow == withoutUV, "setting a PIN changes neither CredRandom")
        #expect(silentNow != withUV)
        // A slot that needs the PIN is never asked of the key without it.
        #expect(throws: FIDO2Error.pinRequired) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, verification: .withPIN) }
    }

    @Test func aWrongPINIsRefusedAndCountedThenBlocks() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        try soft.key.setPIN(try pin("4821"))
        let salt = SecureRandom.bytes(count: 32)
        #expect(throws: FIDO2Error.pinWrong(retriesLeft: 7)) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("0000")) }
        #expect(try soft.key.pinRetries() == 7)
        let (asked, _) = try soft.control.counts()
        #expect(throws: FIDO2Error.pinWrong(retriesLeft: 6)) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("1111")) }
        // A wrong PIN never gets as far as asking for a touch.
        #expect(try soft.control.counts().asked == asked)
        // The right one resets the count.
        _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("4821"))
        #expect(try soft.key.pinRetries() == 8)
        // Three wrong in a row: no more tries until the key is unplugged (here: restarted).
        #expect(throws: FIDO2Error.pinWrong(retriesLeft: 7)) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("0001")) }
        #expect(throws: FIDO2Error.pinWrong(retriesLeft: 6)) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("0002")) }
        #expect(throws: FIDO2Error.pinBlockedUntilReplug) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("0003")) }
        #expect(throws: FIDO2Error.pinBlockedUntilReplug) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt, pin: try pin("4821")) }
        #expect(FIDO2Error.pinWrong(retriesLeft: 1).description.contains("1 try left"))
    }

    @Test func noTouchTimesOutWithNoOutputAndIsCounted() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        let salt = SecureRandom.bytes(count: 32)
        try soft.control.setTouch(false)
        #expect(throws: FIDO2Error.noTouch) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt) }
        #expect(throws: FIDO2Error.noTouch) { try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey) }
        #expect(throws: FIDO2Error.noTouch) { _ = try soft.key.makeCredential(rp: rp, userID: userID) }
        // Asked three more times, touched only for the first credential.
        #expect(try soft.control.counts() == (4, 1))
        #expect(FIDO2Error.noTouch.description.contains("not touched"))
        try soft.control.setTouch(true)
        _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: salt)
        #expect(try soft.control.counts() == (5, 2))
    }

    @Test func aTouchIsAskedForAndItsSignatureChecked() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey)
        try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey)
        #expect(try soft.control.counts() == (3, 3))
        // Another credential's public key: the signature does not verify.
        let other = try soft.key.makeCredential(rp: rp, userID: userID)
        #expect(throws: FIDO2Error.self) { try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: other.publicKey) }
        try soft.control.setHostility(.badSignature)
        #expect { try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey) } throws: { e in
            if case FIDO2Error.malformedReply(let why) = e { return why.contains("signature") } else { return false }
        }
        try soft.control.setHostility(.wrongRPIDHash)
        #expect { try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey) } throws: { e in
            if case FIDO2Error.malformedReply = e { return true } else { return false }
        }
        try soft.control.setHostility(.noPresenceFlag)
        #expect(throws: FIDO2Error.noTouch) { try soft.key.touch(rp: rp, credentialID: credential.id, publicKey: credential.publicKey) }
        #expect(throws: FIDO2Error.noTouch) { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: SecureRandom.bytes(count: 32)) }
    }

    @Test func aCredentialNotOnTheKeyIsNamedSo() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        #expect(throws: FIDO2Error.credentialNotOnKey) {
            _ = try soft.key.hmacSecret(rp: rp, credentialID: SecureRandom.bytes(count: 48), salt: SecureRandom.bytes(count: 32))
        }
        // The right id for another relying party is not on the key either.
        #expect(throws: FIDO2Error.credentialNotOnKey) {
            _ = try soft.key.hmacSecret(rp: "other.example", credentialID: credential.id, salt: SecureRandom.bytes(count: 32))
        }
    }

    @Test func aKeyWithoutHMACSecretIsRefused() throws {
        let soft = try SoftKey(["--no-hmac-secret"])
        defer { soft.stop() }
        #expect(try soft.key.info().hasHMACSecret == false)
        #expect { _ = try soft.key.makeCredential(rp: rp, userID: userID) } throws: { e in
            if case FIDO2Error.noHMACSecret(let why) = e { return why.contains("hmac-secret") } else { return false }
        }
    }

    @Test func noKeyAnswersAtAPathWithoutOne() throws {
        let key = FIDO2Key(path: "soft:/tmp/sitekeep-no-such-socket-\(SecureRandom.bytes(count: 4).map { String($0) }.joined())", timeoutMilliseconds: 2_000)
        #expect { try key.info() } throws: { e in
            if case FIDO2Error.unreachable(let why) = e { return why.contains("plugged in") } else { return false }
        }
        #expect(try FIDO2Key.chosen(environment: [FIDO2Key.environmentVariable: "soft:/x.sock"]).path == "soft:/x.sock")
        // On a machine with no key plugged in (as the test machines), the choice says so.
        if try FIDO2Key.plugged().isEmpty {
            #expect(throws: FIDO2Error.noKey) { try FIDO2Key.chosen(environment: [:]) }
        }
    }

    @Test func inputsAreCheckedBeforeTheKeyIsAsked() throws {
        let key = FIDO2Key(path: "soft:/nonexistent")
        #expect { _ = try key.hmacSecret(rp: rp, credentialID: [1], salt: [0, 1]) } throws: { e in
            if case FIDO2Error.invalidArgument = e { return true } else { return false }
        }
        #expect { _ = try key.makeCredential(rp: rp, userID: []) } throws: { e in
            if case FIDO2Error.invalidArgument = e { return true } else { return false }
        }
        #expect { _ = try key.hmacSecret(rp: rp, credentialID: [1], salt: [UInt8](repeating: 0, count: 32), pin: try pin("123")) } throws: { e in
            if case FIDO2Error.invalidArgument = e { return true } else { return false }
        }
    }
}

/// The WebAuthn PRF relation: PRF output for eval input X is hmac-secret with salt
/// SHA-256("WebAuthn PRF" ‖ 0x00 ‖ X), so a PRF slot's bytes (a browser's, `--prf-file`) and
/// the key's hmac-secret through libfido2 (`--fido2`) are the same bytes.
@Suite(.serialized)
struct FIDO2PRFRelationTests {
    @Test func hmacSecretOfThePRFSaltIsThePRFOutput() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        let input = Array("sitekeep unlock v1".utf8)
        // What the authenticator's PRF gives for the input, computed by the authenticator itself
        // (no hmac-secret transport): what a browser hands a page, and a PRF slot is made with.
        let prf = try soft.control.prfOutput(credentialID: credential.id, evalInput: input, userVerified: false)
        let viaSalt = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: WebAuthnPRF.hmacSecretSalt(forEvalInput: input))
        let relationHolds = viaSalt.constantTimeEquals(prf)
        #expect(relationHolds)
        let direct = try soft.key.prfOutput(rp: rp, credentialID: credential.id, evalInput: input)
        let directHolds = direct.constantTimeEquals(prf)
        #expect(directHolds)
        // The salt is not the input: hmac-secret of the raw input is something else.
        let raw = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: SHA256.hash(input))
        let rawDiffers = !raw.constantTimeEquals(prf)
        #expect(rawDiffers)

        try soft.key.setPIN(try pin("4821"))
        let prfUV = try soft.control.prfOutput(credentialID: credential.id, evalInput: input, userVerified: true)
        let verified = try soft.key.prfOutput(rp: rp, credentialID: credential.id, evalInput: input, pin: try pin("4821"))
        let verifiedHolds = verified.constantTimeEquals(prfUV)
        #expect(verifiedHolds)
        #expect(bytes(verified) != prf)
    }
}

/// A hostile "authenticator" (malformed CBOR, wrong lengths, a wrong nonce): clear errors, no crash.
@Suite(.serialized)
struct FIDO2HostileAuthenticatorTests {
    @Test(arguments: [SoftAuthenticator.Hostility.garbageCBOR, .truncatedCBOR, .hmacSecretWrongLength, .lyingLength])
    func malformedAnswersAreRefused(hostility: SoftAuthenticator.Hostility) throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let credential = try soft.key.makeCredential(rp: rp, userID: userID)
        try soft.control.setHostility(hostility)
        #expect { _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: SecureRandom.bytes(count: 32)) } throws: { e in
            guard case FIDO2Error.malformedReply(let why) = e else { return false }
            return !why.isEmpty
        }
        try soft.control.setHostility(.none)
        _ = try soft.key.hmacSecret(rp: rp, credentialID: credential.id, salt: SecureRandom.bytes(count: 32))
    }

    @Test func aWrongInitNonceIsNoKey() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        try soft.control.setWrongNonce(true)
        #expect { try soft.key.info() } throws: { e in
            if case FIDO2Error.unreachable = e { return true } else { return false }
        }
    }
}
