public import SiteKeepJSON

/// A site's saved session as `tabs.get` returns it and `tabs.set` takes it: the open tabs of the
/// site, each with its URL, title and scroll position (0…1), and the last tab.
public struct TabSession: Sendable, Equatable {
    public struct Tab: Sendable, Equatable {
        public var url: String
        public var title: String?
        public var scroll: Double

        public init(url: String, title: String? = nil, scroll: Double = 0) {
            self.url = url
            self.title = title
            self.scroll = scroll
        }
    }

    public var tabs: [Tab]
    /// Index of the tab shown last, if any.
    public var active: Int?

    /// The most tabs `tabs.set` takes.
    public static let maximumTabs = 200

    public init(tabs: [Tab] = [], active: Int? = nil) {
        self.tabs = tabs
        self.active = active
    }

    /// Reads a `tabs.get` result; tabs with a URL not on `site` are dropped (a page cannot plant
    /// another site's URL in a session that is restored into this site's views).
    public init(result: JSONValue, site: BrowserSite) {
        var tabs: [Tab] = []
        var activeIndex = result["active"]?.intValue.map(Int.init)
        for (i, t) in (result["tabs"]?.arrayValue ?? []).enumerated() {
            guard let url = t["url"]?.stringValue, site.owns(url: url) else {
                if let a = activeIndex, a == i { activeIndex = nil } else if let a = activeIndex, a > i { activeIndex = a - 1 }
                continue
            }
            let scroll = t["scroll"]?.doubleValue ?? 0
            tabs.append(Tab(url: url, title: t["title"]?.stringValue, scroll: scroll.isFinite ? min(1, max(0, scroll)) : 0))
        }
        self.tabs = tabs
        self.active = activeIndex.flatMap { tabs.indices.contains($0) ? $0 : nil }
    }

    /// The `tabs.set` arguments (titles cut to 512 bytes, URLs over 2048 bytes left out).
    public var arguments: JSONValue {
        let list: [JSONValue] = tabs.prefix(Self.maximumTabs).compactMap { t in
            guard t.url.utf8.count <= 2048 else { return nil }
            var members = [JSONMember(key: "url", value: .string(t.url))]
            if let title = t.title, !title.isEmpty { members.append(JSONMember(key: "title", value: .string(Self.cut(title, bytes: 512)))) }
            members.append(JSONMember(key: "scroll", value: .double(t.scroll.isFinite ? min(1, max(0, t.scroll)) : 0)))
            return .object(members)
        }
        let a: JSONValue = active.map { list.indices.contains($0) ? .int(Int64($0)) : .null } ?? .null
        return .object([JSONMember(key: "tabs", value: .array(list)), JSONMember(key: "active", value: a)])
    }

    static func cut(_ s: String, bytes: Int) -> String {
        if s.utf8.count <= bytes { return s }
        var out = ""
        for ch in s {
            if out.utf8.count + ch.utf8.count > bytes { break }
            out.append(ch)
        }
        return out
    }
}
