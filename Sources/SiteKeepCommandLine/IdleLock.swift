/// The daemon's idle lifetime, as `--idle-lock` gives it (like `ssh-add -t`).
enum IdleLock {
    /// The default: 15 minutes.
    static let defaultSeconds = 15 * 60
    /// The longest: one day.
    static let maximumSeconds = 24 * 60 * 60

    /// Seconds from `90s`, `15m`, `2h`, `1d`, or a bare number of minutes (`15`).
    /// - Throws: ``UsageError`` naming the accepted forms.
    static func parse(_ text: String, command: String) throws(UsageError) -> Int {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit = 60
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n > 0,
              n <= maximumSeconds / unit else {
            throw UsageError("--idle-lock must be a duration from 1s to 1d such as 90s, 15m or 2h (a bare number is minutes), not '\(text)'", command: command)
        }
        return n * unit
    }
}
