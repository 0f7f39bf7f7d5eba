import SiteKeepVocabulary

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

/// What a view does with a navigation action, decided before WebKit makes any request for it.
public enum NavigationActionVerdict: Sendable, Equatable {
    /// Let WebKit go on: the address is on the view's site, or (a frame of another app-bound
    /// site, a scheme the response decision refuses) it is decided when its response arrives.
    case proceed
    /// Ignore it in this view before any request is made, then carry out the decision: a
    /// foreign address to the system browser (only for the reader's own gesture), another
    /// app-bound site in a tab of its own.
    case stopHere(NavigationDecision)
}

/// Decides navigations for views of app-bound sites. Pure: the GTK host applies the decision.
public struct NavigationPolicy: Sendable {
    /// The app-bound sites the daemon listed.
    public let sites: [BrowserSite]

    public init(sites: [BrowserSite]) { self.sites = sites }

    /// The site that owns `url`, if an app-bound one does.
    public func site(owning url: String) -> BrowserSite? { sites.first { $0.owns(url: url) } }

    /// The decision for a navigation action in a view of `viewSite` (any frame: WebKitGTK does
    /// not say which), before any request. A foreign address is never requested in the site's
    /// network session, whether a link, a form, a script, a redirect or a frame asks for it
    /// (issue 33: the site's session fetched a foreign link before handing it to the system
    /// browser, and offline the tab became WebKit's error page at the foreign address). Another
    /// app-bound site's address stops here when the reader asked for it (it opens in a tab of
    /// its own); otherwise, as a frame of the page, it is decided at its response.
    public func decideAction(_ url: String, in viewSite: BrowserSite, userGesture: Bool) -> NavigationActionVerdict {
        let decision = decide(url, in: viewSite)
        switch decision {
        case .stay, .refuse: return .proceed
        case .external: return .stopHere(decision)
        case .openSite: return userGesture ? .stopHere(decision) : .proceed
        }
    }

    /// The decision for a top-level navigation of a view of `viewSite` to `url`.
    public func decide(_ url: String, in viewSite: BrowserSite) -> NavigationDecision {
        let scheme = url.prefix(while: { $0 != ":" }).lowercased()
        switch scheme {
        case "http", "https":
            do throws(OriginError) {
                _ = try Origin(ofURL: url)
            } catch .insecureScheme {
                // Plain http off loopback is no site's origin: the system browser's, as before.
                return .external(url)
            } catch {
                // No origin, or one spelled so that it could pass for another (user@, a
                // backslash, a look-alike host, a trailing dot, ...): not loaded anywhere.
                return .refuse("\(url) has no acceptable origin: \(error)")
            }
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
