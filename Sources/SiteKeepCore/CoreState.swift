public import SiteKeepJSON
public import SiteKeepVocabulary

/// Where the core keeps its small state files in a store's home (none holds a key or a secret):
///
/// ```
/// HOME/next.json                          the "what is next" snapshot (readable with no key)
/// HOME/identity.json                      identities per store and site (sitekeep.identity.v1)
/// HOME/core/reminders-delivered.json      reminders already shown (never twice)
/// HOME/core/reminders-adhoc.json          the reminders set by hand (`remind add`)
/// HOME/core/sites/SITE/reminders.json     the site's reminder leads
/// HOME/core/sites/SITE/calendar.json      the calendar export's UIDs and SEQUENCEs
/// SCOPE/workflow-runs.json                where each of the scope's workflow runs is
/// SCOPE/inbox-seen.json                   the scope's vault listing at the last look at its inbox
/// SCOPE/inbox-read.json                   the scope's read marks (a copy of the vault's sitekeep/inbox-read.json)
/// ```
///
/// where SCOPE (``CoreScope``) is `HOME/core/sites/SITE/vaults/VAULT` for a vault a site owns
/// (what that site's bridge connections and `--site ORIGIN` use), `HOME/core/store/vaults/VAULT`
/// for a vault no site owns (the CLI only), and `HOME/core/sites/SITE` or `HOME/core/store` for
/// workflows read from a folder (`--dir`). One site's state is never another's file.
///
/// Before that, the state was store-wide: `HOME/core/workflow-runs.json`,
/// `HOME/core/inbox-seen.json`, `HOME/core/inbox-read.json`. Those files are never written again.
/// A scope with no read marks of its own starts from the store-wide ones (``legacyInboxMarks``;
/// a mark names a file and its content id, so it only marks read the very version that was read);
/// the store-wide runs and last-looked listing are ignored (which site they were for is not
/// recorded): runs start at their first step and every item shows as new once.
public struct CoreStateDirectory: Sendable, Equatable {
    public let home: String
    public init(home: String) { self.home = home }

    public var root: String { home + "/core" }
    public var nextSnapshot: String { home + "/next.json" }
    public var identity: String { home + "/identity.json" }
    public var deliveredLedger: String { root + "/reminders-delivered.json" }
    /// The store-wide files of before per-site state (read, never written; see the type's notes).
    public var legacyWorkflowRuns: String { root + "/workflow-runs.json" }
    public var legacyInboxSeen: String { root + "/inbox-seen.json" }
    public var legacyInboxMarks: String { root + "/inbox-read.json" }

    /// The folder of a scope's state. - Throws: for a site id or vault name that is not a plain name.
    public func folder(_ scope: CoreScope) throws(CoreFileError) -> String {
        let base = try scope.site.map { id throws(CoreFileError) in try site(id) } ?? root + "/store"
        guard let vault = scope.vault else { return base }
        guard (1...64).contains(vault.utf8.count), vault.utf8.first != 0x2e, vault.utf8.allSatisfy({
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d || $0 == 0x5f || $0 == 0x2e
        }) else {
            throw CoreFileError(path: base + "/vaults", reason: "a vault name must be letters, digits, '.', '_' and '-', not starting with '.'")
        }
        return base + "/vaults/" + vault
    }

    public func workflowRuns(_ scope: CoreScope) throws(CoreFileError) -> String { try folder(scope) + "/workflow-runs.json" }
    public func inboxSeen(_ scope: CoreScope) throws(CoreFileError) -> String { try folder(scope) + "/inbox-seen.json" }
    public func inboxMarks(_ scope: CoreScope) throws(CoreFileError) -> String { try folder(scope) + "/inbox-read.json" }

