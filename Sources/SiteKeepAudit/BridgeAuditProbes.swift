import SiteKeepBridge
import SiteKeepJSON
import SiteKeepPartitions

/// The bridge's isolation probes on the audit's own sites: every op from a site not on its
/// allow-list is refused (`not_allowed`), and every op on a connection bound to the subject,
/// in a message claiming another site's origin, is refused (`forbidden_origin`).
///
/// The dispatcher is the shipped catalogue's, resolving origins through the audit's registry;
/// services are in memory (the probes look at the refusals, which happen before any service).
public struct BridgePolicyProbe: Probe {
    public enum Kind: Sendable { case foreignOps, originClaims }
    public let kind: Kind
    public var name: String { kind == .foreignOps ? BridgeProbes.foreignSite : BridgeProbes.originMismatch }
    public var summary: String {
        kind == .foreignOps
            ? "every bridge op from a site its policy does not list is refused (not_allowed), from every site"
            : "every bridge op on a connection bound to the subject but claiming another site's origin is refused (forbidden_origin)"
    }

    public init(_ kind: Kind) { self.kind = kind }

    public func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let bridgeSites = context.sites.compactMap { s -> BridgeSite? in
            guard let site = context.registry.site(forIdentifier: s.id) else { return nil }
            return BridgeSite(id: site.id.string, name: site.displayName, origins: site.origins.map(\.serialized), isAppBound: site.isAppBound)
        }
        guard let me = bridgeSites.first(where: { $0.id == subject.id.string }) else { return .error("the subject is not in the registry") }
        let dispatcher = try BridgeDispatcher(catalogue: try OpCatalogue.bundled(),
                                              sites: RegistrySiteResolver(registry: context.registry), modules: [])
        // The subject, and (for origin claims) its neighbour as the claimed site.
        let neighbour = bridgeSites.first { $0.id == context.neighbour(of: subject).id.string }
        let sites = kind == .foreignOps ? [me] : [me] + (neighbour.map { [$0] } ?? [])
        let results = BridgeProbes.runSynchronously(dispatcher: dispatcher, sites: sites)
            .filter { $0.probe == name && $0.site == me.name }
        guard !results.isEmpty || kind == .foreignOps else { return .error("no bridge probe ran") }
        if let bad = results.first(where: { !$0.passed }) {
            return .leak("\(bad.op) from \(me.origins.first ?? me.id) was not refused (got \(bad.detail))")
        }
        return .pass
    }
}
