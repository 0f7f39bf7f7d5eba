/// What a view does with a response that would fill one of its frames (the main frame or any
/// iframe, of any origin): show it, or refuse it. SiteKeep's browser does not download files, so
/// nothing else exists: WebKit's own default (an attachment is downloaded into the XDG download
/// folder, or `$HOME` where none is set) is never left to run (docs/browser.md, "Downloads").
public enum ResponseVerdict: Sendable, Equatable {
    /// Show it in the frame: a type WebKit displays, meant to be displayed.
    case show
    /// Refuse it: nothing is shown and nothing is saved.
    case refuse
}

/// Decides responses for a site's views. Pure: the GTK host reads the response and applies it.
public enum ResponsePolicy {
    /// The verdict for a response of a type WebKit can (`mimeTypeSupported`) or cannot show,
    /// with its `Content-Disposition` header (nil when there is none; several headers joined
    /// with `, `). Only a response WebKit can show and that asks to be shown inline is shown.
    public static func verdict(mimeTypeSupported: Bool, contentDisposition: String?) -> ResponseVerdict {
        mimeTypeSupported && isInline(contentDisposition: contentDisposition) ? .show : .refuse
    }

    /// Whether a response with this `Content-Disposition` may be displayed: no header at all, or
    /// one whose disposition type is `inline` (case-insensitive). `attachment`, an empty or
    /// unknown type, and anything unparsable count as an attachment (RFC 6266, section 4.2:
    /// unknown types are handled as `attachment`), as are two headers joined (`inline,
    /// attachment`): a form WebKit would read as an attachment is never taken for a page.
    public static func isInline(contentDisposition: String?) -> Bool {
        guard let header = contentDisposition else { return true }
        return header.prefix { $0 != ";" }.trimmingWhitespace.lowercased() == "inline"
    }

    /// The note the window shows for a refused response at `url` of a view of `siteName`
    /// (`frame`: an iframe's rather than the page's own).
    public static func note(siteName: String, url: String, frame: Bool) -> String {
        frame ? "\(siteName): a frame's \(url) is not a page (no downloads here)"
              : "\(siteName): \(url) is not a page (no downloads here)"
    }

    /// The note for a download WebKit started on a site's session, and which was cancelled.
    public static func downloadNote(siteName: String, url: String?) -> String {
        "\(siteName): a download of \(url ?? "an unnamed address") was cancelled (no downloads here)"
    }
}

extension Substring {
    /// Without leading and trailing spaces, tabs, CRs and LFs (HTTP's whitespace).
    fileprivate var trimmingWhitespace: Substring {
        let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let start = firstIndex(where: { !space($0) }), let end = lastIndex(where: { !space($0) }) else { return "" }
        return self[start...end]
    }
}
