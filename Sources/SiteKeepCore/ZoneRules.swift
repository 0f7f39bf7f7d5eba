import Foundation

/// A time zone's rules (from the system's tz database through Foundation's `TimeZone`), with the
/// two questions the core asks: the offset at an instant, and which instant a wall-clock time
/// names.
///
/// Wall-clock times are resolved as RFC 5545 §3.3.5 says, so the agenda, the reminders and the
/// calendar export agree: a time that occurs twice (when summer time ends) names the first
/// occurrence; a time that does not occur (when it starts) is read with the offset before the gap.
public struct ZoneRules: Sendable, Equatable {
    /// The IANA name, e.g. `Europe/Lisbon`.
    public let identifier: String
    let zone: TimeZone

    /// - Returns: nil when the system has no zone of that name.
    public init?(identifier: String) {
        guard identifier.utf8.count <= 64, !hasControlCharacters(identifier), let z = TimeZone(identifier: identifier) else { return nil }
        self.identifier = identifier
        self.zone = z
    }

    /// UTC.
    public static let utc = ZoneRules(identifier: "UTC")!

    public static func == (a: ZoneRules, b: ZoneRules) -> Bool { a.identifier == b.identifier }

    /// Seconds east of UTC at `instant`.
    public func offset(at instant: Instant) -> Int {
        zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(instant.milliseconds) / 1000))
    }

    /// Whether summer (daylight saving) time is in force at `instant`.
    public func isDaylightSaving(at instant: Instant) -> Bool {
        zone.isDaylightSavingTime(for: Date(timeIntervalSince1970: Double(instant.milliseconds) / 1000))
    }

    /// The zone's abbreviation at `instant` (as the system spells it, e.g. `GMT+1`).
    public func abbreviation(at instant: Instant) -> String? {
        zone.abbreviation(for: Date(timeIntervalSince1970: Double(instant.milliseconds) / 1000))
    }

    /// The wall-clock time at `instant`.
    public func local(_ instant: Instant) -> LocalDateTime {
        LocalDateTime(localMilliseconds: instant.milliseconds + Int64(offset(at: instant)) * 1000)
    }

    /// The instant `local` names in this zone (RFC 5545 §3.3.5: the first of two occurrences;
    /// the offset before a gap).
    public func instant(for local: LocalDateTime) -> Instant? {
        let t = local.localMilliseconds
        let day: Int64 = 86_400_000
        guard let before = Instant(milliseconds: max(t - day, 0)), let after = Instant(milliseconds: min(t + day, Instant.latest.milliseconds)) else { return nil }
        let offsets = [offset(at: before), offset(at: after)]
        var valid: [Int64] = []
        for o in offsets {
            let candidate = t - Int64(o) * 1000
            if let c = Instant(milliseconds: candidate), offset(at: c) == o, !valid.contains(candidate) { valid.append(candidate) }
        }
        if let first = valid.min() { return Instant(milliseconds: first) }
        return Instant(milliseconds: t - Int64(offsets[0]) * 1000)
    }

    /// Whether the wall-clock time at `at` occurs twice (the hour repeated when summer time ends),
    /// whichever of the two occurrences `at` is.
    public func isAmbiguousWallClock(_ at: Instant) -> Bool {
        let t = local(at).localMilliseconds
        let day: Int64 = 86_400_000
        guard let before = Instant(milliseconds: max(t - day, 0)), let after = Instant(milliseconds: min(t + day, Instant.latest.milliseconds)) else { return false }
        var valid = Set<Int64>()
        for o in [offset(at: before), offset(at: after)] {
            let candidate = t - Int64(o) * 1000
            if let c = Instant(milliseconds: candidate), offset(at: c) == o { valid.insert(candidate) }
        }
        return valid.count > 1
    }

    /// Whether `instant` is the second occurrence of its wall-clock time (the repeated hour when
    /// summer time ends): its local time would name another instant, so a calendar must write it in UTC.
    public func isRepeatedWallClock(_ at: Instant) -> Bool {
        self.instant(for: local(at)) != at
    }

    /// One change of offset.
    public struct Transition: Sendable, Equatable {
        public let at: Instant
        public let offsetBefore: Int
        public let offsetAfter: Int
        public let isDaylightSaving: Bool
        public let abbreviation: String?
    }

    /// The offset changes after `start` up to `end`, in order (at most 1,000).
    public func transitions(after start: Instant, through end: Instant) -> [Transition] {
        var out: [Transition] = []
        var cursor = Date(timeIntervalSince1970: Double(start.milliseconds) / 1000)
        while out.count < 1000, let next = zone.nextDaylightSavingTimeTransition(after: cursor) {
            let ms = Int64((next.timeIntervalSince1970 * 1000).rounded())
            guard let at = Instant(milliseconds: ms), at <= end else { break }
            out.append(Transition(at: at, offsetBefore: offset(at: at.adding(milliseconds: -1000)), offsetAfter: offset(at: at),
                                  isDaylightSaving: isDaylightSaving(at: at), abbreviation: abbreviation(at: at)))
            cursor = next
        }
        return out
    }
}
