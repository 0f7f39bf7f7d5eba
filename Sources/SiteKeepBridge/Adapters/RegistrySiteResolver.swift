public import SiteKeepPartitions
import Synchronization

/// Origins to sites through the partitions layer's registry: one canonical origin form
/// (``Origin``), and only app-bound sites may use the bridge.
///
/// ``isCurrent(_:)`` runs before every bridge message: it costs one look for changes by the
/// registry (a non-blocking inotify `read` in the daemon) and a dictionary lookup; the bridge's
/// view of the app-bound sites is rebuilt only when the registry's generation moves.
public final class RegistrySiteResolver: SiteResolver {
    public let registry: SiteRegistry
    private let view = Mutex<(generation: UInt64, sites: [String: BridgeSite])>((0, [:]))

    public init(registry: SiteRegistry) { self.registry = registry }

    public func canonicalOrigin(_ origin: String) -> String? { (try? Origin(parsing: origin))?.serialized }

    /// Any registered site, app-bound or not: the dispatcher refuses one that is not app-bound
    /// with a message saying so (a "no site" would send the user looking for the wrong cause).
    public func site(forOrigin origin: String) async -> BridgeSite? {
        guard let s = try? registry.site(forOrigin: origin) else { return nil }
        return Self.bridgeSite(s)
    }

    public func isCurrent(_ site: BridgeSite) -> Bool {
        let generation = registry.generation
        return view.withLock { v in
            if v.generation != generation {
                var sites: [String: BridgeSite] = [:]
                for s in registry.sites() where s.isAppBound { sites[s.id.string] = Self.bridgeSite(s) }
                v = (generation, sites)
            }
            guard let now = v.sites[site.id] else { return false }
            return now.isAppBound == site.isAppBound && now.origins == site.origins
        }
    }

    static func bridgeSite(_ s: Site) -> BridgeSite {
        BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound)
    }
}
