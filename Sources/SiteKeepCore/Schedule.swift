public import SiteKeepJSON

/// When a pick was made, as the site wrote it: milliseconds since the epoch (what the page's
/// `Date.now()` gives) or an RFC 3339 string. The spelling is kept so a page reads back exactly
/// what it wrote.
public enum PickTime: Sendable, Hashable {
    case milliseconds(Instant)
    case text(String, Instant)

    /// The instant, whatever the spelling.
    public var instant: Instant {
        switch self {
        case .milliseconds(let i), .text(_, let i): i
        }
    }

    var json: JSONValue {
        switch self {
        case .milliseconds(let i): .int(i.milliseconds)
        case .text(let s, _): .string(s)
        }
    }
}

/// One pick of a personal schedule: the id of an agenda item and when it was picked.
public struct SchedulePick: Sendable, Hashable {
    /// The agenda item's id (non-empty, at most ``ScheduleDocument/maxIDBytes`` UTF-8 bytes, no control characters).
    public let id: String
    /// When it was picked (the merge rule of the vault compares these).
    public let at: PickTime

    /// - Throws: ``CoreFieldError`` (path `pick.id`) for an id that is empty, too long or holds a control character.
    public init(id: String, at: PickTime) throws(CoreFieldError) {
        try ScheduleDocument.checkID(id, path: "pick.id")
        self.id = id
        self.at = at
    }

    init(validatedID id: String, at: PickTime) {
        self.id = id
        self.at = at
    }
}

/// A site's personal schedule in the sites' own format, `nr.schedule.v1`:
/// `{"v": 1, "picks": [{"id": "…", "at": 1731229200000}, …]}`, validated strictly.
///
/// - `v` is the integer 1;
/// - `picks` is an array of at most ``maxPicks`` objects with exactly `id` and `at`;
/// - `id` is a string of 1 to ``maxIDBytes`` UTF-8 bytes without control characters, unique in
///   the schedule (compared byte for byte, as the page's JavaScript compares them);
/// - `at` is an integer number of milliseconds since the epoch or an RFC 3339 date-time string
///   of at most ``maxTimeTextBytes`` bytes, between 1970 and 9999.
///
/// Anything else is refused with a ``CoreFieldError`` naming the path of the first bad field.
///
/// ```swift
/// let s = try ScheduleDocument(json: value, path: "args")   // args.picks[2].at is not …
/// ```
public struct ScheduleDocument: Sendable, Hashable {
    public static let maxPicks = 1000
    public static let maxIDBytes = 128
    public static let maxTimeTextBytes = 64
    /// The key the sites keep it under in localStorage.
    public static let storageKey = "nr.schedule.v1"

    /// The picks, in the order written.
    public private(set) var picks: [SchedulePick]

    /// An empty schedule.
    public init() { picks = [] }

    /// - Throws: ``CoreFieldError`` for more than ``maxPicks`` picks or a repeated id.
    public init(picks: [SchedulePick]) throws(CoreFieldError) {
        guard picks.count <= Self.maxPicks else {
            throw CoreFieldError("schedule.picks", "has \(picks.count) picks; at most \(Self.maxPicks) are allowed")
        }
        try Self.checkUnique(picks, path: "schedule")
        self.picks = picks
    }

    /// Reads and validates a parsed document; `path` names its root in messages (`args` on the bridge).
    public init(json: JSONValue, path: String = "schedule") throws(CoreFieldError) {
        guard case .object(let members) = json else {
            throw CoreFieldError(path, "must be an nr.schedule.v1 object {\"v\": 1, \"picks\": [...]}, found \(json.typeName)")
        }
        var version: JSONValue?, list: JSONValue?
        for m in members {
            switch m.key {
            case "v": version = m.value
            case "picks": list = m.value
            default: throw CoreFieldError("\(path).\(m.key)", "is not a field of nr.schedule.v1 (only v and picks are)")
            }
        }
        guard let version else { throw CoreFieldError("\(path).v", "is missing; nr.schedule.v1 needs \"v\": 1") }
        guard case .int(let v) = version else { throw CoreFieldError("\(path).v", "must be the integer 1, found \(version.typeName)") }
        guard v == 1 else { throw CoreFieldError("\(path).v", "must be 1 (this is nr.schedule.v1), found \(v)") }
        guard let list else { throw CoreFieldError("\(path).picks", "is missing; give an array, [] for none") }
        guard case .array(let items) = list else { throw CoreFieldError("\(path).picks", "must be an array, found \(list.typeName)") }
        guard items.count <= Self.maxPicks else {
            throw CoreFieldError("\(path).picks", "has \(items.count) picks; at most \(Self.maxPicks) are allowed")
        }
        var picks: [SchedulePick] = []
        picks.reserveCapacity(items.count)
        for (i, item) in items.enumerated() { picks.append(try Self.pick(item, path: "\(path).picks[\(i)]")) }
        try Self.checkUnique(picks, path: path)
        self.picks = picks
    }

