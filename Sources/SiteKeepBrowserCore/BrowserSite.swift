import Foundation

/// An app-bound site as the daemon describes it to a web-view host (control op `sites`).
///
/// The host never decides which site a page belongs to from anything the page says: a view is
/// created for one site, shows only that site's origins, and its bridge connection is bound to
/// that site by the host's `hello`.
public struct BrowserSite: Sendable, Hashable {
    /// The site's stable identifier (its folder's name in the store).
    public var id: String
    /// The name shown to the user.
    public var name: String
    /// The site's origins in SiteKeep's canonical form (`scheme://host:port`, port explicit).
    public var origins: [String]
    /// The folder, inside the site's partition folder, where the host keeps the site's web data
    /// (WebKit's data and cache directories, the kept pages). The daemon creates it 0700.
    public var webFolder: String

    public init(id: String, name: String, origins: [String], webFolder: String) {
        self.id = id
        self.name = name
        self.origins = origins
        self.webFolder = webFolder
    }

    /// The origins as `location.origin` spells them (default ports left out).
    public var pageOrigins: [String] { origins.compactMap { WebOrigin(canonical: $0)?.pageForm } }

    /// Whether `url` is on one of the site's origins.
    public func owns(url: String) -> Bool {
        guard let o = WebOrigin(url: url) else { return false }
        return origins.contains(o.canonicalForm)
    }

    /// The page a new view of the site opens: its first origin's root.
    public var startURL: String { (pageOrigins.first ?? "about:blank") + "/" }

    /// WebKit's data directory for this site (cookies, localStorage, IndexedDB, service workers).
    public var dataDirectory: String { webFolder + "/data" }
    /// WebKit's cache directory for this site (HTTP disk cache).
    public var cacheDirectory: String { webFolder + "/cache" }
    /// The kept-page cache (``KeptPageCache``).
    public var keptDirectory: String { webFolder + "/kept" }
}

/// The origin of an http(s) URL: scheme, lower-cased host, port.
public struct WebOrigin: Sendable, Hashable {
    public var scheme: String
    public var host: String
    public var port: Int

    /// The origin of `url`, or nil when it is not an http(s) URL with a host.
    public init?(url: String) {
        guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = c.host, !host.isEmpty else { return nil }
        self.scheme = scheme
        var h = host.lowercased()
        if h.hasPrefix("[") && h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        self.host = h
        self.port = c.port ?? (scheme == "https" ? 443 : 80)
    }

    /// Parses SiteKeep's canonical form `scheme://host:port` (the daemon's spelling).
    public init?(canonical: String) {
        self.init(url: canonical)
    }

    private var hostForm: String { host.contains(":") ? "[\(host)]" : host }
    private var isDefaultPort: Bool { (scheme == "https" && port == 443) || (scheme == "http" && port == 80) }

    /// `scheme://host:port`, port always explicit (SiteKeep's canonical origin).
    public var canonicalForm: String { "\(scheme)://\(hostForm):\(port)" }
    /// `scheme://host[:port]` as `location.origin` gives it (default port left out).
    public var pageForm: String { isDefaultPort ? "\(scheme)://\(hostForm)" : "\(scheme)://\(hostForm):\(port)" }
}
