/// What a fetch of an agenda URL gave.
public enum AgendaFetchResult: Sendable, Equatable {
    /// `304 Not Modified`: the cached copy (sent as `If-None-Match`) is current.
    case notModified
    /// `200`: the body and its `ETag`, if the server sent one.
    case fetched(body: [UInt8], etag: String?)
}

/// Why an agenda could not be had.
public enum AgendaError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The fetch failed (network, HTTP status, size); the message says which.
    case fetchFailed(String)
    /// The agenda's JSON was refused.
    case invalid(CoreFieldError)
    /// No agenda was ever loaded for this site.
    case notLoaded
    /// The cache could not be read or written.
    case cache(String)

    public var description: String {
        switch self {
        case .fetchFailed(let m): "the agenda could not be fetched: \(m)"
        case .invalid(let e): "the agenda was refused: \(e)"
        case .notLoaded: "no agenda is loaded for this site; load one with 'sitekeep agenda load --site ORIGIN URL|FILE'"
        case .cache(let m): "the agenda cache failed: \(m)"
        }
    }
}

/// Fetches an agenda URL with `If-None-Match`. The daemon fills it (the only HTTP the core
/// needs; the core itself opens no socket).
public protocol AgendaFetcher: Sendable {
    /// - Parameter etag: the cached copy's entity tag, sent as `If-None-Match` when non-nil.
    func fetch(url: String, ifNoneMatch etag: String?) async throws(AgendaError) -> AgendaFetchResult
}

/// The agenda last loaded for a site: its bytes as served, where from, and its entity tag.
public struct CachedAgenda: Sendable, Equatable {
    /// The URL, or `file:` and the path, it came from.
    public var source: String
    public var etag: String?
    public var body: [UInt8]
    public var loadedAt: Instant

    public init(source: String, etag: String?, body: [UInt8], loadedAt: Instant) {
        self.source = source; self.etag = etag; self.body = body; self.loadedAt = loadedAt
    }
}

/// Where a site's agenda is cached (the daemon keeps it in the site's partition).
public protocol AgendaCache: Sendable {
    func current() throws(AgendaError) -> CachedAgenda?
    func store(_ agenda: CachedAgenda) throws(AgendaError)
}

/// How a refresh went.
public enum AgendaRefresh: Sendable, Equatable {
    /// New bytes were fetched, validated and cached.
    case updated
    /// The server said the cached copy is current.
    case notModified
    /// The fetch failed; the cached copy is what is shown (the message says why).
    case stale(String)
}

/// Loads a site's agenda: from its cache, refreshed by URL with `If-None-Match`, or from a file.
/// An agenda that does not validate never replaces the cached one.
///
/// ```swift
/// let loader = AgendaLoader(cache: partitionCache, fetcher: daemonFetcher)
/// let (agenda, how) = try await loader.refresh(url: "https://promptugal.news/api/v1/agenda.json", now: clock.now())
/// ```
public struct AgendaLoader: Sendable {
    public let cache: any AgendaCache
    public let fetcher: (any AgendaFetcher)?

    public init(cache: any AgendaCache, fetcher: (any AgendaFetcher)? = nil) {
        self.cache = cache
        self.fetcher = fetcher
    }

    /// The cached agenda, parsed. - Throws: ``AgendaError/notLoaded`` when none is cached.
    public func current() throws(AgendaError) -> Agenda {
        guard let c = try cache.current() else { throw .notLoaded }
        do { return try Agenda(text: c.body) } catch { throw .invalid(error) }
    }

    /// The cached agenda, or the empty one when none was loaded.
    public func currentOrEmpty() throws(AgendaError) -> Agenda {
        do { return try current() } catch .notLoaded { return .empty }
    }

    /// Fetches `url` (with the cached copy's `ETag` when it came from the same URL), validates
    /// and caches it. When the fetch fails and a copy is cached, that copy is returned as ``AgendaRefresh/stale(_:)``.
    public func refresh(url: String, now: Instant) async throws(AgendaError) -> (Agenda, AgendaRefresh) {
        guard let fetcher else { throw .fetchFailed("this process has no HTTP fetcher") }
        let cached = try cache.current()
        let sameSource = cached?.source == url ? cached : nil
        let result: AgendaFetchResult
        do {
            result = try await fetcher.fetch(url: url, ifNoneMatch: sameSource?.etag)
        } catch {
            guard cached != nil else { throw error }
            return (try current(), .stale(error.description))
        }
        switch result {
        case .notModified:
            guard let sameSource else { throw .fetchFailed("the server answered 304 Not Modified to a request without If-None-Match") }
            do { return (try Agenda(text: sameSource.body), .notModified) } catch { throw .invalid(error) }
        case .fetched(let body, let etag):
            return (try load(body: body, source: url, etag: etag, now: now), .updated)
        }
    }

    /// Validates `body` and caches it as the site's agenda. - Throws: ``AgendaError/invalid(_:)``, leaving the cache as it was.
    public func load(body: [UInt8], source: String, etag: String? = nil, now: Instant) throws(AgendaError) -> Agenda {
        let agenda: Agenda
        do { agenda = try Agenda(text: body) } catch { throw .invalid(error) }
        try cache.store(CachedAgenda(source: source, etag: etag, body: body, loadedAt: now))
        return agenda
    }

    /// The agenda file among `names` (a site's data folder): the first `.json` name, in byte
    /// order, that holds `agenda`.
    public static func agendaFile(in names: [String]) -> String? {
        names.filter { $0.lowercased().contains("agenda") && $0.lowercased().hasSuffix(".json") }
            .min { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
