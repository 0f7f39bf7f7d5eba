public import SiteKeepJSON

/// What the calendar export remembers between runs, so a re-import updates events rather than
/// duplicating them: per UID, a fingerprint of what was exported and its `SEQUENCE`.
///
/// Kept as `sitekeep.calendar.v1` JSON. UIDs of removed picks stay, so a pick removed and added
/// again continues its sequence.
public struct CalendarExportState: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var fingerprint: String
        public var sequence: Int
    }
    public private(set) var entries: [String: Entry]
    static let format = "sitekeep.calendar.v1"

    public init() { entries = [:] }

    /// Reads the JSON form. - Throws: ``CoreFieldError`` naming the bad member.
    public init(json: JSONValue, path: String = "calendar") throws(CoreFieldError) {
        guard json["format"]?.stringValue == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format)") }
        guard case .array(let list)? = json["events"] else { throw CoreFieldError("\(path).events", "must be an array") }
        var entries: [String: Entry] = [:]
        for (i, e) in list.enumerated() {
            guard let uid = e["uid"]?.stringValue, let fp = e["fingerprint"]?.stringValue, let seq = e["sequence"]?.intValue, (0...Int64(Int32.max)).contains(seq) else {
                throw CoreFieldError("\(path).events[\(i)]", "must hold uid, fingerprint and a sequence ≥ 0")
            }
            entries[uid] = Entry(fingerprint: fp, sequence: Int(seq))
        }
        self.entries = entries
    }

    public var json: JSONValue {
        let sorted = entries.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return .object([JSONMember(key: "format", value: .string(Self.format)),
                        JSONMember(key: "events", value: .array(sorted.map { uid, e in
                            .object([JSONMember(key: "uid", value: .string(uid)), JSONMember(key: "fingerprint", value: .string(e.fingerprint)),
                                     JSONMember(key: "sequence", value: .int(Int64(e.sequence)))])
                        }))])
    }

    /// The sequence for `uid` now exporting `fingerprint`: unchanged → the same; changed → one more.
    mutating func sequence(uid: String, fingerprint: String) -> Int {
        guard let e = entries[uid] else {
            entries[uid] = Entry(fingerprint: fingerprint, sequence: 0)
            return 0
        }
        if e.fingerprint == fingerprint { return e.sequence }
        let next = Entry(fingerprint: fingerprint, sequence: e.sequence + 1)
        entries[uid] = next
        return next.sequence
    }
}

/// The picks as an RFC 5545 calendar: one `VEVENT` per pick the agenda knows, its times in the
/// agenda's zone with that zone's `VTIMEZONE`, a stable `UID` per pick and site, `SEQUENCE`
/// bumped when the event changes, and a `VALARM` for the reminder lead.
///
/// A wall-clock time that occurs twice (the hour repeated when summer time ends) is written in
/// UTC, whichever occurrence it is: RFC 5545 §3.3.5 reads `TZID` and such a local time as the
/// first occurrence, but libical 3 reads it as the second (the calendar interop test caught it),
/// so a UTC time is the only spelling every reader takes the same way.
///
/// ```swift
/// var state = CalendarExportState()
/// let out = CalendarExport.render(schedule: s, agenda: a, host: "promptugal.news", state: &state, now: clock.now())
/// ```
public enum CalendarExport {
    /// The calendar and the ids of picks the agenda lacks (not exported: they have no time).
    public struct Output: Sendable, Equatable {
        public let text: String
        public let exported: [String]
        public let skipped: [String]
    }

    /// The `UID` of the pick `id` on the site at `host`: the id percent-encoded (every byte
    /// outside `A-Z a-z 0-9 . _ -`), `@`, the host.
    public static func uid(pickID id: String, host: String) -> String {
        var out = "pick-"
        for b in id.utf8 {
            if (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b) || (0x30...0x39).contains(b) || b == 0x2e || b == 0x5f || b == 0x2d {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + (b < 16 ? "0" : "") + String(b, radix: 16, uppercase: true)
            }
        }
        return out + "@" + host
    }

