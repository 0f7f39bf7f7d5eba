public import Foundation
import Glibc
import Synchronization
public import SiteKeepCustody
import SiteKeepJSON
import SiteKeepSystem
public import SiteKeepVocabulary

/// A registered site. Stored in `sites.json` by ``RegistryFormat``.
public struct Site: Sendable, Hashable {
    /// The stable identifier; also the name of the site's folder.
    public let id: SiteID
    /// The name shown to the user.
    public var displayName: String
    /// The origins that belong to the site, canonical. A subdomain is another origin unless listed.
    public var origins: [Origin]
    /// Whether the site is app-bound (may use the bridge, is never purged). At most ten.
    public var isAppBound: Bool
    /// How the site's storage key is protected.
    public var protection: ProtectionClass
    /// When the site was added.
    public var createdAt: Date
    /// When a partition of the site was last opened (for purging least recently used sites).
    public var lastUsedAt: Date
    /// The bridge ops the user granted this site beyond the catalogue's allow-lists (`sitekeep
    /// site grant`), sorted. The registry keeps names only; the bridge decides which ops may be
    /// granted and applies a grant to this site alone. Absent in a store from before grants.
    public var grants: [String] = []
    /// The programs besides the SiteKeep browser that may bind the site's bridge connections
    /// (`sitekeep site host add`), in the order added. Absent in a store from before hosts.
    public var hosts: [SiteHost] = []
    /// Custody's tag over ``taggedBytes``, made by this store's registry after the approval that
    /// changed the entry; nil for an entry written by hand or by a SiteKeep from before tags
    /// (``SiteRecordStanding``).
    public var tag: [UInt8]? = nil
}

extension Site {
    /// The most ops one site may be granted, and the longest op name.
    public static let maximumGrants = 64
    /// The most hosts one site may have besides the SiteKeep browser.
    public static let maximumHosts = 16
    static let maximumOpNameBytes = OpName.maximumLength

    /// Whether `op` has the form of a bridge op name: lower-case words (a–z, 0–9) joined by dots
    /// (the vocabulary's rule, ``OpName``).
    public static func isOpName(_ op: String) -> Bool { OpName.isValid(op) }
}

extension Site {
    /// Whether `other` gives the same access as this site: same origins, app-bound flag and
    /// protection class. A registry closes a site's open partition when this stops holding.
    public func grantsSameAccess(as other: Site) -> Bool {
        id == other.id && origins == other.origins && isAppBound == other.isAppBound && protection == other.protection
    }

    /// One line for listings: identifier, flags, protection, name and origins.
    public var summary: String {
        "\(id)  \(isAppBound ? "app-bound" : "         ")  \(protection.rawValue)  \(displayName)  \(origins.map(\.serialized).joined(separator: " "))"
    }
}

private final class RegistryState {
    var sites: [SiteID: Site]
    /// The version of sites.json `sites` came from.
    var file: RegistryFileView
    /// Bumped whenever `sites` changes (a read of a changed file, or a write).
    var generation: UInt64 = 1
    /// The daemon's inotify watch, when ``SiteRegistry/watchForChanges()`` made one.
    var watch: ChangeWatch?
    var open: [SiteID: (core: PartitionCore, handles: Int)] = [:]
    /// Partitions closed under the lock whose observers are still to be told.
    var closed: [SiteID] = []
    /// Sites seen removed (here, or by a re-read) under the lock whose observers are still to be told.
    var removed: [SiteID] = []
    /// Whether each site's entry is authentic (``SiteRecordStanding``); a site not listed is.
    var standing: [SiteID: SiteRecordStanding] = [:]
    /// Whether some entry could not be checked (SiteKeep was locked): looked at again while unlocked.
    var anyUnchecked = false
    /// Entries (tagged bytes, then tag) whose tag verified or that this registry tagged: plain
    /// data, no key, so each entry costs one check per process.
    var verified: Set<[UInt8]> = []
    init(sites: [SiteID: Site], file: RegistryFileView) {
        self.sites = sites
        self.file = file
    }
}

