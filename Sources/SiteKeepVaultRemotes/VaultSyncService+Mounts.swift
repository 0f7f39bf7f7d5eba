import Foundation
import SiteKeepSystem
import SiteKeepCustody
import SiteKeepCrypto
public import SiteKeepVault

/// What opening one declared mount did.
public struct MountOpened: Sendable {
    public enum Action: String, Sendable { case cloned, pulled }
    /// The mount.
    public let mount: DeclaredMount
    /// The child's registered name.
    public let childName: String
    public let action: Action
    /// The child's head after.
    public let head: String?
}

/// Opening a vault's declared mounts (issue 48, item 4): each child whose read key the parent's
/// `ro-links.json` holds is cloned read-only from the parent's remote (the same vault server,
/// the parent's access token) into custody and the registry, owned by the parent's site, or
/// pulled when it is open already. The daemon's sync opens them after each pull of the parent.
extension VaultSyncService {
    /// Opens the resolved mounts of vault `parent`. Everything is checked before anything is
    /// written: a duplicate child, a link naming the parent itself, a child registered to
    /// another site, or a parent with no vault-server remote is an error and nothing is cloned.
    /// A child that links back to the parent (a cycle) is refused after its clone, which is then
    /// removed. Links with no usable credential stay plain files and are skipped.
    @discardableResult
    public func openMounts(parent: String) throws(VaultError) -> [MountOpened] {
        let opened = try library.open(parent)
        let mounts = try VaultMounts.declared(in: opened.vault)
        for m in mounts {
            switch m.state {
            case .duplicate(let first):
                throw .mount("\(m.linkPath) names the same child (\(m.childVaultID ?? m.refID)) as \(first): one mount per child; remove one of the links. Nothing was opened")
            case .cycle:
                throw .mount("\(m.linkPath) names vault \(parent) itself (a link cycle); remove the link. Nothing was opened")
            default: continue
            }
        }
        let resolved = mounts.filter(\.isResolved)
        guard !resolved.isEmpty else { return [] }
        let records = try library.records()
        for m in resolved {
            let id = m.childVaultID ?? ""
            if let other = records.first(where: { $0.vaultID == id && $0.siteID != opened.record.siteID }) {
                throw .mount("\(m.linkPath) names vault \(id), which is registered here as \(other.name) for another site; a mount cannot reach another site's vault. Nothing was opened")
            }
        }
        let r = try remote(parent, nil)
        guard r.kind == .api else {
            throw .mount("vault \(parent)'s remote \(r.name) is not a vault server; children are fetched from the parent's vault server")
        }
        let home = AtomicFile.folder(of: remotes.file)
        var out: [MountOpened] = []
        for m in resolved {
            let childID = m.childVaultID ?? ""
            let name = VaultLibrary.childName(parent: parent, childVaultID: childID)
            if records.contains(where: { $0.name == name }) {
                let p = try pull(name: name)
                try refuseCycle(child: name, parent: opened.record.vaultID, mount: m, remove: false)
                out.append(MountOpened(mount: m, childName: name, action: .pulled, head: p.merge?.head.map { "\($0)" } ?? p.remoteHead.map { "\($0)" }))
                continue
            }
            let key = try VaultMounts.credential(for: m, in: opened.vault)
            let token = try parentToken(parent, r)
            let clone = try self.clone(url: r.url, name: name, keyText: key, token: token, path: home + "/vaults/" + name,
                                       siteID: opened.record.siteID, allowUnsigned: opened.record.allowUnsigned)
            try refuseCycle(child: name, parent: opened.record.vaultID, mount: m, remove: true)
            out.append(MountOpened(mount: m, childName: name, action: .cloned, head: clone.pull.remoteHead.map { "\($0)" }))
        }
        return out
    }

    /// A child that declares the parent (or itself) as its own child is a cycle: refused, and a
    /// fresh clone of it removed (its record, keys, remote, token and folder).
    func refuseCycle(child name: String, parent parentID: String, mount: DeclaredMount, remove: Bool) throws(VaultError) {
        let childMounts = try VaultMounts.declared(in: try library.vault(named: name))
        guard let back = childMounts.first(where: { $0.childVaultID == parentID || $0.state == .cycle }) else { return }
        if remove {
            let root = try? library.open(name).record.path
            for r in (try? listRemotes(vault: name)) ?? [] { try? removeRemote(vault: name, name: r.name) }
            try? library.remove(name: name)
            if let root { try? FileManager.default.removeItem(atPath: root) }
        }
        throw .mount("the child vault \(mount.childVaultID ?? "?") of \(mount.linkPath) links back (\(back.linkPath)) to its parent: a link cycle; "
                     + (remove ? "its clone was removed, " : "") + "nothing of it is served. Remove the link in one of the two vaults")
    }

    /// A guarded copy of the parent's access token for the child's remote (nil: none).
    func parentToken(_ parent: String, _ r: VaultRemote) throws(VaultError) -> SecretBytes? {
        guard r.hasToken else { return nil }
        var bytes: [UInt8]
        do throws(CustodyError) {
            bytes = try custodian.withVaultSecret(vaultID: Self.tokenItem(vault: parent, remote: r.name), context: KeyUseContext(op: .vaultRemote)) {
                (s: borrowing SecretBytes) throws(CustodyError) -> [UInt8] in s.withUnsafeBytes { Array($0) }
            }
        } catch { throw .keysUnavailable("the access token of vault \(parent)'s remote: \(error.description)") }
        do { return try SecretBytes(consumingAndZeroing: &bytes) } catch {
            for i in bytes.indices { bytes[i] = 0 }
            throw .keysUnavailable("the access token of vault \(parent)'s remote could not be copied into guarded memory")
        }
    }
}
