public import SiteKeepJSON

/// What an agenda item is, for the reminder lead that applies to it.
public enum AgendaItemKind: String, Sendable, Hashable, CaseIterable {
    /// A talk, panel or workshop: reminded when picked.
    case session
    /// A team stand-up (the meeting briefings): reminded whether picked or not.
    case standup
    /// A reminder the user set by hand (``AdHocReminder``; never read from an agenda).
    case reminder
}

/// One item of a site's public agenda.
public struct AgendaItem: Sendable, Hashable {
    public let id: String
    public let title: String
    public let stage: String?
    public let start: Instant
    public let end: Instant
    public let kind: AgendaItemKind
    /// The item's page on the site, when the agenda gives one (absolute `https:` or `http:` URL).
    public let url: String?

    public init(id: String, title: String, stage: String? = nil, start: Instant, end: Instant, kind: AgendaItemKind = .session, url: String? = nil) {
        self.id = id; self.title = title; self.stage = stage
        self.start = start; self.end = end; self.kind = kind; self.url = url
    }
}

/// A site's agenda: its items and the time zone they are given in.
///
/// Read from the sites' public typed data by ``Agenda/init(json:path:)``. The accepted shape:
///
/// ```json
/// {"timezone": "Europe/Lisbon",
///  "items": [{"id": "ws26-c1-0930", "title": "Opening", "stage": "Centre Stage",
///             "start": "2026-11-10T09:30:00", "end": "2026-11-10T10:00:00+00:00",
///             "kind": "session", "url": "https://promptugal.news/agenda/ws26-c1-0930/"}]}
/// ```
///
/// `items` may also be called `agenda` or `sessions`, or the document may be the bare array (then
/// the zone is UTC unless each item names its own `timezone`). `start` and `end` are RFC 3339
/// with an offset, or wall-clock times (`YYYY-MM-DDTHH:MM[:SS]`) in the item's or the agenda's
/// zone, resolved as RFC 5545 does (``ZoneRules``). `id` may be a string or an integer. `kind`
/// (or `type`) is `session` (the default), `standup` or `stand-up`. `stage` may be `room` or
/// `location`, `url` may be `href`. Members the core does not use are ignored (the sites add
/// fields); every member it does use is checked, and a bad one is refused with its path.
public struct Agenda: Sendable, Equatable {
    public static let maxItems = 20_000
    public static let maxTitleBytes = 512
    public static let maxStageBytes = 256
    public static let maxURLBytes = 2048
    /// The longest an item may last (a conference day, or a multi-day exhibition).
    public static let maxDurationMilliseconds: Int64 = 7 * 86_400_000

    /// The agenda's zone (the calendar export writes times in it).
    public let zone: ZoneRules
    /// The items, sorted by start, then id.
    public let items: [AgendaItem]
    /// Item index by id bytes (ids compare byte for byte, as the page's JavaScript compares them).
    private let byID: [[UInt8]: Int]

