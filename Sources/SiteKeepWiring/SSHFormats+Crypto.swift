public import SiteKeepAgent
public import SiteKeepNames
import SiteKeepCrypto

// The agent's OpenSSH formats with SiteKeep's own crypto filled in (``CryptoSSHCryptography``),
// for the command line, the benchmarks and the tests, which hold the crypto layer anyway: the
// forms they had when the formats did their own hashing, and the OpenSSH form of a key custody
// holds (a P-256 key's SubjectPublicKeyInfo read by OpenSSL).

extension SSHPublicKey {
    /// `SHA256:` and the unpadded base64 of SHA-256 of the blob, as `ssh-keygen -l` prints it.
    public var fingerprint: String { fingerprint(using: CryptoSSHCryptography()) }

    /// The `SHA256:` fingerprint of any key blob.
    public static func fingerprint(ofBlob blob: [UInt8]) -> String {
        fingerprint(ofBlob: blob, using: CryptoSSHCryptography())
    }

    /// Whether `signatureBlob` is a valid signature of `data` by this key
    /// (``isValidSignature(_:for:using:)`` on SiteKeep's crypto).
    public func isValidSignature(_ signatureBlob: [UInt8], for data: [UInt8]) -> Bool {
        isValidSignature(signatureBlob, for: data, using: CryptoSSHCryptography())
    }

    /// The OpenSSH form of a key custody holds: its public key bytes (32 raw bytes for
    /// Ed25519, SubjectPublicKeyInfo DER for P-256).
    /// - Throws: ``SSHWireError/invalid(field:reason:)`` for bytes that are not such a key.
    public init(algorithm: SigningAlgorithm, publicKey: [UInt8]) throws(SSHWireError) {
        switch algorithm {
        case .ed25519:
            guard publicKey.count == 32 else { throw .invalid(field: "Ed25519 key", reason: "\(publicKey.count) bytes, not 32") }
            self = .ed25519(publicKey)
        case .p256:
            guard let spki = try? P256.Signing.PublicKey(derRepresentation: publicKey) else {
                throw .invalid(field: "P-256 key", reason: "not a P-256 SubjectPublicKeyInfo")
            }
            self = .ecdsa(.p256, point: Array(spki.derRepresentation.suffix(65)))
        }
    }
}

extension SSHSIG.Hash {
    /// The digest of `message` (``digest(_:using:)`` on SiteKeep's crypto).
    public func digest(_ message: [UInt8]) -> [UInt8] { digest(message, using: CryptoSSHCryptography()) }
}

extension SSHSIG.Signature {
    /// Whether this is a valid signature of `message` in `namespace`
    /// (``isValid(for:namespace:using:)`` on SiteKeep's crypto).
    public func isValid(for message: [UInt8], namespace expected: String) -> Bool {
        isValid(for: message, namespace: expected, using: CryptoSSHCryptography())
    }
}

extension SessionBindings {
    /// No bindings yet, checked with SiteKeep's crypto.
    public init() { self.init(cryptography: CryptoSSHCryptography()) }
}