    /// The folder of a site's core state. - Throws: for an id that is not a plain name.
    public func site(_ id: String) throws(CoreFileError) -> String {
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d }) else {
            throw CoreFileError(path: root + "/sites", reason: "a site id must be letters, digits and -")
        }
        return root + "/sites/" + id
    }

    /// Deletes the site's core state (`core/sites/SITE`: its leads, calendar sequences, and the
    /// inbox and workflow state of each of its vaults), as its partition is deleted when the site
    /// is removed. - Throws: for an id that is not a plain name, or a folder that cannot be deleted.
    public func removeSite(_ id: String) throws(CoreFileError) {
        try CoreFiles.removeFolder(try site(id))
    }

    /// Reads a JSON state file (nil when absent). - Throws: when it is not JSON.
    public func readJSON(_ path: String, limit: Int = 16 << 20) throws(CoreFileError) -> JSONValue? {
        guard let bytes = try CoreFiles.read(path, limit: limit) else { return nil }
        do { return try JSONParser.parse(bytes) } catch { throw CoreFileError(path: path, reason: "is not JSON (\(error.description)); move it aside") }
    }

    /// Writes a JSON state file atomically, creating its folder.
    public func writeJSON(_ value: JSONValue, to path: String) throws(CoreFileError) {
        if let slash = path.lastIndex(of: "/") { try CoreFiles.ensureDirectory(String(path[..<slash])) }
        try CoreFiles.writeAtomically(JSONSerializer.bytes(value, style: .pretty) + [0x0a], to: path)
    }

    // MARK: per-site reminder leads

    /// The site's reminder policy (its leads; the default when none were set).
    public func reminderPolicy(site: String) throws(CoreFileError) -> ReminderPolicy {
        let path = try self.site(site) + "/reminders.json"
        guard let v = try readJSON(path) else { return .standard }
        var p = ReminderPolicy.standard
        if let m = v["sessionLeadMinutes"]?.intValue, (0...1440).contains(m) { p.leads[.session] = m * 60_000 }
        if let m = v["standupLeadMinutes"]?.intValue, (0...1440).contains(m) { p.leads[.standup] = m * 60_000 }
        return p
    }

    public func setReminderPolicy(_ p: ReminderPolicy, site: String) throws(CoreFileError) {
        try writeJSON(.object([JSONMember(key: "format", value: "sitekeep.reminders.settings.v1"),
                               JSONMember(key: "sessionLeadMinutes", value: .int(p.lead(for: .session) / 60_000)),
                               JSONMember(key: "standupLeadMinutes", value: .int(p.lead(for: .standup) / 60_000))]),
                      to: try self.site(site) + "/reminders.json")
    }

    // MARK: calendar export

    /// The site's calendar export state (its events' sequence numbers; empty when none was kept).
    public func calendarState(site: SiteID) throws(CoreFileError) -> CalendarExportState {
        let path = try self.site(site.string) + "/calendar.json"
        guard let v = try readJSON(path) else { return CalendarExportState() }
        do { return try CalendarExportState(json: v) } catch { throw CoreFileError(path: path, reason: error.description) }
    }

    /// Keeps the site's calendar export state.
    public func setCalendarState(_ s: CalendarExportState, site: SiteID) throws(CoreFileError) {
        try writeJSON(s.json, to: try self.site(site.string) + "/calendar.json")
    }

    // MARK: workflow runs

    /// Where each of the scope's workflow runs is (name → step index).
    public func workflowPositions(_ scope: CoreScope) throws(CoreFileError) -> [String: Int] {
        guard let v = try readJSON(try workflowRuns(scope)) else { return [:] }
        var out: [String: Int] = [:]
        for m in v["runs"]?.objectValue ?? [] { if let i = m.value.intValue, (0...1000).contains(i) { out[m.key] = Int(i) } }
        return out
    }

    public func setWorkflowPosition(_ position: Int, name: String, scope: CoreScope) throws(CoreFileError) {
        var all = try workflowPositions(scope)
        all[name] = position
        try writeJSON(.object([JSONMember(key: "format", value: "sitekeep.workflow-runs.v1"),
                               JSONMember(key: "runs", value: .object(all.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: .integer($0.value)) }))]),
                      to: try workflowRuns(scope))
    }

    // MARK: inbox

    /// The scope's listing at the last look, or nil when the reader never looked.
    public func inboxLastLooked(_ scope: CoreScope) throws(CoreFileError) -> [VaultListingEntry]? {
        guard let v = try readJSON(try inboxSeen(scope)) else { return nil }
        return (v["entries"]?.arrayValue ?? []).compactMap { e in
            guard let p = e["path"]?.stringValue, let ver = e["version"]?.stringValue else { return nil }
            return VaultListingEntry(path: p, version: ver, size: Int(e["size"]?.intValue ?? 0))
        }
    }

    public func setInboxLastLooked(_ listing: [VaultListingEntry], scope: CoreScope) throws(CoreFileError) {
        try writeJSON(.object([JSONMember(key: "format", value: "sitekeep.inbox-seen.v1"),
                               JSONMember(key: "entries", value: .array(listing.filter { Inbox.kind(of: $0.path) != nil }.map { e in
                                   .object([JSONMember(key: "path", value: .string(e.path)), JSONMember(key: "version", value: .string(e.version)),
                                            JSONMember(key: "size", value: .integer(e.size))])
                               }))]),
                      to: try inboxSeen(scope))
    }

    /// The store-wide read marks of before per-site state (empty when there are none).
    public func legacyInboxReadMarks() throws(CoreFileError) -> InboxReadMarks {
        guard let v = try readJSON(legacyInboxMarks) else { return InboxReadMarks() }
        do { return try InboxReadMarks(json: v) } catch { throw CoreFileError(path: legacyInboxMarks, reason: error.description) }
    }
}

