public import SiteKeepBridge
public import SiteKeepCore
public import SiteKeepPartitions
public import SiteKeepVault
import SiteKeepJSON

// The bridge's core services (reminders, workflows, inbox, identity) on the partitions, the
// vault library and the core's state files. Each decodes nothing and decides nothing: the core
// plans, validates and merges; these only fetch its inputs and store its outputs.

extension BridgeFailure {
    init(coreFile error: CoreFileError) { self.init(.internal, "SiteKeep's state file \(error)") }
}

/// The site's agenda, cached in its partition's offline cache (the native-only namespace) under
/// `sitekeep:agenda`, with the entity tag and source as headers.
public struct PartitionAgendaCache: AgendaCache {
    public let partition: Partition
    public static let key = "sitekeep:agenda"
    public init(partition: Partition) { self.partition = partition }

    public func current() throws(AgendaError) -> CachedAgenda? {
        let r: CachedResource?
        do { r = try partition.cache.resource(for: Self.key) } catch { throw .cache(error.description) }
        guard let r else { return nil }
        func header(_ n: String) -> String? { r.headers.first { $0.name == n }?.value }
        let at = header("X-SiteKeep-Loaded-At").flatMap { Int64($0) }.flatMap(Instant.init(milliseconds:)) ?? .earliest
        return CachedAgenda(source: header("X-SiteKeep-Source") ?? "", etag: header("ETag"), body: r.body, loadedAt: at)
    }

    public func store(_ a: CachedAgenda) throws(AgendaError) {
        var headers = [HeaderField(name: "X-SiteKeep-Source", value: a.source), HeaderField(name: "X-SiteKeep-Loaded-At", value: String(a.loadedAt.milliseconds))]
        if let e = a.etag { headers.append(HeaderField(name: "ETag", value: e)) }
        do { try partition.cache.store(CachedResource(url: Self.key, status: 200, headers: headers, body: a.body)) } catch {
            throw .cache(error.description)
        }
    }
}

extension PartitionAccess {
    /// The site's schedule and agenda (the empty agenda when none is loaded), as the core reads them.
    public func coreInputs(_ site: BridgeSite) throws(BridgeFailure) -> (ScheduleDocument, Agenda) {
        let partition = try with(site) { p throws(PartitionError) in p }
        let text = try with(site) { p throws(PartitionError) in try p.storage.getItem(ScheduleDocument.storageKey) }
        let schedule: ScheduleDocument
        do { schedule = try text.map { t throws(CoreFieldError) in try ScheduleDocument(text: t, path: ScheduleDocument.storageKey) } ?? ScheduleDocument() } catch {
            throw BridgeFailure(.internal, "the stored schedule is refused (\(error)); write a valid one with schedule.set")
        }
        do { return (schedule, try AgendaLoader(cache: PartitionAgendaCache(partition: partition)).currentOrEmpty()) } catch {
            throw BridgeFailure(.internal, error.description)
        }
    }
}

/// `notify.plan`: the site's leads kept in its core state, the plan computed by the core from the
/// site's picks and agenda, less what was already delivered.
public struct CoreNotifyService: NotifyService {
    public let access: PartitionAccess
    public let state: CoreStateDirectory
    public let clock: any CoreClock
    /// Told after the leads change (the daemon re-plans).
    public let onChange: @Sendable (BridgeSite) -> Void

    public init(access: PartitionAccess, state: CoreStateDirectory, clock: any CoreClock = SystemClock(),
                onChange: @escaping @Sendable (BridgeSite) -> Void = { _ in }) {
        self.access = access; self.state = state; self.clock = clock; self.onChange = onChange
    }

    public func plan(leads: ReminderLeads, site: BridgeSite) async throws(BridgeFailure) -> [Reminder] {
        do {
            var policy = try state.reminderPolicy(site: site.id)
            if !leads.isEmpty {
                policy = leads.applied(to: policy)
                try state.setReminderPolicy(policy, site: site.id)
                onChange(site)
            }
            let (schedule, agenda) = try access.coreInputs(site)
            let deliverer = ReminderDeliverer(ledger: FileDeliveryLedger(path: state.deliveredLedger), sink: NoSink(), clock: clock, policy: policy)
            return try deliverer.pending(ReminderInput(siteID: site.id, schedule: schedule, agenda: agenda))
        } catch let e as BridgeFailure { throw e } catch let e as CoreFileError { throw BridgeFailure(coreFile: e) } catch {
            throw BridgeFailure(.internal, "reminders could not be planned")
        }
    }

