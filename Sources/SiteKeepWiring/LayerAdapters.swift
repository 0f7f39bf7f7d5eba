public import SiteKeepBridge
public import SiteKeepPartitions
public import SiteKeepVault
public import SiteKeepCustody
public import SiteKeepCore
import SiteKeepJSON
import Synchronization
import SiteKeepVocabulary

// The bridge's services on the partitions and vault layers: each site's own partition, and
// the store's vault library. Each adapter is small; the dispatcher routes to it.

extension BridgeFailure {
    public init(partition error: PartitionError) {
        switch error {
        case .quotaExceeded: self.init(.quotaExceeded, error.description)
        case .keyTooLong, .valueTooLarge, .invalidValue: self.init(.tooLarge, error.description)
        case .keyUnavailable: self.init(.locked, "this site's data needs SiteKeep unlocked; run `sitekeep unlock`")
        case .unknownSite, .siteRemoved: self.init(.notFound, error.description)
        default: self.init(.internal, error.description)
        }
    }

    /// The `not_found` message of a vault name the calling site cannot reach.
    public static let noSuchVault = "args.vault names no vault of this site; `sitekeep vault list` shows each vault's site"

    public init(vault error: VaultError) {
        switch error {
        // One message for every vault this site cannot reach (unknown, another site's, no
        // site's): it names nothing, so the reply cannot tell them apart.
        case .unknownVault: self.init(.notFound, Self.noSuchVault)
        case .notFound: self.init(.notFound, error.description)
        case .invalidPath: self.init(.badRequest, error.description)
        case .keysUnavailable, .signingFailed: self.init(.locked, error.description)
        case .unverifiedCommit, .badSignature: self.init(.vaultUnverified, error.description)
        case .unsupportedVault: self.init(.unsupported, error.description)
        case .readOnly, .mount: self.init(.notAllowed, error.description)
        case .wrongKind, .tooLarge: self.init(.badRequest, error.description)
        default: self.init(.internal, error.description)
        }
    }
}

/// Each bridge site's own partition, kept open between calls: a request pays neither the
/// keyring lookup of the storage key nor SQLite's open and integrity check. The open partitions
/// are kept in a ``LockBound`` of custody's ``LockScope``, so every lock (and unlock) closes them
/// all: `when-unlocked` data needs a fresh key, and so an unlock, before it is read again.
public final class PartitionAccess: Sendable {
    public let registry: SiteRegistry
    private let open: LockBound<[SiteID: OpenPartition]>

    /// An open partition as the lock scope holds it: wiping it closes it.
    struct OpenPartition: LockWipeable {
        let partition: Partition
        mutating func wipeForLock() { partition.close() }
    }

    /// - Parameter lockScope: the scope whose clearing closes the open partitions (the
    ///   custodian's ``Custodian/lockScope`` when it provides the storage keys).
    public init(registry: SiteRegistry, lockScope: LockScope) {
        self.registry = registry
        open = lockScope.cache()
    }

    public func with<R>(_ site: BridgeSite, _ body: (Partition) throws(PartitionError) -> R) throws(BridgeFailure) -> R {
        do throws(PartitionError) {
            let id = try SiteID.parse(site.id)
            // Opened under the holder's lock, so a clear waits for it and then closes it.
            let p = try open.withLock { (cache: inout [SiteID: OpenPartition]) throws(PartitionError) -> Partition in
                if let p = cache[id], p.partition.isOpen { return p.partition }   // one the registry closed is replaced
                let p = try registry.openPartition(forIdentifier: id)
                cache[id] = OpenPartition(partition: p)
                return p
            }
            do throws(PartitionError) {
                return try body(p)
            } catch {
                // A damaged or closed partition is opened afresh next time.
                if case .damaged = error { drop(id) } else if case .partitionClosed = error { drop(id) } else if case .siteRemoved = error { drop(id) }
                throw error
            }
        } catch { throw BridgeFailure(partition: error) }
    }

    /// Closes every partition kept open (lock does this through the scope).
    public func closeAll() {
        open.withLock { $0.wipeForLock() }
    }