    public static func render(schedule: ScheduleDocument, agenda: Agenda, host: String, policy: ReminderPolicy = .standard,
                              state: inout CalendarExportState, now: Instant, name: String? = nil) -> Output {
        let zone = agenda.zone
        var events: [(uid: String, item: AgendaItem)] = []
        var skipped: [String] = []
        for entry in schedule.entries(in: agenda) {
            if let item = entry.item { events.append((uid(pickID: entry.pick.id, host: host), item)) } else { skipped.append(entry.pick.id) }
        }
        var w = ICalendarWriter()
        w.line("BEGIN:VCALENDAR")
        w.line("VERSION:2.0")
        w.line("PRODID:-//SiteKeep//Schedule export 1//EN")
        w.line("CALSCALE:GREGORIAN")
        if let name { w.line("X-WR-CALNAME:" + ICalendarWriter.text(name)) }
        if let first = events.map(\.item.start).min(), let last = events.map(\.item.end).max() {
            timezone(zone, from: first.adding(milliseconds: -366 * 86_400_000), through: last.adding(milliseconds: 366 * 86_400_000), into: &w)
        }
        let stamp = utcForm(now)
        for (uid, item) in events {
            let lead = policy.lead(for: item.kind)
            let fingerprint = [String(item.start.milliseconds), String(item.end.milliseconds), item.title, item.stage ?? "", item.url ?? "",
                               String(lead), zone.identifier].joined(separator: "\u{1f}")
            let sequence = state.sequence(uid: uid, fingerprint: fingerprint)
            w.line("BEGIN:VEVENT")
            w.line("UID:" + uid)
            w.line("DTSTAMP:" + stamp)
            w.line(dateTime("DTSTART", item.start, zone: zone))
            w.line(dateTime("DTEND", item.end, zone: zone))
            w.line("SUMMARY:" + ICalendarWriter.text(item.title))
            if let stage = item.stage { w.line("LOCATION:" + ICalendarWriter.text(stage)) }
            if let url = item.url { w.line("URL:" + url) }
            w.line("SEQUENCE:\(sequence)")
            w.line("STATUS:CONFIRMED")
            w.line("TRANSP:OPAQUE")
            w.line("BEGIN:VALARM")
            w.line("ACTION:DISPLAY")
            w.line("DESCRIPTION:" + ICalendarWriter.text(item.title))
            w.line("TRIGGER:" + duration(-lead))
            w.line("END:VALARM")
            w.line("END:VEVENT")
        }
        w.line("END:VCALENDAR")
        return Output(text: w.text, exported: events.map(\.uid), skipped: skipped)
    }

    static func utcForm(_ i: Instant) -> String {
        LocalDateTime(localMilliseconds: i.milliseconds - i.milliseconds % 1000).icalendar + "Z"
    }

    /// `DTSTART;TZID=Europe/Lisbon:20261110T093000`, or UTC in the repeated hour (and for UTC).
    static func dateTime(_ name: String, _ i: Instant, zone: ZoneRules) -> String {
        if zone.identifier == "UTC" || zone.isAmbiguousWallClock(i) { return "\(name):\(utcForm(i))" }
        return "\(name);TZID=\(zone.identifier):\(zone.local(i).icalendar)"
    }

    /// `-PT10M`, `-PT90S`, `PT0S`.
    static func duration(_ ms: Int64) -> String {
        let sign = ms < 0 ? "-" : ""
        let s = abs(ms) / 1000
        if s % 60 == 0 { return "\(sign)PT\(s / 60)M" }
        return "\(sign)PT\(s)S"
    }

    static func offsetText(_ seconds: Int) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let a = abs(seconds)
        return sign + pad(a / 3600, 2) + pad(a / 60 % 60, 2) + (a % 60 == 0 ? "" : pad(a % 60, 2))
    }

    /// The `VTIMEZONE` of `zone` over the span: the observance in force at its start, then one
    /// per change of offset (each onset written as the local time before the change, as §3.6.5 wants).
    static func timezone(_ zone: ZoneRules, from start: Instant, through end: Instant, into w: inout ICalendarWriter) {
        w.line("BEGIN:VTIMEZONE")
        w.line("TZID:" + zone.identifier)
        let o0 = zone.offset(at: start)
        observance(zone.isDaylightSaving(at: start) ? "DAYLIGHT" : "STANDARD", onset: LocalDateTime(localMilliseconds: start.seconds * 1000 + Int64(o0) * 1000),
                   from: o0, to: o0, name: zone.abbreviation(at: start), into: &w)
        for t in zone.transitions(after: start, through: end) {
            observance(t.isDaylightSaving ? "DAYLIGHT" : "STANDARD", onset: LocalDateTime(localMilliseconds: t.at.milliseconds + Int64(t.offsetBefore) * 1000),
                       from: t.offsetBefore, to: t.offsetAfter, name: t.abbreviation, into: &w)
        }
        w.line("END:VTIMEZONE")
    }

    private static func observance(_ kind: String, onset: LocalDateTime, from: Int, to: Int, name: String?, into w: inout ICalendarWriter) {
        w.line("BEGIN:\(kind)")
        w.line("DTSTART:" + onset.icalendar)
        w.line("TZOFFSETFROM:" + offsetText(from))
        w.line("TZOFFSETTO:" + offsetText(to))
        if let name, !name.isEmpty { w.line("TZNAME:" + ICalendarWriter.text(name)) }
        w.line("END:\(kind)")
    }
}

/// Content lines as RFC 5545 §3.1 wants them: CRLF ends, folded at 75 octets (never inside a
/// UTF-8 sequence), TEXT values escaped.
struct ICalendarWriter {
    private(set) var text = ""

    mutating func line(_ content: String) {
        var octets = 0
        var first = true
        for ch in content {
            let n = String(ch).utf8.count
            if octets + n > (first ? 75 : 74) {
                text += "\r\n "
                octets = 0
                first = false
            }
            text.append(ch)
            octets += n
        }
        text += "\r\n"
    }

    /// A TEXT value: `\` `;` `,` escaped, line breaks as `\n`, other control characters dropped.
    static func text(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "\\": out += "\\\\"
            case ";": out += "\\;"
            case ",": out += "\\,"
            case "\n": out += "\\n"
            case "\t": out += " "
            default:
                if u.value >= 0x20 && u.value != 0x7f { out.unicodeScalars.append(u) }
            }
        }
        return out
    }
}
