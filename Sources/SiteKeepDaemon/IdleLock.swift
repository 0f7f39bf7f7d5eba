/// The daemon's idle lifetime (like `ssh-add -t`): after this long unused, custody locks.
public enum IdleLock {
    /// The default: 15 minutes.
    public static let defaultSeconds = 15 * 60
    /// The longest: one day.
    public static let maximumSeconds = 24 * 60 * 60

    /// Seconds from `90s`, `15m`, `2h`, `1d`, or a bare number of minutes (`15`); nil for
    /// anything else or outside 1 s … 1 day.
    public static func seconds(parsing text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit = 60
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n > 0,
              n <= maximumSeconds / unit else { return nil }
        return n * unit
    }

    /// `seconds` as the shortest duration text `seconds(parsing:)` reads back: `2h`, `15m`, `90s`.
    public static func text(seconds: Int) -> String {
        for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60)] where seconds > 0 && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }
}
