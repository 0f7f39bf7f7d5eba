public import SiteKeepPartitions
public import SiteKeepVault
public import SiteKeepCore
import SiteKeepJSON
import Synchronization

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

    public init(vault error: VaultError) {
        switch error {
        case .notFound, .unknownVault: self.init(.notFound, error.description)
        case .invalidPath: self.init(.badRequest, error.description)
        case .keysUnavailable: self.init(.locked, error.description)
        default: self.init(.internal, error.description)
        }
    }
}

/// Runs `body` on the bridge site's own partition (opened per call; closed after).
/// Each bridge site's own partition, kept open between calls: a request pays neither the
/// keyring lookup of the storage key nor SQLite's open and integrity check. ``closeAll()``
/// drops them (the daemon calls it whenever custody locks, so `when-unlocked` data needs a
/// fresh key, and so an unlock again, before it is read).
public final class PartitionAccess: Sendable {
    public let registry: SiteRegistry
    private let open = Mutex<[SiteID: Partition]>([:])

    public init(registry: SiteRegistry) { self.registry = registry }

    public func with<R>(_ site: BridgeSite, _ body: (Partition) throws(PartitionError) -> R) throws(BridgeFailure) -> R {
        do throws(PartitionError) {
            let id = try SiteID(parsing: site.id)
            let p = try open.withLock { (cache: inout [SiteID: Partition]) throws(PartitionError) -> Partition in
                if let p = cache[id] { return p }
                let p = try registry.openPartition(forIdentifier: id)
                cache[id] = p
                return p
            }
            do throws(PartitionError) {
                return try body(p)
            } catch {
                // A damaged or closed partition is opened afresh next time.
                if case .damaged = error { drop(id) } else if case .partitionClosed = error { drop(id) }
                throw error
            }
        } catch { throw BridgeFailure(partition: error) }
    }

    /// Closes every partition kept open.
    public func closeAll() {
        let all = open.withLock { c -> [Partition] in defer { c.removeAll() }; return Array(c.values) }
        for p in all { p.close() }
    }

    private func drop(_ id: SiteID) {
        if let p = open.withLock({ $0.removeValue(forKey: id) }) { p.close() }
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
        try access.with(site) { p throws(PartitionError) -> TabSession in
            guard let s = try p.tabs.session() else { return TabSession() }
            let tabs = s.tabs.map { SessionTab(url: $0.url, title: $0.title.isEmpty ? nil : $0.title, scroll: $0.scrollY) }
            return TabSession(tabs: tabs, active: s.lastTabID.flatMap { id in s.tabs.firstIndex { $0.id == id } })
        }
    }
    public func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure) {
        let tabs = session.tabs.enumerated().map { TabState(id: "t\($0.offset)", url: $0.element.url, title: $0.element.title ?? "", scrollY: $0.element.scroll ?? 0) }
        let state = SessionState(tabs: tabs, lastTabID: session.active.flatMap { $0 < tabs.count ? tabs[$0].id : nil })
        try access.with(site) { p throws(PartitionError) in try p.tabs.setSession(state) }
    }
}

public struct PartitionReadingService: ReadingService {
    public let access: PartitionAccess
    public init(access: PartitionAccess) { self.access = access }
    public func readingStates(site: BridgeSite) async throws(BridgeFailure) -> [ArticleReading] {
        try access.with(site) { p throws(PartitionError) -> [ArticleReading] in
            try p.reading.all().sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { id, state in
                switch state {
                case .read: ArticleReading(id: id, state: .read)
                case .unread: ArticleReading(id: id, state: .unread)
                case .partRead(let progress): ArticleReading(id: id, state: .partial, progress: progress)
                }
            }
        }
    }
    public func record(_ articles: [ArticleReading], site: BridgeSite) async throws(BridgeFailure) -> Int {
        var states: [String: ReadingState] = [:]
        for a in articles {
            switch a.state {
            case .read: states[a.id] = .read
            case .unread: states[a.id] = .unread
            case .partial: states[a.id] = .partRead(progress: a.progress ?? 0)
            }
        }
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
    public init(access: PartitionAccess, onChange: @escaping @Sendable (BridgeSite) -> Void = { _ in }) {
        self.access = access
        self.onChange = onChange
    }
    public static let key = ScheduleDocument.storageKey
    public func schedule(site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        guard let text = try access.with(site, { p throws(PartitionError) in try p.storage.getItem(Self.key) }) else { return ScheduleDocument() }
        do { return try ScheduleDocument(text: text, path: Self.key) } catch {
            throw BridgeFailure(.internal, "the stored schedule is refused (\(error)); write a valid one with schedule.set")
        }
    }
    public func setSchedule(_ schedule: ScheduleDocument, site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        let text = schedule.text
        try access.with(site) { p throws(PartitionError) in try p.storage.setItem(Self.key, text) }
        onChange(site)
        return schedule
    }
}

/// The vault ops on the store's vault library. `vault` names a registered vault; when absent,
/// the only registered vault (or the one named `default`).
public struct LibraryVaultService: VaultService {
    public let library: VaultLibrary
    public init(library: VaultLibrary) { self.library = library }

    func vault(_ name: String?) throws(BridgeFailure) -> (String, Vault) {
        do {
            let records = try library.records()
            let chosen = name ?? (records.count == 1 ? records[0].name : (records.contains { $0.name == "default" } ? "default" : nil))
            guard let chosen else { throw BridgeFailure(.notConfigured, "no vault chosen: pass args.vault, or register one vault (`sitekeep vault add`)") }
            return (chosen, try library.vault(named: chosen))
        } catch let e as BridgeFailure { throw e } catch let e as VaultError { throw BridgeFailure(vault: e) } catch {
            throw BridgeFailure(.internal, "vault failure")
        }
    }

    public func status(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultStatus {
        let (name, v) = try self.vault(vault)
        do {
            let s = try v.status()
            return BridgeVaultStatus(vault: name, state: .clean, head: s.headCommit.map { "\($0)" }, files: try v.list(path: nil).count)
        } catch { throw BridgeFailure(vault: error) }
    }
    public func list(vault: String?, path: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeVaultEntry] {
        let (_, v) = try self.vault(vault)
        do { return try v.list(path: path).map { BridgeVaultEntry(path: $0.path.string, kind: .file, size: $0.size) } } catch { throw BridgeFailure(vault: error) }
    }
    public func load(vault: String?, path: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8] {
        let (_, v) = try self.vault(vault)
        do { return try v.read(path: path) } catch { throw BridgeFailure(vault: error) }
    }
    public func save(vault: String?, path: String, content: [UInt8], site: BridgeSite) async throws(BridgeFailure) -> String {
        throw BridgeFailure(.notConfigured, "writing to vaults arrives with the vault client's part 2")
    }
}

