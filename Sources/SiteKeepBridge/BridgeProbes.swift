internal import SiteKeepJSON

/// The outcome of one bridge isolation probe.
public struct BridgeProbeResult: Sendable, Equatable {
    /// `op-from-foreign-site` or `origin-claim-mismatch`.
    public var probe: String
    /// The site the connection was bound to (or tried to bind to).
    public var site: String
    public var op: String
    /// True when the bridge refused as it must; false is a LEAK.
    public var passed: Bool
    /// The reply the probe saw (code or "ok").
    public var detail: String
}

/// Bridge probes for the isolation audit (SiteKeepAudit wraps them in its `Probe` protocol).
///
/// - `op-from-foreign-site`: every op (requests and events) from every site not on its allow-list
///   and not granted it must be refused: `not_allowed` for an app-bound site, `forbidden_origin`
///   at `hello` for a site that is not app-bound. What is allowed is worked out here, from the
///   catalogue and the grants the caller states (the registry's), not asked of the dispatcher
///   under test: a grant that reaches a site it was not given to is a leak.
/// - `origin-claim-mismatch`: every op on a connection bound to one site, in a message claiming
///   another site's origin, must be refused with `forbidden_origin` (for `hello`, `args.origin`
///   naming the other site).
public enum BridgeProbes {
    public static let foreignSite = "op-from-foreign-site"
    public static let originMismatch = "origin-claim-mismatch"

    /// Runs both probes over `sites` through `dispatcher`, each on fresh connections.
    /// - Parameters:
    ///   - policy: the dispatcher whose catalogue allow-lists state what must be refused (default:
    ///     `dispatcher` itself). Pass one built from the shipped catalogue to audit another build.
    ///   - grants: the ops the user granted each site, by site id, as the registry records them:
    ///     a granted op (when the catalogue marks it grantable) is allowed for that site only.
    public static func run(dispatcher: BridgeDispatcher, sites: [BridgeSite], policy: BridgeDispatcher? = nil,
                           grants: [String: Set<String>] = [:]) async -> [BridgeProbeResult] {
        let policy = policy ?? dispatcher
        var results: [BridgeProbeResult] = []
        let ops = dispatcher.catalogue.ops
        for site in sites {
            guard let origin = site.origins.first else { continue }
            for op in ops {
                let granted = op.grantable && grants[site.id]?.contains(op.name) == true
                if site.isAppBound && op.direction == .request && (policy.isAllowedByCatalogue(op.name, site: site) || granted) { continue }
                let c = BridgeConnection()
                defer { dispatcher.disconnect(c) }
                let hello = await send(dispatcher, c, op: "hello", args: ["origin": .string(origin)])
                let reply: BridgeMessage
                let expected: BridgeErrorCode
                if site.isAppBound {
                    guard case .success = hello else {
                        results.append(BridgeProbeResult(probe: foreignSite, site: site.name, op: op.name, passed: false,
                                                         detail: "hello failed for an app-bound site: \(describe(hello))"))
                        continue
                    }
                    reply = await send(dispatcher, c, op: op.name, args: op.args.sample())
                    expected = .notAllowed
                } else {
                    reply = hello
                    expected = .forbiddenOrigin
                }
                results.append(result(foreignSite, site, op.name, reply, expected))
            }
        }
        let bound = sites.filter { $0.isAppBound && !$0.origins.isEmpty }
        for a in bound {
            for b in bound where b.id != a.id {
                for op in ops {
                    let c = BridgeConnection()
                    defer { dispatcher.disconnect(c) }
                    _ = await send(dispatcher, c, op: "hello", args: ["origin": .string(a.origins[0])])
                    let reply = op.name == "hello"
                        ? await send(dispatcher, c, op: "hello", args: ["origin": .string(b.origins[0])])
                        : await send(dispatcher, c, op: op.name, args: op.args.sample(), origin: b.origins[0])
                    results.append(result(originMismatch, a, "\(op.name) claiming \(b.name)", reply, .forbiddenOrigin))
                }
            }
        }
        return results
    }

    private static func send(_ d: BridgeDispatcher, _ c: BridgeConnection, op: String, args: JSONValue,
                             origin: String? = nil) async -> BridgeMessage {
        let frame = JSONSerializer.bytes(BridgeRequest(id: "probe", op: op, args: args, origin: origin).json)
        return await d.reply(to: frame, connection: c)
    }

    private static func result(_ probe: String, _ site: BridgeSite, _ op: String, _ reply: BridgeMessage,
                               _ expected: BridgeErrorCode) -> BridgeProbeResult {
        var passed = false
        if case .failure(_, let f) = reply, f.code == expected { passed = true }
        return BridgeProbeResult(probe: probe, site: site.name, op: op, passed: passed, detail: describe(reply))
    }

    private static func describe(_ m: BridgeMessage) -> String {
        switch m {
        case .success: "ok"
        case .failure(_, let f): f.code.rawValue
        case .event(let n, _): "event \(n)"
        }
    }
}
