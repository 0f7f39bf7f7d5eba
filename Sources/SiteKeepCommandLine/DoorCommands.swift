import Foundation
internal import SiteKeepSystem
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepVaultRemotes
internal import SiteKeepDaemon

/// `door enable`, `door status`: the store's key set on the vault server, sealed, found and
/// opened by a door secret alone (docs/door.md). `init --restore` (``DoorRestore``) reads it back.
enum DoorCommands {
    static var all: [CommandSpec] { [enable, status] }

    /// The door's folder in the home (its sgit clone) and its record.
    static func folder(_ home: String) -> String { home + "/door" }
    static func recordFile(_ home: String) -> String { home + "/door.json" }
    /// The custody vault secrets the door keeps: its access token and its sgit keys.
    static let tokenItem = "door-token"
    static let keysItem = "door-keys"

    static let serverOption = OptionSpec.option("--server", value: "URL", "the vault server that keeps the door (https://…, or http://127.0.0.1:PORT)")
    static let recoveryOption = OptionSpec.option("--recovery-file", value: "F", "the door opens with the recovery code in F ('-' for stdin): the one `init` showed, or another")
    static let newRecoveryFlag = OptionSpec.flag("--new-recovery", "the door opens with a new recovery code, shown once")
    static let prfOption = SecretInputKind.prf

    /// The door's secret as the options give it: exactly one of `--recovery-file`,
    /// `--new-recovery` (not for a restore) and `--prf-file`; `minted` gets a new code.
    static func readSecret(_ inv: Invocation, allowNew: Bool, minted: inout RecoveryCode?) throws -> DoorSecret {
        let given = [inv.option("--recovery-file") != nil, allowNew && inv.flag("--new-recovery"), inv.option("--prf-file") != nil].filter { $0 }.count
        guard given == 1 else {
            let choices = allowNew ? "--recovery-file F, --new-recovery or --prf-file F" : "--recovery-file F or --prf-file F"
            throw UsageError("give the door's secret as exactly one of \(choices)", command: inv.spec.commandLine)
        }
        if allowNew, inv.flag("--new-recovery") {
            let made = try DoorSecret.newRecoveryCode()
            minted = made.code
            return made.take()
        }
        if inv.option("--recovery-file") != nil {
            return try DoorSecret.recoveryCode(try inv.secret(.recoveryCode, prompt: nil))
        }
        return try DoorSecret.prf(try inv.secret(.prf, prompt: nil))
    }

    /// The approval of `door enable`: the passphrase when `--passphrase-file` is given, else the
    /// current secret as `slot add` reads it.
    static func approval(_ inv: Invocation) throws -> UnlockInput {
        if inv.option("--passphrase-file") != nil {
            return UnlockInput(UnlockSecret.passphrase(try inv.secret(.passphrase, prompt: nil)))
        }
        return try CurrentSecret.read(inv)
    }

    static func checkServer(_ url: String, _ inv: Invocation) throws {
        guard (try? VaultRemote.kind(of: url)) == .api else {
            throw UsageError("--server takes the vault server's URL (https://host, or http://127.0.0.1:PORT), not '\(url.prefix(80))'", command: inv.spec.commandLine)
        }
    }

