/// The NIST curves of `ecdsa-sha2-nistpNNN` keys (RFC 5656), by the name SSH gives them, each
/// paired with its hash there (P-256 with SHA-256, P-384 with SHA-384, P-521 with SHA-512).
/// One type for the ssh-agent's key formats and the crypto layer's ECDSA checks.
public enum ECDSACurve: String, Sendable, CaseIterable {
    /// P-256 with SHA-256.
    case p256 = "nistp256"
    /// P-384 with SHA-384.
    case p384 = "nistp384"
    /// P-521 with SHA-512.
    case p521 = "nistp521"

    /// The length of one coordinate, in bytes.
    public var coordinateByteCount: Int {
        switch self {
        case .p256: 32
        case .p384: 48
        case .p521: 66
        }
    }
}
