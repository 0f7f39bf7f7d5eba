public import SiteKeepJSON

/// One open tab of a site's saved session.
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
}

/// The session state a site restores at launch.
public struct TabSession: Sendable, Equatable {
    public var tabs: [SessionTab]
    /// Index of the last tab.
    public var active: Int?
    public init(tabs: [SessionTab] = [], active: Int? = nil) {
        self.tabs = tabs
        self.active = active
    }
}

/// The site's saved session, in its partition.
public protocol TabsService: Sendable {
    func session(site: BridgeSite) async throws(BridgeFailure) -> TabSession
    func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure)
}

enum TabsOps {
    static let names: Set<String> = ["tabs.get", "tabs.set"]

    static func handlers(_ s: any TabsService) -> [String: BridgeHandler] {
        [
            "tabs.get": { c throws(BridgeFailure) in
                let session = try await s.session(site: c.site)
                return ["tabs": .array(session.tabs.map(json)), "active": session.active.map { .integer($0) } ?? .null]
            },
            "tabs.set": { c throws(BridgeFailure) in
                let tabs = try c.array("tabs").map { t in
                    SessionTab(url: t["url"]?.stringValue ?? "", title: t["title"]?.stringValue, scroll: t["scroll"]?.doubleValue)
                }
                let active = c.args["active"]?.intValue.map { Int($0) }
                if let active, active >= tabs.count {
                    throw BridgeFailure(.badRequest, "args.active must index one of the \(tabs.count) tabs")
                }
                try await s.setSession(TabSession(tabs: tabs, active: active), site: c.site)
                return .object([])
            },
        ]
    }

    static func json(_ t: SessionTab) -> JSONValue {
        var m = [JSONMember(key: "url", value: .string(t.url))]
        if let title = t.title { m.append(JSONMember(key: "title", value: .string(title))) }
        if let scroll = t.scroll { m.append(JSONMember(key: "scroll", value: .double(scroll))) }
        return .object(m)
    }
}

/// How far an article has been read.
public enum ArticleState: String, Sendable, Equatable, CaseIterable {
    case unread, partial, read
}

/// The reading state of one article.
public struct ArticleReading: Sendable, Equatable {
    public var id: String
    public var state: ArticleState
    /// Part read, 0…1.
    public var progress: Double?
    public init(id: String, state: ArticleState, progress: Double? = nil) {
        self.id = id
        self.state = state
        self.progress = progress
    }
}

/// Reading state per article, in the site's partition.
public protocol ReadingService: Sendable {
    func readingStates(site: BridgeSite) async throws(BridgeFailure) -> [ArticleReading]
    /// Merges `articles` by id; returns how many were recorded.
    func record(_ articles: [ArticleReading], site: BridgeSite) async throws(BridgeFailure) -> Int
}

enum ReadingOps {
    static let names: Set<String> = ["reading.get", "reading.set"]

    static func handlers(_ s: any ReadingService) -> [String: BridgeHandler] {
        [
            "reading.get": { c throws(BridgeFailure) in
                let states = try await s.readingStates(site: c.site)
                return ["articles": .array(states.map { a in
                    var m: [JSONMember] = [JSONMember(key: "id", value: .string(a.id)),
                                           JSONMember(key: "state", value: .string(a.state.rawValue))]
                    if let p = a.progress { m.append(JSONMember(key: "progress", value: .double(p))) }
                    return .object(m)
                })]
            },
            "reading.set": { c throws(BridgeFailure) in
                var articles: [ArticleReading] = []
                for a in try c.array("articles") {
                    guard let id = a["id"]?.stringValue, let state = a["state"]?.stringValue.flatMap(ArticleState.init) else {
                        throw BridgeFailure(.badRequest, "each article needs an id and a state")
                    }
                    articles.append(ArticleReading(id: id, state: state, progress: a["progress"]?.doubleValue))
                }
                return ["updated": .integer(try await s.record(articles, site: c.site))]
            },
        ]
    }
}

/// The bridge module of the `tabs.*` ops: the site's saved tab session.
public struct TabsModule: BridgeModule {
    public static let ops = TabsOps.names
    private let service: any TabsService
    public init(_ service: any TabsService) { self.service = service }
    public var handlers: [String: BridgeHandler] { TabsOps.handlers(service) }
}

/// The bridge module of the `reading.*` ops: reading state per article.
public struct ReadingModule: BridgeModule {
    public static let ops = ReadingOps.names
    private let service: any ReadingService
    public init(_ service: any ReadingService) { self.service = service }
    public var handlers: [String: BridgeHandler] { ReadingOps.handlers(service) }
}
