public import SiteKeepCustody
import SiteKeepCrypto

/// Who signs the commits SiteKeep writes: a P-256 key behind custody (SGIT-FORMAT.md §4.4).
/// The signer hands out its public key and signatures, never the private key.
public protocol CommitSigner: Sendable {
    /// The SubjectPublicKeyInfo DER of the P-256 public key.
    func publicKeyDER() throws(VaultError) -> [UInt8]
    /// The raw 64-byte `r || s` ECDSA-SHA256 signature of `message`.
    func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8]
}

/// This device's key (custody's P-256 device key) as the signer of its vault clone branch: the
/// public half goes into `bare/keys/` and the branch index as sgit's clone keys do; the private
/// half stays wrapped in custody, never in `local/*.pem`.
public struct DeviceCommitSigner: CommitSigner {
    let custodian: Custodian
    let vaultName: String

    /// Signs for the vault registered as `vaultName` (named in the audit log).
    public init(custodian: Custodian, vaultName: String) {
        self.custodian = custodian
        self.vaultName = vaultName
    }

    public func publicKeyDER() throws(VaultError) -> [UInt8] {
        let info: SigningKeyInfo
        do { info = try custodian.deviceKeyInfo() } catch { throw .signingFailed(error.description) }
        guard info.algorithm == .p256, let der = try? Base64.decode(info.publicKey) else {
            throw .signingFailed("the device key is not a P-256 key")
        }
        return der
    }

    public func sign(_ message: [UInt8]) throws(VaultError) -> [UInt8] {
        do {
            return try custodian.signAsDevice(message, context: KeyUseContext(op: .vaultCommit))
        } catch { throw .signingFailed(error.description) }
    }
}
