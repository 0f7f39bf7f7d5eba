public import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCore
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepPartitions
import SiteKeepVault

/// The bridge of one open store: its site registry as the resolver, presence through
/// the daemon's one prompt (``PromptPresenceVerifier``), and every op module on the store's partitions, custody, vaults and core.
public enum StoreBridge {
    /// A dispatcher over `store`'s modules, for a host that serves the bridge itself (the
    /// ``Daemon`` adds its reminders, vault sync and sockets around the same modules).
    /// - Parameter teamKeyID: the team key `identity.get` reports (default: the first team key).
    public static func dispatcher(for store: OpenStore, teamKeyID: String? = nil,
                                  environment: [String: String]) throws -> BridgeDispatcher {
        let wired = try make(store, registry: try store.registry(), teamKeyID: teamKeyID,
                             presence: PromptPresenceVerifier(setting: nil, environment: environment), vault: nil)
        return try wired.dispatcher()
    }

    /// The parts before the dispatcher exists: the daemon's native core needs the dispatcher
    /// later (its events), and the modules need the core now (re-planning).
    struct Wired {
        let sites: any SiteResolver
        let modules: [any BridgeModule]
        let core: DaemonCore

        func dispatcher() throws -> BridgeDispatcher {
            try BridgeDispatcher(catalogue: try OpCatalogue.bundled(), sites: sites, modules: modules)
        }
    }

    /// The modules of `store`, sharing one set of partitions with the native core.
    /// - Parameter vault: the vault service to serve (the daemon's sync passes its own), else
    ///   one on the store's library.
    /// - Parameter presence: the daemon's one presence verifier (the prompt the `prompt` setting chooses).
    /// - Parameter note: where entries of sites.json that bind nothing (no valid tag) are named, with their fix.
    /// - Parameter lanes: the sites' vaults' append lanes for `inbox.list`/`inbox.mark` (nil: none).
    static func make(_ store: OpenStore, registry: SiteRegistry, teamKeyID: String?, presence verifier: any PresenceVerifier,
                     vault: (any VaultService)?, lanes: (any LaneInboxService)? = nil, note: (@Sendable (String) -> Void)? = nil) throws -> Wired {
        // Every holder of keys, decrypted bytes or proofs takes its storage from custody's lock
        // scope, so lock, the idle lock, unlock and the daemon's exit clear them all: the open
        // partitions here, the presence window, and the vault library (through its key store).
        let scope = store.custodian.lockScope
        let access = PartitionAccess(registry: registry, lockScope: scope)
        // The CLI changes sites.json while the daemon runs: see it at once, close what it removed.
        access.followRegistryChanges()
        let core = DaemonCore(home: store.home.path, registry: registry, access: access)
        let team = teamKeyID ?? (try? store.custodian.listTeamKeys().first?.id) ?? nil
        let parts = StoreParts(access: access, state: core.state, library: store.vaultLibrary(), vault: vault, lanes: lanes,
                               custodian: store.custodian, presence: PresenceWindow(verifier: verifier, lockScope: scope), teamKeyID: team, onPlanChange: { _ in core.replan() })
        let modules = StoreModules.make(parts)
        return Wired(sites: RegistrySiteResolver(registry: registry, note: note), modules: modules, core: core)
    }
}
