import SiteKeepSystem
public import SiteKeepVocabulary
public import SiteKeepJSON
import SiteKeepEncoding

/// The site a connection is bound to, as the site registry describes it.
public struct BridgeSite: Sendable, Hashable {
    /// The site's stable identifier (a UUID in the registry).
    public let id: String
    /// The site's display name.
    public let name: String
    /// The site's canonical origins.
    public let origins: [String]
    /// Only app-bound sites get bridge access.
    public let isAppBound: Bool
    /// The hosts the user added for the site, each as one string (path and pinned digest): a
    /// connection bound before they changed is no longer current (``SiteResolver/isCurrent(_:)``).
    public let hostKeys: [String]

    public init(id: String, name: String, origins: [String], isAppBound: Bool, hostKeys: [String] = []) {
        self.id = id
        self.name = name
        self.origins = origins
        self.isAppBound = isAppBound
        self.hostKeys = hostKeys
    }
}

/// Origin → site: the registry seen from the bridge.
public protocol SiteResolver: Sendable {
    /// The site owning `origin`, or nil when none does. The dispatcher has parsed the origin,
    /// once, with the vocabulary's ``Origin`` (the one parser): the resolver matches, it does not
    /// parse again.
    func site(forOrigin origin: Origin) async -> BridgeSite?
    /// Whether `site`, as a connection was bound to it by `hello`, is still registered with the
    /// same id, origins, app-bound flag and hosts. The dispatcher asks before every message on a bound
    /// connection, so it must be cheap and see a change made by another process at once.
    func isCurrent(_ site: BridgeSite) -> Bool
    /// The ops the user granted `site` (`sitekeep site grant`), as the registry says now: the
    /// dispatcher asks whenever the catalogue's allow-list does not name the site, so a grant or
    /// revoke made by any process applies to the next message. Must be cheap.
    func grantedOps(_ site: BridgeSite) -> Set<String>
}

extension SiteResolver {
    /// No grants: only the catalogue's allow-lists apply.
    public func grantedOps(_ site: BridgeSite) -> Set<String> { [] }
}

/// What a handler gets: the bound site, the validated args, and a way to send events to the
/// site's other connections. An op the catalogue marks `presence` gets no proof here: its service
/// passes the site to custody's one gate, which asks the user (or reuses an approval of the last
/// 60 s for the same site, op and key) in the same call that uses the key.
public struct BridgeCall: Sendable {
    public let op: String
    public let site: BridgeSite
    /// The validated `args` object.
    public let args: JSONValue
    let emitter: @Sendable (String, JSONValue) -> Void

    public init(op: String, site: BridgeSite, args: JSONValue,
                emitter: @escaping @Sendable (String, JSONValue) -> Void = { _, _ in }) {
        self.op = op
        self.site = site
        self.args = args
        self.emitter = emitter
    }

    /// Sends `event` to every other connection bound to this call's site.
    public func emit(_ event: String, data: JSONValue) { emitter(event, data) }

    /// A string member (the catalogue has checked its type and length).
    public func string(_ key: String) throws(BridgeFailure) -> String {
        guard let s = args[key]?.stringValue else { throw BridgeFailure(.badRequest, "args.\(key) must be a string") }
        return s
    }

    public func optionalString(_ key: String) -> String? { args[key]?.stringValue }

    /// A Base64 member, decoded.
    public func bytes(_ key: String) throws(BridgeFailure) -> [UInt8] {
        guard let s = args[key]?.stringValue, let b = try? Base64.decode(s, variant: .standard) else {
            throw BridgeFailure(.badRequest, "args.\(key) must be standard Base64")
        }
        return b
    }

    public func array(_ key: String) throws(BridgeFailure) -> [JSONValue] {
        guard let a = args[key]?.arrayValue else { throw BridgeFailure(.badRequest, "args.\(key) must be an array") }
        return a
    }
}

/// One op's implementation. Handlers return plain ``JSONValue``: key handles and secret bytes
/// have no conversion to it, so a reply cannot carry key material.
public typealias BridgeHandler = @Sendable (BridgeCall) async throws(BridgeFailure) -> JSONValue

/// CLOCK_BOOTTIME now, in nanoseconds (the clock presence proofs are timed on).
package func bootNanos() -> Int64 { Int64(truncatingIfNeeded: Clocks.bootNanoseconds()) }
