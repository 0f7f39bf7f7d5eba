public import SiteKeepCustody

/// The sgit file ids of a vault's named objects (SGIT-FORMAT §1.2): a kind prefix and the tail
/// custody computes under the read key (``SgitKeys/fileIDTail(_:)``, a MAC, never key bytes).
/// The naming is the vault format's, so it lives here; custody only holds the key.
extension SgitKeys {
    /// `ref-pid-muw-…`: the named-branch ref of `current`, also used when a vault has no index.
    public var namedRefFileID: String { "ref-pid-muw-" + fileIDTail("sg-vault-v1:file-id:ref:\(vaultID)") }
    /// `idx-pid-muw-…`: the branch index.
    public var branchIndexFileID: String { "idx-pid-muw-" + fileIDTail("sg-vault-v1:file-id:branch-index:\(vaultID)") }
    /// `ref-pid-snw-…`: the ref of a branch by name (what `init` uses for clone branch `local`).
    public func branchRefFileID(branchName: String) -> String {
        "ref-pid-snw-" + fileIDTail("sg-vault-v1:file-id:branch-ref:\(vaultID):\(branchName)")
    }
}