    /// Closes the partition of site `id` kept open here, if any (the daemon releases its own
    /// handle before `site remove` run inside it removes the site).
    public func release(_ id: SiteID) {
        drop(id)
    }

    private func drop(_ id: SiteID) {
        if var p = open.withLock({ $0.removeValue(forKey: id) }) { p.wipeForLock() }
    }
}

public struct PartitionStorageService: StorageService {
    public let access: PartitionAccess
    public init(access: PartitionAccess) { self.access = access }
    public func value(forKey key: String, site: BridgeSite) async throws(BridgeFailure) -> String? { try access.with(site) { p throws(PartitionError) in try p.storage.getItem(key) } }
    public func setValue(_ value: String, forKey key: String, site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.setItem(key, value) } }
    public func removeValue(forKey key: String, site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.removeItem(key) } }
    public func keys(site: BridgeSite) async throws(BridgeFailure) -> [String] { try access.with(site) { p throws(PartitionError) in try p.storage.keys() } }
    public func clear(site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.clear() } }
}

public struct PartitionTabsService: TabsService {
    public let access: PartitionAccess
    public init(access: PartitionAccess) { self.access = access }
    public func session(site: BridgeSite) async throws(BridgeFailure) -> TabSession {
        try access.with(site) { p throws(PartitionError) -> TabSession in TabSession(try p.tabs.session()) }
    }
    public func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure) {
        let state = session.state
        try access.with(site) { p throws(PartitionError) in try p.tabs.setSession(state) }
    }
}

public struct PartitionReadingService: ReadingService {
    public let access: PartitionAccess
    public init(access: PartitionAccess) { self.access = access }
    public func readingStates(site: BridgeSite) async throws(BridgeFailure) -> [ArticleReading] {
        try access.with(site) { p throws(PartitionError) -> [ArticleReading] in
            try p.reading.all().sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { ArticleReading(id: $0.key, $0.value) }
        }
    }
    public func record(_ articles: [ArticleReading], site: BridgeSite) async throws(BridgeFailure) -> Int {
        var states: [String: ReadingState] = [:]
        for a in articles { states[a.id] = a.readingState }
        let all = states
        try access.with(site) { p throws(PartitionError) in try p.reading.setStates(all) }
        return articles.count
    }
}

/// The schedule (`nr.schedule.v1`, as the sites keep it in localStorage) in the site's storage,
/// read and written through the core's strict ``ScheduleDocument``.
public struct PartitionScheduleService: ScheduleService {
    public let access: PartitionAccess
    /// Told after every change (the daemon re-plans the site's reminders).
    public let onChange: @Sendable (BridgeSite) -> Void
    /// Mirrors each change to the site's vault (`agenda/picks.json`), when set.
    public let mirror: VaultPicksMirror?
    public let clock: any CoreClock
    public init(access: PartitionAccess, mirror: VaultPicksMirror? = nil, clock: any CoreClock = SystemClock(),
                onChange: @escaping @Sendable (BridgeSite) -> Void = { _ in }) {
        self.access = access
        self.mirror = mirror
        self.clock = clock
        self.onChange = onChange
    }
    public static let key = ScheduleDocument.storageKey
    public func schedule(site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        guard let text = try access.with(site, { p throws(PartitionError) in try p.storage.getItem(Self.key) }) else { return ScheduleDocument() }
        do { return try ScheduleDocument(text: text, path: Self.key) } catch {
            throw BridgeFailure(.internal, "the stored schedule is refused (\(error)); write a valid one with schedule.set")
        }
    }
    /// Stores the schedule, then mirrors the change to the site's vault. A failure there is
    /// reported, the schedule staying stored (the next change mirrors all its picks again); a
    /// locked store skips the mirror, since the page's schedule works while locked (a pick made
    /// then goes up with the next change, a removal made then is not mirrored).
    public func setSchedule(_ schedule: ScheduleDocument, site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        let old = mirror == nil ? ScheduleDocument() : ((try? await self.schedule(site: site)) ?? ScheduleDocument())
        let text = schedule.text
        try access.with(site) { p throws(PartitionError) in try p.storage.setItem(Self.key, text) }
        onChange(site)
        do { try mirror?.mirror(old: old, new: schedule, siteID: site.id, now: clock.now()) } catch {
            let error = BridgeFailure(mirror: error)
            if error.code == .locked { return schedule }
            throw BridgeFailure(error.code, "the schedule is stored, but not mirrored to the site's vault: \(error.message)")
        }
        return schedule
    }
}

