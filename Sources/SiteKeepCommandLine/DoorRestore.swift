import Foundation
internal import SiteKeepSystem
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepVaultRemotes
internal import SiteKeepDaemon

/// `init --restore URL`: a new store from the door on the vault server (docs/door.md). The
/// order is what keeps a refusal clean: every input is checked, the door is fetched into a
/// scratch folder and opened with its secret, all before the home is touched; then the home
/// gets the door's store id, custody writes the slots, the door's keyring items and a new device
/// key, the record files are written (the vaults' records with their folders in this home),
/// and each vault with a server remote is cloned. A failure at any step leaves no store (the
/// `init` command removes what it made).
enum DoorRestore {
    /// The door's files opened with its secret; a refusal says which.
    static func open(_ files: DoorFiles, with secret: borrowing DoorSecret, server: String, noun: String) throws -> OpenedDoor {
        do {
            return try Custodian.openDoor(files, with: secret)
        } catch .unlockFailed {
            throw CommandFailure("the door at \(server) does not open with this \(noun)",
                                 remedy: "nothing was written; the server answered with a door this secret did not make", code: "door_refused")
        } catch {
            throw CommandFailure("the door at \(server) is damaged: \(error)", remedy: "nothing was written", code: "door_damaged")
        }
    }

    /// Restores into `inv`'s home (missing, or an empty folder).
    static func run(_ inv: Invocation, server: String) throws {
        try DoorCommands.checkServer(server, inv)
        let home = inv.settings.home
        if let names = try? FileManager.default.contentsOfDirectory(atPath: home), !names.isEmpty {
            throw CommandFailure("\(home) is not empty: a restore makes a new store", remedy: "give an empty or new folder with --home (or SITEKEEP_HOME)", code: "home_not_empty")
        }
        var minted: RecoveryCode? = nil
        let secret = try DoorCommands.readSecret(inv, allowNew: false, minted: &minted)
        let keys = try secret.vaultKeys()
        let credentials = GivenCredentials(token: try VaultSyncCommands.token(inv), keys: keys)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-door-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let noun = secret.kind == .recovery ? "recovery code" : "PRF output"
        let fetched: DoorFiles?
        do {
            inv.note("Reading the door from \(server)")
            fetched = try DoorVault.fetch(server: server, keys: keys, credentials: credentials, scratch: scratch)
        } catch {
            throw CommandFailure("the door at \(server) could not be read: \(error)",
                                 remedy: "nothing was written; check the server's URL and access token, and that the door was not damaged", code: "door_unreadable")
        }
        guard let files = fetched else {
            throw CommandFailure("\(server) holds no door for this \(noun)",
                                 remedy: "nothing was written; check the \(noun) and the server's URL (the door's place derives from both)", code: "no_door")
        }
        let opened = try open(files, with: secret, server: server, noun: noun)
        let doorFiles = opened.files
        let counts = opened.itemCounts

        // The home, with the door's store id (the keyring items are bound to it).
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try AtomicFile.replace(home + "/store-id", with: Array((opened.storeID + "\n").utf8))
        let store = try StoreContext.open(inv, creating: true)
        let custodian = store.custodian
        var parameters: Argon2id.Parameters? = nil
        if inv.option("--argon2-iterations") != nil || inv.option("--argon2-memory") != nil {
            let t = try inv.intOption("--argon2-iterations", default: 3, range: 2...10)
            let m = try inv.intOption("--argon2-memory", default: 64, range: 19...1024)
            parameters = try Argon2id.Parameters(iterations: t, memoryKiB: m * 1024)
        }
        let passphrase = try inv.readSecret(.passphrase, prompt: "New SiteKeep passphrase for this machine: ", confirm: true)
        let result = try custodian.initialize(from: opened, passphrase: passphrase, parameters: parameters, recoverySlot: secret)

        // The record files; the vaults' records get folders in this home, tagged anew.
        for name in ["sites.json", "daemon.json", "append-lanes.json", "vault-remotes.json"] {
            if let bytes = doorFiles[name] { try AtomicFile.replace(home + "/" + name, with: bytes) }
        }
        var cloned: [String] = [], notCloned: [String] = []
        if let bytes = doorFiles["vaults.json"] {
            let scratchRegistry = scratch + "-vaults.json"
            defer { try? FileManager.default.removeItem(atPath: scratchRegistry) }
            try AtomicFile.replace(scratchRegistry, with: bytes)
            let theirs = try VaultRegistry(file: scratchRegistry).records()
            let registry = VaultRegistry(file: home + "/vaults.json")
            let remotes = VaultRemoteRegistry(file: home + "/vault-remotes.json")
            let library = store.vaultLibrary()
            let sync = VaultSyncService(library: library, remotes: remotes, custodian: custodian)
            for old in theirs {
                let path = home + "/vaults/" + old.name
                var record: VaultRecord
                let tagged = try old.tag.map { try custodian.isValidRecordTag($0, for: old.taggedBytes, purpose: .vaultRecord) } ?? false
                if tagged {
                    record = VaultRecord(name: old.name, path: path, vaultID: old.vaultID, readOnly: old.readOnly, siteID: old.siteID,
                                         allowUnsigned: old.allowUnsigned, signers: old.signers)
                    record.tag = try custodian.recordTag(for: record.taggedBytes, purpose: .vaultRecord)
                } else {
                    record = VaultRecord(name: old.name, path: path, vaultID: old.vaultID, readOnly: old.readOnly)
                }
                guard let remote = try remotes.all().first(where: { $0.vault == old.name && $0.kind == .api }) else {
                    notCloned.append(old.name)
                    continue
                }
                try registry.add(record)
                inv.note("Cloning \(old.name) from \(remote.url)")
                let vaultKeys = try library.keys(named: old.name)
                _ = try Vault.clone(from: try sync.store(for: remote, keys: vaultKeys), into: path, keys: vaultKeys,
                                    signer: DeviceCommitSigner(custodian: custodian, vaultName: old.name))
                cloned.append(old.name)
            }
        }
        let sites = (try? JSONParser.parse(doorFiles["sites.json"] ?? Array("{}".utf8)))?["sites"]?.arrayValue?.count ?? 0
        inv.emit(.object([
            JSONMember(key: "store", value: .string(custodian.storeID)), JSONMember(key: "home", value: .string(home)),
            JSONMember(key: "restoredFrom", value: .string(server)),
            JSONMember(key: "teamKeys", value: .integer(counts["team-key"] ?? 0)),
            JSONMember(key: "vaultsCloned", value: .array(cloned.map { .string($0) })),
            JSONMember(key: "vaultsNotCloned", value: .array(notCloned.map { .string($0) })),
            JSONMember(key: "sites", value: .integer(sites)),
            JSONMember(key: "deviceKey", value: CustodyCommands.keyJSON(result.deviceKey)),
        ])) {
            (["Restored SiteKeep store \(custodian.storeID) into \(home) from the door at \(server)",
              "  team keys: \(counts["team-key"] ?? 0); sites: \(sites); vaults cloned: \(cloned.isEmpty ? "none" : cloned.joined(separator: ", "))",
              "  new device key: \(result.deviceKey.algorithm.rawValue) \(result.deviceKey.fingerprint)"]
             + notCloned.map { "  vault \($0): its keys are restored, but it has no server remote to clone from; add its folder with 'sitekeep vault add'" })
                .joined(separator: "\n")
        }
    }
}