    static let enable = CommandSpec(
        path: ["door", "enable"],
        summary: "Put the store's keys on the vault server, sealed, behind a door that a recovery code or a passkey's PRF opens",
        discussion: """
        Seals the store's key set (the master key; the team keys with their versions and \
        policies, vault keys and access tokens, site storage keys, as the keyring keeps them; \
        the site registry with hosts and grants, the vaults' records with their pinned signers, \
        the remotes and the settings) under a random key-set key, wraps that key under the door's \
        secret, bound to the slot's header, and writes the three files as an sgit vault on the \
        server whose vault id and keys derive from the secret (docs/door.md). The secret and the \
        server's URL then find and open it on a new machine ('sitekeep init --restore URL'). The \
        door's secret is a recovery code (--recovery-file: the one 'init' showed, or any other; \
        --new-recovery mints one, shown once) or 32 bytes of a passkey's PRF (--prf-file). The \
        device key and the unlock slots stay on this machine. A door is one more way to the \
        keys, so this needs the current secret (as 'slot add' does): --passphrase-file, or \
        --recovery-file when the code is also this store's. The door is written once; this \
        build does not yet push later changes (door status says when the key set changed).
        """,
        options: [serverOption, VaultSyncCommands.tokenOption, recoveryOption, newRecoveryFlag],
        secretInputs: [.passphrase, .prf],
        examples: [CommandExample("sitekeep door enable --server https://send.example --token-file token.txt --recovery-file recovery.txt --passphrase-file pass.txt",
                                  "put the keys behind a door the recovery code written down at init opens")]
    ) { inv in
        guard let server = inv.option("--server") else {
            throw UsageError("door enable needs --server URL (the vault server that keeps the door)", command: inv.spec.commandLine)
        }
        try checkServer(server, inv)
        let store = try StoreContext.open(inv)
        let custodian = store.custodian
        guard try custodian.isInitialized() else { throw CustodyError.notInitialized }
        let home = store.home.path
        guard !FileManager.default.fileExists(atPath: folder(home)), !FileManager.default.fileExists(atPath: recordFile(home)) else {
            throw CommandFailure("this store's door is enabled already (\(recordFile(home)))",
                                 remedy: "see it with 'sitekeep door status'", code: "door_exists")
        }
        var minted: RecoveryCode? = nil
        let secret = try readSecret(inv, allowNew: true, minted: &minted)
        let token = SecretBox(try VaultSyncCommands.token(inv))
        // The approval, before anything slow or written: checked by opening a slot.
        if !custodian.isUnlocked { try custodian.unlock(try approval(inv).take()) }
        let keys = try secret.vaultKeys(lockScope: custodian.lockScope)
        try custodian.storeVaultSecret(vaultID: keysItem, secret: try keys.exportForWrapping())
        let credentials: GivenCredentials
        switch token.takeIfAny() {
        case .some(let t):
            try custodian.storeVaultSecret(vaultID: tokenItem, secret: t)
            credentials = GivenCredentials(token: t, keys: keys)
        case .none:
            credentials = GivenCredentials(token: nil, keys: keys)
        }
        let files = try custodian.sealDoor(for: secret, current: try approval(inv).take())
        let digest = try custodian.doorKeySetDigest()
        let pushed: PushOutcome
        do {
            pushed = try DoorVault.publish(files, server: server, keys: keys, credentials: credentials, folder: folder(home),
                                           signer: DeviceCommitSigner(custodian: custodian, vaultName: "door"))
        } catch {
            try? FileManager.default.removeItem(atPath: folder(home))
            throw CommandFailure("the door could not be written to \(server): \(error)",
                                 remedy: "check the server's URL and access token (--token-file) and run 'sitekeep door enable' again", code: "door_push_failed")
        }
        let record = JSONValue.object([
            JSONMember(key: "server", value: .string(server)), JSONMember(key: "vaultID", value: .string(keys.vaultID)),
            JSONMember(key: "kind", value: .string(secret.kind.description)),
            JSONMember(key: "head", value: .string(pushed.head.map { "\($0)" })),
            JSONMember(key: "pushedAt", value: .integer(Int(Clocks.wallMilliseconds()))),
            JSONMember(key: "keySetSHA256", value: .string(digest)),
        ])
        try AtomicFile.replace(recordFile(home), with: JSONSerializer.bytes(record, style: .pretty) + [0x0a])
        var members: [JSONMember] = [JSONMember(key: "server", value: .string(server)), JSONMember(key: "vaultID", value: .string(keys.vaultID)),
                                     JSONMember(key: "kind", value: .string(secret.kind.description)),
                                     JSONMember(key: "head", value: .string(pushed.head.map { "\($0)" }))]
        if let minted { members.append(JSONMember(key: "recoveryCode", value: .string(minted.formatted))) }
        inv.emit(.object(members)) {
            var lines = ["Door enabled on \(server): vault \(keys.vaultID), opened by a \(secret.kind == .recovery ? "recovery code" : "passkey's PRF output")."]
            if let minted {
                lines += ["", inv.style("The door's recovery code (shown once; write it down and keep it offline):", .bold), "", "    \(minted.formatted)", ""]
            }
            lines.append("A new machine: sitekeep init --restore \(server) --\(secret.kind == .recovery ? "recovery-file CODE-FILE" : "prf-file PRF-FILE")")
            return lines.joined(separator: "\n")
        }
    }

    static let status = CommandSpec(
        path: ["door", "status"],
        summary: "Say where the store's door is, what was pushed, and whether the key set changed since",
        options: [],
        secretInputs: [],
        examples: [CommandExample("sitekeep door status", "where the door is and whether it is up to date")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let home = store.home.path
        guard let bytes = FileManager.default.contents(atPath: recordFile(home)) else {
            throw CommandFailure("this store has no door", remedy: "enable one with 'sitekeep door enable --server URL --recovery-file F'", code: "no_door")
        }
        let r = try JSONParser.parse(String(decoding: bytes, as: UTF8.self))
        let pushedDigest = r["keySetSHA256"]?.stringValue ?? ""
        let current = try store.custodian.doorKeySetDigest()
        let upToDate = current == pushedDigest
        let pushedAt = Int(r["pushedAt"]?.intValue ?? 0)
        inv.emit(.object([
            JSONMember(key: "server", value: r["server"] ?? .null), JSONMember(key: "vaultID", value: r["vaultID"] ?? .null),
            JSONMember(key: "kind", value: r["kind"] ?? .null), JSONMember(key: "head", value: r["head"] ?? .null),
            JSONMember(key: "pushedAt", value: .integer(pushedAt)), JSONMember(key: "upToDate", value: .bool(upToDate)),
        ])) {
            let when = Date(timeIntervalSince1970: Double(pushedAt) / 1000)
            return ["server     \(r["server"]?.stringValue ?? "-")",
                    "vault      \(r["vaultID"]?.stringValue ?? "-")",
                    "opened by  \(r["kind"]?.stringValue == "prf" ? "a passkey's PRF output" : "a recovery code")",
                    "pushed     \(r["head"]?.stringValue ?? "-") at \(ISO8601DateFormatter().string(from: when))",
                    "key set    " + (upToDate ? "as pushed" : "changed since the push (this build does not push changes yet: they are not on the server)")]
                .joined(separator: "\n")
        }
    }
}
