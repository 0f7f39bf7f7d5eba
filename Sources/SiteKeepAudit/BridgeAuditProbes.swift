import SiteKeepBridge
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepVocabulary

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
            ? "every bridge op from a site its policy does not list, and the user did not grant it, is refused (not_allowed), from every site; a grant works for its own site"
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
        // The grants as the registry records them: the probe's own truth, not the dispatcher's.
        var grants: [String: Set<String>] = [:]
        for s in context.registry.sites() where !s.grants.isEmpty { grants[s.id.string] = Set(s.grants) }
        let results = BridgeProbes.runSynchronously(dispatcher: dispatcher, sites: sites, grants: grants)
            .filter { $0.probe == name && $0.site == me.name }
        guard !results.isEmpty || kind == .foreignOps else { return .error("no bridge probe ran") }
        if kind == .foreignOps, let mine = grants[me.id], !mine.isEmpty {
            // The subject's own grants must reach it, or the probe above proved nothing about them.
            let missing = mine.filter { dispatcher.catalogue[$0]?.grantable == true && !dispatcher.allowedOps(for: me).contains($0) }
            if let op = missing.sorted().first { return .error("\(op), granted to \(me.origins.first ?? me.id), is not in its hello") }
        }
        if let bad = results.first(where: { !$0.passed }) {
            return .leak("\(bad.op) from \(me.origins.first ?? me.id) was not refused (got \(bad.detail))")
        }
        return .pass
    }
}
