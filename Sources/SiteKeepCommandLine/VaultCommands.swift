import Foundation
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepKeyring
internal import SiteKeepVaultRemotes

/// `vault add|list|remove|ls|cat|log|status|verify`.
enum VaultCommands {
    static var all: [CommandSpec] { [add, list, remove, ls, cat, log, status, verify] + VaultWriteCommands.all + VaultSyncCommands.all }

    /// The vault library of a store, its keys kept by the (unlocked) custodian.
    static func library(_ store: StoreContext) -> VaultLibrary {
        let registry = VaultRegistry(file: store.home.path + "/vaults.json")
        let custodian = store.custodian
        return VaultLibrary(registry: registry, keyStore: CustodianVaultKeyStore(custodian: custodian, registry: registry),
                            signer: { DeviceCommitSigner(custodian: custodian, vaultName: $0) })
    }

    /// Opens the store and unlocks it for this command.
    static func unlockedLibrary(_ inv: Invocation) throws -> VaultLibrary {
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        return library(store)
    }

    static let vaultName = ArgumentSpec("NAME", "the vault's name in this store")
    static let unlockOptions = [UnlockOptions.recoveryFile]

    static let add = CommandSpec(
        path: ["vault", "add"],
        summary: "Register an sgit vault folder; its keys are derived once and kept in custody",
        discussion: """
        Reads the vault key (passphrase:vault_id, with or without an sgit_private_vault_ prefix) \
        or a read key (<64 hex>:vault_id) from --key-file ('-' for stdin) or a prompt. The PBKDF2 \
        derivation (600,000 iterations, twice) runs here, once; the derived keys are wrapped under \
        the master key, so later reads pay no PBKDF2. The vault's HEAD is opened and verified \
        before anything is stored, so a wrong key is refused here.
        """,
        arguments: [vaultName],
        options: unlockOptions + [.option("--path", value: "DIR", "the vault's working copy (the folder holding .sg_vault)")],
        secretInputs: [.passphrase, .prf, .key],
        examples: [CommandExample("sitekeep vault add notes --path ~/notes --key-file notes.key --passphrase-file pass.txt",
                                  "register the vault in ~/notes")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        guard let given = inv.option("--path") else { throw UsageError("vault add needs --path DIR", command: inv.spec.commandLine) }
        // Registered by absolute path, so later commands work from any folder.
        let path = given.hasPrefix("/") ? given : FileManager.default.currentDirectoryPath + "/" + given
        let library = try unlockedLibrary(inv)
        let keyText = try inv.readSecret(.key, prompt: "Vault key: ")
        let box = SecretBox(keyText)
        let status = try inv.withProgress("Deriving the vault keys (PBKDF2, 600,000 iterations)") { () throws -> VaultStatus in
            let key = box.take()
            return try library.add(name: name, path: path, keyText: key)
        }
        inv.emit(statusJSON(name: name, status)) { "Added vault \(name) (\(status.vaultID)), HEAD \(status.headCommit.map { "\($0)" } ?? "none")" + (status.isReadOnly ? ", read-only" : "") }
    }

    static let list = CommandSpec(
        path: ["vault", "list"],
        summary: "List registered vaults (no unlock needed)",
        examples: [CommandExample("sitekeep vault list", "list vaults")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let records = try library(store).records()
        inv.emit(.array(records.map { r in
            ["name": .string(r.name), "path": .string(r.path), "vaultId": .string(r.vaultID), "readOnly": .bool(r.readOnly)]
        })) {
            records.isEmpty ? "No vaults; add one with 'sitekeep vault add NAME --path DIR'." :
            Table(headers: ["NAME", "VAULT ID", "MODE", "PATH"], rows: records.map { [$0.name, $0.vaultID, $0.readOnly ? "read-only" : "read-write", $0.path] })
                .render { inv.style($0, .bold) }
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
        let vault = try unlockedLibrary(inv).vault(named: try inv.requiredArgument("NAME"))
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
        summary: "Print one file of a vault's HEAD, byte for byte",
        arguments: [vaultName, ArgumentSpec("PATH", "the file's path in the vault")],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault cat notes docs/a.txt --prf-file prf.bin", "print docs/a.txt")]
    ) { inv in
        let vault = try unlockedLibrary(inv).vault(named: try inv.requiredArgument("NAME"))
        let path = try inv.requiredArgument("PATH")
        let bytes = try vault.read(path: path)
        if inv.settings.json {
            inv.emit(["path": .string(path), "size": .integer(bytes.count), "data_b64": .string(Base64.encode(bytes))]) { "" }
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
        let vault = try unlockedLibrary(inv).vault(named: try inv.requiredArgument("NAME"))
        let commits = try vault.log(limit: limit)
        inv.emit(.array(commits.map { c in
            ["id": .string("\(c.id)"), "timestampMs": .int(c.timestampMs), "message": .string(c.message),
             "signature": .string("\(c.signature)"), "parents": .array(c.parents.map { .string("\($0)") })]
        })) {
            commits.map { c in
                let when = Date(timeIntervalSince1970: Double(c.timestampMs) / 1000)
                return "\(inv.style("\(c.id)", .yellow))  \(ISO8601DateFormatter().string(from: when))  [\(c.signature)]\n    \(c.message ?? "")"
            }.joined(separator: "\n")
        }
    }

    static let status = CommandSpec(
        path: ["vault", "status"],
        summary: "Show a vault's HEAD, branch, format and HEAD signature",
        arguments: [vaultName],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault status notes --prf-file prf.bin", "show the vault's state")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let vault = try unlockedLibrary(inv).vault(named: name)
        let s = try vault.status()
        let conflicts = try vault.mergeState()?.conflicts ?? []
        let queued = try PushQueue(vaultRoot: vault.root).entries()
        var json = statusJSON(name: name, s)
        if case .object(var m) = json {
            m.append(JSONMember(key: "conflicts", value: .array(conflicts.map { .string($0) })))
            m.append(JSONMember(key: "pushQueue", value: .array(queued.map { e in
                .object([JSONMember(key: "remote", value: .string(e.remote)), JSONMember(key: "head", value: .string(e.head)),
                         JSONMember(key: "attempts", value: .integer(e.attempts)), JSONMember(key: "lastError", value: .string(e.lastError))])
            })))
            json = .object(m)
        }
        inv.emit(json) {
            [
                "vault      \(name) (\(s.vaultID))",
                "HEAD       \(s.headCommit.map { "\($0)" } ?? "none") on \(s.branchName)\(s.isReadOnly ? " (read-only)" : "")",
                "signature  \(s.headSignature.map { "\($0)" } ?? "-")",
                "format     \(s.format)\(s.features.isEmpty ? "" : " (" + s.features.joined(separator: ", ") + ")")",
                "message    \(s.headMessage ?? "")",
                "conflicts  \(conflicts.isEmpty ? "-" : conflicts.joined(separator: ", "))",
                "queued     \(queued.isEmpty ? "-" : queued.map { "\($0.remote) \($0.head) (\($0.attempts) attempts\($0.lastError.map { ": " + $0 } ?? ""))" }.joined(separator: "; "))",
            ].joined(separator: "\n")
        }
    }

    static let verify = CommandSpec(
        path: ["vault", "verify"],
        summary: "Verify every object id and commit signature reachable from HEAD",
        arguments: [vaultName],
        options: unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault verify notes --prf-file prf.bin", "check the whole history")]
    ) { inv in
        let name = try inv.requiredArgument("NAME")
        let report = try unlockedLibrary(inv).vault(named: name).verify()
        inv.emit(.object([
            JSONMember(key: "clean", value: .bool(report.isClean)),
            JSONMember(key: "commits", value: .integer(report.commits)), JSONMember(key: "trees", value: .integer(report.trees)),
            JSONMember(key: "blobs", value: .integer(report.blobs)), JSONMember(key: "verified", value: .integer(report.verified)),
            JSONMember(key: "bad", value: .integer(report.bad)), JSONMember(key: "unsigned", value: .integer(report.unsigned)),
            JSONMember(key: "noKey", value: .integer(report.noKey)),
            JSONMember(key: "problems", value: .array(report.problems.map { .string($0.description) })),
        ])) {
            "\(report.commits) commits, \(report.trees) trees, \(report.blobs) blobs: \(report.verified) signatures verified, \(report.bad) bad, \(report.unsigned) unsigned, \(report.noKey) without key"
                + (report.problems.isEmpty ? "" : "\n" + report.problems.map { "  ✗ \($0.description)" }.joined(separator: "\n"))
        }
        if !report.isClean { throw CommandFailure("vault \(name) failed verification", remedy: "do not trust its contents; restore it from a good copy", code: "vault_unverified") }
    }

    static func statusJSON(name: String, _ s: VaultStatus) -> JSONValue {
        .object([
            JSONMember(key: "name", value: .string(name)), JSONMember(key: "vaultId", value: .string(s.vaultID)),
            JSONMember(key: "head", value: .string(s.headCommit.map { "\($0)" })), JSONMember(key: "branch", value: .string(s.branchName)),
            JSONMember(key: "format", value: .integer(s.format)), JSONMember(key: "features", value: .array(s.features.map { .string($0) })),
            JSONMember(key: "readOnly", value: .bool(s.isReadOnly)),
            JSONMember(key: "headSignature", value: .string(s.headSignature.map { "\($0)" })),
            JSONMember(key: "message", value: .string(s.headMessage)),
        ])
    }
}