/// The vault ops on the store's vault library, for the calling site's vaults only. `vault`
/// names one of the site's vaults; when absent, the site's only vault (or its one named
/// `default`). A vault of another site answers `not_found` exactly as an unknown name does.
public struct LibraryVaultService: VaultService {
    public let library: VaultLibrary
    /// The daemon's sync state of a vault by name (push queue, last round), when it syncs.
    public let syncStatus: (@Sendable (String) -> BridgeVaultSync)?
    public init(library: VaultLibrary, syncStatus: (@Sendable (String) -> BridgeVaultSync)? = nil) {
        self.library = library
        self.syncStatus = syncStatus
    }

    func vault(_ name: String?, site: BridgeSite) throws(BridgeFailure) -> (String, Vault) {
        var chosen = name
        if chosen == nil {
            do { chosen = try library.defaultVaultName(forSite: site.id) } catch { throw BridgeFailure(vault: error) }
        }
        guard let chosen else {
            throw BridgeFailure(.notConfigured, "no vault chosen: pass args.vault, or give this site one vault (`sitekeep vault add NAME --path DIR --site ORIGIN`)")
        }
        do { return (chosen, try library.vault(named: chosen, forSite: site.id)) } catch { throw BridgeFailure(vault: error) }
    }

    public func status(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultStatus {
        let (name, v) = try self.vault(vault, site: site)
        do {
            try v.requireServedHead()
            let s = try v.status()
            let conflicts = try v.mergeState()?.conflicts ?? []
            let sync = syncStatus?(name)
            let waiting = !conflicts.isEmpty || (sync?.queued ?? 0) > 0
            return BridgeVaultStatus(vault: name, state: waiting ? .pending : .clean, head: s.headCommit.map { "\($0)" }, files: try v.list(path: nil).count,
                                     queued: sync?.queued ?? 0, conflicts: conflicts, lastSyncMs: sync?.lastSyncMs, lastSyncError: sync?.lastSyncError)
        } catch { throw BridgeFailure(vault: error) }
    }
    public func list(vault: String?, path: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeVaultEntry] {
        let (_, v) = try self.vault(vault, site: site)
        do { return try v.list(path: path).map { BridgeVaultEntry(path: $0.path.string, kind: .file, size: $0.size) } } catch { throw BridgeFailure(vault: error) }
    }
    public func load(vault: String?, path: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8] {
        let (name, _) = try self.vault(vault, site: site)
        do { return try library.readThroughMounts(name: name, path: path, siteID: site.id) } catch { throw BridgeFailure(vault: error) }
    }
    /// Commits the file on this device's clone branch, signed with the device key; answers the
    /// new HEAD (the old one, not changed, when the content was already there).
    public func save(vault: String?, path: String, content: [UInt8], site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultSaved {
        let (name, _) = try self.vault(vault, site: site)
        do {
            let r = try library.write(name: name, path: path, contents: content)
            return BridgeVaultSaved(vault: name, commit: (r.commit ?? r.parent).map { "\($0)" } ?? "", changed: r.commit != nil)
        } catch { throw BridgeFailure(vault: error) }
    }
}

extension PartitionAccess {
    /// For a long-running process (the daemon calls it once): the registry watches `sites.json`
    /// (``SiteRegistry/watchForChanges()``), and a partition it closes because its site was
    /// removed or changed (here or in another process) is let go of at once, so a removed site's
    /// storage key does not stay in memory until the next lock and a changed site's next request
    /// opens it afresh. The drop runs in a task of its own: the registry may notice inside ``with(_:_:)``.
    public func followRegistryChanges() {
        registry.watchForChanges()
        registry.onPartitionClosed { [weak self] id in
            Task.detached { self?.drop(id) }
        }
    }
}
