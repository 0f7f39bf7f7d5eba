import Foundation
internal import SiteKeepSystem
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepVaultRemotes
internal import SiteKeepKeyring
internal import SiteKeepDaemon

/// `vault remote add|list|remove`, `vault clone|pull|push|resolve|merge-abort`.
enum VaultSyncCommands {
    static var all: [CommandSpec] { [remoteAdd, remoteList, remoteRemove, clone, pull, push, resolve, mergeAbort] }

    static func service(_ inv: Invocation, unlock: Bool = true) throws -> VaultSyncService {
        let store = try StoreContext.open(inv)
        if unlock { try store.unlockOneShot(inv) }
        return VaultSyncService(library: VaultCommands.library(store), remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                custodian: store.custodian)
    }

    /// The daemon's vault sync, when this command runs inside a daemon that syncs (unlocked for
    /// the command first): its pulls and pushes are then the daemon's own, reported in
    /// `vault.status` and, for a pull that brings changes, sent to the site as `vault.changed`.
    static func daemonSync(_ inv: Invocation) throws -> VaultSyncScheduler? {
        guard inv.hosted != nil else { return nil }
        let store = try StoreContext.open(inv)
        guard let sync = store.shared?.vaultSync else { return nil }
        try store.unlockOneShot(inv)
        return sync
    }

    /// Reads an access token from `--token-file` by the one secret-input rule (``SecretReader``)
    /// into guarded memory; it must be printable ASCII without spaces.
    static func token(_ inv: Invocation) throws -> SecretBytes? {
        guard let path = inv.option("--token-file") else { return nil }
        let token = try SecretReader.read(.token, path: path, io: inv.io)
        let printable = token.withUnsafeBytes { $0.allSatisfy { $0 >= 0x21 && $0 < 0x7f } }
        guard printable else {
            throw CommandFailure("the access token file holds characters a token cannot have", remedy: "put the token alone in the file", code: "bad_secret")
        }
        return token
    }

    static let tokenOption = OptionSpec.option("--token-file", value: "F", "read the vault server's access token from F ('-' for stdin); kept wrapped in custody")
    static let remoteOption = OptionSpec.option("--remote", value: "R", "the remote to use (default: origin, or the only one)")

