import Foundation
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepKeyring
internal import SiteKeepPartitions
internal import SiteKeepVaultRemotes
internal import SiteKeepDaemon
import SiteKeepVocabulary

/// `vault add|list|remove|ls|cat|log|status|verify|fsck|trust|assign|policy`.
enum VaultCommands {
    static var all: [CommandSpec] { [add, list, remove, ls, cat, log, status, verify, VaultFsckCommand.fsck, VaultMountsCommand.mounts, trust, assign, policy] + VaultWriteCommands.all + VaultSyncCommands.all }

    /// The vault library of a store, its keys kept by the (unlocked) custodian.
    static func library(_ store: StoreContext) -> VaultLibrary {
        store.vaultLibrary()
    }

    /// Opens the store and unlocks it for this command.
    static func unlockedLibrary(_ inv: Invocation) throws -> VaultLibrary {
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        return library(store)
    }

    /// Opens vault NAME for a command, saying so when a vault registered before pins had its
    /// signers pinned now.
    static func opened(_ inv: Invocation, _ library: VaultLibrary) throws -> OpenedVault {
        let o = try library.open(try inv.requiredArgument("NAME"))
        if !o.pinnedAtFirstUse.isEmpty {
            inv.note("note: vault \(o.record.name) was registered before SiteKeep pinned signers; trusted from now on, as its branch index lists them: "
                + o.pinnedAtFirstUse.map { "\($0.keyID) (sha256 \($0.fingerprint.prefix(16))…)" }.joined(separator: ", ")
                + ". It belongs to no site (the bridge does not serve it): `sitekeep vault assign \(o.record.name) --site ORIGIN`.")
        }
        return o
    }

    /// The site an owner option names (its id or one of its origins), resolved through the registry.
    static func owner(_ text: String, store: StoreContext, inv: Invocation) throws -> Site {
        try SiteCommands.site(text, in: try SiteCommands.registry(store), command: inv.spec.commandLine)
    }

    /// The id of the site `--site` names, or nil when the option is absent (a CLI-only vault).
    static func owningSiteID(_ inv: Invocation, _ store: StoreContext) throws -> String? {
        guard let text = inv.option("--site") else { return nil }
        return try owner(text, store: store, inv: inv).id.string
    }

    /// How the owner of a record is shown: the site's name and first origin, `removed site <id>`, or `-`.
    static func ownerText(_ siteID: String?, sites: [Site]) -> String {
        guard let siteID else { return "-" }
        guard let s = sites.first(where: { $0.id.string == siteID }) else { return "removed site \(siteID)" }
        return "\(s.displayName) (\(s.origins.first?.serialized ?? s.id.string))"
    }

    static let vaultName = ArgumentSpec("NAME", "the vault's name in this store")
    static let unlockOptions = [UnlockOptions.recoveryFile]
    static let siteOption = OptionSpec.option("--site", value: "ORIGIN", "the site that owns the vault (one of its origins, or its id); only that site's bridge calls reach it")

