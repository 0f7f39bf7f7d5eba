internal import SiteKeepDaemon

extension IdleLock {
    /// Seconds from `--idle-lock`'s `90s`, `15m`, `2h`, `1d`, or a bare number of minutes (`15`).
    /// - Throws: ``UsageError`` naming the accepted forms.
    static func parse(_ text: String, command: String) throws(UsageError) -> Int {
        guard let seconds = seconds(parsing: text) else {
            throw UsageError("--idle-lock must be a duration from 1s to 1d such as 90s, 15m or 2h (a bare number is minutes), not '\(text)'", command: command)
        }
        return seconds
    }
}