    static let remoteAdd = CommandSpec(
        path: ["vault", "remote", "add"],
        summary: "Add a remote to a vault: the vault server (https://…), a folder (read-only) or a static web host (static+https://…, read-only)",
        arguments: [VaultCommands.vaultName, ArgumentSpec("URL", "https://host, /path/to/.sg_vault, file:///path, or static+https://host/path")],
        options: VaultCommands.unlockOptions + [.option("--name", value: "REMOTE", "the remote's name (default: origin)"), tokenOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault remote add notes ~/notes --name shared --prf-file prf.bin", "read another copy of the vault from a shared folder")],
        printsData: false
    ) { inv in
        let name = try inv.requiredArgument("NAME"), url = try inv.requiredArgument("URL")
        let remote = inv.option("--name") ?? "origin"
        let token = try token(inv)
        try service(inv).addRemote(vault: name, name: remote, url: url, token: token)
        inv.say("Added remote \(remote) of vault \(name): \(url)")
    }

    static let remoteList = CommandSpec(
        path: ["vault", "remote", "list"],
        summary: "List a vault's remotes (no unlock needed; tokens are never shown)",
        arguments: [VaultCommands.vaultName],
        examples: [CommandExample("sitekeep vault remote list notes", "show the remotes of notes")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let remotes = try service(inv, unlock: false).listRemotes(vault: name)
        inv.emit(.array(remotes.map { r in ["name": .string(r.name), "url": .string(r.url), "kind": .string(r.kind.rawValue), "token": .bool(r.hasToken)] })) {
            remotes.isEmpty ? "No remotes; add one with 'sitekeep vault remote add \(name) URL'." :
                Table(headers: ["NAME", "KIND", "TOKEN", "URL"], rows: remotes.map { [$0.name, $0.kind.rawValue, $0.hasToken ? "in custody" : "-", $0.url] }).render { inv.style($0, .bold) }
        }
    }

    static let remoteRemove = CommandSpec(
        path: ["vault", "remote", "remove"],
        summary: "Remove a vault's remote and its token",
        arguments: [VaultCommands.vaultName, ArgumentSpec("REMOTE", "the remote's name", optional: true)],
        options: VaultCommands.unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault remote remove notes origin --prf-file prf.bin", "forget the remote origin")],
        printsData: false
    ) { inv in
        let name = try inv.requiredArgument("NAME"), remote = inv.argument("REMOTE") ?? "origin"
        try service(inv).removeRemote(vault: name, name: remote)
        inv.say("Removed remote \(remote) of vault \(name).")
    }

    static let clone = CommandSpec(
        path: ["vault", "clone"],
        summary: "Clone a vault from a remote into a new folder, its keys and token kept in custody",
        discussion: """
        Reads the vault key from --key-file and the server's access token from --token-file; the \
        keys are derived once (PBKDF2) and, with the token, kept wrapped in custody. Nothing \
        secret is written to the folder (sgit keeps its vault key, token and private key in \
        local/; SiteKeep signs with this device's key). Every object id and commit signature is \
        verified. As with git, the second argument may be the folder to clone into (a path with \
        a '/', e.g. ~/notes or ./notes: the vault is then named after the folder's last part), or \
        the vault's name, then optionally the folder (default: vaults/NAME in the SiteKeep home). \
        The folder must be new or empty. The name, URL and folder are checked before anything \
        secret is asked for; a vault server accepts only vault ids of \(ServerVaultID.rule), \
        checked before the key is derived. The folder opens in sgit when given the vault key. \
        The clone is the first look at the vault: it pins the signers the branch index lists \
        and, at first use, those of HEAD's last 64 commits that it does not list (the sites' \
        web client rewrites the index on every push), and shows those (key id, fingerprint, \
        the commits they signed); --trust-signer KEY-ID (repeatable) admits only the signers \
        named, besides those the index lists. \
        A vault the sites' web client (sg-vault) also writes holds unsigned commits: clone it \
        with --allow-unsigned (shown in `vault status` and `vault list`, changed with `vault \
        policy`); a bad signature and a key that differs from its pin are refused either way.
        """,
        arguments: [ArgumentSpec("URL", "the remote: https://host, a folder, or static+https://…"),
                    ArgumentSpec("NAME", "the vault's name in this store, or the folder to clone into (a path with a '/')"),
                    ArgumentSpec("DIR", "the folder to clone into (as --path)", optional: true)],
        options: VaultCommands.unlockOptions + [tokenOption, .option("--path", value: "DIR", "where to put the working vault"),
                                                .option("--site", value: "ORIGIN", "the site the vault belongs to"),
                                                .option("--trust-signer", value: "KEY-ID", "pin this signer the branch index does not list, and no other (repeatable; as `vault log` shows it)"),
                                                .flag("--allow-unsigned", "serve unsigned commits and unpinned signers (for a vault the sites' web client writes; see SECURITY.md 6)")],
        secretInputs: UnlockOptions.secretInputs + [.key],
        examples: [CommandExample("sitekeep vault clone ~/notes notes2 --key-file notes.key --prf-file prf.bin", "clone a vault from a shared folder")]
    ) { inv in
        let url = try inv.requiredArgument("URL")
        let (name, given) = try destination(inv)
        let store = try StoreContext.open(inv)
        let svc = VaultSyncService(library: VaultCommands.library(store), remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                   custodian: store.custodian)
        let path = (given ?? store.home.path + "/vaults/" + name).absolutePath
        // Everything the user typed is checked before a passphrase, key or token is asked for.
        let siteID = try VaultCommands.owningSiteID(inv, store)
        _ = try svc.checkClone(url: url, name: name, path: path)
        let named = try inv.options("--trust-signer").map { text throws -> String in
            guard let id = SignerPin.keyID(parsing: text) else {
                throw UsageError("--trust-signer takes a signer's key id (key-rnd-imm- and 8 to 64 hex digits, as `vault log` and `vault status` show it), "
                                 + "not '\(text.prefix(80))'", command: inv.spec.commandLine)
            }
            return id
        }
        try store.unlockOneShot(inv)
        try? PrivateFolder.makeParents(of: path)
        let key = SecretBox(try inv.readSecret(.key, prompt: "Vault key: "))
        let tokenBox: SecretBox?
        if let t = try token(inv) { tokenBox = SecretBox(t) } else { tokenBox = nil }
        let cloned = try inv.withProgress("Deriving the vault keys and cloning") { () throws -> CloneOutcome in
            let allow = inv.flag("--allow-unsigned")
            if let tokenBox {
                return try svc.clone(url: url, name: name, keyText: key.take(), token: tokenBox.take(), path: path, siteID: siteID,
                                     allowUnsigned: allow, trustSigners: named)
            }
            return try svc.clone(url: url, name: name, keyText: key.take(), token: nil, path: path, siteID: siteID,
                                 allowUnsigned: allow, trustSigners: named)
        }
        let outcome = cloned.pull, fromHistory = cloned.pinnedFromHistory
        inv.emit(.object([
            JSONMember(key: "name", value: .string(name)), JSONMember(key: "path", value: .string(path)),
            JSONMember(key: "head", value: .string(outcome.remoteHead.map { "\($0)" })),
            JSONMember(key: "objects", value: .integer(outcome.fetched.objects)),
            JSONMember(key: "remoteHeldNothing", value: .bool(outcome.remoteHeldNothing)),
            JSONMember(key: "pinnedFromHistory", value: .array(fromHistory.map { s in
                .object([JSONMember(key: "keyID", value: .string(s.keyID)), JSONMember(key: "fingerprint", value: .string(s.fingerprint)),
                         JSONMember(key: "commits", value: .array(s.commits.map { .string("\($0)") }))])
            })),
        ])) { "Cloned \(name) into \(path): \(outcome.fetched.commits) commits, \(outcome.fetched.trees) trees, \(outcome.fetched.blobs) blobs verified"
            + fromHistory.map { s in
                let shown = s.commits.prefix(3).map { "\($0)" }.joined(separator: ", ") + (s.commits.count > 3 ? " and \(s.commits.count - 3) more" : "")
                return "\n  pinned   \(s.keyID) (public key sha256 \(s.fingerprint)) at first use: it signed \(shown) of HEAD's history, "
                    + "and the branch index does not list it (the sites' web client rewrites the index). If you do not know this signer, "
                    + "`sitekeep vault remove \(name)` and clone again with --trust-signer naming the signer you expect"
            }.joined()
            + (outcome.remoteHeldNothing ? "\n  note     \(url) holds nothing under vault id \(cloned.vaultID): a new, empty vault. "
                + "If you expected files, check the vault id (the part of the key after ':') and clone again" : "")
            + (inv.flag("--allow-unsigned") ? "\n  policy   unsigned commits and unpinned signers allowed (--allow-unsigned); change it with `sitekeep vault policy \(name) --require-signed`" : "") }
    }

    /// The vault's name and the folder `vault clone` was given (nil: the default folder). A
    /// second argument with a '/' (or `.`/`..`) is the folder, as `git clone URL DIR`: the name
    /// is its last part.
    static func destination(_ inv: Invocation) throws -> (name: String, folder: String?) {
        let second = try inv.requiredArgument("NAME")
        var folder = inv.argument("DIR")
        if let p = inv.option("--path") {
            if let f = folder, f != p {
                throw UsageError("vault clone got two folders (DIR \(f) and --path \(p)); give one", command: inv.spec.commandLine)
            }
            folder = p
        }
        let looksLikeFolder = second.contains("/") || second == "." || second == ".."
        guard looksLikeFolder else { return (second, folder) }
        if folder != nil {
            throw UsageError("vault clone got a folder (\(second)) where the vault's name goes, and a folder after it; "
                             + "give `vault clone URL FOLDER` or `vault clone URL NAME FOLDER`", command: inv.spec.commandLine)
        }
        var trimmed = second
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        let last = String(trimmed.absolutePath.split(separator: "/").last ?? "")
        guard VaultRecord.isValidName(last) else {
            throw UsageError("the folder \(second) gives no usable vault name (\(last.isEmpty ? "it has no last part" : "'\(last.prefix(80))' is not 1-64 letters, digits, '.', '_' or '-'")); "
                             + "name the vault: `sitekeep vault clone URL NAME \(second)`", command: inv.spec.commandLine)
        }
        return (last, trimmed)
    }

    static let pull = CommandSpec(
        path: ["vault", "pull"],
        summary: "Fetch what is new on the remote (every id and signature verified) and merge it",
        arguments: [VaultCommands.vaultName],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault pull notes --prf-file prf.bin", "bring notes up to date")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let p: PullOutcome
        if let sync = try daemonSync(inv) { p = try sync.pull(name: name, remote: inv.option("--remote")) } else {
            p = try service(inv).pull(name: name, remote: inv.option("--remote"))
        }
        inv.emit(.object([
            JSONMember(key: "remoteHead", value: .string(p.remoteHead.map { "\($0)" })),
            JSONMember(key: "merge", value: .string(p.merge?.kind.rawValue)),
            JSONMember(key: "head", value: .string(p.merge?.head.map { "\($0)" })),
            JSONMember(key: "fetched", value: .integer(p.fetched.objects)),
            JSONMember(key: "conflicts", value: .array((p.merge?.conflicts ?? []).map { .string($0) })),
            JSONMember(key: "droppedByRemote", value: .string(p.droppedByRemote.map { "\($0)" })),
        ])) {
            let what = p.merge.map { "\($0.kind.rawValue)" } ?? "nothing on the remote"
            let dropped = p.droppedByRemote.map {
                "\nThe remote's head no longer contained \($0), which it held before: a writer moved it without compare-and-swap "
                    + "(the sites' web client does). Nothing is lost: it is merged back here; 'sitekeep vault push \(name)' publishes it again."
            } ?? ""
            return "Pulled \(name): \(p.fetched.objects) new objects, \(what)" + dropped + ((p.merge?.conflicts.isEmpty ?? true) ? "" :
                "\nConflicts (theirs is in PATH.conflict): " + p.merge!.conflicts.joined(separator: ", ") + "\nResolve each with 'sitekeep vault resolve \(name) PATH --ours|--theirs'.")
        }
    }

    static let push = CommandSpec(
        path: ["vault", "push"],
        summary: "Push this device's commits to the remote; a failure stays queued and is retried",
        arguments: [VaultCommands.vaultName],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault push notes --prf-file prf.bin", "publish the new commits")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let p: PushOutcome
        if let sync = try daemonSync(inv) { p = try sync.push(name: name, remote: inv.option("--remote")) } else {
            p = try service(inv).push(name: name, remote: inv.option("--remote"))
        }
        inv.emit(.object([JSONMember(key: "head", value: .string(p.head.map { "\($0)" })), JSONMember(key: "objects", value: .integer(p.objects)),
                          JSONMember(key: "upToDate", value: .bool(p.upToDate))])) {
            p.upToDate ? "Everything is on the remote already." : "Pushed \(p.objects) objects; the remote's head is \(p.head.map { "\($0)" } ?? "-")"
        }
    }

    static let resolve = CommandSpec(
        path: ["vault", "resolve"],
        summary: "Resolve one conflict of a merge with ours or theirs; the last one makes the merge commit",
        arguments: [VaultCommands.vaultName, ArgumentSpec("PATH", "the conflicting file")],
        options: VaultCommands.unlockOptions + [.flag("--ours", "keep this vault's version"), .flag("--theirs", "take the remote's version")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault resolve notes docs/a.txt --theirs --prf-file prf.bin", "take the remote's docs/a.txt")]
    ) { inv in
        let name = try inv.requiredArgument("NAME"), path = try inv.requiredArgument("PATH")
        guard inv.flag("--ours") != inv.flag("--theirs") else { throw UsageError("give exactly one of --ours and --theirs", command: inv.spec.commandLine) }
        let library = try VaultCommands.unlockedLibrary(inv)
        let out = try library.vault(named: name).resolve(path: path, useTheirs: inv.flag("--theirs"), signer: try library.commitSigner(for: name))
        inv.emit(.object([JSONMember(key: "merge", value: .string(out.kind.rawValue)), JSONMember(key: "head", value: .string(out.head.map { "\($0)" })),
                          JSONMember(key: "conflicts", value: .array(out.conflicts.map { .string($0) }))])) {
            out.conflicts.isEmpty ? "Merged: \(out.head.map { "\($0)" } ?? "")" : "Resolved \(path); still in conflict: " + out.conflicts.joined(separator: ", ")
        }
    }

    static let mergeAbort = CommandSpec(
        path: ["vault", "merge-abort"],
        summary: "Abandon the merge in progress (HEAD stays this vault's; PATH.conflict files go)",
        arguments: [VaultCommands.vaultName],
        options: VaultCommands.unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault merge-abort notes --prf-file prf.bin", "give up the merge")],
        printsData: false
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        try VaultCommands.unlockedLibrary(inv).vault(named: name).mergeAbort()
        inv.say("Merge abandoned.")
    }
}

extension String {
    /// This path made absolute against the working folder, `~/` against HOME, with `.` and `..`
    /// parts resolved (as the shell would have, for a path given with an option).
    var absolutePath: String {
        var p = self
        if p == "~" || p.hasPrefix("~/"), let home = ProcessInfo.processInfo.environment["HOME"] { p = home + p.dropFirst() }
        if !p.hasPrefix("/") { p = FileManager.default.currentDirectoryPath + "/" + p }
        var parts: [Substring] = []
        for part in p.split(separator: "/") {
            if part == "." || part.isEmpty { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }
}