    static let add = CommandSpec(
        path: ["vault", "add"],
        summary: "Register an sgit vault folder for a site; its keys are derived once and kept in custody",
        discussion: """
        Reads the vault key (passphrase:vault_id, with or without an sgit_private_vault_ prefix) \
        or a read key (<64 hex>:vault_id) from --key-file ('-' for stdin) or a prompt. The PBKDF2 \
        derivation (600,000 iterations, twice) runs here, once; the derived keys are wrapped under \
        the master key, so later reads pay no PBKDF2. The vault's HEAD is opened and verified \
        before anything is stored, so a wrong key is refused here. \
        --site gives the vault to one site: the bridge serves it to that site's calls only (without \
        --site, to none: the vault is for the CLI). The signers its branch index lists now are \
        pinned: later commits must be signed by one of them (`vault trust` adds one), unless \
        --allow-unsigned (for vaults whose writers do not sign).
        """,
        arguments: [vaultName],
        options: unlockOptions + [.option("--path", value: "DIR", "the vault's working copy (the folder holding .sg_vault)"), siteOption,
                                  .flag("--allow-unsigned", "serve unsigned commits and signers that are not pinned (a bad signature is still refused)")],
        secretInputs: [.passphrase, .prf, .key],
        examples: [CommandExample("sitekeep vault add notes --path ~/notes --key-file notes.key --passphrase-file pass.txt",
                                  "register the vault in ~/notes for the CLI only"),
                   CommandExample("sitekeep vault add pnotes --path ~/notes --site https://promptugal.news --key-file notes.key --passphrase-file pass.txt",
                                  "register it for promptugal.news")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        guard let given = inv.option("--path") else { throw UsageError("vault add needs --path DIR", command: inv.spec.commandLine) }
        // Registered by absolute path, so later commands work from any folder.
        let path = given.hasPrefix("/") ? given : FileManager.default.currentDirectoryPath + "/" + given
        // The arguments are checked before any secret is asked for (issue 33): a typo costs no
        // passphrase and no key derivation.
        guard VaultRecord.isValidName(name) else {
            throw UsageError("'\(name.prefix(80))' is not a vault name: use 1-64 letters, digits, '.', '_' or '-', not starting with '.'",
                             command: inv.spec.commandLine)
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path + "/.sg_vault", isDirectory: &isFolder), isFolder.boolValue else {
            throw CommandFailure("\(path) holds no sgit vault (no .sg_vault folder in it)",
                                 remedy: "give --path the folder where 'sgit init' or 'sgit clone' made the vault, or clone one with 'sitekeep vault clone URL FOLDER'",
                                 code: "not_found")
        }
        let store = try StoreContext.open(inv)
        let site = try inv.option("--site").map { try owner($0, store: store, inv: inv) }
        try store.unlockOneShot(inv)
        let library = library(store)
        let keyText = try inv.readSecret(.key, prompt: "Vault key: ")
        let box = SecretBox(keyText)
        let allowUnsigned = inv.flag("--allow-unsigned")
        let siteID = site?.id.string
        let status = try inv.withProgress("Deriving the vault keys (PBKDF2, 600,000 iterations)") { () throws -> VaultStatus in
            let key = box.take()
            return try library.add(name: name, path: path, keyText: key, siteID: siteID, allowUnsigned: allowUnsigned)
        }
        let pinned = status.signers.filter { $0.state == .pinned }
        if !ServerVaultID.isValid(status.vaultID) {
            // It works in its folder; it cannot go to a vault server (and sync would fail).
            inv.note("warning: " + VaultError.serverRefusesVaultID(status.vaultID).description
                     + "; this vault works here and with folder remotes, but `sitekeep vault remote add \(name) https://…` will refuse it")
        }
        var json = statusJSON(name: name, status)
        if case .object(var m) = json {
            m.append(JSONMember(key: "site", value: .string(siteID)))
            json = .object(m)
        }
        inv.emit(json) {
            "Added vault \(name) (\(status.vaultID)), HEAD \(status.headCommit.map { "\($0)" } ?? "none")" + (status.isReadOnly ? ", read-only" : "")
                + "\n  site     " + (site.map { "\($0.displayName) (\($0.origins.first?.serialized ?? $0.id.string))" } ?? "none: the CLI only; `sitekeep vault assign \(name) --site ORIGIN` gives it to a site")
                + "\n  signers  \(pinned.count) pinned: " + pinned.map(\.keyID).joined(separator: ", ")
                + (allowUnsigned ? "\n  policy   unsigned commits allowed (--allow-unsigned)" : "")
        }
    }

    static let list = CommandSpec(
        path: ["vault", "list"],
        summary: "List registered vaults and the site each belongs to (no unlock needed)",
        examples: [CommandExample("sitekeep vault list", "list vaults")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let records = try library(store).records()
        let sites = (try? SiteCommands.registry(store).sites()) ?? []
        inv.emit(.array(records.map { r in
            .object([
                JSONMember(key: "name", value: .string(r.name)), JSONMember(key: "path", value: .string(r.path)),
                JSONMember(key: "vaultId", value: .string(r.vaultID)), JSONMember(key: "readOnly", value: .bool(r.readOnly)),
                JSONMember(key: "site", value: .string(r.siteID)), JSONMember(key: "owner", value: .string(ownerText(r.siteID, sites: sites))),
                JSONMember(key: "allowUnsigned", value: .bool(r.allowUnsigned)),
                JSONMember(key: "pinnedSigners", value: r.signers.map { .integer($0.count) } ?? .null),
            ])
        })) {
            records.isEmpty ? "No vaults; add one with 'sitekeep vault add NAME --path DIR --site ORIGIN'." :
            Table(headers: ["NAME", "SITE", "VAULT ID", "MODE", "SIGNERS", "PATH"], rows: records.map { r in
                [r.name, ownerText(r.siteID, sites: sites), r.vaultID, r.readOnly ? "read-only" : "read-write",
                 r.signers.map { "\($0.count) pinned" + (r.allowUnsigned ? ", unsigned ok" : "") } ?? "not pinned yet", r.path]
            }).render { inv.style($0, .bold) }
        }
    }

    static let remove = CommandSpec(
        path: ["vault", "remove"],
        summary: "Forget a vault: its record and its wrapped keys (the folder is left alone)",
        arguments: [vaultName],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault remove notes --passphrase-file pass.txt", "forget the vault")],
        printsData: false
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        try unlockedLibrary(inv).remove(name: name)
        inv.say("Removed vault \(name).")
    }

    static let ls = CommandSpec(
        path: ["vault", "ls"],
        summary: "List the files of a vault's HEAD (optionally under PATH)",
        arguments: [vaultName, ArgumentSpec("PATH", "a folder in the vault", optional: true)],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault ls notes docs --prf-file prf.bin", "list the files under docs/")]
    ) { inv in
        let vault = try opened(inv, try unlockedLibrary(inv)).vault
        let entries = try vault.list(path: inv.argument("PATH"))
        inv.emit(.array(entries.map { e in
            ["path": .string(e.path.string), "size": .integer(e.size), "contentType": .string(e.contentType), "blobId": .string("\(e.blobID)")]
        })) {
            Table(headers: ["SIZE", "TYPE", "PATH"], rows: entries.map { ["\($0.size)", $0.contentType ?? "", $0.path.string] })
                .render { inv.style($0, .bold) }
        }
    }

    static let cat = CommandSpec(
        path: ["vault", "cat"],
        summary: "Print one file of a vault's HEAD, byte for byte (under a mount: the child vault's file)",
        arguments: [vaultName, ArgumentSpec("PATH", "the file's path in the vault (or MOUNT/PATH, a file of a child `vault mounts` opened)")],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault cat notes docs/a.txt --prf-file prf.bin", "print docs/a.txt")]
    ) { inv in
        let library = try unlockedLibrary(inv)
        let name = try opened(inv, library).record.name
        let path = try inv.requiredArgument("PATH")
        let bytes = try library.readThroughMounts(name: name, path: path, siteID: nil)
        if inv.settings.json {
            inv.emit(["path": .string(path), "size": .integer(bytes.count), "dataBase64": .string(Base64.encode(bytes))]) { "" }
        } else {
            inv.io.writeBytes(bytes)
        }
    }

    static let log = CommandSpec(
        path: ["vault", "log"],
        summary: "Show a vault's history (first parents from HEAD) with each commit's signature status",
        arguments: [vaultName],
        options: unlockOptions + [.option("--limit", value: "N", "at most N commits (default 20)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault log notes --limit 5 --prf-file prf.bin", "the last five commits")]
    ) { inv in
        let limit = try inv.intOption("--limit", default: 20, range: 1...100_000)
        let vault = try opened(inv, try unlockedLibrary(inv)).vault
        let commits = try vault.log(limit: limit)
        inv.emit(.array(commits.map { c in
            ["id": .string("\(c.id)"), "timestampMs": .int(c.timestampMs), "message": .string(c.message),
             "signature": .string("\(c.signature)"), "trust": .string(c.trust?.word), "signer": .string(c.signerKeyID),
             "parents": .array(c.parents.map { .string("\($0)") })]
        })) {
            commits.map { c in
                let when = Date(timeIntervalSince1970: Double(c.timestampMs) / 1000)
                return "\(inv.style("\(c.id)", .yellow))  \(ISO8601DateFormatter().string(from: when))  [\(c.trust?.description ?? "\(c.signature)")]\n    \(c.message ?? "")"
            }.joined(separator: "\n")
        }
    }

    static let status = CommandSpec(
        path: ["vault", "status"],
        summary: "Show a vault's HEAD, whether it is served, its signers (pinned or new), site, policy and format",
        discussion: "Reports a HEAD that reads would refuse (unsigned, a new signer, a replaced key file) instead of failing, with the command that fixes it; exits 1 when HEAD is not served.",
        arguments: [vaultName],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault status notes --prf-file prf.bin", "show the vault's state")]
    ) { inv in
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let o = try opened(inv, library(store))
        let name = o.record.name
        let s = try o.vault.status(historySigners: true)
        let sites = (try? SiteCommands.registry(store).sites()) ?? []
        let conflicts = try o.vault.mergeState()?.conflicts ?? []
        let queued = try PushQueue(vaultRoot: o.vault.root).entries()
        var json = statusJSON(name: name, s)
        if case .object(var m) = json {
            m.append(JSONMember(key: "site", value: .string(o.record.siteID)))
            m.append(JSONMember(key: "owner", value: .string(ownerText(o.record.siteID, sites: sites))))
            m.append(JSONMember(key: "conflicts", value: .array(conflicts.map { .string($0) })))
            m.append(JSONMember(key: "pushQueue", value: .array(queued.map { e in
                .object([JSONMember(key: "remote", value: .string(e.remote)), JSONMember(key: "head", value: .string(e.head)),
                         JSONMember(key: "attempts", value: .integer(e.attempts)), JSONMember(key: "lastError", value: .string(e.lastError))])
            })))
            json = .object(m)
        }
        inv.emit(json) {
            var lines = [
                "vault      \(name) (\(s.vaultID))",
                "site       \(o.record.siteID == nil ? "none (the CLI only)" : ownerText(o.record.siteID, sites: sites))",
                "HEAD       \(s.headCommit.map { "\($0)" } ?? "none") on \(s.branchName)\(s.isReadOnly ? " (read-only)" : "")",
                "signature  " + (s.headSignature == .unsigned ? "unsigned (as every commit of the sites' web client, sg-vault)"
                    : "\(s.headSignature.map { "\($0)" } ?? "-")\(s.headTrust.map { ", \($0)" } ?? "")") + (s.headServed ? "" : "  NOT SERVED"),
                "policy     " + (s.allowUnsigned ? "unsigned commits and unpinned signers allowed (--allow-unsigned)" : "only commits signed by a pinned signer")
                    + (s.signaturesRequired ? "; the vault requires signatures\(s.signedSince.map { " since \($0)" } ?? "")" : ""),
            ]
            for signer in s.signers {
                let what: String
                switch signer.state {
                case .pinned: what = "pinned (\(signer.pin?.source.rawValue ?? "-"))"
                case .own: what = "this device's own key (trusted: commits it signs were written here)"
                case .new: what = "NEW: listed in the branch index, not trusted; `sitekeep vault trust \(name) \(signer.keyID)` if it is yours"
                case .keyChanged: what = "KEY CHANGED: its key file differs from the pinned key (sha256 \(signer.pin?.fingerprint ?? "-"))"
                case .missingKeyFile: what = "listed, but its key file is missing"
                }
                lines.append("signer     \(signer.keyID)  \(what)  [\(signer.branches.joined(separator: ", "))]")
            }
            lines.append("format     \(s.format)\(s.features.isEmpty ? "" : " (" + s.features.joined(separator: ", ") + ")")")
            if s.headServed { lines.append("message    \(s.headMessage ?? "")") }
            lines.append("conflicts  \(conflicts.isEmpty ? "-" : conflicts.joined(separator: ", "))")
            lines.append("queued     \(queued.isEmpty ? "-" : queued.map { "\($0.remote) \($0.head) (\($0.attempts) attempts\($0.lastError.map { ": " + $0 } ?? ""))" }.joined(separator: "; "))")
            if let refusal = s.headRefusal { lines.append("refused    \(refusal.description)") }
            return lines.joined(separator: "\n")
        }
        if let refusal = s.headRefusal { throw refusal }
    }

    static let verify = CommandSpec(
        path: ["vault", "verify"],
        summary: "Verify every object id and commit signature reachable from HEAD; fail on any commit not signed by a pinned signer",
        discussion: "Exits 1 on any damaged object, bad signature, or commit that is unsigned or signed by a signer this store has not pinned, unless the vault allows unsigned commits (`vault policy NAME --allow-unsigned`). Commits from before a vault's signed-since anchor are exempt when its index lists signatures-required.",
        arguments: [vaultName],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault verify notes --prf-file prf.bin", "check the whole history")]
    ) { inv in
        let o = try opened(inv, try unlockedLibrary(inv))
        let name = o.record.name
        let report = try o.vault.verify()
        inv.emit(.object([
            JSONMember(key: "clean", value: .bool(report.isClean)),
            JSONMember(key: "commits", value: .integer(report.commits)), JSONMember(key: "trees", value: .integer(report.trees)),
            JSONMember(key: "blobs", value: .integer(report.blobs)), JSONMember(key: "verified", value: .integer(report.verified)),
            JSONMember(key: "bad", value: .integer(report.bad)), JSONMember(key: "unsigned", value: .integer(report.unsigned)),
            JSONMember(key: "noKey", value: .integer(report.noKey)), JSONMember(key: "trusted", value: .integer(report.trusted)),
            JSONMember(key: "newSigners", value: .integer(report.newSigners)), JSONMember(key: "notInIndex", value: .integer(report.notInIndex)),
            JSONMember(key: "keyChanged", value: .integer(report.keyChanged)), JSONMember(key: "allowed", value: .integer(report.allowed)),
            JSONMember(key: "beforeAnchor", value: .integer(report.beforeAnchor)),
            JSONMember(key: "problems", value: .array(report.problems.map { .string($0.description) })),
        ])) {
            "\(report.commits) commits, \(report.trees) trees, \(report.blobs) blobs: \(report.verified) signatures verified, \(report.bad) bad, \(report.unsigned) unsigned, \(report.noKey) without key; \(report.trusted) by pinned signers"
                + (report.newSigners > 0 ? ", \(report.newSigners) by new signers" : "") + (report.notInIndex > 0 ? ", \(report.notInIndex) by signers the index does not list" : "")
                + (report.allowed > 0 ? ", \(report.allowed) untrusted but allowed" : "") + (report.beforeAnchor > 0 ? ", \(report.beforeAnchor) from before the vault required signatures" : "")
                + (report.problems.isEmpty ? "" : "\n" + report.problems.map { "  ✗ \($0.description)" }.joined(separator: "\n"))
        }
        if !report.isClean {
            throw CommandFailure("vault \(name) failed verification (\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s"))",
                                 remedy: "do not trust its contents until each problem above is explained; a new signer of yours: `sitekeep vault trust \(name) KEYID`; damage: restore the folder from a good copy",
                                 code: "vault_unverified")
        }
    }

