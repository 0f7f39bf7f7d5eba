public import SiteKeepJSON

/// One reminder the user set by hand (`sitekeep remind add TEXT --at TIME`): a text, the instant
/// to show it, and the zone it was given in (so it is shown as it was meant).
public struct AdHocReminder: Sendable, Equatable {
    /// Short and typeable (`r1`, `r2`, …): what `remind remove` takes.
    public let id: String
    public let text: String
    public let at: Instant
    public let zone: ZoneRules

    public static let maxTextBytes = 200

    public init(id: String, text: String, at: Instant, zone: ZoneRules) {
        self.id = id; self.text = text; self.at = at; self.zone = zone
    }

    /// The agenda item the planner and the deliverer see: kind ``AgendaItemKind/reminder``, from
    /// its time to a day later (a daemon that was not running shows it late within that day).
    public var item: AgendaItem {
        AgendaItem(id: id, title: text, start: at, end: at.adding(milliseconds: AdHocReminders.graceMilliseconds), kind: .reminder)
    }
}

/// The user's own reminders, in `HOME/core/reminders-adhoc.json` (`sitekeep.reminders.adhoc.v1`).
///
/// They are delivered as every other reminder is: ``input`` makes them one more
/// ``ReminderInput`` (site id ``siteID``, lead 0), so the same ledger keeps them from showing
/// twice and the same loop shows them on time.
public struct AdHocReminders: Sendable, Equatable {
    public static let format = "sitekeep.reminders.adhoc.v1"
    /// The ledger's site id for them: not a site id (those are letters, digits and `-`).
    public static let siteID = "~reminders"
    /// The most kept at once.
    public static let maxCount = 256
    /// How long after its time an undelivered reminder is still shown (late), and then dropped.
    public static let graceMilliseconds: Int64 = 86_400_000
    /// How far ahead one may be set.
    public static let maxAheadMilliseconds: Int64 = 366 * 86_400_000

    public private(set) var reminders: [AdHocReminder]

    public init(reminders: [AdHocReminder] = []) { self.reminders = reminders }

