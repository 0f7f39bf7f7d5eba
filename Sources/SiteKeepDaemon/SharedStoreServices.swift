public import SiteKeepPartitions
public import SiteKeepVault
public import SiteKeepVaultRemotes
public import SiteKeepCustody
import Synchronization
import SiteKeepVocabulary

/// What a daemon shares with the commands it runs: one site registry and one vault library
/// (their caches register with custody's lock scope, so `lock` clears them for everyone), and
/// its vault sync while it runs one.
public final class SharedStoreServices: Sendable {
    public let registry: SiteRegistry
    public let library: VaultLibrary
    /// How the daemon asks the user to approve a key use a command run inside it asks for (the
    /// daemon's `SITEKEEP_ASKPASS`); nil when it has none (a command then asks for the
    /// passphrase on its client's terminal, or is refused).
    public let presence: (any PresenceVerifier)?
    private let sync = Mutex<VaultSyncScheduler?>(nil)

    public init(registry: SiteRegistry, library: VaultLibrary, presence: (any PresenceVerifier)? = nil) {
        self.registry = registry
        self.library = library
        self.presence = presence
    }

    /// The daemon's vault sync while it runs: a `vault pull` or `vault push` run inside the
    /// daemon goes through it, so `vault.status` reports it and a pull that brings changes
    /// sends `vault.changed` to the owning site's connections, as a background round does.
    public var vaultSync: VaultSyncScheduler? { sync.withLock { $0 } }

    func attach(_ scheduler: VaultSyncScheduler?) { sync.withLock { $0 = scheduler } }

    /// The daemon serving this store while it runs: a `config set` run inside it applies the
    /// change at once (``Daemon/apply(_:)``), and `config` shows the settings in force.
    public var daemon: Daemon? { host.withLock { $0.daemon } }

    private struct WeakDaemon: Sendable { weak var daemon: Daemon? }
    private let host = Mutex(WeakDaemon())

    func attach(daemon: Daemon?) { host.withLock { $0.daemon = daemon } }

    /// Closes the daemon's own open handle on the partition of site `id` (its bridge keeps one
    /// per site it served), so `site remove` run inside the daemon is not refused as "in use"
    /// by the daemon itself. Does nothing when no daemon runs.
    public func releaseSite(_ id: SiteID) {
        release.withLock { $0 }?(id)
    }

    private let release = Mutex<(@Sendable (SiteID) -> Void)?>(nil)

    func attach(release body: (@Sendable (SiteID) -> Void)?) { release.withLock { $0 = body } }
}
