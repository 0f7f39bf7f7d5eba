public import SiteKeepJSON
import SiteKeepVocabulary

/// Routes one request frame to its handler after every policy check the catalogue states.
///
/// Order of checks: size → JSON (``JSONLimits/message``) → envelope (unknown members refused) →
/// version → op known → op is a request → connection bound (`hello` first) → its site still
/// registered as it was at `hello` (else the connection is revoked) → claimed origin is
/// the connection's site → site on the op's allow-list, or granted the op by the user (a
/// grantable op only; the registry is asked on every call) → op size limit → rate limit →
/// `unsupported` → args shape (from the catalogue) → handler registered (its module) → handler
/// → result shape.
///
/// Presence is not the dispatcher's: an op the catalogue marks `presence` (`key.sign`,
/// `sealed.open`) reaches custody once, through its service, and custody's one gate checks that
/// the use could run (unlocked, the key exists, `args.key` a key id), then reuses an approval of
/// the last 60 s for this site, op and key or asks the user, checks that proof once, and uses the
/// key, all in that one call. Every check above runs first, so a request that cannot run never
/// prompts.
///
/// The dispatcher routes; handlers live beside the service they call (`Services/`). Replies are
/// built from ``JSONValue`` only, so no key type has a path into a reply.
///
/// ```swift
/// let d = try BridgeDispatcher(catalogue: .bundled(), sites: resolver, modules: [StorageModule(storage)])
/// let c = BridgeConnection()
/// let reply = await d.handle(Array(#"{"v":1,"id":1,"op":"hello","args":{"origin":"https://promptugal.news"}}"#.utf8), connection: c)
/// ```
public final class BridgeDispatcher: Sendable {
    public let catalogue: OpCatalogue
    /// The registry seen from the bridge: origin → site.
    let sites: any SiteResolver
    let handlers: [String: BridgeHandler]
    /// Per op: every app-bound site, or these canonical origins.
    private let allow: [String: (appBound: Bool, origins: Set<String>)]
    /// The catalogue's ops by name (the catalogue's own look-up is a linear search, paid on
    /// every request before); a hit is confirmed byte for byte.
    private let policies: [String: OpPolicy]
    let hub = EventHub()

    /// The ops some registered module serves; every other catalogued request answers
    /// `not_configured` (or `unsupported`, as the catalogue says).
    public var servedOps: Set<String> { Set(handlers.keys) }