    /// Reads the file's JSON. - Throws: ``CoreFieldError`` naming the bad member.
    public init(json: JSONValue, path: String = "reminders") throws(CoreFieldError) {
        guard json["format"]?.stringValue == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format)") }
        var out: [AdHocReminder] = []
        for (i, v) in (json["reminders"]?.arrayValue ?? []).prefix(Self.maxCount).enumerated() {
            let p = "\(path).reminders[\(i)]"
            guard let id = v["id"]?.stringValue, let text = v["text"]?.stringValue, let at = v["at"]?.stringValue.flatMap({ try? Instant(rfc3339: $0) }),
                  let zone = v["zone"]?.stringValue.flatMap(ZoneRules.init(identifier:)) else {
                throw CoreFieldError(p, "must hold id, text, at (RFC 3339) and zone (an IANA zone name)")
            }
            // The file may have been edited by hand or by another program: held to what `add` allows.
            guard id.utf8.count <= 8, id.first == "r", let n = Int(id.dropFirst()), n > 0, "r\(n)" == id else {
                throw CoreFieldError("\(p).id", "(\(printable(id))) must be r1, r2, …")
            }
            guard !text.isEmpty, text.utf8.count <= AdHocReminder.maxTextBytes, !hasControlCharacters(text) else {
                throw CoreFieldError("\(p).text", "must be 1 to \(AdHocReminder.maxTextBytes) bytes on one line, without control characters")
            }
            guard !out.contains(where: { $0.id == id }) else { throw CoreFieldError("\(p).id", "(\(id)) is there twice") }
            out.append(AdHocReminder(id: id, text: text, at: at, zone: zone))
        }
        reminders = out
    }

    public var json: JSONValue {
        .object([JSONMember(key: "format", value: .string(Self.format)),
                 JSONMember(key: "reminders", value: .array(reminders.map { r in
                     .object([JSONMember(key: "id", value: .string(r.id)), JSONMember(key: "text", value: .string(r.text)),
                              JSONMember(key: "at", value: .string(r.at.rfc3339)), JSONMember(key: "zone", value: .string(r.zone.identifier))])
                 }))])
    }

    /// Adds one; reminders more than a day past are dropped first.
    /// - Throws: for an empty or over-long text, a control character, a time in the past or more
    ///   than a year ahead, or too many reminders.
    @discardableResult
    public mutating func add(text: String, at: Instant, zone: ZoneRules, now: Instant) throws(CoreFieldError) -> AdHocReminder {
        let trimmed = text.trimmingSpaces
        guard !trimmed.isEmpty else { throw CoreFieldError("TEXT", "is empty; say what to be reminded of, e.g. sitekeep remind add 'Call Ana' --in 20m") }
        guard trimmed.utf8.count <= AdHocReminder.maxTextBytes else { throw CoreFieldError("TEXT", "is longer than \(AdHocReminder.maxTextBytes) bytes; shorten it") }
        guard !hasControlCharacters(trimmed) else { throw CoreFieldError("TEXT", "has a control character (a new line or tab); write it on one line") }
        guard at > now else {
            throw CoreFieldError("the time", "\(Self.stamp(at, zone)) is in the past (it is now \(Self.stamp(now, zone))); give a later time, or --in 20m")
        }
        guard at.milliseconds - now.milliseconds <= Self.maxAheadMilliseconds else {
            throw CoreFieldError("the time", "\(Self.stamp(at, zone)) is more than a year ahead; a calendar suits that better ('sitekeep schedule export')")
        }
        prune(now: now)
        guard reminders.count < Self.maxCount else { throw CoreFieldError("reminders", "already holds \(Self.maxCount); remove some with 'sitekeep remind remove ID'") }
        var n = 1
        let taken = Set(reminders.map(\.id))
        while taken.contains("r\(n)") { n += 1 }
        let r = AdHocReminder(id: "r\(n)", text: trimmed, at: at, zone: zone)
        reminders.append(r)
        reminders.sort { $0.at != $1.at ? $0.at < $1.at : $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        return r
    }

    /// Removes the reminder `id`. - Returns: it, or nil when there is none of that id.
    public mutating func remove(id: String) -> AdHocReminder? {
        guard let i = reminders.firstIndex(where: { $0.id == id }) else { return nil }
        return reminders.remove(at: i)
    }

    /// Drops the reminders whose day of grace has passed.
    public mutating func prune(now: Instant) {
        reminders.removeAll { $0.at.adding(milliseconds: Self.graceMilliseconds) <= now }
    }

    /// What the deliverer is given: every reminder as a picked item of a one-off agenda, lead 0.
    /// Nil when there are none.
    public var input: ReminderInput? {
        guard !reminders.isEmpty else { return nil }
        let items = reminders.map(\.item)
        // Zone of the agenda: the first reminder's; each reminder's own zone is kept for display.
        guard let agenda = try? Agenda(zone: reminders[0].zone, items: items),
              let schedule = try? ScheduleDocument(picks: items.map { SchedulePick(validatedID: $0.id, at: .milliseconds($0.start)) }) else { return nil }
        return ReminderInput(siteID: Self.siteID, schedule: schedule, agenda: agenda,
                             policy: ReminderPolicy(leads: [.reminder: 0], remindEveryStandup: false))
    }

    /// `2026-12-05 09:30 Europe/Lisbon`: a time with the zone it is in.
    public static func stamp(_ instant: Instant, _ zone: ZoneRules) -> String {
        let l = zone.local(instant)
        return l.description.prefix(10) + " " + l.hourMinute + " " + zone.identifier
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}

/// Reads the times `remind add` takes.
public enum ReminderTime {
    /// `--at`: `HH:MM` (its next occurrence in `zone`: today, or tomorrow once it has passed, as
    /// `at(1)` reads it), `YYYY-MM-DD HH:MM` or `YYYY-MM-DDTHH:MM[:SS]` (in
    /// `zone`), or RFC 3339 with its own offset (`2026-12-05T09:30:00Z`).
    /// - Throws: naming the text and the forms accepted.
    public static func at(_ text: String, zone: ZoneRules, now: Instant) throws(CoreFieldError) -> Instant {
        let t = text.trimmingSpaces
        let forms = "give HH:MM (the next one), 'YYYY-MM-DD HH:MM' (in \(zone.identifier)) or an RFC 3339 time such as 2026-12-05T09:30:00Z"
        if let i = try? Instant(rfc3339: t) { return i }
        var local: LocalDateTime?
        let b = Array(t.utf8)
        if b.count == 5, b[2] == UInt8(ascii: ":"), let h = Int(t.prefix(2)), let m = Int(t.suffix(2)), t.prefix(2).allSatisfy(\.isASCII) {
            let today = zone.local(now)
            local = LocalDateTime(year: today.year, month: today.month, day: today.day, hour: h, minute: m)
            guard local != nil else { throw CoreFieldError("--at", "\(printable(t)) is not a time of day; \(forms)") }
            // Passed today: the same time tomorrow (a day later on the wall clock of `zone`).
            if let i = local.flatMap({ zone.instant(for: $0) }), i <= now {
                let tomorrow = zone.local(now.adding(milliseconds: 86_400_000))
                local = LocalDateTime(year: tomorrow.year, month: tomorrow.month, day: tomorrow.day, hour: h, minute: m)
            }
        } else if b.count >= 16, b[10] == UInt8(ascii: " ") || b[10] == UInt8(ascii: "T") {
            local = try? LocalDateTime(floating: String(t.prefix(10)) + "T" + String(t.dropFirst(11)))
        }
        guard let local else { throw CoreFieldError("--at", "\(printable(t)) is not a time SiteKeep reads; \(forms)") }
        guard let i = zone.instant(for: local) else { throw CoreFieldError("--at", "\(printable(t)) is out of range; \(forms)") }
        return i
    }

    /// `--in`: a duration such as `20m`, `90s`, `2h`, `1h30m` or `1d`, added to `now`.
    /// - Throws: naming the text and the form.
    public static func after(_ text: String, now: Instant) throws(CoreFieldError) -> Instant {
        let t = text.trimmingSpaces
        let bad = CoreFieldError("--in", "\(printable(t)) is not a duration; give a number with s, m, h or d, e.g. 20m, 90s, 1h30m")
        var total: Int64 = 0, number: Int64? = nil
        for c in t.utf8 {
            if c >= 48 && c <= 57 {
                let n = (number ?? 0) * 10 + Int64(c - 48)
                guard n < 1_000_000 else { throw bad }
                number = n
            } else {
                guard let n = number else { throw bad }
                switch c {
                case UInt8(ascii: "s"): total += n * 1000
                case UInt8(ascii: "m"): total += n * 60_000
                case UInt8(ascii: "h"): total += n * 3_600_000
                case UInt8(ascii: "d"): total += n * 86_400_000
                default: throw bad
                }
                number = nil
            }
        }
        guard number == nil, !t.isEmpty else { throw bad }
        guard total > 0 else { throw CoreFieldError("--in", "\(printable(t)) is no time at all; give more than 0, e.g. 20m") }
        return now.adding(milliseconds: total)
    }
}

extension CoreStateDirectory {
    /// `HOME/core/reminders-adhoc.json`: the user's own reminders (``AdHocReminders``).
    public var adHocRemindersFile: String { root + "/reminders-adhoc.json" }

    /// The user's own reminders (none when the file is absent). - Throws: when it is not one.
    public func adHocReminders() throws(CoreFileError) -> AdHocReminders {
        guard let v = try readJSON(adHocRemindersFile, limit: 1 << 20) else { return AdHocReminders() }
        do { return try AdHocReminders(json: v) } catch { throw CoreFileError(path: adHocRemindersFile, reason: "\(error.description); move it aside to start again") }
    }

    public func setAdHocReminders(_ r: AdHocReminders) throws(CoreFileError) { try writeJSON(r.json, to: adHocRemindersFile) }
}
