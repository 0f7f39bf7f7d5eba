public import Foundation
public import SiteKeepSystem

/// A note captured from a page (`capture.save`): the Markdown written into the site's vault
/// and the path it goes to.
public struct CaptureNote: Sendable, Equatable {
    public let title: String
    public let text: String
    public let url: String?

    /// A note; the title and URL may not hold control characters (they are one Markdown line each).
    /// `path` names the arguments in the error (e.g. `args`).
    public init(title: String, text: String, url: String?, path: String = "note") throws(CoreFieldError) {
        if hasControlCharacters(title) { throw CoreFieldError("\(path).title", "holds a control character; a title is one line") }
        if let url, hasControlCharacters(url) { throw CoreFieldError("\(path).url", "holds a control character") }
        self.title = title
        self.text = text
        self.url = url
    }

    /// `# <title>`, a blank line, `<url>` and a blank line when there is one, then the text and a newline.
    public var markdown: String {
        var note = "# \(title)\n\n"
        if let url { note += "<\(url)>\n\n" }
        return note + text + "\n"
    }

    /// `captures/<UTC time>-<slug>-<4 hex>.md`: the time as `YYYYMMDD-HHMMSS`, the slug the
    /// title's lower-case ASCII letters and digits (others `-`, at most 40; `note` when empty),
    /// `tag` four hex digits that keep two notes of one second apart.
    public func path(at date: Date = Date(timeIntervalSince1970: Clocks.wallSeconds()), tag: UInt16 = UInt16.random(in: .min ... .max)) -> String {
        let stamp = date.ISO8601Format(.iso8601.year().month().day().dateSeparator(.omitted).time(includingFractionalSeconds: false).timeSeparator(.omitted))
            .replacingOccurrences(of: "T", with: "-").replacingOccurrences(of: "Z", with: "")
        let slug = String(title.lowercased().unicodeScalars.map { s -> Character in
            (s.value >= 0x61 && s.value <= 0x7a) || (s.value >= 0x30 && s.value <= 0x39) ? Character(s) : "-"
        }.prefix(40))
        let hex = String(tag, radix: 16)
        return "captures/\(stamp)-\(slug.isEmpty ? "note" : slug)-\(String(repeating: "0", count: 4 - hex.count) + hex).md"
    }
}
