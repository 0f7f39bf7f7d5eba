import Foundation
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepVaultRemotes

/// `vault mounts NAME [--open] [--json]` (issue 48, item 4): the child vaults a vault declares
/// with `*.link.json` files, their credentials resolved from `.vault/owner/ro-links.json` as the
/// sites' web client resolves them; `--open` clones (or pulls) each child read-only.
enum VaultMountsCommand {
    static let mounts = CommandSpec(
        path: ["vault", "mounts"],
        summary: "List the child vaults a vault declares (*.link.json); with --open, clone or pull each one read-only",
        discussion: """
        A vault written by the sites' web client declares a child vault with a file \
        MOUNT.link.json (the child's vault_id and a ref_id, no key) and keeps the child's read \
        key in .vault/owner/ro-links.json under that ref_id. Each link is listed with its mount \
        path, the child's vault id and whether its credential resolved; a link with no usable \
        credential stays a plain file, as in the web client. No key is ever printed. --open \
        clones each resolved child from the parent's vault server (with the parent's access \
        token) into the SiteKeep home, its read key kept in custody, registered as \
        PARENT.CHILD-VAULT-ID for the parent's site, read-only; a child already opened is \
        pulled. `vault cat PARENT MOUNT/PATH` and the bridge's vault.load then serve the \
        child's files under the mount path; a write there is refused. A running daemon's sync \
        pulls the children with their parent. A duplicate child, a link back to the parent, a \
        child registered to another site, or an ro-links.json that is malformed or over its \
        bounds is an error, and nothing is opened.
        """,
        arguments: [VaultCommands.vaultName],
        options: VaultCommands.unlockOptions + [.flag("--open", "clone (or pull) each child with a resolved credential, read-only")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault mounts notes --prf-file prf.bin", "list the child vaults notes declares"),
                   CommandExample("sitekeep vault mounts notes --open --prf-file prf.bin --json", "open them read-only, and report as JSON")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        var opened: [String: MountOpened] = [:]
        let mounts: [DeclaredMount]
        if inv.flag("--open") {
            let svc = try VaultSyncCommands.service(inv)
            for o in try svc.openMounts(parent: name) { opened[o.mount.linkPath] = o }
            mounts = try VaultMounts.declared(in: svc.library.vault(named: name))
        } else {
            mounts = try VaultMounts.declared(in: VaultCommands.opened(inv, try VaultCommands.unlockedLibrary(inv)).vault)
        }
        inv.emit(.array(mounts.map { m in
            var members = [JSONMember(key: "mount", value: .string(m.mountPath)), JSONMember(key: "link", value: .string(m.linkPath)),
                           JSONMember(key: "label", value: .string(m.label)), JSONMember(key: "vaultId", value: .string(m.childVaultID)),
                           JSONMember(key: "resolved", value: .bool(m.isResolved)), JSONMember(key: "state", value: .string(stateName(m.state)))]
            if let why = reason(m.state) { members.append(JSONMember(key: "reason", value: .string(why))) }
            if let o = opened[m.linkPath] {
                members.append(JSONMember(key: "child", value: .string(o.childName)))
                members.append(JSONMember(key: "opened", value: .string(o.action.rawValue)))
                members.append(JSONMember(key: "head", value: .string(o.head)))
            }
            return .object(members)
        })) {
            mounts.isEmpty ? "Vault \(name) declares no mounts (no *.link.json files)." :
                Table(headers: ["MOUNT", "VAULT ID", "CREDENTIAL", "LABEL"], rows: mounts.map { m in
                    [m.mountPath, m.childVaultID ?? "-",
                     m.isResolved ? ("resolved" + (opened[m.linkPath].map { ", \($0.action.rawValue) as \($0.childName)" } ?? "")) : stateName(m.state) + ": " + (reason(m.state) ?? ""),
                     m.label]
                }).render { inv.style($0, .bold) }
        }
    }

    static func stateName(_ s: DeclaredMount.State) -> String {
        switch s {
        case .resolved: "resolved"
        case .noCredential: "plain-file"
        case .duplicate: "duplicate"
        case .cycle: "cycle"
        }
    }

    static func reason(_ s: DeclaredMount.State) -> String? {
        switch s {
        case .resolved: nil
        case .noCredential(let why): why + "; the link stays a plain file"
        case .duplicate(let first): "names the same child as \(first), which mounts instead"
        case .cycle: "names the vault itself"
        }
    }
}
