import Foundation
internal import SiteKeepBridge
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepPartitions
internal import SiteKeepVault

// The daemon's bridge services on the real layers: the site registry and its partitions,
// custody, and the vault library. Each adapter is small; the dispatcher routes to it.

extension BridgeFailure {
    init(partition error: PartitionError) {
        switch error {
        case .quotaExceeded: self.init(.quotaExceeded, error.description)
        case .keyTooLong, .valueTooLarge, .invalidValue: self.init(.tooLarge, error.description)
        case .keyUnavailable: self.init(.locked, "this site's data needs SiteKeep unlocked; run `sitekeep unlock`")
        case .unknownSite, .siteRemoved: self.init(.notFound, error.description)
        default: self.init(.internal, error.description)
        }
    }

    init(vault error: VaultError) {
        switch error {
        case .notFound, .unknownVault: self.init(.notFound, error.description)
        case .invalidPath: self.init(.badRequest, error.description)
        case .keysUnavailable: self.init(.locked, error.description)
        default: self.init(.internal, error.description)
        }
    }
}

/// Runs `body` on the bridge site's own partition (opened per call; closed after).
struct PartitionAccess: Sendable {
    let registry: SiteRegistry
    func with<R>(_ site: BridgeSite, _ body: (Partition) throws(PartitionError) -> R) throws(BridgeFailure) -> R {
        do {
            let id = try SiteID(parsing: site.id)
            let p = try registry.openPartition(forIdentifier: id)
            defer { p.close() }
            return try body(p)
        } catch { throw BridgeFailure(partition: error) }
    }
}

struct PartitionStorageService: StorageService {
    let access: PartitionAccess
    func value(forKey key: String, site: BridgeSite) async throws(BridgeFailure) -> String? { try access.with(site) { p throws(PartitionError) in try p.storage.getItem(key) } }
    func setValue(_ value: String, forKey key: String, site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.setItem(key, value) } }
    func removeValue(forKey key: String, site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.removeItem(key) } }
    func keys(site: BridgeSite) async throws(BridgeFailure) -> [String] { try access.with(site) { p throws(PartitionError) in try p.storage.keys() } }
    func clear(site: BridgeSite) async throws(BridgeFailure) { try access.with(site) { p throws(PartitionError) in try p.storage.clear() } }
}

struct PartitionTabsService: TabsService {
    let access: PartitionAccess
    func session(site: BridgeSite) async throws(BridgeFailure) -> TabSession {
        try access.with(site) { p throws(PartitionError) -> TabSession in
            guard let s = try p.tabs.session() else { return TabSession() }
            let tabs = s.tabs.map { SessionTab(url: $0.url, title: $0.title.isEmpty ? nil : $0.title, scroll: $0.scrollY) }
            return TabSession(tabs: tabs, active: s.lastTabID.flatMap { id in s.tabs.firstIndex { $0.id == id } })
        }
    }
    func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure) {
        let tabs = session.tabs.enumerated().map { TabState(id: "t\($0.offset)", url: $0.element.url, title: $0.element.title ?? "", scrollY: $0.element.scroll ?? 0) }
        let state = SessionState(tabs: tabs, lastTabID: session.active.flatMap { $0 < tabs.count ? tabs[$0].id : nil })
        try access.with(site) { p throws(PartitionError) in try p.tabs.setSession(state) }
    }
}

