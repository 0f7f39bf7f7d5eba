import Foundation
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepKeyring
internal import SiteKeepPartitions
internal import SiteKeepAudit
internal import SiteKeepCore
internal import SiteKeepVault
internal import SiteKeepDaemon
internal import SiteKeepBridge
import SiteKeepWiring
import SiteKeepVocabulary

/// `site add|list|remove|grant|revoke`, `site storage get|set|remove|keys`, and `audit`.
enum SiteCommands {
    static var all: [CommandSpec] { [add, list, approve, remove, grant, revoke, check, export, rebuild, storageGet, storageSet, storageRemove, storageKeys, audit] }

    /// The site registry of a store, its storage keys provided by the custodian.
    static func registry(_ store: StoreContext) throws -> SiteRegistry {
        try store.registry()
    }

    /// A site named by its id, a unique prefix of its id (8 characters or more), one of its
    /// origins, or its display name. A host without a scheme is not guessed at: the error asks
    /// "did you mean https://host" when such a site exists.
    static func site(_ text: String, in registry: SiteRegistry, command: String) throws -> Site {
        if let id = try? SiteID(parsing: text), let s = registry.site(forIdentifier: id) { return s }
        if text.contains("://") {
            if let s = try registry.site(forOrigin: text) { return s }
            throw CommandFailure("no site has the origin \(text)", remedy: "see 'sitekeep site list'", code: "not_found")
        }
        let sites = registry.sites()
        let named = sites.filter { $0.displayName == text }
        if named.count == 1 { return named[0] }
        if named.count > 1 {
            throw CommandFailure("\(named.count) sites are named \(text)", remedy: "name one by its id or an origin: " + named.map { $0.id.string }.joined(separator: ", "), code: "ambiguous")
        }
        let lower = text.lowercased()
        if lower.count >= 8 {
            let prefixed = sites.filter { $0.id.string.lowercased().hasPrefix(lower) }
            if prefixed.count == 1 { return prefixed[0] }
            if prefixed.count > 1 { throw CommandFailure("the id prefix \(text) matches \(prefixed.count) sites", remedy: "give more of the id", code: "ambiguous") }
        }
        for scheme in ["https://", "http://"] {
            if let s = try? registry.site(forOrigin: scheme + text) {
                throw CommandFailure("no site \(text): an origin needs its scheme (did you mean \(scheme + text)?)",
                                     remedy: "give the origin with its scheme: \(scheme + text) is the site \(s.displayName)", code: "not_found")
            }
        }
        let near = CommandLineTool.suggestion(text, among: sites.map(\.displayName))
        throw CommandFailure("no site \(text)" + near, remedy: "name a site by its origin (https://…), its name or its id (see 'sitekeep site list')", code: "not_found")
    }

    static func siteJSON(_ s: Site, standing: SiteRecordStanding = .authentic) -> JSONValue {
        .object([
            JSONMember(key: "authentic", value: .bool(standing == .authentic)),
            JSONMember(key: "id", value: .string(s.id.string)), JSONMember(key: "name", value: .string(s.displayName)),
            JSONMember(key: "origins", value: .array(s.origins.map { .string($0.serialized) })),
            JSONMember(key: "appBound", value: .bool(s.isAppBound)), JSONMember(key: "protection", value: .string(s.protection.rawValue)),
            JSONMember(key: "grants", value: .array(s.grants.map { .string($0) })),
            JSONMember(key: "hosts", value: .array(s.hosts.map(SiteHostCommands.hostJSON))),
        ])
    }

    static let siteArgument = ArgumentSpec("SITE", "the site: one of its origins, its name, or its id (or 8+ characters of it)")
    static let unlockFor = "Sites of the when-unlocked class need the store unlocked: give --passphrase-file, --prf-file or --recovery-file."

