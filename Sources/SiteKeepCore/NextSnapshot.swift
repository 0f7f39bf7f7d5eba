public import SiteKeepJSON

/// "What is next" at a glance: the design's App Group store, on Linux a small file any process of
/// the user may read with no key (a panel applet, a lock-screen widget, `sitekeep next`).
///
/// It holds only what a lock-screen widget shows: the next few items (title, stage, start and
/// end, the site's display name, whether a reminder was late), badge counts and the last sync
/// time. No pick ids, no URLs, no reading state, nothing sealed.
public struct NextSnapshot: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public let title: String
        public let stage: String?
        public let start: Instant
        public let end: Instant
        public let kind: AgendaItemKind
        /// The site's display name.
        public let site: String
        /// Start as wall-clock `HH:MM` in the agenda's zone (what the widget prints).
        public let localStart: String
        /// The zone `localStart` is in (IANA name; nil in a snapshot written before it was kept).
        public let zone: String?

        public init(title: String, stage: String?, start: Instant, end: Instant, kind: AgendaItemKind, site: String, localStart: String, zone: String? = nil) {
            self.title = title; self.stage = stage; self.start = start; self.end = end
            self.kind = kind; self.site = site; self.localStart = localStart; self.zone = zone
        }

        /// `2026-12-05 09:30 Europe/Lisbon`: the start with the zone it is in (UTC when the
        /// snapshot does not say which zone).
        public var shownStart: String {
            AdHocReminders.stamp(start, zone.flatMap(ZoneRules.init(identifier:)) ?? .utc)
        }
    }

    public static let format = "sitekeep.next.v1"
    public static let maxItems = 8

    public let generatedAt: Instant
    public let lastSync: Instant?
    /// Counts by name (`today`: picked items left today; `inbox`: unread inbox items; `reminders`: pending).
    public let badges: [String: Int]
    public let items: [Item]

    public init(generatedAt: Instant, lastSync: Instant?, badges: [String: Int], items: [Item]) {
        self.generatedAt = generatedAt
        self.lastSync = lastSync
        self.badges = badges
        self.items = Array(items.prefix(Self.maxItems))
    }

    /// One site's part: its display name, picks and agenda.
    public struct Source: Sendable {
        public let siteName: String
        public let schedule: ScheduleDocument
        public let agenda: Agenda
        public init(siteName: String, schedule: ScheduleDocument, agenda: Agenda) {
            self.siteName = siteName; self.schedule = schedule; self.agenda = agenda
        }
    }

    /// The snapshot at `now`: picked items and stand-ups not yet ended, soonest first; `today`
    /// counts the picked items left today (in each agenda's zone), `reminders` those planned
    /// (the daemon passes its own pending count in `extraBadges`, which win).
    public static func build(_ sources: [Source], now: Instant, lastSync: Instant?, extraBadges: [String: Int] = [:],
                             policy: ReminderPolicy = .standard, limit: Int = 5) -> NextSnapshot {
        var items: [Item] = []
        var today = 0, reminders = 0
        for s in sources {
            let zone = s.agenda.zone
            let day = zone.local(now)
            var seen = Set<[UInt8]>()
            for e in s.schedule.entries(in: s.agenda) {
                guard let item = e.item, item.end > now else { continue }
                seen.insert(Array(item.id.utf8))
                items.append(Item(title: item.title, stage: item.stage, start: item.start, end: item.end, kind: item.kind, site: s.siteName,
                                  localStart: zone.local(item.start).hourMinute, zone: zone.identifier))
                let d = zone.local(item.start)
                if d.year == day.year && d.month == day.month && d.day == day.day { today += 1 }
            }
            if policy.remindEveryStandup {
                for item in s.agenda.items where item.kind == .standup && item.end > now && !seen.contains(Array(item.id.utf8)) {
                    items.append(Item(title: item.title, stage: item.stage, start: item.start, end: item.end, kind: item.kind, site: s.siteName,
                                      localStart: zone.local(item.start).hourMinute, zone: zone.identifier))
                }
            }
            reminders += ReminderPlanner.plan(schedule: s.schedule, agenda: s.agenda, policy: policy, now: now).count
        }
        items.sort { $0.start != $1.start ? $0.start < $1.start : $0.title.utf8.lexicographicallyPrecedes($1.title.utf8) }
        var badges = ["today": today, "reminders": reminders]
        badges.merge(extraBadges) { _, given in given }
        return NextSnapshot(generatedAt: now, lastSync: lastSync, badges: badges, items: Array(items.prefix(min(limit, maxItems))))
    }

    public var json: JSONValue {
        let b = badges.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return .object([
            JSONMember(key: "format", value: .string(Self.format)),
            JSONMember(key: "generatedAt", value: .string(generatedAt.rfc3339)),
            JSONMember(key: "lastSync", value: .string(lastSync?.rfc3339)),
            JSONMember(key: "badges", value: .object(b.map { JSONMember(key: $0.key, value: .integer($0.value)) })),
            JSONMember(key: "items", value: .array(items.map { i in
                var m = [JSONMember(key: "title", value: .string(i.title))]
                if let stage = i.stage { m.append(JSONMember(key: "stage", value: .string(stage))) }
                m += [JSONMember(key: "start", value: .string(i.start.rfc3339)), JSONMember(key: "end", value: .string(i.end.rfc3339)),
                      JSONMember(key: "localStart", value: .string(i.localStart))]
                if let zone = i.zone { m.append(JSONMember(key: "zone", value: .string(zone))) }
                m += [JSONMember(key: "kind", value: .string(i.kind.rawValue)),
                      JSONMember(key: "site", value: .string(i.site))]
                return .object(m)
            })),
        ])
    }

    /// Reads the file's JSON. - Throws: ``CoreFieldError`` with the path of the bad member.
    public init(json: JSONValue, path: String = "next") throws(CoreFieldError) {
        guard json["format"]?.stringValue == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format)") }
        func instant(_ v: JSONValue?, _ p: String) throws(CoreFieldError) -> Instant {
            guard let s = v?.stringValue, let i = try? Instant(rfc3339: s) else { throw CoreFieldError(p, "must be an RFC 3339 date-time") }
            return i
        }
        generatedAt = try instant(json["generatedAt"], "\(path).generatedAt")
        lastSync = json["lastSync"]?.isNull ?? true ? nil : try instant(json["lastSync"], "\(path).lastSync")
        var badges: [String: Int] = [:]
        for m in json["badges"]?.objectValue ?? [] {
            guard let n = m.value.intValue, (0...1_000_000).contains(n) else { throw CoreFieldError("\(path).badges.\(m.key)", "must be a count") }
            badges[m.key] = Int(n)
        }
        self.badges = badges
        var items: [Item] = []
        for (i, v) in (json["items"]?.arrayValue ?? []).prefix(Self.maxItems).enumerated() {
            let p = "\(path).items[\(i)]"
            guard let title = v["title"]?.stringValue, let site = v["site"]?.stringValue, let local = v["localStart"]?.stringValue,
                  let kind = v["kind"]?.stringValue.flatMap(AgendaItemKind.init(rawValue:)) else {
                throw CoreFieldError(p, "must hold title, site, localStart and kind")
            }
            items.append(Item(title: title, stage: v["stage"]?.stringValue, start: try instant(v["start"], "\(p).start"),
                              end: try instant(v["end"], "\(p).end"), kind: kind, site: site, localStart: local,
                              zone: v["zone"]?.stringValue))
        }
        self.items = items
    }
}

/// The snapshot's file, written atomically (readers see the old or the new one, never half).
public struct NextSnapshotStore: Sendable {
    public let path: String
    public init(path: String) { self.path = path }

    public func write(_ snapshot: NextSnapshot) throws(CoreFileError) {
        try CoreFiles.writeAtomically(JSONSerializer.bytes(snapshot.json, style: .pretty) + [0x0a], to: path)
    }

    /// The last snapshot, or nil when none was written. - Throws: when the file is not a snapshot.
    public func read() throws(CoreFileError) -> NextSnapshot? {
        guard let bytes = try CoreFiles.read(path, limit: 1 << 20) else { return nil }
        do {
            return try NextSnapshot(json: try JSONParser.parse(bytes))
        } catch let e as CoreFieldError {
            throw CoreFileError(path: path, reason: e.description)
        } catch {
            throw CoreFileError(path: path, reason: "is not JSON (\(error))")
        }
    }
}