    struct NoSink: NotificationSink { func deliver(_ n: DesktopNotification) throws(DeliveryError) {} }
}

/// A vault's `workflows/*.json`, read through the vault client (verified like every read).
public struct VaultWorkflowSource: WorkflowSource {
    public let vault: Vault
    public init(vault: Vault) { self.vault = vault }
    public func files() throws(CoreFileError) -> [(name: String, bytes: [UInt8])] {
        do {
            let entries = try vault.list(path: nil).filter { $0.path.string.hasPrefix("workflows/") && $0.path.string.hasSuffix(".json") }
            return try entries.prefix(200).map { e throws(VaultError) in
                let p = e.path.string
                return (String(p.dropFirst("workflows/".count).dropLast(".json".count)), try vault.read(path: p))
            }.filter { !$0.name.contains("/") }
        } catch { throw CoreFileError(path: "vault:workflows/", reason: error.description) }
    }
}

/// A vault as the core sees it: its name, the opened vault and the scope of its inbox and
/// workflow state. For a site (a bridge call's, or the CLI's `--site`), exactly the vault the
/// bridge's vault ops would use for that site (one of its own; another site's answers
/// `not_found`); without one (the CLI), the vault named, or the only one registered, in the
/// scope of the site that owns it (so the CLI and that site's bridge share one state).
public struct ResolvedVault: Sendable {
    public let name: String
    public let vault: Vault
    public let scope: CoreScope
}

/// Why no vault could be chosen for a core op.
public enum VaultChoiceError: Error, Sendable {
    /// A site has no vault of its own and none was named.
    case noVaultForSite
    /// No vault was named and there is not exactly one (or one called `default`).
    case noVaultNamed
    /// The vault library refused.
    case vault(VaultError)
}

extension BridgeFailure {
    /// The bridge code for a vault choice that failed.
    init(choice error: VaultChoiceError) {
        switch error {
        case .noVaultForSite: self.init(.notConfigured, "no vault chosen: pass args.vault, or give this site one vault (`sitekeep vault add NAME --path DIR --site ORIGIN`)")
        case .noVaultNamed: self.init(.notConfigured, "no vault chosen: name one with --vault")
        case .vault(let e): self.init(vault: e)
        }
    }
}

public struct CoreVaultAccess: Sendable {
    public let library: VaultLibrary
    public init(library: VaultLibrary) { self.library = library }

    /// The vault a core op works on, without the bridge's error codes: the command line's
    /// local commands call this, the bridge's adapters ``resolve(_:siteID:)``.
    /// - Throws: ``VaultChoiceError``.
    public func choose(_ name: String? = nil, siteID: String?) throws(VaultChoiceError) -> ResolvedVault {
        if let siteID {
            var found = name
            if found == nil {
                do { found = try library.defaultVaultName(forSite: siteID) } catch { throw .vault(error) }
            }
            guard let chosen = found else { throw .noVaultForSite }
            do {
                return ResolvedVault(name: chosen, vault: try library.vault(named: chosen, forSite: siteID), scope: CoreScope(site: siteID, vault: chosen))
            } catch { throw .vault(error) }
        }
        let records: [VaultRecord]
        do { records = try library.records() } catch { throw .vault(error) }
        guard let chosen = name ?? (records.count == 1 ? records[0].name : (records.contains { $0.name == "default" } ? "default" : nil)) else {
            throw .noVaultNamed
        }
        do {
            let opened = try library.open(chosen)
            return ResolvedVault(name: chosen, vault: opened.vault, scope: CoreScope(site: opened.record.siteID, vault: chosen))
        } catch { throw .vault(error) }
    }

    /// ``choose(_:siteID:)`` with the bridge's codes.
    public func resolve(_ name: String? = nil, siteID: String?) throws(BridgeFailure) -> ResolvedVault {
        do { return try choose(name, siteID: siteID) } catch { throw BridgeFailure(choice: error) }
    }