    static let add = CommandSpec(
        path: ["site", "add"],
        summary: "Register a site with its origins, its own partition and storage key",
        discussion: """
        Each site gets a stable id, a folder (0700) and its own SQLite database (0600) whose \
        every value is sealed under the site's own key. At most ten sites may be app-bound; only \
        app-bound sites may use the bridge, and they are never purged. --protection \
        when-unlocked keeps the site's key under the master key (readable only while unlocked). \
        An app-bound site's entry in sites.json (origins, hosts, grants) carries a tag under the \
        master key, so adding one needs SiteKeep unlocked (the daemon unlocked, or the secret \
        given for this command); an entry written into the file by hand binds nothing.
        """,
        arguments: [ArgumentSpec("NAME", "a display name")],
        options: [.option("--origin", value: "URL", "an origin of the site (repeatable), e.g. https://promptugal.news"),
                  .flag("--app-bound", "let the site use the bridge (at most ten)"),
                  .option("--protection", value: "after-login|when-unlocked", "the data-protection class (default after-login)"),
                  .option("--host", value: "PATH", "a program besides the SiteKeep browser that may bind the site's bridge connections (repeatable; see 'sitekeep site host add')"),
                  .flag("--command-line-host", "let 'sitekeep call' act for the site too (the command line as one of its hosts)"),
                  UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site add 'Web Summit' --origin https://web-summit.sgit.ai --app-bound --passphrase-file pass.txt", "register an app-bound site"),
                   CommandExample("sitekeep site add Reader --origin https://reader.example --app-bound --command-line-host --passphrase-file pass.txt", "an app-bound site that 'sitekeep call' may also act for, from the terminal"),
                   CommandExample("sitekeep site add Drafts --origin http://localhost:8080 --protection when-unlocked --passphrase-file pass.txt", "a local site whose data is readable only while unlocked")]
    ) { inv in
        let origins = inv.options("--origin")
        guard !origins.isEmpty else { throw UsageError("give at least one --origin URL", command: inv.spec.commandLine) }
        let protection: ProtectionClass
        switch inv.option("--protection") ?? "after-login" {
        case "after-login": protection = .afterLogin
        case "when-unlocked": protection = .whenUnlocked
        case let other: throw UsageError("--protection must be after-login or when-unlocked, not '\(other)'", command: inv.spec.commandLine)
        }
        // A new site's first hosts need no approval: the site holds nothing yet, and no
        // registered site's origins can be taken (origins are unique).
        var hosts: [SiteHost] = []
        let typedHosts = inv.options("--host") + (inv.flag("--command-line-host") ? [try SiteHostCommands.commandLineProgram()] : [])
        for typed in typedHosts {
            guard inv.flag("--app-bound") else {
                throw UsageError("--host and --command-line-host need --app-bound: only app-bound sites use the bridge", command: inv.spec.commandLine)
            }
            do throws(PartitionError) { hosts.append(try SiteHost.adding(typed)) } catch {
                throw CommandFailure(error.description, remedy: "give the path of the host program's executable", code: "invalid_host")
            }
        }
        let store = try StoreContext.open(inv)
        // An app-bound site's entry in sites.json is tagged under the master key (what binds a
        // site is authenticated), so adding one needs SiteKeep unlocked, as a when-unlocked key does.
        if protection == .whenUnlocked || inv.flag("--app-bound") { try store.unlockOneShot(inv) }
        let s = try registry(store).add(displayName: try inv.requiredArgument("NAME"), origins: origins,
                                        appBound: inv.flag("--app-bound"), protection: protection, hosts: hosts)
        inv.emit(siteJSON(s)) {
            "Added site \(s.displayName) (\(s.origins.map(\.serialized).joined(separator: " "))): id \(s.id.string), "
                + (s.isAppBound ? "app-bound, " : "") + s.protection.rawValue
        }
    }

