public import SiteKeepVocabulary

/// An app-bound site as the daemon describes it to a web-view host (control op `sites`).
///
/// The host never decides which site a page belongs to from anything the page says: a view is
/// created for one site, shows only that site's origins, and its bridge connection is bound to
/// that site by the host's `hello`. Every origin question (which site owns an address, which
/// page receives bridge events, where a navigation may go) is answered by the vocabulary's one
/// origin parser, ``Origin``: the daemon's origins are parsed once, when the site is made, and
/// a page's address through ``Origin/init(ofURL:)``.
public struct BrowserSite: Sendable, Hashable {
    /// The site's stable identifier (its folder's name in the store).
    public var id: String
    /// The name shown to the user.
    public var name: String
    /// The site's origins.
    public var origins: [Origin]
    /// The folder, inside the site's partition folder, where the host keeps the site's web data
    /// (WebKit's data and cache directories, the kept pages). The daemon creates it 0700.
    public var webFolder: String

    /// A site with these (already parsed) origins.
    public init(id: String, name: String, origins: [Origin], webFolder: String) {
        self.id = id
        self.name = name
        self.origins = origins
        self.webFolder = webFolder
    }

    /// A site whose origins are given as text (the daemon's canonical `scheme://host:port`, or
    /// any spelling ``Origin/init(parsing:)`` accepts), parsed here once.
    /// - Throws: the ``OriginError`` of the first origin that does not parse.
    public init(id: String, name: String, origins: [String], webFolder: String) throws(OriginError) {
        var parsed: [Origin] = []
        for text in origins { parsed.append(try Origin(parsing: text)) }
        self.init(id: id, name: name, origins: parsed, webFolder: webFolder)
    }

    /// The origins as `location.origin` spells them (default ports left out).
    public var pageOrigins: [String] { origins.map(\.pageForm) }

    /// Whether `url` is on one of the site's origins (``Origin/init(ofURL:)``: an address whose
    /// origin does not parse is on no site).
    public func owns(url: String) -> Bool {
        guard let o = try? Origin(ofURL: url) else { return false }
        return origins.contains(o)
    }

    /// The page a new view of the site opens: its first origin's root.
    public var startURL: String { (pageOrigins.first ?? "about:blank") + "/" }

    /// The front page a new tab opened from a page at `url` shows (Ctrl+T): the root of that
    /// page's origin when it is one of the site's, else ``startURL`` (a site served on several
    /// origins stays on the one the reader is on).
    public func frontPage(from url: String?) -> String {
        guard let url, let o = try? Origin(ofURL: url), origins.contains(o) else { return startURL }
        return o.pageForm + "/"
    }

    /// WebKit's data directory for this site (cookies, localStorage, IndexedDB, service workers).
    public var dataDirectory: String { webFolder + "/data" }
    /// WebKit's cache directory for this site (HTTP disk cache).
    public var cacheDirectory: String { webFolder + "/cache" }
    /// The kept-page cache (``KeptPageCache``).
    public var keptDirectory: String { webFolder + "/kept" }
}