    public func vault(_ name: String? = nil, site: BridgeSite?) throws(BridgeFailure) -> Vault {
        try resolve(name, siteID: site?.id).vault
    }

    /// The vault's listing as the inbox reads it (path and blob id).
    public static func listing(_ v: Vault) throws(VaultError) -> [VaultListingEntry] {
        try v.list(path: nil).map { VaultListingEntry(path: $0.path.string, version: "\($0.blobID)", size: $0.size) }
    }

    public func listing(_ name: String? = nil, site: BridgeSite?) throws(BridgeFailure) -> [VaultListingEntry] {
        try listing(try vault(name, site: site))
    }

    /// ``listing(_:)-swift.type.method`` with the bridge's codes.
    func listing(_ v: Vault) throws(BridgeFailure) -> [VaultListingEntry] {
        do { return try Self.listing(v) } catch { throw BridgeFailure(vault: error) }
    }

    /// The read marks of `r`'s inbox: in the vault, with the scope's local copy.
    public func marks(_ r: ResolvedVault, state: CoreStateDirectory) -> VaultInboxMarksStore {
        VaultInboxMarksStore(library: library, vault: r.name, local: FileInboxMarksStore(state: state, scope: r.scope))
    }
}

/// The read marks in the vault at ``InboxReadMarks/path`` (`sitekeep/inbox-read.json`), so they
/// travel: loaded as the vault's file merged with the scope's local copy (marks made where the
/// vault could not be written); saved to both, with a commit on this device's clone branch only
/// when the vault's file would change (the sync pushes it; a pull merges two devices' files by
/// the union of their marks, ``InboxReadMarksMerge``). A read-only vault keeps them locally.
public struct VaultInboxMarksStore: InboxMarksStore {
    public let library: VaultLibrary
    public let vault: String
    public let local: FileInboxMarksStore

    func inVault() throws(CoreFileError) -> InboxReadMarks? {
        let bytes: [UInt8]
        do { bytes = try library.vault(named: vault).read(path: InboxReadMarks.path) } catch {
            if case .notFound = error { return nil }
            throw CoreFileError(path: "vault \(vault): \(InboxReadMarks.path)", reason: error.description)
        }
        do { return try InboxReadMarks(json: try JSONParser.parse(bytes, limits: .document)) } catch {
            throw CoreFileError(path: "vault \(vault): \(InboxReadMarks.path)", reason: "\(error); fix or remove the file in the vault")
        }
    }

    public func load() throws(CoreFileError) -> InboxReadMarks {
        let mine = try local.load()
        return try inVault().map { mine.merged(with: $0) } ?? mine
    }

    public func save(_ marks: InboxReadMarks) throws(CoreFileError) {
        try local.save(marks)
        let current = try inVault()
        guard current != marks, current != nil || !marks.marks.isEmpty else { return }
        if (try? library.records().first { $0.name == vault }?.readOnly) == true { return }
        do { try library.write(name: vault, path: InboxReadMarks.path, contents: JSONSerializer.bytes(marks.json, style: .pretty) + [0x0a], message: "Inbox read marks") } catch {
            if case .readOnly = error { return }
            throw CoreFileError(path: "vault \(vault): \(InboxReadMarks.path)", reason: error.description)
        }
    }
}

/// `workflow.*` on the vault's workflows, runs kept in the core's state of the scope `source` names.
public struct CoreWorkflowService: WorkflowService {
    public let source: @Sendable (BridgeSite) throws(BridgeFailure) -> (any WorkflowSource, CoreScope)
    public let state: CoreStateDirectory
    public init(state: CoreStateDirectory, source: @escaping @Sendable (BridgeSite) throws(BridgeFailure) -> (any WorkflowSource, CoreScope)) {
        self.state = state
        self.source = source
    }

    /// The workflows of the site's vault, in the site's scope for that vault.
    public init(state: CoreStateDirectory, vaults: CoreVaultAccess) {
        self.init(state: state) { site throws(BridgeFailure) in
            let r = try vaults.resolve(siteID: site.id)
            return (VaultWorkflowSource(vault: r.vault), r.scope)
        }
    }

    public func catalogue(site: BridgeSite) async throws(BridgeFailure) -> WorkflowCatalogue {
        try catalogue(try source(site).0)
    }

