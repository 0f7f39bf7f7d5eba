/// Which commit signers a pull or clone lets into a vault (SGIT-FORMAT.md §4.4; issue 12's
/// pinned signers plug in here).
///
/// Every commit that arrives is checked: its id against its bytes, its signature against the
/// key it names. This decides whether that key may sign for the vault at all, so a holder of
/// the read key alone cannot bring in a forged HEAD.
public protocol SignerTrust: Sendable {
    /// Whether commits signed by `keyID` (SPKI DER `publicKey`) may enter the vault.
    /// `listedInIndex`: the key is a branch's `public_key_id` in the branch index.
    func admits(keyID: String, publicKey: [UInt8], listedInIndex: Bool, vaultID: String) -> Bool
    /// Called once a pull or clone from an authenticated remote has stored everything: the
    /// signers its new commits were verified under, to pin.
    func pin(_ signers: [(keyID: String, publicKey: [UInt8])], vaultID: String)
    /// Whether unsigned commits may enter (false by default).
    var allowsUnsigned: Bool { get }
}

/// The default rule until signers are pinned per vault: a signer must be a branch key of the
/// branch index (a key that reached the index through a push, which needed the write key);
/// unsigned commits are refused.
public struct BranchIndexSignerTrust: SignerTrust {
    public init() {}
    public func admits(keyID: String, publicKey: [UInt8], listedInIndex: Bool, vaultID: String) -> Bool { listedInIndex }
    public func pin(_ signers: [(keyID: String, publicKey: [UInt8])], vaultID: String) {}
    public var allowsUnsigned: Bool { false }
}
