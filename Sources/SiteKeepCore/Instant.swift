/// A point in time as milliseconds since the Unix epoch (UTC), the unit the sites write
/// (`Date.now()` in the page).
///
/// Only instants from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z exist here: what the
/// sites write and what RFC 3339 can spell with a four-digit year.
///
/// ```swift
/// let a = try Instant(rfc3339: "2026-10-25T01:05:00+00:00")
/// a.milliseconds            // 1792890300000
/// a.rfc3339                 // "2026-10-25T01:05:00.000Z"
/// ```
public struct Instant: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let milliseconds: Int64

    /// The first and last instants representable.
    public static let earliest = Instant(unchecked: 0)
    public static let latest = Instant(unchecked: 253_402_300_799_999)

    /// - Returns: nil when `milliseconds` is outside ``earliest``…``latest``.
    public init?(milliseconds: Int64) {
        guard (Self.earliest.milliseconds...Self.latest.milliseconds).contains(milliseconds) else { return nil }
        self.milliseconds = milliseconds
    }

    init(unchecked milliseconds: Int64) { self.milliseconds = milliseconds }

    /// Seconds since the epoch (the remainder of a millisecond dropped).
    public var seconds: Int64 { milliseconds / 1000 }

    /// This instant moved by `milliseconds` (clamped to the representable range).
    public func adding(milliseconds delta: Int64) -> Instant {
        let (sum, overflow) = milliseconds.addingReportingOverflow(delta)
        if overflow { return delta < 0 ? .earliest : .latest }
        return Instant(unchecked: min(max(sum, Self.earliest.milliseconds), Self.latest.milliseconds))
    }

    public static func < (a: Instant, b: Instant) -> Bool { a.milliseconds < b.milliseconds }

    /// UTC, with milliseconds: `2026-10-25T01:05:00.000Z`.
    public var rfc3339: String {
        let f = CivilTime(utcMilliseconds: milliseconds)
        return f.formatted(separator: "T") + "." + pad(Int(milliseconds % 1000), 3) + "Z"
    }

    public var description: String { rfc3339 }
}

/// Why a timestamp was refused (the caller adds the JSON path).
public enum TimestampProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed
    case outOfRange
    case leapSecond

    public var description: String {
        switch self {
        case .malformed: "is not an RFC 3339 date-time such as 2026-11-10T09:30:00Z or 2026-11-10T09:30:00+00:00"
        case .outOfRange: "is outside 1970-01-01T00:00:00Z … 9999-12-31T23:59:59.999Z"
        case .leapSecond: "names a leap second (:60), which SiteKeep does not accept"
        }
    }
}

extension Instant {
    /// Parses an RFC 3339 `date-time` (§5.6): `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, `T`/`t`
    /// and `Z`/`z` in either case, a fraction of 1 to 9 digits (kept to the millisecond, the rest
    /// dropped). No other spelling: no space for `T`, no missing seconds, no offset without a colon.
    ///
    /// - Throws: ``TimestampProblem``.
    public init(rfc3339 text: String) throws(TimestampProblem) {
        var p = DigitScanner(text)
        let local = try p.localDateTime(requireSeconds: true)
        guard let offset = try p.offset() else { throw .malformed }
        guard p.atEnd else { throw .malformed }
        let ms = local.localMilliseconds - Int64(offset) * 1000
        guard let i = Instant(milliseconds: ms) else { throw .outOfRange }
        self = i
    }
}

/// A wall-clock date and time without a zone (a "floating" local time), to the millisecond.
public struct LocalDateTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int

    /// - Returns: nil when a field is out of its range (day checked against the month, leap years included).
    public init?(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0, millisecond: Int = 0) {
        guard (1970...9999).contains(year), (1...12).contains(month), (1...CivilTime.daysIn(month: month, year: year)).contains(day),
              (0...23).contains(hour), (0...59).contains(minute), (0...59).contains(second), (0...999).contains(millisecond) else { return nil }
        self.year = year; self.month = month; self.day = day
        self.hour = hour; self.minute = minute; self.second = second; self.millisecond = millisecond
    }

    /// Parses `YYYY-MM-DDTHH:MM[:SS[.fraction]]` with no offset.
    public init(floating text: String) throws(TimestampProblem) {
        var p = DigitScanner(text)
        let v = try p.localDateTime(requireSeconds: false)
        guard p.atEnd else { throw .malformed }
        self = v
    }

    /// Milliseconds since the epoch if this wall-clock time were UTC.
    public var localMilliseconds: Int64 {
        let days = CivilTime.daysFromCivil(year: year, month: month, day: day)
        return ((days * 24 + Int64(hour)) * 60 + Int64(minute)) * 60_000 + Int64(second) * 1000 + Int64(millisecond)
    }

    /// The wall-clock fields of `localMilliseconds` (an instant shifted by a zone offset).
    public init(localMilliseconds ms: Int64) {
        let c = CivilTime(utcMilliseconds: ms)
        self.year = c.year; self.month = c.month; self.day = c.day
        self.hour = c.hour; self.minute = c.minute; self.second = c.second
        self.millisecond = Int(((ms % 1000) + 1000) % 1000)
    }

    public static func < (a: LocalDateTime, b: LocalDateTime) -> Bool { a.localMilliseconds < b.localMilliseconds }

    /// `20261025T010500`, the RFC 5545 local form (milliseconds dropped).
    public var icalendar: String {
        pad(year, 4) + pad(month, 2) + pad(day, 2) + "T" + pad(hour, 2) + pad(minute, 2) + pad(second, 2)
    }

    /// `2026-10-25T01:05:00`.
    public var description: String {
        CivilTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second).formatted(separator: "T")
    }

    /// `01:05`.
    public var hourMinute: String { pad(hour, 2) + ":" + pad(minute, 2) }
}

