public import SiteKeepEncoding

/// The cryptography the agent's formats need and do not implement: the SHA-2 digests of
/// fingerprints and SSHSIG, and the checks of signatures made by keys SiteKeep does not hold (a
/// server's host key signing its session identifier, an SSHSIG signer). The agent links no
/// crypto library: SiteKeepWiring's `CryptoSSHCryptography` implements this over SiteKeepCrypto
/// (libsodium and OpenSSL), and every ``AgentKeySource`` hands its connections one.
///
/// Nothing here signs or holds a secret.
public protocol SSHCryptography: Sendable {
    /// The SHA-256 digest of `message`.
    func sha256(_ message: [UInt8]) -> [UInt8]
    /// The SHA-512 digest of `message`.
    func sha512(_ message: [UInt8]) -> [UInt8]
    /// Whether `signature` (64 bytes) is a valid Ed25519 signature of `message` under the 32-byte
    /// `publicKey`.
    func isValidEd25519(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool
    /// Whether (`r`, `s`), unsigned big-endian, is a valid ECDSA signature of `message` under the
    /// SEC 1 uncompressed `point` on `curve`, hashed with the curve's hash (RFC 5656 §6.2.1).
    func isValidECDSA(curve: SSHCurve, point: [UInt8], r: [UInt8], s: [UInt8], message: [UInt8]) -> Bool
    /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 signature of `message` with `hash` under
    /// the key (`modulus`, `exponent`), both unsigned big-endian.
    func isValidRSA(modulus: [UInt8], exponent: [UInt8], signature: [UInt8], message: [UInt8], hash: SSHRSAHash) -> Bool
}

/// The NIST curves of `ecdsa-sha2-nistpNNN` keys (RFC 5656): the encoding target's, shared with the crypto layer.
public typealias SSHCurve = ECDSACurve

/// The hashes an `ssh-rsa` key's signature may use here: `rsa-sha2-256` and `rsa-sha2-512`
/// (SHA-1, `ssh-rsa` signatures, is refused).
public enum SSHRSAHash: String, Sendable {
    /// `rsa-sha2-256`.
    case sha256
    /// `rsa-sha2-512`.
    case sha512
}