/// Whose inbox and workflow state a call reads and writes: the site (nil: the store, for the CLI
/// on a vault no site owns) and the vault the state is about (nil: workflows from a folder).
public struct CoreScope: Sendable, Hashable {
    public let site: String?
    public let vault: String?
    public init(site: String?, vault: String?) { self.site = site; self.vault = vault }
}

/// Where the inbox's read marks are kept: the vault (so they travel), and a local copy.
public protocol InboxMarksStore: Sendable {
    func load() throws(CoreFileError) -> InboxReadMarks
    func save(_ marks: InboxReadMarks) throws(CoreFileError)
}

/// A scope's read marks in a local file (``CoreStateDirectory/inboxMarks(_:)``); a scope that has
/// none yet starts from the store-wide marks of before per-site state.
public struct FileInboxMarksStore: InboxMarksStore {
    public let state: CoreStateDirectory
    public let scope: CoreScope
    public init(state: CoreStateDirectory, scope: CoreScope) { self.state = state; self.scope = scope }
    public func load() throws(CoreFileError) -> InboxReadMarks {
        let path = try state.inboxMarks(scope)
        guard let v = try state.readJSON(path) else { return try state.legacyInboxReadMarks() }
        do { return try InboxReadMarks(json: v) } catch { throw CoreFileError(path: path, reason: error.description) }
    }
    public func save(_ marks: InboxReadMarks) throws(CoreFileError) { try state.writeJSON(marks.json, to: try state.inboxMarks(scope)) }
}

/// Identities from ``CoreStateDirectory/identity``.
extension CoreStateDirectory {
    public func identitySettings() throws(CoreFileError) -> IdentitySettings? {
        guard let v = try readJSON(identity, limit: 1 << 20) else { return nil }
        do { return try IdentitySettings(json: v) } catch { throw CoreFileError(path: identity, reason: error.description) }
    }

    public func setIdentitySettings(_ s: IdentitySettings) throws(CoreFileError) { try writeJSON(s.json, to: identity) }
}

extension CoreStateDirectory {
    /// A look at a scope's inbox: the items of `listing` against the scope's last look and its
    /// read marks (as they were before this look); the items `reading` picks are marked read at
    /// `now`, the marks are pruned to the listing and saved, and the listing is kept as the last look.
    public func lookAtInbox(listing: [VaultListingEntry], scope: CoreScope, marks store: any InboxMarksStore, now: Instant,
                            reading: ([InboxItem]) -> [InboxItem] = { _ in [] }) throws(CoreFileError) -> [InboxItem] {
        var marks = try store.load()
        let items = Inbox.items(current: listing, lastLooked: try inboxLastLooked(scope), marks: marks)
        for i in reading(items) { marks.markRead(path: i.path, version: i.version, at: now) }
        marks.prune(keeping: listing)
        try store.save(marks)
        try setInboxLastLooked(listing, scope: scope)
        return items
    }

    /// Marks the inbox items `paths` read at `now`, each in its version in `listing`, and saves
    /// the marks (pruned to the listing) to `store`: not a look, so what is new since the last
    /// look stays as it was. Paths that are not items of the inbox are left out (the caller
    /// refuses them first, ``Inbox/firstNonItem(_:in:)``). - Returns: how many items were marked.
    @discardableResult
    public func markInboxRead(_ paths: [String], listing: [VaultListingEntry], marks store: any InboxMarksStore, now: Instant) throws(CoreFileError) -> Int {
        var marks = try store.load()
        let marked = marks.markRead(paths, in: listing, at: now)
        marks.prune(keeping: listing)
        try store.save(marks)
        return marked
    }
}