    func catalogue(_ src: any WorkflowSource) throws(BridgeFailure) -> WorkflowCatalogue {
        do throws(CoreFileError) { return try WorkflowCatalogue(source: src) } catch { throw BridgeFailure(coreFile: error) }
    }

    func named(_ name: String, site: BridgeSite) throws(BridgeFailure) -> (Workflow, CoreScope) {
        let (src, scope) = try source(site)
        guard let w = try catalogue(src).workflow(named: name) else {
            throw BridgeFailure(.notFound, "no workflow \(FieldSchema.printable(name)); workflow.list names them")
        }
        return (w, scope)
    }

    public func run(_ name: String, restart: Bool, site: BridgeSite) async throws(BridgeFailure) -> WorkflowRun {
        let (w, scope) = try named(name, site: site)
        do {
            let run = WorkflowRun(w, position: restart ? 0 : (try state.workflowPositions(scope)[name] ?? 0))
            try state.setWorkflowPosition(run.position, name: name, scope: scope)
            return run
        } catch { throw BridgeFailure(coreFile: error) }
    }

    public func next(_ name: String, site: BridgeSite) async throws(BridgeFailure) -> (run: WorkflowRun, moved: Bool) {
        let (w, scope) = try named(name, site: site)
        do {
            var run = WorkflowRun(w, position: try state.workflowPositions(scope)[name] ?? 0)
            let moved = run.next()
            try state.setWorkflowPosition(run.position, name: name, scope: scope)
            return (run, moved)
        } catch { throw BridgeFailure(coreFile: error) }
    }
}

/// `inbox.list` on the site's vault's listing: each call is a look (the listing is kept as the
/// last seen), in the site's scope for that vault, the read marks in the vault; `inbox.mark`
/// marks items of that listing read there.
public struct CoreInboxService: InboxService {
    public let vaults: CoreVaultAccess
    public let state: CoreStateDirectory
    public let clock: any CoreClock
    public init(vaults: CoreVaultAccess, state: CoreStateDirectory, clock: any CoreClock = SystemClock()) {
        self.vaults = vaults; self.state = state; self.clock = clock
    }

    public func items(site: BridgeSite) async throws(BridgeFailure) -> [InboxItem] {
        let r = try vaults.resolve(siteID: site.id)
        let listing = try vaults.listing(r.vault)
        do { return try state.lookAtInbox(listing: listing, scope: r.scope, marks: vaults.marks(r, state: state), now: clock.now()) } catch {
            throw BridgeFailure(coreFile: error)
        }
    }

    /// Marks in the site's scope for its vault, committed to the vault as the CLI's `inbox --mark-read` does.
    public func markRead(_ paths: [String], site: BridgeSite) async throws(BridgeFailure) -> Int {
        let r = try vaults.resolve(siteID: site.id)
        let listing = try vaults.listing(r.vault)
        if let bad = Inbox.firstNonItem(paths, in: listing) { throw .notInInbox(bad) }
        guard !paths.isEmpty else { return 0 }
        do { return try state.markInboxRead(paths, listing: listing, marks: vaults.marks(r, state: state), now: clock.now()) } catch {
            throw BridgeFailure(coreFile: error)
        }
    }
}

/// `identity.get` from the store's identity settings (`identity.json`), else from `fallback`
/// (the team key's id and name in custody).
public struct SettingsIdentityService: IdentityService {
    public let state: CoreStateDirectory
    public let fallback: (any IdentityService)?
    public init(state: CoreStateDirectory, fallback: (any IdentityService)?) {
        self.state = state
        self.fallback = fallback
    }

    public func identity(site: BridgeSite) async throws(BridgeFailure) -> BridgeIdentity {
        let settings: IdentitySettings?
        do { settings = try state.identitySettings() } catch { throw BridgeFailure(coreFile: error) }
        if let p = settings?.identity(forSite: site.id) { return BridgeIdentity(teamID: p.teamID, displayName: p.displayName) }
        guard let fallback else {
            throw BridgeFailure(.notFound, "no identity is configured; run 'sitekeep identity set --team ID --name NAME'")
        }
        return try await fallback.identity(site: site)
    }
}
