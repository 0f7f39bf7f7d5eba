/// The algorithms of signing keys custody holds: a name custody, the ssh-agent protocol and the
/// bridge share, here so that the agent names a key's algorithm without importing custody.
public enum SigningAlgorithm: String, Sendable, CaseIterable {
    /// Ed25519 (RFC 8032); 64-byte signatures.
    case ed25519
    /// ECDSA P-256 with SHA-256; 64-byte raw `r || s` signatures.
    case p256 = "p256"
}
