import Foundation
internal import SiteKeepBridge
internal import SiteKeepCustody
internal import SiteKeepCore
internal import SiteKeepKeyring
internal import SiteKeepPartitions

enum DaemonServices {
    /// The services of `store` for the bridge.
    static func make(_ store: StoreContext, registry: SiteRegistry, teamKeyID: String?, environment: [String: String]) throws -> BridgeServices {
        try makeWithCore(store, registry: registry, teamKeyID: teamKeyID, environment: environment).services
    }

    /// The services and the daemon's native core (reminders, snapshot) sharing one set of partitions.
    static func makeWithCore(_ store: StoreContext, registry: SiteRegistry, teamKeyID: String?,
                             environment: [String: String]) throws -> (services: BridgeServices, core: DaemonCore) {
        // Every holder of keys, decrypted bytes or proofs takes its storage from custody's lock
        // scope, so lock, the idle lock, unlock and the daemon's exit clear them all: the open
        // partitions here, the presence window, and the vault library (through its key store).
        let scope = store.custodian.lockScope
        let access = PartitionAccess(registry: registry, lockScope: scope)
        // The CLI changes sites.json while the daemon runs: see it at once, close what it removed.
        access.followRegistryChanges()
        let core = DaemonCore(home: store.home.path, registry: registry, access: access)
        let state = core.state
        let library = VaultCommands.library(store)
        let vaults = CoreVaultAccess(library: library)
        var presence: (any PresenceService)? = nil
        if let verifier = try? AskpassPresenceVerifier.fromEnvironment(environment) {
            presence = CustodyPresenceService(window: PresenceWindow(verifier: verifier, lockScope: scope))
        }
        let team = teamKeyID ?? (try? store.custodian.listTeamKeys().first?.id) ?? nil
        let services = BridgeServices(
            sites: RegistrySiteResolver(registry: registry),
            presence: presence,
            storage: PartitionStorageService(access: access),
            tabs: PartitionTabsService(access: access),
            reading: PartitionReadingService(access: access),
            schedule: PartitionScheduleService(access: access, mirror: VaultPicksMirror(library: library), onChange: { _ in core.replan() }),
            notify: CoreNotifyService(access: access, state: state, onChange: { _ in core.replan() }),
            identity: SettingsIdentityService(state: state, fallback: team.map { CustodyIdentityService(custodian: store.custodian, teamKeyID: $0) }),
            signing: CustodySigningService(custodian: store.custodian),
            vault: LibraryVaultService(library: library),
            workflow: CoreWorkflowService(state: state, vaults: vaults),
            inbox: CoreInboxService(vaults: vaults, state: state))
        return (services, core)
    }
}