    /// Parses and validates JSON text (at most 1 MiB).
    public init(text: String, path: String = "schedule") throws(CoreFieldError) {
        let value: JSONValue
        do { value = try JSONParser.parse(text, limits: .message) } catch {
            throw CoreFieldError(path, "is not valid JSON (\(error.description))")
        }
        try self.init(json: value, path: path)
    }

    /// Refuses the first id that repeats an earlier one (compared byte for byte).
    static func checkUnique(_ picks: [SchedulePick], path: String) throws(CoreFieldError) {
        var seen: [[UInt8]: Int] = [:]
        seen.reserveCapacity(picks.count)
        for (i, p) in picks.enumerated() {
            if let first = seen.updateValue(i, forKey: Array(p.id.utf8)) {
                throw CoreFieldError("\(path).picks[\(i)].id", "duplicates \(path).picks[\(first)].id (\(printable(p.id))); each id may be picked once")
            }
        }
    }

    static func pick(_ value: JSONValue, path: String) throws(CoreFieldError) -> SchedulePick {
        guard case .object(let members) = value else { throw CoreFieldError(path, "must be an object {\"id\", \"at\"}, found \(value.typeName)") }
        var id: JSONValue?, at: JSONValue?
        for m in members {
            switch m.key {
            case "id": id = m.value
            case "at": at = m.value
            default: throw CoreFieldError("\(path).\(m.key)", "is not a field of a pick (only id and at are)")
            }
        }
        guard let id else { throw CoreFieldError("\(path).id", "is missing") }
        guard case .string(let idText) = id else { throw CoreFieldError("\(path).id", "must be a string, found \(id.typeName)") }
        try checkID(idText, path: "\(path).id")
        guard let at else { throw CoreFieldError("\(path).at", "is missing; give milliseconds since the epoch or an RFC 3339 date-time") }
        return SchedulePick(validatedID: idText, at: try time(at, path: "\(path).at"))
    }

    static func checkID(_ id: String, path: String) throws(CoreFieldError) {
        guard !id.isEmpty else { throw CoreFieldError(path, "is empty; a pick needs the agenda item's id") }
        guard id.utf8.count <= maxIDBytes else { throw CoreFieldError(path, "is \(id.utf8.count) bytes long; at most \(maxIDBytes) are allowed") }
        guard !hasControlCharacters(id) else { throw CoreFieldError(path, "holds a control character") }
    }

    /// An `at` value: integer milliseconds or an RFC 3339 string.
    public static func time(_ value: JSONValue, path: String) throws(CoreFieldError) -> PickTime {
        switch value {
        case .int(let ms):
            guard let i = Instant(milliseconds: ms) else { throw CoreFieldError(path, "is \(ms), outside 0 … \(Instant.latest.milliseconds) milliseconds since the epoch") }
            return .milliseconds(i)
        case .double(let d):
            throw CoreFieldError(path, "is \(d); milliseconds since the epoch must be a whole number")
        case .string(let s):
            guard s.utf8.count <= maxTimeTextBytes else { throw CoreFieldError(path, "is \(s.utf8.count) bytes long; an RFC 3339 date-time has at most \(maxTimeTextBytes)") }
            do { return .text(s, try Instant(rfc3339: s)) } catch { throw CoreFieldError(path, "(\(printable(s))) \(error.description)") }
        default:
            throw CoreFieldError(path, "must be milliseconds since the epoch or an RFC 3339 date-time string, found \(value.typeName)")
        }
    }

    /// `{"v": 1, "picks": [...]}`, each `at` in the spelling it was written in.
    public var json: JSONValue {
        .object([JSONMember(key: "v", value: .int(1)),
                 JSONMember(key: "picks", value: .array(picks.map { .object([JSONMember(key: "id", value: .string($0.id)), JSONMember(key: "at", value: $0.at.json)]) }))])
    }

    /// Compact JSON text, as the page keeps it in localStorage.
    public var text: String { JSONSerializer.string(json) }

    /// Whether `id` is picked (compared byte for byte).
    public func contains(id: String) -> Bool { picks.contains { $0.id.hasSameUTF8(as: id) } }

    /// Adds a pick made at `at` (milliseconds, as the page writes it).
    /// - Returns: false when `id` was already picked (the schedule is unchanged).
    /// - Throws: ``CoreFieldError`` for a bad id or a full schedule.
    @discardableResult
    public mutating func add(id: String, at: Instant) throws(CoreFieldError) -> Bool {
        try Self.checkID(id, path: "pick.id")
        guard !contains(id: id) else { return false }
        guard picks.count < Self.maxPicks else { throw CoreFieldError("schedule.picks", "already holds \(Self.maxPicks) picks, the most allowed") }
        picks.append(SchedulePick(validatedID: id, at: .milliseconds(at)))
        return true
    }

    /// Removes the pick `id`. - Returns: false when it was not picked.
    @discardableResult
    public mutating func remove(id: String) -> Bool {
        guard let i = picks.firstIndex(where: { $0.id.hasSameUTF8(as: id) }) else { return false }
        picks.remove(at: i)
        return true
    }
}
