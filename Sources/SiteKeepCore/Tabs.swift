public import SiteKeepJSON
import Foundation

// A site's saved session (its open tabs): its rules, and the form the bridge's `tabs.get` and
// `tabs.set` carry. Its stored form, in the partition's `tabs` namespace, is SiteKeepWiring's
// `TabsStore`.

/// One open tab of a site's session.
public struct TabState: Sendable, Hashable {
    /// The tab's identifier (stable across launches).
    public var id: String
    /// The page shown.
    public var url: String
    /// The page title.
    public var title: String
    /// Horizontal scroll position in CSS pixels.
    public var scrollX: Double
    /// Vertical scroll position in CSS pixels.
    public var scrollY: Double

    public init(id: String, url: String, title: String, scrollX: Double = 0, scrollY: Double = 0) {
        self.id = id; self.url = url; self.title = title; self.scrollX = scrollX; self.scrollY = scrollY
    }
}

/// The session state an app restores at launch. Stored by SiteKeepWiring's `TabsStore` through SiteKeepJSON with
/// the members Foundation's `Codable` JSON of this type had (the form the partition has always
/// held: keep the fields and their names; rows written by `JSONEncoder` are still read).
public struct SessionState: Sendable, Hashable {
    /// Open tabs, in order.
    public var tabs: [TabState]
    /// The identifier of the tab that was last in front, if any.
    public var lastTabID: String?

    public init(tabs: [TabState] = [], lastTabID: String? = nil) {
        self.tabs = tabs; self.lastTabID = lastTabID
    }

    /// The session's rules: the last tab is one of the tabs, tab ids are unique, scroll
    /// positions are finite. `path` names the session in the error (e.g. `partition.tabs`).
    public func check(path: String) throws(CoreFieldError) {
        if let last = lastTabID, !tabs.contains(where: { $0.id.hasSameUTF8(as: last) }) {
            throw CoreFieldError("\(path).lastTabID", "(\(printable(last))) is not one of the session's tabs")
        }
        var seen: [[UInt8]: Int] = [:]
        for (i, t) in tabs.enumerated() {
            if let first = seen.updateValue(i, forKey: Array(t.id.utf8)) {
                throw CoreFieldError("\(path).tabs[\(i)].id", "duplicates \(path).tabs[\(first)].id (\(printable(t.id))); tab identifiers must be unique")
            }
            if !t.scrollX.isFinite { throw CoreFieldError("\(path).tabs[\(i)].scrollX", "is not a finite number") }
            if !t.scrollY.isFinite { throw CoreFieldError("\(path).tabs[\(i)].scrollY", "is not a finite number") }
        }
    }
}

/// One open tab as the bridge carries it.
public struct SessionTab: Sendable, Equatable {
    public var url: String
    public var title: String?
    /// Scroll position, 0…1.
    public var scroll: Double?
    public init(url: String, title: String? = nil, scroll: Double? = nil) {
        self.url = url
        self.title = title
        self.scroll = scroll
    }

    var json: JSONValue {
        var m = [JSONMember(key: "url", value: .string(url))]
        if let title { m.append(JSONMember(key: "title", value: .string(title))) }
        if let scroll { m.append(JSONMember(key: "scroll", value: .double(scroll))) }
        return .object(m)
    }
}

/// The session state a site restores at launch, as the bridge carries it (`tabs.get`, `tabs.set`).
public struct TabSession: Sendable, Equatable {
    public var tabs: [SessionTab]
    /// Index of the last tab.
    public var active: Int?
    public init(tabs: [SessionTab] = [], active: Int? = nil) {
        self.tabs = tabs
        self.active = active
    }

    /// Reads `tabs.set`'s arguments `{"tabs": [{"url", "title"?, "scroll"?}], "active"?}`,
    /// refusing a wrong type, a non-finite scroll or an `active` that indexes no tab, naming the field.
    public init(json: JSONValue, path: String) throws(CoreFieldError) {
        guard case .object = json else { throw CoreFieldError(path, "must be an object {\"tabs\": [...]}, found \(json.typeName)") }
        guard let list = json["tabs"] else { throw CoreFieldError("\(path).tabs", "is missing; give an array, [] for none") }
        guard case .array(let items) = list else { throw CoreFieldError("\(path).tabs", "must be an array, found \(list.typeName)") }
        var tabs: [SessionTab] = []
        for (i, t) in items.enumerated() {
            let at = "\(path).tabs[\(i)]"
            guard case .object = t else { throw CoreFieldError(at, "must be an object {\"url\", \"title\", \"scroll\"}, found \(t.typeName)") }
            guard let url = t["url"]?.stringValue else { throw CoreFieldError("\(at).url", "must be a string") }
            var title: String?
            if let v = t["title"], !v.isNull {
                guard let s = v.stringValue else { throw CoreFieldError("\(at).title", "must be a string, found \(v.typeName)") }
                title = s
            }
            var scroll: Double?
            if let v = t["scroll"], !v.isNull {
                guard let d = v.doubleValue, d.isFinite else { throw CoreFieldError("\(at).scroll", "must be a finite number, found \(v.typeName)") }
                scroll = d
            }
            tabs.append(SessionTab(url: url, title: title, scroll: scroll))
        }
        var active: Int?
        if let v = json["active"], !v.isNull {
            guard let i = v.intValue else { throw CoreFieldError("\(path).active", "must be an integer, found \(v.typeName)") }
            guard i >= 0, i < tabs.count else { throw CoreFieldError("\(path).active", "must index one of the \(tabs.count) tabs") }
            active = Int(i)
        }
        self.init(tabs: tabs, active: active)
    }

    /// `tabs.get`'s reply: `{"tabs": [...], "active": n | null}`.
    public var json: JSONValue {
        ["tabs": .array(tabs.map(\.json)), "active": active.map { .integer($0) } ?? .null]
    }

    /// The bridge's form of a stored session (an untitled tab has no title; the scroll is the vertical one).
    public init(_ state: SessionState?) {
        guard let state else { self.init(); return }
        let tabs = state.tabs.map { SessionTab(url: $0.url, title: $0.title.isEmpty ? nil : $0.title, scroll: $0.scrollY) }
        self.init(tabs: tabs, active: state.lastTabID.flatMap { id in state.tabs.firstIndex { $0.id == id } })
    }

    /// The stored form: tabs named `t0`, `t1`, … in order.
    public var state: SessionState {
        let tabs = tabs.enumerated().map { TabState(id: "t\($0.offset)", url: $0.element.url, title: $0.element.title ?? "", scrollY: $0.element.scroll ?? 0) }
        return SessionState(tabs: tabs, lastTabID: active.flatMap { $0 < tabs.count ? tabs[$0].id : nil })
    }
}