/// The site registry and the owner of every open partition of one store home.
///
/// Layout under `home` (created 0700): `sites.json` (0600, written atomically), its lock
/// `sites.json.lock` (0600) and `sites/<uuid>/partition.sqlite` (folder 0700, files 0600).
///
/// Several processes share one home (the daemon, CLI commands), so the registry never trusts a
/// view it read earlier:
/// - Every read first looks whether `sites.json` changed (``RegistryFileStamp``: one `stat`, or
///   with ``watchForChanges()`` one non-blocking inotify `read`) and re-reads it if so.
/// - Every read-modify-write (add, remove, `lastUsedAt`) takes `sites.json.lock` (`flock`),
///   re-reads the file under it and writes the result, so no process writes back a stale view.
/// - When a re-read shows a site gone, or its origins, app-bound flag or protection changed, its
///   open partition is closed at once: handles then throw ``PartitionError/siteRemoved(_:)`` or
///   ``PartitionError/partitionClosed``.
/// A damaged `sites.json` found by a re-read leaves the last good view in place for reads (writes
/// refuse with ``PartitionError/registryDamaged(_:)``).
///
/// Every entry's origins, app-bound flag, protection, grants and hosts carry custody's record
/// tag (``Site/taggedBytes``), made by this registry when it writes a change (after the approval
/// that allowed it) and checked when it reads one: ``standing(of:)`` says whether an entry is
/// authentic. An entry written by hand, or by a SiteKeep from before tags, is not: the bridge
/// ignores it (``authenticSites()``), changes to it are refused, and ``approve(_:)``
/// (`sitekeep site approve`, after the user's approval) tags it as it stands. While SiteKeep is
/// locked a changed entry cannot be checked: it stays ignored until a look while unlocked.
///
/// Thread-safe: all state sits behind one `Mutex`.
public final class SiteRegistry: Sendable {
    /// The most sites that may be app-bound (as `WKAppBoundDomains`).
    public static let maximumAppBoundSites = 10

    /// The store home.
    public let home: URL
    /// `<home>/sites.json` and its lock, as paths (formed once: every read looks at the first).
    let registryPath: String
    let lockPath: String
    /// Limits every partition of this store enforces.
    public let limits: PartitionLimits
    let keys: any SiteStorageKeyProvider
    /// Makes and checks entries' tags: the key provider, when it is one (custody); nil (test
    /// stores with in-memory keys): entries carry no tags and all are taken as they are.
    let records: (any SiteRecordAuthenticator)?
    let faults: AuditFaults
    private let state: Mutex<RegistryState>
    private let closeObservers = Mutex<[@Sendable (SiteID) -> Void]>([])
    private let removalObservers = Mutex<[@Sendable (SiteID) -> Void]>([])

    /// Opens (or creates) the registry in `home`.
    /// - Throws: ``PartitionError/registryDamaged(_:)`` when `sites.json` cannot be read.
    public convenience init(home: URL, keys: any SiteStorageKeyProvider, limits: PartitionLimits = PartitionLimits()) throws(PartitionError) {
        try self.init(home: home, keys: keys, limits: limits, faults: [])
    }

    /// As the public initialiser, with checks switched off for the isolation audit's own tests.
    package init(home: URL, keys: any SiteStorageKeyProvider, limits: PartitionLimits = PartitionLimits(), faults: AuditFaults) throws(PartitionError) {
        self.home = home
        registryPath = home.appendingPathComponent("sites.json").path
        lockPath = registryPath + ".lock"
        self.keys = keys
        records = keys as? any SiteRecordAuthenticator
        self.limits = limits
        self.faults = faults
        // Parents are created as needed (with the default mode); the home itself is 0700.
        try? PrivateFolder.makeParents(of: home.path)
        try Self.makePrivateDirectory(home.path, tighten: false)
        try Self.makePrivateDirectory(home.appendingPathComponent("sites").path)
        let (sites, file) = try Self.read(registryPath)
        let st = RegistryState(sites: sites, file: file)
        Self.judge(st, records)
        state = Mutex(st)
        // The lock file exists from the start, so taking it later changes no file listing.
        try RegistryFileLock.create(lockPath)
    }


