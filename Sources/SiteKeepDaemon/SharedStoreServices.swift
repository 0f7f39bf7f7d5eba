public import SiteKeepPartitions
public import SiteKeepVault

/// What a daemon shares with the commands it runs: one site registry and one vault library
/// (their caches register with custody's lock scope, so `lock` clears them for everyone).
public final class SharedStoreServices: Sendable {
    public let registry: SiteRegistry
    public let library: VaultLibrary
    public init(registry: SiteRegistry, library: VaultLibrary) {
        self.registry = registry
        self.library = library
    }
}
