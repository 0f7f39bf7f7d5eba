import SiteKeepSystem

/// A document the core refused, naming the JSON path of the bad field and what is wrong with it.
///
/// Every validator of the core (schedules, agendas, workflows, read marks) throws this, so a
/// caller can show `args.picks[3].at is not an RFC 3339 date-time …` and a test can pin the path.
public struct CoreFieldError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path of the bad field, e.g. `schedule.picks[3].at` (the root name is the caller's).
    public let path: String
    /// What is wrong, as a phrase that follows the path.
    public let problem: String

    public init(_ path: String, _ problem: String) {
        self.path = path
        self.problem = problem
    }

    public var description: String { "\(path) \(problem)" }
}

/// A short, printable rendering of text from outside (for messages), quoted: hidden characters,
/// quotes and backslashes escaped by SiteKeep's one display escaper (``DisplayText``), at most 40
/// characters.
package func printable(_ text: String) -> String {
    "\"" + DisplayText.escaped(text, limit: 40) + "\""
}

/// Whether `text` has a C0 control character or DEL (refused in ids and titles: they would break
/// a notification, a calendar line or a terminal).
func hasControlCharacters(_ text: String) -> Bool {
    text.utf8.contains { $0 < 0x20 || $0 == 0x7f }
}