    public init(zone: ZoneRules, items: [AgendaItem]) throws(CoreFieldError) {
        var sorted = items
        sorted.sort { $0.start != $1.start ? $0.start < $1.start : $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        var index: [[UInt8]: Int] = [:]
        index.reserveCapacity(sorted.count)
        for (i, item) in sorted.enumerated() {
            if index.updateValue(i, forKey: Array(item.id.utf8)) != nil {
                throw CoreFieldError("agenda.items", "holds the id \(printable(item.id)) twice; agenda ids must be unique")
            }
        }
        self.zone = zone
        self.items = sorted
        self.byID = index
    }

    /// An empty agenda in UTC.
    public static let empty = Agenda()

    private init() {
        zone = .utc
        items = []
        byID = [:]
    }

    /// The item with this id, if the agenda has it.
    public func item(id: String) -> AgendaItem? { byID[Array(id.utf8)].map { items[$0] } }

    public static func == (a: Agenda, b: Agenda) -> Bool { a.zone == b.zone && a.items == b.items }

    /// Parses the sites' agenda JSON text (at most 16 MiB).
    public init(text: some Collection<UInt8>, path: String = "agenda") throws(CoreFieldError) {
        let value: JSONValue
        do { value = try JSONParser.parse(text, limits: .document) } catch {
            throw CoreFieldError(path, "is not valid JSON (\(error.description))")
        }
        try self.init(json: value, path: path)
    }

    /// Reads a parsed agenda document; see the type's documentation for the shape.
    public init(json: JSONValue, path: String = "agenda") throws(CoreFieldError) {
        var zone = ZoneRules.utc
        var list: [JSONValue]
        var listPath = path
        switch json {
        case .array(let a):
            list = a
        case .object:
            if let tz = json["timezone"] ?? json["timeZone"] {
                guard case .string(let name) = tz else { throw CoreFieldError("\(path).timezone", "must be an IANA zone name such as Europe/Lisbon, found \(tz.typeName)") }
                guard let z = ZoneRules(identifier: name) else { throw CoreFieldError("\(path).timezone", "(\(printable(name))) is not a time zone this system knows") }
                zone = z
            }
            let key = ["items", "agenda", "sessions"].first { json[$0] != nil }
            guard let key, let v = json[key] else { throw CoreFieldError("\(path).items", "is missing; an agenda lists its items under items") }
            guard case .array(let a) = v else { throw CoreFieldError("\(path).\(key)", "must be an array, found \(v.typeName)") }
            list = a
            listPath = "\(path).\(key)"
        default:
            throw CoreFieldError(path, "must be an object with items, or an array of items, found \(json.typeName)")
        }
        guard list.count <= Self.maxItems else { throw CoreFieldError(listPath, "has \(list.count) items; at most \(Self.maxItems) are read") }
        var items: [AgendaItem] = []
        items.reserveCapacity(list.count)
        var seen: [[UInt8]: Int] = [:]
        for (i, v) in list.enumerated() {
            let here = "\(listPath)[\(i)]"
            let item = try Self.item(v, path: here, zone: zone)
            if let first = seen.updateValue(i, forKey: Array(item.id.utf8)) {
                throw CoreFieldError("\(here).id", "duplicates \(listPath)[\(first)].id (\(printable(item.id)))")
            }
            items.append(item)
        }
        try self.init(zone: zone, items: items)
    }

    static func item(_ v: JSONValue, path: String, zone agendaZone: ZoneRules) throws(CoreFieldError) -> AgendaItem {
        guard case .object = v else { throw CoreFieldError(path, "must be an object, found \(v.typeName)") }
        let id: String
        switch v["id"] {
        case .string(let s)?: id = s
        case .int(let n)?: id = String(n)
        case nil: throw CoreFieldError("\(path).id", "is missing; every agenda item needs an id (picks name it)")
        case let other?: throw CoreFieldError("\(path).id", "must be a string or an integer, found \(other.typeName)")
        }
        try ScheduleDocument.checkID(id, path: "\(path).id")
        let title = try text(v, ["title", "name"], path: path, limit: maxTitleBytes, required: true)!
        let stage = try text(v, ["stage", "room", "location"], path: path, limit: maxStageBytes, required: false)
        var zone = agendaZone
        if let tz = v["timezone"] {
            guard case .string(let name) = tz, let z = ZoneRules(identifier: name) else {
                throw CoreFieldError("\(path).timezone", "must be an IANA zone name this system knows, such as Europe/Lisbon")
            }
            zone = z
        }
        let start = try time(v, "start", path: path, zone: zone)
        let end = v["end"] == nil ? start.adding(milliseconds: 30 * 60_000) : try time(v, "end", path: path, zone: zone)
        guard end >= start else { throw CoreFieldError("\(path).end", "(\(end)) is before start (\(start))") }
        guard end.milliseconds - start.milliseconds <= maxDurationMilliseconds else {
            throw CoreFieldError("\(path).end", "is more than 7 days after start")
        }
        var kind = AgendaItemKind.session
        if let k = try text(v, ["kind", "type"], path: path, limit: 32, required: false) {
            switch k.lowercased() {
            case "session", "talk", "panel", "workshop": kind = .session
            case "standup", "stand-up": kind = .standup
            default: throw CoreFieldError("\(path).kind", "(\(printable(k))) must be session or standup")
            }
        }
        var url: String?
        if let u = try text(v, ["url", "href"], path: path, limit: maxURLBytes, required: false) {
            guard u.hasPrefix("https://") || u.hasPrefix("http://"), !u.contains(" ") else {
                throw CoreFieldError("\(path).url", "(\(printable(u))) must be an absolute http or https URL")
            }
            url = u
        }
        return AgendaItem(id: id, title: title, stage: stage, start: start, end: end, kind: kind, url: url)
    }

    private static func text(_ v: JSONValue, _ names: [String], path: String, limit: Int, required: Bool) throws(CoreFieldError) -> String? {
        guard let name = names.first(where: { v[$0] != nil }), let value = v[name], !value.isNull else {
            if required { throw CoreFieldError("\(path).\(names[0])", "is missing") }
            return nil
        }
        guard case .string(let s) = value else { throw CoreFieldError("\(path).\(name)", "must be a string, found \(value.typeName)") }
        guard s.utf8.count <= limit else { throw CoreFieldError("\(path).\(name)", "is \(s.utf8.count) bytes long; at most \(limit) are allowed") }
        guard !s.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7f }) else { throw CoreFieldError("\(path).\(name)", "holds a control character") }
        if required && s.isEmpty { throw CoreFieldError("\(path).\(name)", "is empty") }
        return s
    }

    private static func time(_ v: JSONValue, _ name: String, path: String, zone: ZoneRules) throws(CoreFieldError) -> Instant {
        guard let value = v[name] else { throw CoreFieldError("\(path).\(name)", "is missing") }
        guard case .string(let s) = value, s.utf8.count <= 64 else {
            throw CoreFieldError("\(path).\(name)", "must be an RFC 3339 date-time or a wall-clock time YYYY-MM-DDTHH:MM[:SS], found \(value.typeName)")
        }
        if let i = try? Instant(rfc3339: s) { return i }
        do {
            let local = try LocalDateTime(floating: s)
            guard let i = zone.instant(for: local) else { throw TimestampProblem.outOfRange }
            return i
        } catch {
            throw CoreFieldError("\(path).\(name)", "(\(printable(s))) is neither an RFC 3339 date-time nor a wall-clock time YYYY-MM-DDTHH:MM[:SS]")
        }
    }
}