    /// - Parameters:
    ///   - sites: origin → site, the registry as the bridge sees it.
    ///   - modules: the op groups this daemon serves (at most one module per op).
    ///   - knownModules: every module kind that could serve an op, registered or not (the
    ///     catalogue check's list; the kinds in `modules` are added to it).
    /// - Throws: ``BridgeError/invalidCatalogue(_:)`` when an allow-list origin is not a valid
    ///   origin; ``BridgeError/catalogueMismatch(_:)`` when a catalogued op has no module kind
    ///   that can serve it, a module serves an op the catalogue does not list, a module's
    ///   handlers differ from the ops it declares, or two modules serve one op.
    public init(catalogue: OpCatalogue, sites: any SiteResolver,
                modules: [any BridgeModule], knownModules: [any BridgeModule.Type] = BridgeModules.shipped) throws(BridgeError) {
        self.catalogue = catalogue
        self.sites = sites
        var handlers: [String: BridgeHandler] = [:]
        var servable = Set<String>()
        for kind in knownModules { servable.formUnion(kind.ops) }
        for module in modules {
            let kind = type(of: module)
            let table = module.handlers
            guard Set(table.keys) == kind.ops else {
                throw .catalogueMismatch("\(kind) declares \(kind.ops.sorted()) but handles \(table.keys.sorted())")
            }
            for (op, handler) in table {
                guard handlers.updateValue(handler, forKey: op) == nil else {
                    throw .catalogueMismatch("op \(op) is served by two registered modules")
                }
            }
            servable.formUnion(kind.ops)
        }
        self.handlers = handlers
        var allow: [String: (appBound: Bool, origins: Set<String>)] = [:]
        for op in catalogue.ops {
            var entry = (appBound: false, origins: Set<String>())
            for rule in op.sites {
                switch rule {
                case .appBound: entry.appBound = true
                case .origin(let o):
                    guard let canonical = Self.canonical(o) else {
                        throw .invalidCatalogue("op \(op.name): \(o) is not a valid origin")
                    }
                    entry.origins.insert(canonical)
                }
            }
            allow[op.name] = entry
            if op.direction == .request, op.name != "hello", op.unsupportedMessage == nil, !servable.contains(op.name) {
                throw .catalogueMismatch("op \(op.name) has no module that can serve it")
            }
        }
        for name in servable.sorted() where catalogue[name] == nil {
            throw .catalogueMismatch("a module serves \(name), which the catalogue does not list")
        }
        self.allow = allow
        policies = Dictionary(catalogue.ops.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether `site` may call `op`: it is on the op's allow-list in the catalogue, or the op is
    /// a request the catalogue marks grantable and the user granted it to this site
    /// (``SiteResolver/grantedOps(_:)``, asked afresh each time).
    public func isAllowed(_ op: String, site: BridgeSite) -> Bool {
        if isAllowedByCatalogue(op, site: site) { return true }
        guard let policy = policies[op], policy.name.hasSameUTF8(as: op), policy.direction == .request, policy.grantable else { return false }
        return sites.grantedOps(site).contains(op)
    }

    /// Whether `site` is on `op`'s allow-list in the catalogue (grants aside).
    public func isAllowedByCatalogue(_ op: String, site: BridgeSite) -> Bool {
        guard let a = allow[op] else { return false }
        if a.appBound && site.isAppBound { return true }
        return site.origins.contains { a.origins.contains($0) }
    }

    /// The request ops `site` may call, by the catalogue or by a grant, in catalogue order (what
    /// `hello` returns).
    public func allowedOps(for site: BridgeSite) -> [String] {
        let granted = sites.grantedOps(site)
        return catalogue.ops.filter { op in
            op.direction == .request && (isAllowedByCatalogue(op.name, site: site) || (op.grantable && granted.contains(op.name)))
        }.map(\.name)
    }

    /// Handles one frame (one JSON request, without its newline) and returns the reply frame.
    public func handle(_ frame: [UInt8], connection: BridgeConnection) async -> [UInt8] {
        await reply(to: frame, connection: connection).bytes
    }

    /// Sends `event` to every connection bound to the site `siteID`: events the daemon raises
    /// itself (a notification's default action, `notify.opened`), not in answer to a request.
    public func broadcast(_ event: String, data: JSONValue, siteID: String) {
        hub.send(BridgeMessage.event(name: event, data: data).bytes, site: siteID, except: .max)
    }

    /// Forgets `connection` (no more events). The server calls it when a socket closes.
    public func disconnect(_ connection: BridgeConnection) { hub.remove(connection) }

    /// Handles one frame and returns the reply as a message.
    public func reply(to frame: [UInt8], connection: BridgeConnection) async -> BridgeMessage {
        guard frame.count <= JSONLimits.message.maxBytes else {
            return .failure(id: .null, BridgeFailure(.tooLarge, "the frame is larger than \(JSONLimits.message.maxBytes) bytes"))
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(frame, limits: .message)
        } catch {
            let code: BridgeErrorCode = switch error.reason {
            case .tooLarge, .stringTooLong, .tooManyElements: .tooLarge
            default: .badRequest
            }
            return .failure(id: .null, BridgeFailure(code, error.description))
        }
        let id = BridgeRequest.salvageID(value)
        do {
            let request = try BridgeRequest.decode(value, supportedVersion: catalogue.protocolVersion)
            let result = try await route(request, frameSize: frame.count, connection: connection)
            return .success(id: request.id, result: result)
        } catch {
            return .failure(id: id, error)
        }
    }

    private func route(_ request: BridgeRequest, frameSize: Int, connection: BridgeConnection) async throws(BridgeFailure) -> JSONValue {
        // Names match byte for byte, as the catalogue's look-up does: a Dictionary compares
        // Strings by canonical equivalence (U+212A KELVIN SIGN equals "K").
        guard let op = policies[request.op], op.name.hasSameUTF8(as: request.op) else {
            throw BridgeFailure(.unknownOp, "\(FieldSchema.printable(request.op)) is not an op; `hello` lists the ops this site may call")
        }
        if op.name == "hello" {
            return try await hello(request, op: op, frameSize: frameSize, connection: connection)
        }
        guard let site = connection.site else {
            throw BridgeFailure(.helloRequired, "this connection is not bound to a site; send hello with args.origin first")
        }
        try checkBindingIsCurrent(site, connection: connection)
        try await checkClaimedOrigin(request.origin, site: site)
        guard op.direction == .request else {
            throw BridgeFailure(.notAllowed, "\(op.name) is an event SiteKeep sends; it cannot be called")
        }
        let handler = try admit(request, op: op, site: site, frameSize: frameSize, connection: connection)
        let hub = self.hub
        let call = BridgeCall(op: op.name, site: site, args: request.args) { event, data in
            hub.send(BridgeMessage.event(name: event, data: data).bytes, site: site.id, except: connection.id)
        }
        let result = try await handler(call)
        do {
            try op.result.validate(result, path: "result")
        } catch {
            throw BridgeFailure(.internal, "\(op.name) produced a reply outside its catalogue shape")
        }
        return result
    }

    /// Allow-list, size, rate, unsupported, args shape, handler: the checks every op passes
    /// before its handler (and, for a presence op, custody's gate) runs.
    private func admit(_ request: BridgeRequest, op: OpPolicy, site: BridgeSite, frameSize: Int,
                       connection: BridgeConnection) throws(BridgeFailure) -> BridgeHandler {
        guard isAllowed(op.name, site: site) else {
            let grant = op.grantable ? " (the user can grant it: sitekeep site grant \(Self.shortOrigin(site.origins.first) ?? site.id) \(op.name))" : ""
            throw BridgeFailure(.notAllowed, "\(op.name) is not allowed for \(site.name)\(grant); hello lists the ops this site may call")
        }
        guard frameSize <= op.maxRequestBytes else {
            throw BridgeFailure(.tooLarge, "\(op.name) requests are limited to \(op.maxRequestBytes) bytes")
        }
        guard connection.take(op.name, limit: op.rateLimit, now: bootNanos()) else {
            throw BridgeFailure(.rateLimited, "\(op.name) is limited to \(op.rateLimit.burst) at once and \(op.rateLimit.perSecond) per second on one connection; retry later")
        }
        if let message = op.unsupportedMessage { throw BridgeFailure(.unsupported, message) }
        try op.args.validate(request.args, path: "args")
        guard let handler = handlers[op.name] else {
            throw BridgeFailure(.notConfigured, "\(op.name) is not configured in this daemon (its service is not set up)")
        }
        return handler
    }

    /// The canonical form of `origin` (the vocabulary's ``Origin``, the one parser), or nil when
    /// it is malformed or refused (opaque, `file:`, …).
    static func canonical(_ origin: String) -> String? { (try? Origin(parsing: origin))?.serialized }

    /// A canonical origin as people type it (``Origin/pageForm``: without the scheme's default port).
    static func shortOrigin(_ origin: String?) -> String? {
        guard let origin else { return nil }
        return (try? Origin(parsing: origin))?.pageForm ?? origin
    }

    /// Refuses every message on a connection whose site was removed, or whose origins or
    /// app-bound flag changed, since its `hello` (by this process or another: the resolver sees
    /// both at once). The connection is revoked for good; the socket server then closes it.
    private func checkBindingIsCurrent(_ site: BridgeSite, connection: BridgeConnection) throws(BridgeFailure) {
        guard connection.isRevoked || !sites.isCurrent(site) else { return }
        connection.revoke()
        hub.remove(connection)
        throw BridgeFailure(.forbiddenOrigin, "\(site.name) was removed from SiteKeep, or its origins or app-bound flag changed, after this connection's hello; the connection is closed: open a new one and send hello")
    }

    private func checkClaimedOrigin(_ origin: String?, site: BridgeSite) async throws(BridgeFailure) {
        guard let origin else { return }
        guard let canonical = Self.canonical(origin), site.origins.contains(canonical) else {
            throw BridgeFailure(.forbiddenOrigin, "this connection is bound to \(site.name); a message may not claim another origin")
        }
    }

    private func hello(_ request: BridgeRequest, op: OpPolicy, frameSize: Int, connection: BridgeConnection) async throws(BridgeFailure) -> JSONValue {
        if let bound = connection.site { try checkBindingIsCurrent(bound, connection: connection) }
        guard connection.take(op.name, limit: op.rateLimit, now: bootNanos()) else {
            throw BridgeFailure(.rateLimited, "hello is limited to \(op.rateLimit.burst) at once on one connection")
        }
        guard frameSize <= op.maxRequestBytes else {
            throw BridgeFailure(.tooLarge, "hello requests are limited to \(op.maxRequestBytes) bytes")
        }
        try op.args.validate(request.args, path: "args")
        guard let origin = request.args["origin"]?.stringValue else {
            throw BridgeFailure(.badRequest, "args.origin is missing")
        }
        guard let parsed = try? Origin(parsing: origin) else {
            let typed = FieldSchema.printable(origin)
            throw BridgeFailure(.forbiddenOrigin, "the origin '\(typed)' is not a web origin (scheme://host[:port])" + (origin.contains("://") ? "" : "; did you mean https://\(typed)?"))
        }
        let canonical = parsed.serialized
        guard let site = await sites.site(forOrigin: parsed) else {
            throw BridgeFailure(.forbiddenOrigin, "no site has the origin \(FieldSchema.printable(canonical))")
        }
        guard site.isAppBound else {
            throw BridgeFailure(.forbiddenOrigin, "\(site.name) is registered but not app-bound; only app-bound sites may use the bridge. A site is made app-bound when it is added: 'sitekeep site add NAME --origin ORIGIN --app-bound' (save its data with 'sitekeep site export' before 'sitekeep site remove')")
        }
        if let claimed = request.origin {
            guard let c = claimed.utf8.elementsEqual(origin.utf8) ? canonical : Self.canonical(claimed), site.origins.contains(c) else {
                throw BridgeFailure(.forbiddenOrigin, "the message's origin and args.origin name different sites")
            }
        }
        // Only a host of the site binds it: the process on the other end of the socket runs the
        // SiteKeep browser or an executable the user added for this site.
        if connection.site == nil, let why = connection.host.refusal(for: site) {
            throw BridgeFailure(.forbiddenHost, why)
        }
        let bound = connection.bind(site)
        guard bound.id == site.id else {
            throw BridgeFailure(.forbiddenOrigin, "this connection is bound to \(bound.name); open another connection for another site")
        }
        guard isAllowed(op.name, site: site) else {
            throw BridgeFailure(.notAllowed, "hello is not allowed for \(site.name)")
        }
        hub.register(connection, site: site.id)
        return ["version": .integer(catalogue.protocolVersion), "ops": .array(allowedOps(for: site).map { .string($0) })]
    }
}
