import Testing
import SiteKeepBrowserCore

/// ``ResponsePolicy``: which frame documents a view shows. Everything else is refused, never
/// downloaded (issue 32, defect 6).
@Suite struct ResponsePolicyTests {
    /// Only a type WebKit shows, with no disposition or an inline one, is a page.
    @Test func onlyAnInlinePageIsShown() {
        #expect(ResponsePolicy.verdict(mimeTypeSupported: true, contentDisposition: nil) == .show)
        #expect(ResponsePolicy.verdict(mimeTypeSupported: true, contentDisposition: "inline") == .show)
        #expect(ResponsePolicy.verdict(mimeTypeSupported: true, contentDisposition: " InLine ; filename=\"a.html\"") == .show)
        #expect(ResponsePolicy.verdict(mimeTypeSupported: false, contentDisposition: nil) == .refuse, "a type WebKit cannot show")
        #expect(ResponsePolicy.verdict(mimeTypeSupported: false, contentDisposition: "inline") == .refuse)
    }

    /// An attachment in any spelling, an empty, unknown or doubled disposition: not a page.
    @Test func attachmentsAndUnknownDispositionsAreRefused() {
        for header in ["attachment", "attachment; filename=\".profile\"", "ATTACHMENT;filename=x", "\tattachment ; filename*=UTF-8''x",
                       "", ";", "filename=\"x.html\"", "form-data; name=x", "inline, attachment", "attachment, inline",
                       "inlinex", "in line", "\"inline\""] {
            #expect(ResponsePolicy.verdict(mimeTypeSupported: true, contentDisposition: header) == .refuse, "\(header) was shown")
            #expect(!ResponsePolicy.isInline(contentDisposition: header))
        }
    }

    /// The notes keep the words the window has always given: "is not a page (no downloads here)".
    @Test func notesNameTheAddressAndSayNoDownloads() {
        #expect(ResponsePolicy.note(siteName: "One", url: "http://a/x", frame: false) == "One: http://a/x is not a page (no downloads here)")
        #expect(ResponsePolicy.note(siteName: "One", url: "http://b/y", frame: true) == "One: a frame's http://b/y is not a page (no downloads here)")
        #expect(ResponsePolicy.downloadNote(siteName: "One", url: nil).hasSuffix("was cancelled (no downloads here)"))
    }
}
