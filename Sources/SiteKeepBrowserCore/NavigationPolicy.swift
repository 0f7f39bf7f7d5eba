/// Where a navigation may go: a view stays on its own site; another app-bound site opens in a
/// view of that site (its own network session and bridge binding); anything else leaves the
/// browser for the system's browser (`xdg-open`) or is refused.
public enum NavigationDecision: Sendable, Equatable {
    /// Load it in this view: it is on the view's own site.
    case stay
    /// Open it in a view of this other app-bound site (never in this view).
    case openSite(BrowserSite)
    /// Hand it to the system's browser or mail program; this view does not load it.
    case external(String)
    /// Do not load it anywhere (a scheme with no place in a site's view).
    case refuse(String)
}

/// Decides navigations for views of app-bound sites. Pure: the GTK host applies the decision.
public struct NavigationPolicy: Sendable {
    /// The app-bound sites the daemon listed.
    public let sites: [BrowserSite]

    public init(sites: [BrowserSite]) { self.sites = sites }

    /// The site that owns `url`, if an app-bound one does.
    public func site(owning url: String) -> BrowserSite? { sites.first { $0.owns(url: url) } }

    /// The decision for a top-level navigation of a view of `viewSite` to `url`.
    public func decide(_ url: String, in viewSite: BrowserSite) -> NavigationDecision {
        let scheme = url.prefix(while: { $0 != ":" }).lowercased()
        switch scheme {
        case "http", "https":
            guard WebOrigin(url: url) != nil else { return .refuse("\(url) has no host") }
            if viewSite.owns(url: url) { return .stay }
            if let other = site(owning: url) { return .openSite(other) }
            return .external(url)
        case "about":
            return url == "about:blank" ? .stay : .refuse("\(url) is not a page of \(viewSite.name)")
        case "mailto", "tel":
            return .external(url)
        default:
            // javascript:, data:, blob:, file: and the rest: a site's view shows only the site.
            return .refuse("\(scheme): URLs are not opened in a site's view")
        }
    }
}