    static let trust = CommandSpec(
        path: ["vault", "trust"],
        summary: "Trust a new signer of a vault: pin the public key its branch index lists for KEYID",
        discussion: """
        A vault's commits are served only when signed by a pinned signer. A second sgit clone of \
        yours that pushed through the vault's server brings its signing key into the branch index; \
        `vault status` and the refused command name it as a new signer. So does a key that anyone \
        holding the vault's read key wrote into its folder: trust a signer only if you know the \
        clone it belongs to. The key's current public key is pinned; a key file replaced later is \
        refused. Needs your approval (the presence prompt, the passphrase typed again, or the \
        current secret given for this command), even with the daemon unlocked.
        """,
        arguments: [vaultName, ArgumentSpec("KEYID", "the signer's key id (key-rnd-imm-…), as `vault status` shows it")],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault trust notes key-rnd-imm-1a064d7bd08a7250 --prf-file prf.bin", "trust the signer of your second clone")]
    ) { inv in
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let library = library(store)
        let o = try opened(inv, library)
        let keyID = try inv.requiredArgument("KEYID")
        // Which signers a vault trusts changes only with the user's approval (or the current
        // secret given for this command), never because a process reached an unlocked daemon.
        _ = try Approval.approve(inv, store: store, op: .vaultTrust, keyID: nil)
        let (pin, already) = try library.trust(vault: o.record.name, keyID: keyID)
        inv.emit(["vault": .string(o.record.name), "keyId": .string(pin.keyID), "sha256": .string(pin.fingerprint),
                  "alreadyPinned": .bool(already)]) {
            already ? "\(pin.keyID) was already trusted for vault \(o.record.name) (sha256 \(pin.fingerprint))."
                : "Trusted \(pin.keyID) for vault \(o.record.name): public key sha256 \(pin.fingerprint) pinned."
        }
    }