    static let approve = CommandSpec(
        path: ["site", "approve"],
        summary: "Approve a site's entry in sites.json as it stands, so its origins, hosts and grants apply",
        discussion: """
        What binds a site (its origins, app-bound flag, hosts and grants) carries a tag under the \
        master key, written when an approved command changes it. An entry without a valid tag \
        (written into sites.json by hand, changed by another program, or written by a SiteKeep \
        from before tags) binds and opens nothing, and 'sitekeep doctor', 'sitekeep site list' \
        and the daemon's log name it. Check what it says (shown here and in the prompt), then \
        approve it: that needs your approval (the presence prompt, the passphrase typed again, or \
        the current secret given for this command) and is in the audit log. If it says something \
        you did not set, remove the site instead ('sitekeep site remove').
        """,
        arguments: [siteArgument],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site approve https://promptugal.news --passphrase-file pass.txt", "approve the site's entry as it stands (after checking it with 'sitekeep site list')")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        let said = "origins \(s.origins.map(\.serialized).joined(separator: " ")); \(s.isAppBound ? "app-bound" : "not app-bound"); "
            + "hosts \(SiteHostCommands.describe(s.hosts)); grants \(s.grants.isEmpty ? "none" : s.grants.joined(separator: " "))"
        if reg.standing(of: s.id) == .authentic {
            inv.emit(["site": .string(s.id.string), "approved": .bool(false)]) { "\(s.displayName)'s entry is authentic already (\(said)); nothing to approve." }
            return
        }
        inv.note("sites.json says of \(s.displayName): \(said)")
        let proof = try Approval.approve(inv, store: store, op: .siteApprove, keyID: nil, subject: "approve \(s.displayName) as sites.json has it: \(said)")
        let now = try reg.approve(s)
        try store.custodian.auditLog.append(client: .site(s.id), op: .siteApprove, key: nil, result: "ok", prompt: proof.promptID,
                                            detail: "approved the entry of \(s.origins.first?.serialized ?? s.id.string): \(said)")
        inv.emit(["site": .string(s.id.string), "approved": .bool(true), "entry": siteJSON(now)]) { "Approved \(s.displayName)'s entry: \(said)." }
    }

    static let list = CommandSpec(
        path: ["site", "list"],
        summary: "List sites: id, name, origins, app-bound, protection class, granted ops",
        examples: [CommandExample("sitekeep site list", "list the sites"), CommandExample("sitekeep site list --json", "as JSON")]
    ) { inv in
        let reg = try registry(try StoreContext.open(inv))
        let sites = reg.sites()
        // Marked: entries known not to be authentic. One read while locked cannot be told here
        // (the daemon checks it at unlock), so it is shown as it is.
        let standing = Dictionary(uniqueKeysWithValues: reg.sitesNotAuthentic().filter { $0.standing != .unchecked }.map { ($0.site.id, $0.standing) })
        inv.emit(.array(sites.map { siteJSON($0, standing: standing[$0.id] ?? .authentic) })) {
            sites.isEmpty ? "No sites; add one with 'sitekeep site add NAME --origin URL'." :
            Table(headers: ["ID", "NAME", "APP-BOUND", "PROTECTION", "ORIGINS", "GRANTED OPS"], rows: sites.map {
                [$0.id.string, $0.displayName + (standing[$0.id] == nil ? "" : " (not approved)"), $0.isAppBound ? "yes" : "no", $0.protection.rawValue,
                 $0.origins.map(\.serialized).joined(separator: " "), $0.grants.isEmpty ? "-" : $0.grants.joined(separator: " ")]
            }).render { inv.style($0, .bold) }
                + sites.compactMap { s in standing[s.id]?.problem(of: s).map { "\n" + $0 } }.joined()
        }
    }

    static let opArguments = ArgumentSpec("OP", "a bridge op, e.g. key.sign (repeatable; `sitekeep ops` lists them)", variadic: true)

    /// The op names of a grant or revoke: given, no repeats, in the order given.
    static func opNames(_ inv: Invocation) throws -> [String] {
        var ops: [String] = []
        for op in inv.remainingArguments(from: "OP") where !ops.contains(op) { ops.append(op) }
        guard !ops.isEmpty else { throw UsageError("name at least one OP, e.g. key.sign (see 'sitekeep ops')", command: inv.spec.commandLine) }
        return ops
    }