    /// Reads `sites.json` (an absent file is an empty registry) and keeps it open.
    /// - Throws: ``PartitionError/registryDamaged(_:)`` when it cannot be parsed.
    private static func read(_ path: String) throws(PartitionError) -> ([SiteID: Site], RegistryFileView) {
        // O_NONBLOCK: a FIFO or a device in its place is refused below instead of blocking open.
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            if Errno.current == .noSuchFileOrDirectory { return ([:], RegistryFileView()) }
            throw .registryDamaged("sites.json cannot be opened (\(Errno.current))")
        }
        let view = RegistryFileView(fd: fd)
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw .registryDamaged("sites.json is not a regular file; move it away and restore the registry from a backup")
        }
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && Errno.current == .interrupted { continue }
            if n < 0 { throw .registryDamaged("sites.json cannot be read (\(Errno.current))") }
            if n == 0 { break }
            data.append(contentsOf: chunk[0..<n])
            // Past the parser's limit: refused by it without reading the rest.
            if data.count > JSONLimits.document.maxBytes { break }
        }
        var sites: [SiteID: Site] = [:]
        for s in try RegistryFormat.decoded(data) { sites[s.id] = s }
        return (sites, view)
    }

    // MARK: - Seeing other processes' changes

    /// Makes this registry notice changes to `sites.json` through an inotify watch on the home
    /// (one non-blocking `read` per look instead of a `stat`), and close the partition of a
    /// removed or changed site within moments even while nobody asks (a thread waits on the
    /// watch). For a long-running process: the daemon calls it once. Without inotify it changes
    /// nothing (each look is then a `stat`).
    public func watchForChanges() {
        guard let watch = state.withLock({ (st: inout RegistryState) -> ChangeWatch? in
            // An inotify watch on the home: whether anything there changed, for one read.
            guard st.watch == nil, let w = ChangeWatch(folders: [home.path]) else { return nil }
            st.watch = w
            return w
        }) else { return }
        Thread.detachNewThread { [weak self] in
            while true {
                let news = watch.waitForNews(milliseconds: 1000)
                guard let self, self.state.withLock({ $0.watch === watch }) else { return }
                if news { self.refresh() }
            }
        }
    }

    /// Re-reads `sites.json` if it changed since this registry last looked (see the type's
    /// discussion); every read of the registry does this first.
    public func refresh() { current { _ in } }

    /// A number that changes whenever this registry's view of the sites changes, after a look
    /// for changes: a caller may keep what it derived from the sites until it differs.
    public var generation: UInt64 { current { $0.generation } }

    /// Calls `observer` with the site of every partition this registry closes because the site
    /// was removed or changed (here or, seen by a re-read, in another process). It runs on the
    /// thread that noticed, after the registry's lock is released; as that thread may be inside
    /// its caller's own locks, an observer that takes locks should hand the work to a queue.
    public func onPartitionClosed(_ observer: @escaping @Sendable (SiteID) -> Void) {
        closeObservers.withLock { $0.append(observer) }
    }

    /// Calls `observer` with every site this registry sees removed, whether its partition was
    /// open or not: by ``remove(forIdentifier:force:)`` here, by a purge, or (seen by a re-read)
    /// in another process. It runs as ``onPartitionClosed(_:)``'s observers do (on the thread that
    /// noticed, after the registry's lock is released), so one that takes locks should hand the
    /// work to a queue. A removed site's id is never given again, so what was kept under it can go.
    public func onSiteRemoved(_ observer: @escaping @Sendable (SiteID) -> Void) {
        removalObservers.withLock { $0.append(observer) }
    }

    /// Runs `body` on the current view (after a look for changes) under the registry's lock, then
    /// tells the observers of ``onPartitionClosed(_:)`` which partitions were closed meanwhile and
    /// those of ``onSiteRemoved(_:)`` which sites were removed.
    private func current<R: Sendable, E: Error>(_ body: @Sendable (RegistryState) throws(E) -> R) throws(E) -> R {
        let (result, closed, removed) = state.withLock { st -> (Result<R, E>, [SiteID], [SiteID]) in
            look(st)
            let result = Result { () throws(E) -> R in try body(st) }
            defer { st.closed.removeAll(); st.removed.removeAll() }
            return (result, st.closed, st.removed)
        }
        if !closed.isEmpty {
            let observers = closeObservers.withLock { $0 }
            for id in closed { for o in observers { o(id) } }
        }
        if !removed.isEmpty {
            let observers = removalObservers.withLock { $0 }
            for id in removed { for o in observers { o(id) } }
        }
        return try result.get()
    }

    /// The look behind every read: cheap when nothing changed.
    private func look(_ st: RegistryState) {
        // Entries read while locked are checked at the first look while unlocked.
        if st.anyUnchecked, records?.canCheckSiteRecordTags == true, Self.judge(st, records) { st.generation &+= 1 }
        if let watch = st.watch {
            switch watch.drain() {
            case .none: return
            case .something: break
            case .lost: st.watch = nil
            }
        }
        guard RegistryFileStamp.current(registryPath) != st.file.stamp else { return }
        try? reload(st)
    }

    /// Reads `sites.json` afresh (whether or not it changed) and closes the partitions of sites
    /// that are gone or grant other access now.
    private func reload(_ st: RegistryState) throws(PartitionError) {
        let (sites, file) = try Self.read(registryPath)
        let old = st.sites
        st.file = file
        guard sites != old else { return }
        st.sites = sites
        Self.judge(st, records)
        st.generation &+= 1
        st.removed += old.keys.filter { sites[$0] == nil }
        for (id, entry) in st.open {
            guard let before = old[id] else { continue }
            if let now = sites[id] {
                if now.grantsSameAccess(as: before) { continue }
                entry.core.shutdown(removed: false)
            } else {
                entry.core.shutdown(removed: true)
            }
            st.open[id] = nil
            st.closed.append(id)
        }
    }

    /// Decides every entry's standing (``SiteRecordStanding``), checking each tag not checked
    /// before in this process. Returns whether a standing changed.
    @discardableResult
    private static func judge(_ st: RegistryState, _ records: (any SiteRecordAuthenticator)?) -> Bool {
        guard let records else { return false }
        var standing: [SiteID: SiteRecordStanding] = [:]
        for (id, site) in st.sites {
            guard let tag = site.tag else { standing[id] = .untagged; continue }
            let bytes = site.taggedBytes
            if st.verified.contains(bytes + tag) { continue }
            switch records.isValidSiteRecordTag(tag, for: bytes) {
            case true?:
                if st.verified.count >= 4096 { st.verified.removeAll() }
                st.verified.insert(bytes + tag)
            case false?: standing[id] = .tagMismatch
            case nil: standing[id] = .unchecked
            }
        }
        defer { st.standing = standing; st.anyUnchecked = standing.values.contains(.unchecked) }
        return standing != st.standing
    }

    /// Tags `site` (an entry this registry is about to write, after the approval that allowed
    /// the change) and marks it authentic. Without an authenticator, entries carry no tags.
    /// - Throws: ``PartitionError/keyUnavailable(_:)`` while SiteKeep is locked.
    private func tagged(_ site: Site, _ st: RegistryState) throws(PartitionError) -> Site {
        guard let records else { return site }
        var s = site
        let bytes = s.taggedBytes
        let tag = try records.siteRecordTag(for: bytes)
        s.tag = tag
        st.verified.insert(bytes + tag)
        st.standing[s.id] = nil
        return s
    }

    /// Runs `body` under the registry's file lock on a fresh read of `sites.json`; `body` writes
    /// with ``persist(_:)``. With `wait` false, returns nil at once when another process holds the lock.
    private func underFileLock<R>(_ st: RegistryState, wait: Bool = true,
                                  _ body: (RegistryState) throws(PartitionError) -> R) throws(PartitionError) -> R? {
        try RegistryFileLock.holding(lockPath, wait: wait) { () throws(PartitionError) -> R in
            try reload(st)
            return try body(st)
        }
    }

    /// Creates `path` (0700) if absent. An existing folder open to others is tightened only when
    /// it is one of the registry's own folders inside the store (`tighten`); a folder the caller
    /// named (the store home) is refused instead: SiteKeep never changes the mode of a folder it
    /// did not create.
    static func makePrivateDirectory(_ path: String, tighten: Bool = true) throws(PartitionError) {
        do { try PrivateFolder.make(path) } catch { throw .storageFailure("\(error)") }
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR else {
            throw .storageFailure("\(path) is not a directory")
        }
        guard st.st_uid == getuid() else { throw .storageFailure("\(path) is not owned by you") }
        if st.st_mode & 0o077 != 0 {
            guard tighten else {
                throw .storageFailure("\(path) is open to other users; use a private folder (chmod 700 \(path)) for the store")
            }
            chmod(path, 0o700)
        }
    }

    func folder(_ id: SiteID) -> String { home.appendingPathComponent("sites").appendingPathComponent(id.string).path }
    func databasePath(_ id: SiteID) -> String { folder(id) + "/partition.sqlite" }

    // MARK: - Sites

    /// Registers a site and creates its partition (folder, database, storage key).
    ///
    /// - Parameters:
    ///   - displayName: 1–100 characters, no control characters.
    ///   - origins: at least one; each parsed with ``Origin/init(parsing:)``; none may belong to another site.
    ///   - appBound: at most ``maximumAppBoundSites`` sites may be.
    ///   - protection: how the storage key is protected.
    /// - Returns: The new site.
    @discardableResult
    /// - Parameter hosts: programs besides the SiteKeep browser that may bind the site's bridge
    ///   connections (an app-bound site's only).
    public func add(displayName: String, origins: [String], appBound: Bool, protection: ProtectionClass = .afterLogin,
                    hosts: [SiteHost] = []) throws(PartitionError) -> Site {
        try add(displayName: displayName, origins: origins, appBound: appBound, protection: protection, identifier: .random(), hosts: hosts)
    }

    /// As ``add(displayName:origins:appBound:protection:hosts:)`` with a chosen identifier (tests, restore).
    package func add(displayName: String, origins: [String], appBound: Bool, protection: ProtectionClass, identifier: SiteID,
                     hosts: [SiteHost] = []) throws(PartitionError) -> Site {
        guard appBound || hosts.isEmpty else {
            throw .invalidValue("only an app-bound site has hosts: the bridge is for app-bound sites")
        }
        guard hosts.count <= Site.maximumHosts else { throw .invalidValue("a site may have at most \(Site.maximumHosts) hosts") }
        let name = displayName.trimmingCharacters(in: .whitespaces)
        if name.isEmpty || name.count > 100 { throw .invalidDisplayName("it must be 1 to 100 characters") }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }) {
            throw .invalidDisplayName("it must not contain control characters")
        }
        if origins.isEmpty { throw .noOrigins }
        var parsed: [Origin] = []
        for text in origins {
            do { parsed.append(try Origin(parsing: text)) } catch { throw .invalidOrigin(error) }
        }
        var distinct: [Origin] = []
        for o in parsed where !distinct.contains(o) { distinct.append(o) }
        let unique = distinct
        let now = Date(timeIntervalSince1970: Clocks.wallSeconds())
        var distinctHosts: [SiteHost] = []
        for h in hosts where !distinctHosts.contains(where: { $0.path == h.path }) { distinctHosts.append(h) }
        let site = Site(id: identifier, displayName: name, origins: unique, isAppBound: appBound, protection: protection, createdAt: now, lastUsedAt: now,
                        hosts: distinctHosts)

        // Under the file lock on a fresh read: two processes adding at once both land, and the
        // origin and app-bound checks see every site another process added.
        let added = try current { (st: RegistryState) throws(PartitionError) -> Site? in try underFileLock(st) { (st: RegistryState) throws(PartitionError) -> Site in
            if st.sites[identifier] != nil { throw PartitionError.siteExists(identifier.string) }
            for o in unique {
                if let owner = st.sites.values.first(where: { $0.origins.contains(o) }) {
                    throw PartitionError.originInUse(origin: o.serialized, site: owner.id.string)
                }
            }
            if appBound && st.sites.values.filter(\.isAppBound).count >= Self.maximumAppBoundSites {
                throw PartitionError.appBoundLimitReached(limit: Self.maximumAppBoundSites)
            }
            // The entry is tagged before anything is made: an app-bound site's needs the unlock.
            // One that is not app-bound binds nothing whatever it says, so added while locked it
            // goes untagged (and stays off the bridge, as it would anyway).
            let entry = appBound ? try tagged(site, st) : ((try? tagged(site, st)) ?? site)
            // Create the partition first; only a complete partition is registered.
            let dir = folder(identifier)
            if FileManager.default.fileExists(atPath: dir) { try? FileManager.default.removeItem(atPath: dir) }
            try Self.makePrivateDirectory(dir)
            do throws(PartitionError) {
                let key: SymmetricKeyHandle
                do { key = try keys.storageKey(forSite: identifier.string, protection: protection) }
                catch { throw PartitionError.keyUnavailable("\(error)") }
                let core = try PartitionCore.open(site: identifier, path: databasePath(identifier), key: key, create: true, limits: limits, faults: faults)
                core.shutdown(removed: false)
                st.sites[identifier] = entry
                try persist(st)
            } catch {
                st.sites[identifier] = nil
                try? FileManager.default.removeItem(atPath: dir)
                throw error
            }
            return entry
        } }
        guard let added else { throw .storageFailure("the registry lock was not taken") }
        return added
    }

    /// Whether the site's entry in `sites.json` is authentic (``SiteRecordStanding``); an unknown
    /// site's is ``SiteRecordStanding/untagged``.
    public func standing(of id: SiteID) -> SiteRecordStanding {
        current { st in st.sites[id] == nil ? .untagged : (st.standing[id] ?? .authentic) }
    }

    /// Every site whose entry is not authentic, with its standing (for `doctor` and the log),
    /// sorted by identifier.
    public func sitesNotAuthentic() -> [(site: Site, standing: SiteRecordStanding)] {
        current { st in st.standing.compactMap { id, s in st.sites[id].map { ($0, s) } }.sorted { $0.site.id < $1.site.id } }
    }

    /// The sites whose entries are authentic, sorted by identifier: all that binds a bridge
    /// connection or opens an op (``RegistrySiteResolver`` reads only these).
    public func authenticSites() -> [Site] {
        current { st in st.sites.values.filter { st.standing[$0.id] == nil }.sorted { $0.id < $1.id } }
    }

    /// Tags the site's entry as `shown` to the user (`sitekeep site approve`, after the user's
    /// approval of what it says), so its origins, hosts and grants apply; returns it.
    /// - Throws: ``PartitionError/unknownSite(_:)``; ``PartitionError/invalidValue(_:)`` when the
    ///   entry in the file is no longer what was shown; ``PartitionError/keyUnavailable(_:)`` while locked.
    @discardableResult
    public func approve(_ shown: Site) throws(PartitionError) -> Site {
        let id = shown.id
        let written = try current { (st: RegistryState) throws(PartitionError) -> Site? in try underFileLock(st) { (st: RegistryState) throws(PartitionError) -> Site in
            guard let site = st.sites[id] else { throw PartitionError.unknownSite(id.string) }
            // What the user approved, not what the file says by now.
            guard site.taggedBytes == shown.taggedBytes else {
                throw PartitionError.invalidValue("the entry of \(shown.displayName) in sites.json changed while you were asked; nothing was approved: run the command again and check what it shows")
            }
            let entry = try tagged(site, st)
            st.sites[id] = entry
            try persist(st)
            return entry
        } }
        guard let written else { throw .storageFailure("the registry lock was not taken") }
        return written
    }

    /// The identifiers of all sites, sorted.
    public func identifiers() -> [SiteID] { current { $0.sites.keys.sorted() } }

    /// All sites, sorted by identifier.
    public func sites() -> [Site] { current { $0.sites.values.sorted { $0.id < $1.id } } }

    /// The site with `id`, or nil.
    public func site(forIdentifier id: SiteID) -> Site? { current { $0.sites[id] } }

    /// The site that lists `origin` (canonical forms compared for equality), or nil.
    public func site(forOrigin origin: Origin) -> Site? { site(forOrigin: origin, authenticOnly: false) }

    /// The site whose authentic entry lists `origin` (``standing(of:)``), or nil: an entry
    /// written by hand neither resolves nor shadows an authentic one listing the same origin.
    public func authenticSite(forOrigin origin: Origin) -> Site? { site(forOrigin: origin, authenticOnly: true) }

    private func site(forOrigin origin: Origin, authenticOnly: Bool) -> Site? {
        #if SITEKEEP_FAULTS
        let ignorePort = faults.contains(.originMatchIgnoresPort)
        #else
        let ignorePort = false
        #endif
        return current { st in
            st.sites.values.sorted { $0.id < $1.id }.first { site in
                guard !authenticOnly || st.standing[site.id] == nil else { return false }
                return site.origins.contains { o in
                    ignorePort ? (o.scheme == origin.scheme && o.host == origin.host) : o == origin
                }
            }
        }
    }

    /// Parses `text` as an origin and returns the site that lists it, or nil.
    /// - Throws: ``PartitionError/invalidOrigin(_:)`` when `text` is not an origin.
    public func site(forOrigin text: String) throws(PartitionError) -> Site? {
        do { return site(forOrigin: try Origin(parsing: text)) } catch { throw .invalidOrigin(error) }
    }

    // MARK: - Partitions

    /// Opens a handle on the site's partition (shared connection, counted handles).
    /// - Throws: ``PartitionError/unknownSite(_:)``; ``PartitionError/damaged(site:reason:)`` when
    ///   the partition is missing, fails its integrity check or its sealed header.
    public func openPartition(forIdentifier id: SiteID) throws(PartitionError) -> Partition {
        let core = try current { (st: RegistryState) throws(PartitionError) -> PartitionCore in
            guard let site = st.sites[id] else { throw PartitionError.unknownSite(id.string) }
            if let entry = st.open[id] {
                st.open[id] = (entry.core, entry.handles + 1)
                return entry.core
            }
            let key: SymmetricKeyHandle
            do { key = try keys.storageKey(forSite: id.string, protection: site.protection) }
            catch { throw PartitionError.keyUnavailable("\(error)") }
            let core = try PartitionCore.open(site: id, path: databasePath(id), key: key, create: false, limits: limits, faults: faults)
            st.open[id] = (core, 1)
            let now = Date(timeIntervalSince1970: Clocks.wallSeconds())
            if now.timeIntervalSince(site.lastUsedAt) > 60 {
                // On a fresh read under the file lock, changing only this site's lastUsedAt; if
                // another process holds the lock, the update waits for a later open.
                _ = try? underFileLock(st, wait: false) { (st: RegistryState) throws(PartitionError) in
                    guard var fresh = st.sites[id] else { return }
                    fresh.lastUsedAt = now
                    st.sites[id] = fresh
                    try persist(st)
                }
            }
            return core
        }
        return Partition(core: core) { [weak self] in self?.release(id, core: core) }
    }

    private func release(_ id: SiteID, core: PartitionCore) {
        state.withLock { st in
            guard let entry = st.open[id], entry.core === core else { return }
            if entry.handles <= 1 {
                st.open[id] = nil
                core.shutdown(removed: false)
            } else {
                st.open[id] = (core, entry.handles - 1)
            }
        }
    }

    /// The number of open handles on the site's partition (0 when closed).
    public func openHandles(forIdentifier id: SiteID) -> Int { current { $0.open[id]?.handles ?? 0 } }

    /// Removes a site: destroys its storage key first (crypto-shredding), then its files, then
    /// its registry entry.
    ///
    /// - Parameter force: remove even while partition handles are open; they then throw
    ///   ``PartitionError/siteRemoved(_:)``.
    /// - Throws: ``PartitionError/siteInUse(site:openHandles:)`` when handles are open and not forced;
    ///   ``PartitionError/keyUnavailable(_:)`` when the key cannot be destroyed (then nothing is deleted).
    public func remove(forIdentifier id: SiteID, force: Bool = false) throws(PartitionError) {
        _ = try current { (st: RegistryState) throws(PartitionError) in try underFileLock(st) { (st: RegistryState) throws(PartitionError) in
            guard let site = st.sites[id] else { throw PartitionError.unknownSite(id.string) }
            if let entry = st.open[id] {
                if !force { throw PartitionError.siteInUse(site: id.string, openHandles: entry.handles) }
                entry.core.shutdown(removed: true)
                st.open[id] = nil
                st.closed.append(id)
            }
            do { try keys.destroyStorageKey(forSite: id.string, protection: site.protection) }
            catch { throw PartitionError.keyUnavailable("\(error)") }
            do { try FileManager.default.removeItem(atPath: folder(id)) } catch {
                if FileManager.default.fileExists(atPath: folder(id)) {
                    throw PartitionError.storageFailure("the key was destroyed but the folder \(folder(id)) could not be deleted; delete it by hand")
                }
            }
            st.sites[id] = nil
            try persist(st)
            st.removed.append(id)
        } }
    }

    /// The folder a web-view host keeps the site's web data in (its web engine's data and cache,
    /// kept pages): `sites/<uuid>/web`, inside the site's own folder, so removing the site removes
    /// it too. Created 0700 when absent.
    /// - Throws: ``PartitionError/unknownSite(_:)`` when no such site is registered.
    public func webFolder(forIdentifier id: SiteID) throws(PartitionError) -> String {
        guard site(forIdentifier: id) != nil else { throw .unknownSite(id.string) }
        let path = folder(id) + "/web"
        try Self.makePrivateDirectory(path)
        return path
    }

    /// Replaces the ops granted to the site (``Site/grants``) under the file lock, on a fresh
    /// read, and returns the site as written. Only app-bound sites use the bridge, so only they
    /// may hold grants. Which ops may be granted is the caller's (the bridge catalogue's) rule;
    /// the registry checks the names' form and count.
    /// - Throws: ``PartitionError/unknownSite(_:)``; ``PartitionError/invalidValue(_:)`` for a
    ///   site that is not app-bound, a malformed op name or too many grants.
    @discardableResult
    public func setGrants(_ ops: [String], forIdentifier id: SiteID) throws(PartitionError) -> Site {
        try changeGrants(forIdentifier: id) { _ in ops }
    }

    /// Adds and removes granted ops on the registry's fresh read under the file lock, so a
    /// change another process made meanwhile is kept (as ``setGrants(_:forIdentifier:)`` checks).
    @discardableResult
    public func updateGrants(forIdentifier id: SiteID, adding: [String] = [], removing: [String] = []) throws(PartitionError) -> Site {
        try changeGrants(forIdentifier: id) { now in (now + adding).filter { !removing.contains($0) } }
    }

    private func changeGrants(forIdentifier id: SiteID, _ change: @Sendable ([String]) -> [String]) throws(PartitionError) -> Site {
        try changeSite(id) { (site: inout Site) throws(PartitionError) in
            let sorted = Array(Set(change(site.grants))).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            if let bad = sorted.first(where: { !Site.isOpName($0) }) {
                throw PartitionError.invalidValue("\"\(bad.prefix(80))\" is not an op name (lower-case words joined by dots); see `sitekeep ops`")
            }
            guard sorted.count <= Site.maximumGrants else {
                throw PartitionError.invalidValue("a site may be granted at most \(Site.maximumGrants) ops")
            }
            guard site.isAppBound || sorted.isEmpty else {
                throw PartitionError.invalidValue("\(site.displayName) is not app-bound; only app-bound sites use the bridge, so a grant would do nothing")
            }
            site.grants = sorted
        }
    }

    /// Changes one site on the registry's fresh read under the file lock, and writes the
    /// registry only when `change` left the site different.
    private func changeSite(_ id: SiteID, _ change: @Sendable (inout Site) throws(PartitionError) -> Void) throws(PartitionError) -> Site {
        let written = try current { (st: RegistryState) throws(PartitionError) -> Site? in try underFileLock(st) { (st: RegistryState) throws(PartitionError) -> Site in
            guard let before = st.sites[id] else { throw PartitionError.unknownSite(id.string) }
            // A change is tagged with the entry it changes: an entry not authentic is approved
            // as a whole first, so a hand-written origin or host is never tagged in passing.
            if let problem = st.standing[id]?.problem(of: before) { throw PartitionError.invalidValue(problem) }
            var site = before
            try change(&site)
            guard site != before else { return site }
            site = try tagged(site, st)
            st.sites[id] = site
            try persist(st)
            return site
        } }
        guard let written else { throw .storageFailure("the registry lock was not taken") }
        return written
    }

    /// Changes the site's hosts (``Site/hosts``) on the registry's fresh read under the file
    /// lock, so a change another process made meanwhile is kept; `change` gets the hosts now and
    /// returns the new list (one entry per path is kept, the last given).
    /// - Throws: ``PartitionError/unknownSite(_:)``; ``PartitionError/invalidValue(_:)`` for a
    ///   site that is not app-bound or too many hosts.
    @discardableResult
    public func updateHosts(forIdentifier id: SiteID, _ change: @Sendable ([SiteHost]) -> [SiteHost]) throws(PartitionError) -> Site {
        try changeSite(id) { (site: inout Site) throws(PartitionError) in
            var hosts: [SiteHost] = []
            for h in change(site.hosts).reversed() where !hosts.contains(where: { $0.path == h.path }) { hosts.insert(h, at: 0) }
            guard hosts.count <= Site.maximumHosts else { throw PartitionError.invalidValue("a site may have at most \(Site.maximumHosts) hosts") }
            guard site.isAppBound || hosts.isEmpty else {
                throw PartitionError.invalidValue("\(site.displayName) is not app-bound; only app-bound sites use the bridge, so a host would do nothing")
            }
            site.hosts = hosts
        }
    }

    /// The sites of the store in `home` as its `sites.json` says now, without opening any key
    /// (for listings such as `sitekeep ops`); none when the store has no sites yet.
    /// - Throws: ``PartitionError/registryDamaged(_:)`` when `sites.json` cannot be read.
    public static func sites(inHome home: URL) throws(PartitionError) -> [Site] {
        try read(home.appendingPathComponent("sites.json").path).0.values.sorted { $0.id < $1.id }
    }

    /// Bytes the site's folder uses on disk.
    public func diskUsage(forIdentifier id: SiteID) -> Int64 {
        let dir = folder(id)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return 0 }
        var total: Int64 = 0
        for n in names {
            var st = stat()
            if lstat(dir + "/" + n, &st) == 0 { total += Int64(st.st_size) }
        }
        return total
    }

    /// Removes non-app-bound sites, least recently used first, until all sites together use at
    /// most `budget` bytes. App-bound sites and sites with open handles are never purged.
    /// - Returns: The removed sites' identifiers, in removal order.
    @discardableResult
    public func purge(toBudget budget: Int64) throws(PartitionError) -> [SiteID] {
        let all = sites()
        var total = all.reduce(Int64(0)) { $0 + diskUsage(forIdentifier: $1.id) }
        var removed: [SiteID] = []
        let candidates = all.filter { !$0.isAppBound }.sorted { ($0.lastUsedAt, $0.id) < ($1.lastUsedAt, $1.id) }
        for site in candidates where total > budget {
            if openHandles(forIdentifier: site.id) > 0 { continue }
            let used = diskUsage(forIdentifier: site.id)
            try remove(forIdentifier: site.id, force: false)
            total -= used
            removed.append(site.id)
        }
        return removed
    }

    /// Replaces a lost or damaged partition with what `source` supplies. Only this site's files
    /// are touched; the storage key is kept.
    /// - Throws: ``PartitionError/siteInUse(site:openHandles:)`` while handles are open.
    public func rebuildPartition(forIdentifier id: SiteID, from source: any PartitionRebuildSource) throws(PartitionError) {
        let contents: PartitionContents
        do { contents = try source.contents(forSite: id) } catch { throw .storageFailure("the rebuild source failed: \(error)") }
        try current { (st: RegistryState) throws(PartitionError) in
            guard let site = st.sites[id] else { throw PartitionError.unknownSite(id.string) }
            if let entry = st.open[id] { throw PartitionError.siteInUse(site: id.string, openHandles: entry.handles) }
            let key: SymmetricKeyHandle
            do { key = try keys.storageKey(forSite: id.string, protection: site.protection) }
            catch { throw PartitionError.keyUnavailable("\(error)") }
            try Self.makePrivateDirectory(folder(id))
            let path = databasePath(id)
            for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
            let core = try PartitionCore.open(site: id, path: path, key: key, create: true, limits: limits, faults: faults)
            defer { core.shutdown(removed: false) }
            try core.fill(contents)
        }
    }
}

