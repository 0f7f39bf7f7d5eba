public import SiteKeepBridge
public import SiteKeepPartitions
import Synchronization
public import SiteKeepVocabulary

/// Origins to sites through the partitions layer's registry: one canonical origin form
/// (``Origin``), and only app-bound sites may use the bridge.
///
/// Only authentic entries count (``SiteRegistry/authenticSites()``): an origin, host or grant
/// written into `sites.json` by hand, or an entry whose tag does not verify, binds and opens
/// nothing; ``note`` names each such entry once, with its fix.
///
/// ``isCurrent(_:)`` runs before every bridge message: it costs one look for changes by the
/// registry (a non-blocking inotify `read` in the daemon) and a dictionary lookup; the bridge's
/// view of the app-bound sites is rebuilt only when the registry's generation moves.
public final class RegistrySiteResolver: SiteResolver {
    public let registry: SiteRegistry
    private let view = Mutex<View>(View())

    /// Where entries that are not authentic are named (the daemon's log); nil: nowhere.
    private let note: (@Sendable (String) -> Void)?

    /// The app-bound sites and their grants, as of one registry generation.
    private struct View {
        var generation: UInt64 = 0
        /// The entries named by ``note`` already, with what they said.
        var noted: [SiteID: [UInt8]] = [:]
        var sites: [String: BridgeSite] = [:]
        var grants: [String: Set<String>] = [:]
        var hosts: [String: [SiteHost]] = [:]
    }

    /// - Parameters:
    ///   - note: where to name entries of `sites.json` that are not authentic (once each).
    public init(registry: SiteRegistry, note: (@Sendable (String) -> Void)? = nil) {
        self.registry = registry
        self.note = note
    }

    /// Any registered site, app-bound or not: the dispatcher refuses one that is not app-bound
    /// with a message saying so (a "no site" would send the user looking for the wrong cause).
    public func site(forOrigin origin: Origin) async -> BridgeSite? {
        current { _ in () }   // names entries that are not authentic, as every look does
        return registry.authenticSite(forOrigin: origin).map(Self.bridgeSite)
    }

    public func isCurrent(_ site: BridgeSite) -> Bool {
        current { v in
            guard let now = v.sites[site.id] else { return false }
            return now.isAppBound == site.isAppBound && now.origins == site.origins && now.hostKeys == site.hostKeys
        }
    }

    /// The site's grants from the same view: only while the site is registered with the same
    /// origins and app-bound flag as `site` (a grant belongs to the site it was given to).
    public func grantedOps(_ site: BridgeSite) -> Set<String> {
        current { v in
            guard let now = v.sites[site.id], now.isAppBound == site.isAppBound, now.origins == site.origins else { return [] }
            return v.grants[site.id] ?? []
        }
    }

    /// The hosts the user added for the site (``Site/hosts``), from the same view and on the same
    /// terms as ``grantedOps(_:)``: a site re-registered with other origins has none of them.
    public func hosts(_ site: BridgeSite) -> [SiteHost] {
        current { v in
            guard let now = v.sites[site.id], now.isAppBound == site.isAppBound, now.origins == site.origins else { return [] }
            return v.hosts[site.id] ?? []
        }
    }

    /// Runs `body` on the view of the registry's current generation (rebuilt when it moved).
    private func current<R: Sendable>(_ body: (View) -> R) -> R {
        let generation = registry.generation
        return view.withLock { v in
            if v.generation != generation {
                var fresh = View(generation: generation)
                if let note {
                    // Named: entries that claim something (app-bound, hosts, grants) and were
                    // checked; those read while locked are checked at the next unlock.
                    for (site, standing) in registry.sitesNotAuthentic()
                    where standing != .unchecked && (site.isAppBound || !site.hosts.isEmpty || !site.grants.isEmpty) {
                        let said = site.taggedBytes + (site.tag ?? [])
                        fresh.noted[site.id] = said
                        if v.noted[site.id] != said, let problem = standing.problem(of: site) { note(problem) }
                    }
                }
                for s in registry.authenticSites() where s.isAppBound {
                    fresh.sites[s.id.string] = Self.bridgeSite(s)
                    if !s.grants.isEmpty { fresh.grants[s.id.string] = Set(s.grants) }
                    if !s.hosts.isEmpty { fresh.hosts[s.id.string] = s.hosts }
                }
                v = fresh
            }
            return body(v)
        }
    }

    static func bridgeSite(_ s: Site) -> BridgeSite {
        BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound,
                   hostKeys: s.hosts.map { $0.path + " " + ($0.sha256 ?? "-") })
    }
}