    /// The catalogue op named `name`, or a failure naming what to do.
    static func catalogueOp(_ name: String, in catalogue: OpCatalogue) throws -> OpPolicy {
        guard let op = catalogue[name] else {
            let near = CommandLineTool.suggestion(name, among: catalogue.ops.map(\.name))
            throw CommandFailure("no op \(FieldSchema.printable(name))" + near, remedy: "name an op of the catalogue: 'sitekeep ops' lists them and which may be granted", code: "unknown_op")
        }
        return op
    }

    static let grant = CommandSpec(
        path: ["site", "grant"],
        summary: "Let an app-bound site call bridge ops its catalogue allow-list does not name",
        discussion: """
        The catalogue (`sitekeep ops`) names the sites of each op; a site you added gets only the \
        ops open to every app-bound site. A grant opens an op to one more site, this one alone, \
        and at once (a running daemon applies it to the next message). The catalogue stays the \
        ceiling: the op keeps its presence prompt, size and rate limits, and only ops the \
        catalogue marks grantable can be granted (never hello or events). Needs your approval \
        (the presence prompt, the passphrase typed again, or the current secret given for this \
        command), even with the daemon unlocked; recorded in the audit log (`sitekeep log show`). \
        `sitekeep site revoke` takes a grant back.
        """,
        arguments: [siteArgument, opArguments],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site grant https://newsroom.sgit.ai schedule.get vault.list vault.load --passphrase-file pass.txt", "let a site read its schedule and its vaults"),
                   CommandExample("sitekeep site grant Newsroom key.sign --passphrase-file pass.txt", "let it ask to sign (each signature still prompts)")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        let catalogue = try OpCatalogue.bundled()
        let names = try opNames(inv)
        guard s.isAppBound else {
            throw CommandFailure("\(s.displayName) is not app-bound: only app-bound sites use the bridge, so a grant would do nothing",
                                 remedy: "a site is made app-bound when it is added: save its data ('sitekeep site export'), remove it and add it again with --app-bound",
                                 code: "not_app_bound")
        }
        let bridgeSite = BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound)
        let policy = try BridgeDispatcher(catalogue: catalogue, sites: RegistrySiteResolver(registry: reg), modules: [])
        var added: [String] = []
        for name in names {
            let op = try catalogueOp(name, in: catalogue)
            guard op.direction == .request else {
                throw CommandFailure("\(op.name) is an event SiteKeep sends and cannot be granted; a site receives it through the requests it may call",
                                     remedy: "grant the request ops instead ('sitekeep ops' lists them)", code: "not_grantable")
            }
            guard op.grantable else {
                throw CommandFailure("\(op.name) can never be granted: the catalogue marks it grantable: false",
                                     remedy: "'sitekeep ops' shows which ops may be granted", code: "not_grantable")
            }
            if policy.isAllowedByCatalogue(op.name, site: bridgeSite) {
                inv.note("note: \(op.name) is already open to \(s.displayName) by the catalogue; nothing to grant")
                continue
            }
            if s.grants.contains(op.name) {
                inv.note("note: \(op.name) was already granted to \(s.displayName)")
                continue
            }
            added.append(op.name)
        }
        var now = s
        if !added.isEmpty {
            let origin = s.origins.first?.serialized ?? s.id.string
            // Opening an op to a site widens what a page may do: the user approves it, whichever
            // process sent the command (as `vault trust` and `team ssh enable`).
            let proof = try Approval.approve(inv, store: store, op: .siteGrant, keyID: nil,
                                             subject: "grant \(added.joined(separator: " ")) to \(s.displayName) (\(origin))")
            now = try reg.updateGrants(forIdentifier: s.id, adding: added)
            do {
                try store.custodian.auditLog.append(client: .site(s.id), op: .siteGrant, key: nil, result: "ok", prompt: proof.promptID,
                                                    detail: "granted \(added.joined(separator: " ")) to \(origin); now \(now.grants.joined(separator: " "))")
            } catch {
                // Unlogged, the grant does not stand.
                _ = try? reg.updateGrants(forIdentifier: s.id, removing: added)
                throw error
            }
        }
        inv.emit(["site": .string(s.id.string), "granted": .array(added.map { .string($0) }), "grants": .array(now.grants.map { .string($0) })]) {
            added.isEmpty ? "Nothing granted; \(s.displayName) has: \(now.grants.isEmpty ? "no grants" : now.grants.joined(separator: " "))."
                : "Granted \(added.joined(separator: " ")) to \(s.displayName); its grants: \(now.grants.joined(separator: " "))."
        }
    }

    static let revoke = CommandSpec(
        path: ["site", "revoke"],
        summary: "Take back bridge ops granted to a site (at once, also in a running daemon)",
        discussion: "Removes the named ops from the site's grants; the catalogue's own allow-lists are not changed. Needs no approval (it only narrows what a page may do), but SiteKeep unlocked (the site's entry in sites.json is tagged again under the master key); recorded in the audit log.",
        arguments: [siteArgument, opArguments],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site revoke https://newsroom.sgit.ai key.sign", "the site may no longer ask to sign")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        let names = try opNames(inv)
        var removed: [String] = []
        for name in names {
            if s.grants.contains(name) { removed.append(name); continue }
            // A name the site holds is revoked even if the catalogue no longer lists it; any other
            // must be an op, so a typo is not taken for a revoke.
            let op = try catalogueOp(name, in: try OpCatalogue.bundled())
            inv.note("note: \(op.name) is not granted to \(s.displayName)" + (s.grants.isEmpty ? "" : " (its grants: \(s.grants.joined(separator: " ")))"))
        }
        var now = s
        if !removed.isEmpty {
            // No approval: a revoke only narrows what a page may do. A process that revokes
            // unasked can at worst take an op away, which the user's approved grant gives back.
            // Should the audit line fail, the revoke stands (the narrower state) and the error is
            // reported. The entry is tagged again, which needs SiteKeep unlocked (not an approval).
            try store.unlockOneShot(inv)
            now = try reg.updateGrants(forIdentifier: s.id, removing: removed)
            try store.custodian.auditLog.append(client: .site(s.id), op: .siteRevoke, key: nil, result: "ok",
                                                detail: "revoked \(removed.joined(separator: " ")) from \(s.origins.first?.serialized ?? s.id.string); now \(now.grants.isEmpty ? "-" : now.grants.joined(separator: " "))")
        }
        inv.emit(["site": .string(s.id.string), "revoked": .array(removed.map { .string($0) }), "grants": .array(now.grants.map { .string($0) })]) {
            removed.isEmpty ? "Nothing revoked." : "Revoked \(removed.joined(separator: " ")) from \(s.displayName); its grants: \(now.grants.isEmpty ? "none" : now.grants.joined(separator: " "))."
        }
    }

    static let remove = CommandSpec(
        path: ["site", "remove"],
        summary: "Remove a site: destroy its storage key first (crypto-shredding), then its files",
        discussion: "Asks first on a terminal (type the site's name); scripts pass --yes. A when-unlocked site's data is readable only while unlocked, so removing one needs the store unlocked too: " + UnlockOptions.note,
        arguments: [siteArgument],
        options: [Invocation.yes, .flag("--force", "remove even while the site is in use"), UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site remove https://newsroom.sgit.ai --yes", "remove the site and shred its data, without asking")],
        printsData: false
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        try inv.confirmDestruction("the site \(s.displayName) (\(s.origins.map(\.serialized).joined(separator: " "))) and all its data",
                                   typing: s.displayName, noun: "the site's name")
        if s.protection == .whenUnlocked { try store.unlockOneShot(inv) }
        // Run inside the daemon (as it is whenever one serves the store), its own open handle on
        // the site is not a holder to refuse for: it is closed first (a bridge request opening
        // it again in between is closed on the next try). A handle of another command running
        // in the daemon is a real holder: the message names --force.
        var attempt = 0
        while true {
            attempt += 1
            store.shared?.releaseSite(s.id)
            do throws(PartitionError) {
                try reg.remove(forIdentifier: s.id, force: inv.flag("--force"))
                break
            } catch {
                guard case let .siteInUse(_, handles) = error else { throw error }
                if attempt < 3 { continue }
                throw CommandFailure("the site \(s.displayName) is in use: \(handles) open handle(s) held by another command running in the daemon",
                                     remedy: "wait for that command to finish and try again, or pass --force to remove it anyway (the command holding it then fails)",
                                     code: "site_in_use")
            }
        }
        inv.say("Removed site \(s.id.string) (\(s.displayName)); its key was destroyed before its files.")
        // Its core state (reminder leads, calendar sequences, inbox and workflow state) goes with
        // its partition (a daemon serving the store forgets it too, ``SiteRegistry/onSiteRemoved(_:)``).
        do throws(CoreFileError) { try CoreStateDirectory(home: store.home.path).removeSite(s.id.string) } catch {
            inv.note("note: the site's core state was not deleted (\(error))")
        }
        // Its vaults stay registered to the removed site's id, which no site ever has again: no
        // site reaches them until the user gives them to one.
        let orphans = ((try? VaultCommands.library(store).records()) ?? []).filter { $0.siteID == s.id.string }.map(\.name)
        if !orphans.isEmpty {
            inv.note("note: vault\(orphans.count == 1 ? "" : "s") \(orphans.joined(separator: ", ")) belonged to this site; no site reaches \(orphans.count == 1 ? "it" : "them") now. `sitekeep vault assign NAME --site ORIGIN` gives one to a site, `sitekeep vault remove NAME` forgets it.")
        }
    }

    static let check = CommandSpec(
        path: ["site", "check"],
        summary: "Check a site's partition: integrity check, header and every sealed value",
        discussion: "Reports a lost or damaged partition (missing file, not a database, failed integrity check, a value that does not authenticate). Rebuild it with 'sitekeep site rebuild'.",
        arguments: [siteArgument],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site check https://promptugal.news", "check the site's partition")]
    ) { inv in
        let p = try partition(inv)
        defer { p.close() }
        try p.verify(namespaces: PartitionNamespace.core)
        _ = try p.storage.keys(); _ = try p.reading.all(); _ = try p.tabs.session()
        inv.emit(["site": .string(p.site.string), "ok": true]) { "The partition of \(p.site.string) is intact." }
    }

    static let export = CommandSpec(
        path: ["site", "export"],
        summary: "Print a site's partition as a sitekeep_partition_v1 document (for keeping in a vault)",
        discussion: "Storage, reading state and tabs, as JSON. Commit it to a vault that belongs to this site ('sitekeep vault add NAME --path DIR --site ORIGIN'), e.g. at sitekeep/sites/<host>.json, and 'sitekeep site rebuild' can restore the partition from there. SiteKeep does not write vaults itself (yet), so it cannot choose where the document goes; 'site rebuild' reads it back only from a vault of this site, and the bridge serves that vault to this site alone.",
        arguments: [siteArgument],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site export https://promptugal.news", "print the site's state as JSON")],
        printsData: false
    ) { inv in
        let p = try partition(inv)
        defer { p.close() }
        inv.io.write(JSONSerializer.string(try PartitionDocument(partition: p).json, style: .pretty) + "\n")
    }

    static let rebuild = CommandSpec(
        path: ["site", "rebuild"],
        summary: "Rebuild a lost or damaged partition from its document in a vault",
        discussion: "Reads the site's sitekeep_partition_v1 document from the vault's HEAD (default path sitekeep/sites/<host>.json), verifies it like every vault read, and writes a fresh partition under the site's own key. The vault must belong to this site ('sitekeep vault assign NAME --site ORIGIN'): another site's vault could hand it that site's data, or data that site wrote. No other site is touched.",
        arguments: [siteArgument],
        options: [.option("--from-vault", value: "NAME", "the registered vault holding the document"),
                  .option("--vault-path", value: "PATH", "the document's path in the vault"),
                  UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site rebuild https://promptugal.news --from-vault notes --prf-file prf.bin", "restore the site's partition from the vault")]
    ) { inv in
        guard let vaultName = inv.option("--from-vault") else {
            throw UsageError("site rebuild needs --from-vault NAME", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        try store.unlockOneShot(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        let opened = try VaultCommands.library(store).open(vaultName)
        guard opened.record.siteID == s.id.string else {
            let origin = s.origins.first?.serialized ?? s.id.string
            if let other = opened.record.siteID {
                let sites = reg.sites()
                throw CommandFailure("vault \(vaultName) belongs to \(VaultCommands.ownerText(other, sites: sites)), not to \(s.displayName); a site is rebuilt only from its own vault",
                                     remedy: "name a vault of \(s.displayName) (see 'sitekeep vault list')", code: "not_owner")
            }
            throw CommandFailure("vault \(vaultName) belongs to no site; a site is rebuilt only from a vault it owns",
                                 remedy: "give it to this site first: sitekeep vault assign \(vaultName) --site \(origin)", code: "not_owner")
        }
        let vault = opened.vault
        let path = inv.option("--vault-path") ?? PartitionDocument.defaultPath(for: s)
        try reg.rebuildPartition(forIdentifier: s.id, from: VaultPartitionSource(vault: vault, path: path))
        inv.emit(["site": .string(s.id.string), "rebuiltFrom": .string("\(vaultName):\(path)")]) {
            "Rebuilt the partition of \(s.displayName) from \(vaultName):\(path)."
        }
    }

    /// Opens the partition of the site named on the command line.
    static func partition(_ inv: Invocation) throws -> Partition {
        let store = try StoreContext.open(inv)
        let reg = try registry(store)
        let s = try site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        if s.protection == .whenUnlocked { try store.unlockOneShot(inv) }
        return try reg.openPartition(forIdentifier: s.id)
    }

    static let storageGet = CommandSpec(
        path: ["site", "storage", "get"],
        summary: "Read one key of a site's key/value store (its localStorage)",
        discussion: unlockFor,
        arguments: [siteArgument, ArgumentSpec("KEY", "the key")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site storage get https://promptugal.news nr.schedule.v1", "print the site's schedule")]
    ) { inv in
        let p = try partition(inv)
        defer { p.close() }
        let key = try inv.requiredArgument("KEY")
        guard let value = try p.storage.getItem(key) else {
            throw CommandFailure("no key \(key) in this site's storage", remedy: "see 'sitekeep site storage keys SITE'", code: "not_found")
        }
        inv.emit(["key": .string(key), "value": .string(value)]) { value }
    }

    static let storageSet = CommandSpec(
        path: ["site", "storage", "set"],
        summary: "Write one key of a site's key/value store",
        discussion: unlockFor,
        arguments: [siteArgument, ArgumentSpec("KEY", "the key"), ArgumentSpec("VALUE", "the value (use --value-file for long or binary-safe text)", optional: true)],
        options: [.option("--value-file", value: "PATH", "read the value from PATH ('-' for stdin)"), UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site storage set https://promptugal.news nr.schedule.v1 '{\"v\":1,\"picks\":[]}'", "store the site's schedule")],
        printsData: false
    ) { inv in
        let key = try inv.requiredArgument("KEY")
        let value: String
        if let path = inv.option("--value-file") {
            let bytes = path == "-" ? try inv.io.readStandardInput(limit: 8 << 20) : try CustodyCommands.readMessage(path, inv: inv)
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw CommandFailure("the value is not UTF-8 text", remedy: "storage values are strings, as localStorage's are")
            }
            value = text
        } else if let v = inv.argument("VALUE") {
            value = v
        } else {
            throw UsageError("give VALUE or --value-file PATH", command: inv.spec.commandLine)
        }
        let p = try partition(inv)
        defer { p.close() }
        try p.storage.setItem(key, value)
        inv.say("Stored \(key) (\(value.utf8.count) bytes).")
    }

    static let storageRemove = CommandSpec(
        path: ["site", "storage", "remove"],
        summary: "Remove one key of a site's key/value store",
        arguments: [siteArgument, ArgumentSpec("KEY", "the key")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site storage remove https://promptugal.news draft", "remove the key 'draft'")],
        printsData: false
    ) { inv in
        let p = try partition(inv)
        defer { p.close() }
        try p.storage.removeItem(try inv.requiredArgument("KEY"))
        inv.say("Removed.")
    }

    static let storageKeys = CommandSpec(
        path: ["site", "storage", "keys"],
        summary: "List the keys of a site's key/value store",
        arguments: [siteArgument],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site storage keys https://promptugal.news", "list the keys")]
    ) { inv in
        let p = try partition(inv)
        defer { p.close() }
        let keys = try p.storage.keys().sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        inv.emit(.array(keys.map { .string($0) })) { keys.joined(separator: "\n") }
    }

    static let audit = CommandSpec(
        path: ["audit"],
        summary: "Prove that no site reaches another's data: a sites × probes matrix; exits 1 on any leak",
        discussion: """
        Builds a scratch store (never yours) of --sites sites, writes a distinct canary into \
        every namespace of each, then runs every probe: foreign API paths, origin look-alikes, \
        path traversal, SQL metacharacters, rows, files and folders swapped between sites, \
        concurrent writers, and the bridge's ops from sites not allowed to call them. Prints the \
        matrix; exits 1 if any cell is a LEAK or could not be decided. With a store, it then lists \
        who may bind each of your app-bound sites: the SiteKeep browser and the hosts you added.
        """,
        options: [.option("--sites", value: "N", "how many sites (default 5, at least 2)")],
        examples: [CommandExample("sitekeep audit", "run the audit and print the matrix"),
                   CommandExample("sitekeep audit --sites 6 --json", "six sites, the report as JSON")]
    ) { inv in
        let n = try inv.intOption("--sites", default: 5, range: 2...10)
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-audit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let report = try inv.withProgress("Running the isolation audit") {
            try IsolationAudit.run(in: scratch, sites: n, probes: AuditCatalogue.all)
        }
        // Who may bind each of your app-bound sites (its hosts), read from sites.json without
        // opening a key; nothing when there is no store.
        let yours = StoreContext.exists(home: inv.settings.home)
            ? try SiteRegistry.sites(inHome: URL(fileURLWithPath: inv.settings.home)).filter(\.isAppBound) : []
        if inv.settings.json {
            // The one serialiser of every --json output, the report's members in their order;
            // with a store, "hosts" after them.
            guard case .object(var members) = report.json else { return }
            if StoreContext.exists(home: inv.settings.home) {
                members.append(JSONMember(key: "hosts", value: .array(yours.map { s in
                    .object([JSONMember(key: "site", value: .string(s.id.string)),
                             JSONMember(key: "origin", value: .string(s.origins.first?.serialized ?? "")),
                             JSONMember(key: "browser", value: .bool(true)),
                             JSONMember(key: "hosts", value: .array(s.hosts.map(SiteHostCommands.hostJSON)))])
                })))
            }
            inv.emit(.object(members)) { "" }
        } else {
            inv.io.write(report.renderText())
            if StoreContext.exists(home: inv.settings.home) {
                var text = "\nWho may act for your app-bound sites (their hosts; 'sitekeep site host add' adds one):\n"
                if yours.isEmpty { text += "  no app-bound sites\n" }
                for s in yours {
                    text += "  \(s.displayName) (\(s.origins.first?.serialized ?? s.id.string)): \(SiteHostCommands.describe(s.hosts))\n"
                }
                inv.io.write(text)
            }
        }
        if !report.passed {
            throw CommandFailure("the isolation audit found \(report.hasLeaks ? "a LEAK" : "a probe it could not decide")",
                                 remedy: "read the findings above; a LEAK means one site reached another's data", code: "audit_failed")
        }
    }
}

/// Every probe the audit runs: the partitions layer's, plus the layers' above it.
enum AuditCatalogue {
    static var all: [any Probe] { IsolationAudit.standardProbes + [VaultPathProbe(), BridgePolicyProbe(.foreignOps), BridgePolicyProbe(.originClaims)] }
}
