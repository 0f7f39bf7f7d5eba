import Foundation
import SiteKeepJSON

/// One article of a site's reading list, as `reading.get` lists it (the native list F9 shows).
public struct ReadingItem: Sendable, Equatable {
    /// The article's id: the site's own name for it (its URL, a path on the site, or a plain id).
    public var id: String
    /// `unread`, `partial` or `read`.
    public var state: String
    /// Part read, 0…1.
    public var progress: Double?

    public init(id: String, state: String, progress: Double? = nil) {
        self.id = id
        self.state = state
        self.progress = progress
    }

    /// The article's line in the reading list F9 shows: its state's mark (✓ read, ◐ part read,
    /// ○ unread), its id, and how much of it was read when part read.
    public var listLine: String {
        let mark = ["read": "✓ read", "partial": "◐ part read", "unread": "○ unread"]
        var line = "\(mark[state] ?? state)  \(id)"
        if state == "partial", let p = progress { line += String(format: "  %.0f%%", p * 100) }
        return line
    }

    /// The articles of a `reading.get` reply (none when it failed).
    public static func list(from reply: PageReply) -> [ReadingItem] {
        guard reply.json["ok"]?.boolValue == true else { return [] }
        return (reply.json["result"]?["articles"]?.arrayValue ?? []).compactMap { a in
            guard let id = a["id"]?.stringValue, let state = a["state"]?.stringValue else { return nil }
            return ReadingItem(id: id, state: state, progress: a["progress"]?.doubleValue)
        }
    }
}

/// The pages one prefetch round of a site fetches in the background, from its reading list: the
/// articles not read yet (part read first, then unread) whose id is an address on the site's
/// own origins and that are not kept yet, at most ``limit`` of them. An id that is an absolute
/// URL must be on one of the site's origins; a path (`/2026/12/article.html`) is on the site's
/// first origin; anything else (`a1`, `//host/x`, `javascript:…`) is no address and is skipped.
/// An id naming another origin is refused and never fetched: a site's list cannot make the
/// browser fetch from anywhere but the site.
public struct PrefetchPlan: Sendable, Equatable {
    /// The URLs to fetch, in order.
    public var urls: [String]
    /// Ids naming another origin (or scheme), refused; at most ``reportedRefusals`` are listed.
    public var refused: [String]
    /// How many ids were refused in all.
    public var refusedCount: Int
    /// How many articles were left for a later round once ``urls`` was full.
    public var deferred: Int

    /// A plan that fetches nothing.
    public static let empty = PrefetchPlan(urls: [], refused: [], refusedCount: 0, deferred: 0)

    /// The most pages one round fetches (a list may hold 5000 articles).
    public static let limit = 50
    /// The most refused ids a plan names (the count has them all).
    public static let reportedRefusals = 20
    /// The longest id taken as an address (the bridge's own limit for an article id).
    public static let maximumIDBytes = 256

    /// Where an article id points.
    public enum Address: Sendable, Equatable {
        /// A page on the site.
        case page(String)
        /// An address off the site: another origin, another scheme, or a scheme-relative `//host`.
        case foreign
        /// Not an address (a plain id).
        case notAnAddress
    }

    /// What `id` names on `site`.
    public static func address(of id: String, on site: BrowserSite) -> Address {
        guard !id.isEmpty, id.utf8.count <= maximumIDBytes, !id.utf8.contains(where: { $0 < 0x21 || $0 == 0x7f }) else { return .notAnAddress }
        if id.hasPrefix("//") || id.hasPrefix("/\\") { return .foreign }
        if id.hasPrefix("/") {
            guard let origin = site.pageOrigins.first else { return .notAnAddress }
            let url = origin + id
            return site.owns(url: url) ? .page(KeptPageCache.key(for: url)) : .foreign
        }
        guard let colon = id.firstIndex(of: ":"), id[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }),
              id[..<colon].first?.isLetter == true else { return .notAnAddress }
        let scheme = id[..<colon].lowercased()
        guard scheme == "http" || scheme == "https", WebOrigin(url: id) != nil else { return .foreign }
        return site.owns(url: id) ? .page(KeptPageCache.key(for: id)) : .foreign
    }

    /// The plan for `items` on `site`; `isKept` says whether a URL has a kept copy already.
    public static func make(_ items: [ReadingItem], site: BrowserSite, limit: Int = PrefetchPlan.limit,
                            isKept: (String) -> Bool) -> PrefetchPlan {
        var plan = PrefetchPlan(urls: [], refused: [], refusedCount: 0, deferred: 0)
        var seen = Set<String>()
        let waiting = items.filter { $0.state == "partial" } + items.filter { $0.state == "unread" }
        for item in waiting {
            switch address(of: item.id, on: site) {
            case .notAnAddress:
                continue
            case .foreign:
                plan.refusedCount += 1
                if plan.refused.count < reportedRefusals { plan.refused.append(item.id) }
            case .page(let url):
                guard seen.insert(url).inserted else { continue }
                if plan.urls.count >= limit { plan.deferred += 1; continue }
                if !isKept(url) { plan.urls.append(url) }
            }
        }
        return plan
    }
}
