/// The children of a vault's declared mounts, as registered vaults: `vault mounts NAME --open`
/// registers each child (read key only, so read-only) under ``childName(parent:childVaultID:)``,
/// owned by the parent's site; a read under a mount path is served from it.
extension VaultLibrary {
    /// The name a mount's child vault is registered under: `<parent>.<child vault id>` (the
    /// parent's name cut so the whole fits the 64-character rule).
    public static func childName(parent: String, childVaultID: String) -> String {
        let room = max(1, 64 - 1 - childVaultID.count)
        return String(parent.prefix(room)) + "." + childVaultID
    }

    /// The mount of vault `name` whose path holds `path` (nil: none does). `siteID` nil: the CLI.
    public func mount(of name: String, containing path: String, siteID: String?) throws(VaultError) -> DeclaredMount? {
        let parent = try reachable(name, siteID)
        return try VaultMounts.declared(in: parent).first { $0.isResolved && $0.contains(path) }
    }

    /// The child vault and the path in it that `path` of vault `name` names, when `path` lies
    /// under one of its resolved mounts (nil: it does not).
    /// - Throws: ``VaultError/mount(_:)`` when the child is not opened here, or is registered to
    ///   another site than the parent's.
    public func mountedChild(of name: String, path: String, siteID: String?) throws(VaultError) -> (vault: Vault, path: String)? {
        guard let m = try mount(of: name, containing: path, siteID: siteID), let childID = m.childVaultID else { return nil }
        let parentRecord = try registry.record(named: name)
        let childName = Self.childName(parent: name, childVaultID: childID)
        guard let record = try records().first(where: { $0.name == childName && $0.vaultID == childID }) else {
            throw .mount("\(m.mountPath) is the mount of vault \(childID) in vault \(name), but that child is not opened here; open it with `sitekeep vault mounts \(name) --open`")
        }
        guard record.siteID == parentRecord.siteID else {
            throw .mount("the child vault \(childName) of mount \(m.mountPath) belongs to another site than vault \(name); nothing was read")
        }
        let child = try reachable(childName, siteID)
        let rest = path == m.mountPath ? "" : String(path.dropFirst(m.mountPath.count + 1))
        return (child, rest)
    }

    /// Reads `path` of vault `name`, or, when the vault has no such file and `path` lies under
    /// one of its mounts, the child's file.
    public func readThroughMounts(name: String, path: String, siteID: String?) throws(VaultError) -> [UInt8] {
        let v = try reachable(name, siteID)
        do { return try v.read(path: path) } catch .notFound(let missing) {
            guard let child = try mountedChild(of: name, path: path, siteID: siteID) else { throw .notFound(path: missing) }
            return try child.vault.read(path: child.path)
        }
    }

    /// The vault `name` for the site `siteID` (nil: for the CLI, whichever site owns it).
    func reachable(_ name: String, _ siteID: String?) throws(VaultError) -> Vault {
        if let siteID { return try vault(named: name, forSite: siteID) }
        return try vault(named: name)
    }

    /// Refuses a write to `path` of vault `name` when it lies under a mount: a child opens
    /// read-only here, as in the web client's v1. Declarations SiteKeep refuses (a malformed or
    /// oversized `ro-links.json`, too many links) open no child, so they block no write: a
    /// parent's writer cannot stop the vault's writes by planting one.
    public func refuseWriteUnderMount(name: String, path: String) throws(VaultError) {
        let found: DeclaredMount?
        do { found = try mount(of: name, containing: path, siteID: nil) } catch .mount { return }
        guard let m = found else { return }
        throw .readOnly(reason: "\(path) lies under \(m.mountPath), the mount of child vault \(m.childVaultID ?? "?") (\(m.label)), which opens read-only "
                        + "(as in the web client); nothing was written. Write to the child vault with its own vault key")
    }
}