    static let assign = CommandSpec(
        path: ["vault", "assign"],
        summary: "Give a vault to a site (the only site whose bridge calls reach it), or to none",
        discussion: "A vault registered before vaults had owners belongs to no site: the CLI reads it, the bridge never serves it. Assign it here. --no-site takes a vault from its site.",
        arguments: [vaultName],
        options: unlockOptions + [siteOption, .flag("--no-site", "the vault belongs to no site (the CLI only)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault assign notes --site https://promptugal.news --prf-file prf.bin", "give the vault notes to promptugal.news")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let store = try StoreContext.open(inv)
        let site: Site?
        switch (inv.option("--site"), inv.flag("--no-site")) {
        case (let text?, false): site = try owner(text, store: store, inv: inv)
        case (nil, true): site = nil
        default: throw UsageError("give --site ORIGIN or --no-site", command: inv.spec.commandLine)
        }
        try store.unlockOneShot(inv)
        let library = library(store)
        _ = try opened(inv, library)
        try library.assign(vault: name, siteID: site?.id.string)
        inv.emit(["vault": .string(name), "site": .string(site?.id.string)]) {
            site.map { "Vault \(name) now belongs to \($0.displayName) (\($0.origins.first?.serialized ?? $0.id.string)); no other site reaches it." }
                ?? "Vault \(name) now belongs to no site: the CLI reads it, the bridge does not serve it."
        }
    }

    static let policy = CommandSpec(
        path: ["vault", "policy"],
        summary: "Set whether a vault serves unsigned commits and signers that are not pinned",
        discussion: "--allow-unsigned is for vaults whose writers do not sign: anyone with the vault's read key and write access to its folder can then change what is served. A bad signature, and a key file that differs from its pin, are refused either way; so is an unsigned HEAD of a vault whose branch index lists signatures-required.",
        arguments: [vaultName],
        options: unlockOptions + [.flag("--allow-unsigned", "serve unsigned commits and unpinned signers"),
                                  .flag("--require-signed", "serve only commits signed by a pinned signer (the default)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault policy notes --require-signed --prf-file prf.bin", "serve only commits of pinned signers")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let allow: Bool
        switch (inv.flag("--allow-unsigned"), inv.flag("--require-signed")) {
        case (true, false): allow = true
        case (false, true): allow = false
        default: throw UsageError("give --allow-unsigned or --require-signed", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let library = library(store)
        _ = try opened(inv, library)
        // Serving unsigned commits changes what is trusted: the user approves it; going back to
        // signed-only only narrows and needs no approval.
        if allow { _ = try Approval.approve(inv, store: store, op: .vaultPolicy, keyID: nil) }
        try library.setAllowUnsigned(allow, vault: name)
        inv.emit(["vault": .string(name), "allowUnsigned": .bool(allow)]) {
            allow ? "Vault \(name) now serves unsigned commits and unpinned signers (bad signatures and replaced keys are still refused)."
                : "Vault \(name) now serves only commits signed by a pinned signer."
        }
    }

    static func statusJSON(name: String, _ s: VaultStatus) -> JSONValue {
        .object([
            JSONMember(key: "name", value: .string(name)), JSONMember(key: "vaultId", value: .string(s.vaultID)),
            JSONMember(key: "head", value: .string(s.headCommit.map { "\($0)" })), JSONMember(key: "branch", value: .string(s.branchName)),
            JSONMember(key: "format", value: .integer(s.format)), JSONMember(key: "features", value: .array(s.features.map { .string($0) })),
            JSONMember(key: "readOnly", value: .bool(s.isReadOnly)),
            JSONMember(key: "headSignature", value: .string(s.headSignature.map { "\($0)" })),
            JSONMember(key: "headTrust", value: .string(s.headTrust?.word)), JSONMember(key: "headSigner", value: .string(s.headTrust?.signer)),
            JSONMember(key: "headServed", value: .bool(s.headServed)),
            JSONMember(key: "allowUnsigned", value: .bool(s.allowUnsigned)),
            JSONMember(key: "signaturesRequired", value: .bool(s.signaturesRequired)),
            JSONMember(key: "signers", value: .array(s.signers.map { signer in
                .object([JSONMember(key: "keyId", value: .string(signer.keyID)), JSONMember(key: "state", value: .string(signer.state.rawValue)),
                         JSONMember(key: "sha256", value: .string(signer.fingerprint)),
                         JSONMember(key: "pinnedBy", value: .string(signer.pin?.source.rawValue)),
                         JSONMember(key: "branches", value: .array(signer.branches.map { .string($0) }))])
            })),
            JSONMember(key: "message", value: .string(s.headMessage)),
        ])
    }
}

extension VaultError: CodedError {
    /// The `--json` error code: `vault_unverified` for a HEAD or commit the trust rule refuses.
    var code: String {
        switch self {
        case .unverifiedCommit, .badSignature, .pinConflict: "vault_unverified"
        case .unsupportedVault: "vault_unsupported"
        case .recordNotAuthentic: "record_not_authentic"
        case .unknownVault, .signerNotListed, .notFound: "not_found"
        case .damagedFetchedObject, .damagedLocalObject: "vault_damaged"
        default: "failed"
        }
    }
    var remedy: String? { nil }
}
