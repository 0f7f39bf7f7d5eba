import Foundation
import SiteKeepJSON
import SiteKeepVocabulary

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

/// The reading list F9 shows for one site: the site's reading records and, as unread, the
/// site's kept pages that have no record.
///
/// The daemon keeps no row for an unread article (`reading.get` lists read and part-read ones
/// only), so the unread articles come from what the browser itself knows of the site: the pages
/// in the site's ``KeptPageCache`` (every page a view of the site opens is kept, and so is every
/// page prefetched). The rule, exactly:
///
/// - Every record of `reading.get` is shown, with its own state, whatever its id (a URL, a path,
///   or a plain id of the site's own).
/// - A kept URL is shown as unread when it is on one of the site's own origins
///   (``BrowserSite/owns(url:)``) and no record names it. A kept URL off the site is never shown:
///   the cache lives in the site's own web folder, so one there would be damage or a bug, and a
///   site's list must not show another site's pages.
/// - A record names a kept URL when ``PrefetchPlan/address(of:on:)`` gives `.page(url)` for its
///   id with that URL, compared as ``KeptPageCache/key(for:)`` spells it (without the fragment):
///   a path id is on the site's first origin, an absolute one must be on one of its origins,
///   and the bytes must match (no case folding). It is the rule prefetching uses to tell whether
///   a listed article is kept, so an article shows once: as its record, or as a kept page.
/// - The browser cannot tell an article from any other page of the site, so every kept page
///   counts (the site's front page too, once opened). A page dropped from the cache by its
///   budget is no longer listed.
///
/// Order: part read first, then unread, then read (states the daemon does not name last), and
/// within each group by id in UTF-8 byte order (the order `reading.get` lists records in). The
/// list is where the reader picks what to read next: what they are in the middle of, then what
/// they have not begun, then what they are done with; prefetching takes them in the same order.
///
/// Bounded: at most ``limit`` items (a list may hold 5000 records and the cache thousands of
/// pages); the rest are counted in ``omitted``, cut from the end, so read articles go first.
public struct ReadingList: Sendable, Equatable {
    /// The items shown, in order.
    public var items: [ReadingItem]
    /// How many more there were beyond ``limit``.
    public var omitted: Int

    /// The most items a list shows.
    public static let limit = 500

    /// The list for `site` from its `records` (`reading.get`) and the URLs its kept-page cache
    /// holds (``KeptPageCache/keptPages()``).
    public static func merge(records: [ReadingItem], kept: [String], site: BrowserSite, limit: Int = ReadingList.limit) -> ReadingList {
        var named = Set<String>()
        for r in records {
            if case .page(let url) = PrefetchPlan.address(of: r.id, on: site) { named.insert(url) }
        }
        var seen = Set<String>()
        let unread = kept.map { KeptPageCache.key(for: $0) }.filter { url in
            site.owns(url: url) && !named.contains(url) && seen.insert(url).inserted
        }.map { ReadingItem(id: $0, state: "unread") }
        func rank(_ state: String) -> Int { ["partial": 0, "unread": 1, "read": 2][state] ?? 3 }
        let all = (records + unread).enumerated().sorted { a, b in
            let (ra, rb) = (rank(a.element.state), rank(b.element.state))
            if ra != rb { return ra < rb }
            if !a.element.id.utf8.elementsEqual(b.element.id.utf8) { return a.element.id.utf8.lexicographicallyPrecedes(b.element.id.utf8) }
            return a.offset < b.offset
        }.map(\.element)
        let shown = Array(all.prefix(max(0, limit)))
        return ReadingList(items: shown, omitted: all.count - shown.count)
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
        guard scheme == "http" || scheme == "https", (try? Origin(ofURL: id)) != nil else { return .foreign }
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
