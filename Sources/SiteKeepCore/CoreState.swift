public import SiteKeepJSON

/// Where the core keeps its small state files in a store's home (none holds a key or a secret):
///
/// ```
/// HOME/next.json                          the "what is next" snapshot (readable with no key)
/// HOME/identity.json                      identities per store and site (sitekeep.identity.v1)
/// HOME/core/reminders-delivered.json      reminders already shown (never twice)
/// HOME/core/workflow-runs.json            where each workflow run is
/// HOME/core/inbox-seen.json               the vault listing at the last look at the inbox
/// HOME/core/inbox-read.json               read marks, until the vault client writes them to the vault
/// HOME/core/sites/SITE/reminders.json     the site's reminder leads
/// HOME/core/sites/SITE/calendar.json      the calendar export's UIDs and SEQUENCEs
/// ```
public struct CoreStateDirectory: Sendable, Equatable {
    public let home: String
    public init(home: String) { self.home = home }

    public var root: String { home + "/core" }
    public var nextSnapshot: String { home + "/next.json" }
    public var identity: String { home + "/identity.json" }
    public var deliveredLedger: String { root + "/reminders-delivered.json" }
    public var workflowRuns: String { root + "/workflow-runs.json" }
    public var inboxSeen: String { root + "/inbox-seen.json" }
    public var inboxMarks: String { root + "/inbox-read.json" }

    /// The folder of a site's core state. - Throws: for an id that is not a plain name.
    public func site(_ id: String) throws(CoreFileError) -> String {
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x2d }) else {
            throw CoreFileError(path: root + "/sites", reason: "a site id must be letters, digits and -")
        }
        return root + "/sites/" + id
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

    public func calendarState(site: String) throws(CoreFileError) -> CalendarExportState {
        let path = try self.site(site) + "/calendar.json"
        guard let v = try readJSON(path) else { return CalendarExportState() }
        do { return try CalendarExportState(json: v) } catch { throw CoreFileError(path: path, reason: error.description) }
    }

    public func setCalendarState(_ s: CalendarExportState, site: String) throws(CoreFileError) {
        try writeJSON(s.json, to: try self.site(site) + "/calendar.json")
    }

    // MARK: workflow runs

    /// Where each workflow's run is (name → step index).
    public func workflowPositions() throws(CoreFileError) -> [String: Int] {
        guard let v = try readJSON(workflowRuns) else { return [:] }
        var out: [String: Int] = [:]
        for m in v["runs"]?.objectValue ?? [] { if let i = m.value.intValue, (0...1000).contains(i) { out[m.key] = Int(i) } }
        return out
    }

    public func setWorkflowPosition(_ position: Int, name: String) throws(CoreFileError) {
        var all = try workflowPositions()
        all[name] = position
        try writeJSON(.object([JSONMember(key: "format", value: "sitekeep.workflow-runs.v1"),
                               JSONMember(key: "runs", value: .object(all.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: .integer($0.value)) }))]),
                      to: workflowRuns)
    }

    // MARK: inbox

    /// The listing at the last look, or nil when the reader never looked.
    public func inboxLastLooked() throws(CoreFileError) -> [VaultListingEntry]? {
        guard let v = try readJSON(inboxSeen) else { return nil }
        return (v["entries"]?.arrayValue ?? []).compactMap { e in
            guard let p = e["path"]?.stringValue, let ver = e["version"]?.stringValue else { return nil }
            return VaultListingEntry(path: p, version: ver, size: Int(e["size"]?.intValue ?? 0))
        }
    }

    public func setInboxLastLooked(_ listing: [VaultListingEntry]) throws(CoreFileError) {
        try writeJSON(.object([JSONMember(key: "format", value: "sitekeep.inbox-seen.v1"),
                               JSONMember(key: "entries", value: .array(listing.filter { Inbox.kind(of: $0.path) != nil }.map { e in
                                   .object([JSONMember(key: "path", value: .string(e.path)), JSONMember(key: "version", value: .string(e.version)),
                                            JSONMember(key: "size", value: .integer(e.size))])
                               }))]),
                      to: inboxSeen)
    }
}

/// Where the inbox's read marks are kept: the vault (so they travel, once the vault client
/// writes), or a local file until then.
public protocol InboxMarksStore: Sendable {
    func load() throws(CoreFileError) -> InboxReadMarks
    func save(_ marks: InboxReadMarks) throws(CoreFileError)
}

/// Read marks in a local file (``CoreStateDirectory/inboxMarks``).
public struct FileInboxMarksStore: InboxMarksStore {
    public let state: CoreStateDirectory
    public init(state: CoreStateDirectory) { self.state = state }
    public func load() throws(CoreFileError) -> InboxReadMarks {
        guard let v = try state.readJSON(state.inboxMarks) else { return InboxReadMarks() }
        do { return try InboxReadMarks(json: v) } catch { throw CoreFileError(path: state.inboxMarks, reason: error.description) }
    }
    public func save(_ marks: InboxReadMarks) throws(CoreFileError) { try state.writeJSON(marks.json, to: state.inboxMarks) }
}

/// Identities from ``CoreStateDirectory/identity``.
extension CoreStateDirectory {
    public func identitySettings() throws(CoreFileError) -> IdentitySettings? {
        guard let v = try readJSON(identity, limit: 1 << 20) else { return nil }
        do { return try IdentitySettings(json: v) } catch { throw CoreFileError(path: identity, reason: error.description) }
    }

    public func setIdentitySettings(_ s: IdentitySettings) throws(CoreFileError) { try writeJSON(s.json, to: identity) }
}
