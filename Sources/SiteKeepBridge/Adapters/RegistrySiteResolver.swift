public import SiteKeepPartitions

/// Origins to sites through the partitions layer's registry: one canonical origin form
/// (``Origin``), and only app-bound sites may use the bridge.
public struct RegistrySiteResolver: SiteResolver {
    public let registry: SiteRegistry
    public init(registry: SiteRegistry) { self.registry = registry }

    public func canonicalOrigin(_ origin: String) -> String? { (try? Origin(parsing: origin))?.serialized }

    public func site(forOrigin origin: String) async -> BridgeSite? {
        guard let s = try? registry.site(forOrigin: origin), s.isAppBound else { return nil }
        return BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound)
    }
}
