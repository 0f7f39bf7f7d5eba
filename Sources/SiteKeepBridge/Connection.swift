import Synchronization
public import SiteKeepSocket

/// One caller's connection: bound to one site by its `hello`, with its own rate-limit buckets.
///
/// The socket server makes one per accepted socket; in-process callers make their own and pass
/// it to ``BridgeDispatcher/handle(_:connection:)``.
public final class BridgeConnection: Sendable {
    private static let counter = Atomic<UInt64>(0)

    /// Unique within the process.
    public let id: UInt64
    public let peer: PeerCredentials?
    /// How `hello` checks that this connection's process is a host of the site it names.
    let host: HostCheck
    let deliver: @Sendable ([UInt8]) -> Void

    private struct State {
        var site: BridgeSite?
        var revoked = false
        var buckets: [String: TokenBucket] = [:]
    }
    private let state = Mutex(State())

    /// - Parameters:
    ///   - peer: the peer's credentials, when known.
    ///   - host: how `hello` checks the connecting process against the site's hosts;
    ///     ``HostCheck/inProcess`` (the default) for a caller in this process, which is its own
    ///     host. A socket server passes ``HostCheck/socket(accepted:identifyNow:authority:)``.
    ///   - onEvent: receives the compact JSON bytes of each event sent to this connection.
    public init(peer: PeerCredentials? = nil, host: HostCheck = .inProcess, onEvent: @escaping @Sendable ([UInt8]) -> Void = { _ in }) {
        id = Self.counter.add(1, ordering: .relaxed).newValue
        self.peer = peer
        self.host = host
        deliver = onEvent
    }

    /// The site this connection is bound to, once `hello` succeeded.
    public var site: BridgeSite? { state.withLock { $0.site } }

    /// Whether the site this connection was bound to was removed or changed: every later message
    /// is refused, and the socket server closes the connection after its reply.
    public var isRevoked: Bool { state.withLock { $0.revoked } }

    /// Marks the binding dead (see ``isRevoked``). It never comes back.
    func revoke() { state.withLock { $0.revoked = true } }

    /// Binds to `site` unless bound to another; returns the binding in force.
    func bind(_ site: BridgeSite) -> BridgeSite {
        state.withLock { s in
            if let bound = s.site { return bound }
            s.site = site
            return site
        }
    }

    /// Takes one token from `op`'s bucket; false when it is empty.
    func take(_ op: String, limit: RateLimit, now: Int64) -> Bool {
        state.withLock { s in
            var bucket = s.buckets[op] ?? TokenBucket(limit: limit, now: now)
            let ok = bucket.take(now: now)
            s.buckets[op] = bucket
            return ok
        }
    }
}

/// A token bucket: `burst` tokens, refilled continuously at `perSecond`.
struct TokenBucket: Sendable {
    let limit: RateLimit
    var tokens: Double
    var last: Int64

    init(limit: RateLimit, now: Int64) {
        self.limit = limit
        tokens = Double(limit.burst)
        last = now
    }

    mutating func take(now: Int64) -> Bool {
        let elapsed = Double(max(0, now - last)) / 1e9
        tokens = min(Double(limit.burst), tokens + elapsed * limit.perSecond)
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// The connections bound to each site, for event fan-out. Holds them weakly.
final class EventHub: Sendable {
    private final class Weak: @unchecked Sendable {
        // @unchecked: `connection` is written once at creation; a weak load is atomic.
        weak var connection: BridgeConnection?
        init(_ c: BridgeConnection) { connection = c }
    }
    private let bySite = Mutex<[String: [UInt64: Weak]]>([:])

    func register(_ c: BridgeConnection, site: String) {
        bySite.withLock { $0[site, default: [:]][c.id] = Weak(c) }
    }

    func remove(_ c: BridgeConnection) {
        bySite.withLock { map in
            for key in map.keys { map[key]?[c.id] = nil }
        }
    }

    /// Sends `bytes` to every live connection of `site` except `sender`.
    func send(_ bytes: [UInt8], site: String, except sender: UInt64) {
        let targets: [BridgeConnection] = bySite.withLock { map in
            guard var conns = map[site] else { return [] }
            conns = conns.filter { $0.value.connection != nil }
            map[site] = conns
            return conns.values.compactMap { $0.connection }.filter { $0.id != sender }
        }
        for t in targets { t.deliver(bytes) }
    }
}