extension PartitionCore {
    /// Writes a rebuild's contents (each namespace in its own transaction).
    func fill(_ c: PartitionContents) throws(PartitionError) {
        try put(.storage, c.storage.map { ($0.key, Array($0.value.utf8)) }, quota: limits.storageQuota, maxValue: limits.storageQuota)
        for group in c.namespaces {
            try declareCallers(group.namespace)
            try put(group.namespace, group.rows.map { ($0.name, $0.value) }, quota: nil, maxValue: limits.maximumRecordBytes)
        }
        for r in c.cache { try cacheStore(r) }
    }
}

extension SiteRegistry {
    /// Writes sites.json atomically (``AtomicFile/replace(_:with:mode:)``: a unique 0600 temp
    /// file, fsync, rename, fsync of the folder). Only under the file lock
    /// (``underFileLock(_:wait:_:)``), so the file opened after the rename is the one written;
    /// it becomes the view.
    private func persist(_ st: RegistryState) throws(PartitionError) {
        let data = RegistryFormat.encoded(st.sites.values.sorted { $0.id < $1.id })
        let path = registryPath
        do { try AtomicFile.replace(path, with: data) } catch { throw .storageFailure("\(error)") }
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw .storageFailure("\(SystemError.current("open", path))") }
        st.file = RegistryFileView(fd: fd)
        st.generation &+= 1
    }
}