/// Proleptic Gregorian calendar arithmetic on integers (H. Hinnant's days-from-civil).
struct CivilTime {
    var year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int

    init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        self.year = year; self.month = month; self.day = day; self.hour = hour; self.minute = minute; self.second = second
    }

    init(utcMilliseconds ms: Int64) {
        let totalSeconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        var days = totalSeconds >= 0 ? totalSeconds / 86_400 : (totalSeconds - 86_399) / 86_400
        let secs = Int(totalSeconds - days * 86_400)
        hour = secs / 3600; minute = secs / 60 % 60; second = secs % 60
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = Int(doy - (153 * mp + 2) / 5 + 1)
        month = Int(mp < 10 ? mp + 3 : mp - 9)
        year = Int(yoe + era * 400) + (month <= 2 ? 1 : 0)
    }

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    func formatted(separator: String) -> String {
        pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + separator + pad(hour, 2) + ":" + pad(minute, 2) + ":" + pad(second, 2)
    }
}

/// Zero-padded decimal.
func pad(_ value: Int, _ width: Int) -> String {
    let s = String(value)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// Reads the fixed-width fields of RFC 3339 text, byte by byte.
struct DigitScanner {
    private let bytes: [UInt8]
    private var i = 0
    init(_ text: String) { bytes = Array(text.utf8) }
    var atEnd: Bool { i == bytes.count }

    mutating func digits(_ n: Int) throws(TimestampProblem) -> Int {
        guard i + n <= bytes.count else { throw .malformed }
        var v = 0
        for _ in 0..<n {
            let b = bytes[i]
            guard (0x30...0x39).contains(b) else { throw .malformed }
            v = v * 10 + Int(b - 0x30)
            i += 1
        }
        return v
    }

    mutating func expect(_ options: UInt8...) throws(TimestampProblem) {
        guard i < bytes.count, options.contains(bytes[i]) else { throw .malformed }
        i += 1
    }

    mutating func peek(_ b: UInt8) -> Bool { i < bytes.count && bytes[i] == b }

    mutating func localDateTime(requireSeconds: Bool) throws(TimestampProblem) -> LocalDateTime {
        let year = try digits(4); try expect(0x2d)
        let month = try digits(2); try expect(0x2d)
        let day = try digits(2); try expect(0x54, 0x74)
        let hour = try digits(2); try expect(0x3a)
        let minute = try digits(2)
        var second = 0, ms = 0
        if requireSeconds || peek(0x3a) {
            try expect(0x3a)
            second = try digits(2)
            if peek(0x2e) {
                i += 1
                var count = 0
                while i < bytes.count, (0x30...0x39).contains(bytes[i]) {
                    if count < 3 { ms = ms * 10 + Int(bytes[i] - 0x30) }
                    count += 1; i += 1
                }
                guard (1...9).contains(count) else { throw .malformed }
                if count < 3 { for _ in count..<3 { ms *= 10 } }
            }
        }
        if second == 60 { throw .leapSecond }
        guard (1...12).contains(month), day >= 1, day <= CivilTime.daysIn(month: month, year: max(year, 1)),
              hour <= 23, minute <= 59, second <= 59 else { throw .malformed }
        guard let v = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second, millisecond: ms) else {
            throw .outOfRange
        }
        return v
    }

    /// `Z` → 0; `±HH:MM` → seconds east of UTC; nothing → nil.
    mutating func offset() throws(TimestampProblem) -> Int? {
        guard i < bytes.count else { return nil }
        switch bytes[i] {
        case 0x5a, 0x7a: i += 1; return 0
        case 0x2b, 0x2d:
            let sign = bytes[i] == 0x2d ? -1 : 1
            i += 1
            let h = try digits(2); try expect(0x3a)
            let m = try digits(2)
            guard h <= 23, m <= 59 else { throw .malformed }
            return sign * (h * 3600 + m * 60)
        default: throw .malformed
        }
    }
}