struct PartitionReadingService: ReadingService {
    let access: PartitionAccess
    func readingStates(site: BridgeSite) async throws(BridgeFailure) -> [ArticleReading] {
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
    func record(_ articles: [ArticleReading], site: BridgeSite) async throws(BridgeFailure) -> Int {
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

/// The schedule (`nr.schedule.v1`, as the sites keep it in localStorage) in the site's storage.
struct PartitionScheduleService: ScheduleService {
    let access: PartitionAccess
    static let key = "nr.schedule.v1"
    func schedule(site: BridgeSite) async throws(BridgeFailure) -> Schedule {
        guard let text = try access.with(site, { p throws(PartitionError) in try p.storage.getItem(Self.key) }),
              let value = try? JSONParser.parse(text, limits: .message) else { return Schedule() }
        // Picks written by the page itself may carry `at` as a number; the bridge's shape is a string.
        let picks = (value["picks"]?.arrayValue ?? []).compactMap { p -> SchedulePick? in
            guard let id = p["id"]?.stringValue else { return nil }
            let at = p["at"]?.stringValue ?? p["at"]?.intValue.map { String($0) } ?? ""
            return SchedulePick(id: id, at: at)
        }
        return Schedule(picks: picks)
    }
    func setSchedule(_ schedule: Schedule, site: BridgeSite) async throws(BridgeFailure) -> Schedule {
        let text = JSONSerializer.string(schedule.json)
        try access.with(site) { p throws(PartitionError) in try p.storage.setItem(Self.key, text) }
        return schedule
    }
}

/// Planned notifications, kept in the site's storage for the desktop notifier to pick up.
struct PartitionNotifyService: NotifyService {
    let access: PartitionAccess
    func plan(_ notifications: [PlannedNotification], site: BridgeSite) async throws(BridgeFailure) -> Int {
        let value: JSONValue = .array(notifications.map { n in
            ["id": .string(n.id), "at": .string(n.at), "title": .string(n.title), "body": .string(n.body)]
        })
        let text = JSONSerializer.string(value)
        try access.with(site) { p throws(PartitionError) in try p.storage.setItem("sitekeep.notify.plan", text) }
        return notifications.count
    }
}

/// The vault ops on the store's vault library. `vault` names a registered vault; when absent,
/// the only registered vault (or the one named `default`).
struct LibraryVaultService: VaultService {
    let library: VaultLibrary

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

    func status(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultStatus {
        let (name, v) = try self.vault(vault)
        do {
            let s = try v.status()
            return BridgeVaultStatus(vault: name, state: .clean, head: s.headCommit.map { "\($0)" }, files: try v.list(path: nil).count)
        } catch { throw BridgeFailure(vault: error) }
    }
    func list(vault: String?, path: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeVaultEntry] {
        let (_, v) = try self.vault(vault)
        do { return try v.list(path: path).map { BridgeVaultEntry(path: $0.path.string, kind: .file, size: $0.size) } } catch { throw BridgeFailure(vault: error) }
    }
    func load(vault: String?, path: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8] {
        let (_, v) = try self.vault(vault)
        do { return try v.read(path: path) } catch { throw BridgeFailure(vault: error) }
    }
    func save(vault: String?, path: String, content: [UInt8], site: BridgeSite) async throws(BridgeFailure) -> String {
        throw BridgeFailure(.notConfigured, "writing to vaults arrives with the vault client's part 2")
    }
}

enum DaemonServices {
    /// The services of `store` for the bridge.
    static func make(_ store: StoreContext, teamKeyID: String?, environment: [String: String]) throws -> BridgeServices {
        let registry = try SiteCommands.registry(store)
        let access = PartitionAccess(registry: registry)
        var presence: (any PresenceService)? = nil
        if let verifier = try? AskpassPresenceVerifier.fromEnvironment(environment) {
            presence = CustodyPresenceService(window: PresenceWindow(verifier: verifier))
        }
        let team = teamKeyID ?? (try? store.custodian.listTeamKeys().first?.id) ?? nil
        return BridgeServices(
            sites: RegistrySiteResolver(registry: registry),
            presence: presence,
            storage: PartitionStorageService(access: access),
            tabs: PartitionTabsService(access: access),
            reading: PartitionReadingService(access: access),
            schedule: PartitionScheduleService(access: access),
            notify: PartitionNotifyService(access: access),
            identity: team.map { CustodyIdentityService(custodian: store.custodian, teamKeyID: $0) },
            signing: CustodySigningService(custodian: store.custodian),
            vault: LibraryVaultService(library: VaultCommands.library(store)))
    }
}
