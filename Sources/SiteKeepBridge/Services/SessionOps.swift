internal import SiteKeepJSON
public import SiteKeepCore

/// The site's saved session, in its partition (the core's ``TabSession``; SiteKeepWiring keeps it in the `tabs` namespace).
public protocol TabsService: Sendable {
    func session(site: BridgeSite) async throws(BridgeFailure) -> TabSession
    func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure)
}

enum TabsOps {
    static let names: Set<String> = ["tabs.get", "tabs.set"]

    static func handlers(_ s: any TabsService) -> [String: BridgeHandler] {
        [
            "tabs.get": { c throws(BridgeFailure) in try await s.session(site: c.site).json },
            "tabs.set": { c throws(BridgeFailure) in
                let session: TabSession
                do throws(CoreFieldError) { session = try TabSession(json: c.args, path: "args") } catch { throw BridgeFailure(core: error) }
                try await s.setSession(session, site: c.site)
                return .object([])
            },
        ]
    }
}

/// Reading state per article, in the site's partition (the core's ``ArticleReading``; SiteKeepWiring keeps it in the `reading` namespace).
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
                ["articles": .array(try await s.readingStates(site: c.site).map(\.json))]
            },
            "reading.set": { c throws(BridgeFailure) in
                let articles: [ArticleReading]
                do throws(CoreFieldError) { articles = try ArticleReading.list(json: c.args["articles"] ?? .null, path: "args.articles") } catch {
                    throw BridgeFailure(core: error)
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
