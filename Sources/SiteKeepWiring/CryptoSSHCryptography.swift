public import SiteKeepAgent
public import SiteKeepCrypto

/// The agent's ``SSHCryptography`` on SiteKeepCrypto: SHA-256 and SHA-512 and Ed25519 through
/// libsodium, ECDSA on the NIST curves and RSA through OpenSSL (``ForeignSignature``). What the
/// agent's formats did themselves before they were moved off the crypto layer, unchanged.
public struct CryptoSSHCryptography: SSHCryptography {
    public init() {}

    public func sha256(_ message: [UInt8]) -> [UInt8] { SHA256.hash(message) }

    public func sha512(_ message: [UInt8]) -> [UInt8] { SHA512.hash(message) }

    public func isValidEd25519(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard let key = try? Ed25519.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    public func isValidECDSA(curve: SSHCurve, point: [UInt8], r: [UInt8], s: [UInt8], message: [UInt8]) -> Bool {
        ForeignSignature.isValidECDSA(curve: curve, point: point, r: r, s: s, message: message)
    }

    public func isValidRSA(modulus: [UInt8], exponent: [UInt8], signature: [UInt8], message: [UInt8], hash: SSHRSAHash) -> Bool {
        let named: ForeignSignature.RSAHash = switch hash {
        case .sha256: .sha256
        case .sha512: .sha512
        }
        return ForeignSignature.isValidRSA(modulus: modulus, exponent: exponent, signature: signature, message: message, hash: named)
    }
}
