import SiteKeepCore
import SiteKeepVaultRemotes

/// The one desktop notification of a lane check that found new messages: how many, and for
/// each of the first few its sender's label and title. Never a body, a link or an attachment;
/// never anything of a token. What an agent wrote (labels are the owner's, titles the agent's)
/// is shown as plain text: control characters dropped, cut to a line, and `&`, `<`, `>`
/// escaped, since a notification server may read the body as markup.
enum LaneNotice {
    /// Messages named in the body; the rest are counted.
    static let named = 5
    /// Longest title or label shown.
    static let maxShown = 80

    static func notification(for check: LaneCheck, now: Instant) -> DesktopNotification {
        let news = check.news
        let title = news.count == 1 ? "SiteKeep: a new message" : "SiteKeep: \(news.count) new messages"
        var lines = news.prefix(named).map { n in
            "\(plain(n.sender)): \(n.title.map(plain) ?? "(no title)")"
        }
        if news.count > named { lines.append("and \(news.count - named) more") }
        if check.seenReset != nil { lines.append("(every unread message is shown again: the record of those already shown was changed outside SiteKeep)") }
        let siteID = news.first?.siteID ?? ""
        return DesktopNotification(key: "lanes/\(news.first?.vault ?? "")/\(news.first?.id ?? "")", siteID: siteID, title: title,
                                   body: lines.joined(separator: "\n"), fireAt: now)
    }

    /// `text` as one line of plain text a notification server shows as written.
    static func plain(_ text: String) -> String {
        var out = ""
        for ch in text.unicodeScalars {
            if out.unicodeScalars.count >= maxShown { out += "…"; break }
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default:
                // C0/C1 controls, line and paragraph separators, bidi controls: dropped.
                let v = ch.value
                if v < 0x20 || (0x7f...0x9f).contains(v) || v == 0x2028 || v == 0x2029 || (0x202a...0x202e).contains(v) || (0x2066...0x2069).contains(v) { continue }
                out.unicodeScalars.append(ch)
            }
        }
        return out
    }
}
