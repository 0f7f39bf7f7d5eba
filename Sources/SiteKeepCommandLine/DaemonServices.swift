import Foundation
internal import SiteKeepBridge
internal import SiteKeepCustody
internal import SiteKeepCore
internal import SiteKeepKeyring

enum DaemonServices {
    /// The services of `store` for the bridge.
    static func make(_ store: StoreContext, teamKeyID: String?, environment: [String: String]) throws -> BridgeServices {
        try make(store, teamKeyID: teamKeyID, environment: environment).services
    }

    /// The services and the daemon's native core (reminders, snapshot) sharing one set of partitions.
    static func make(_ store: StoreContext, teamKeyID: String?, environment: [String: String]) throws -> (services: BridgeServices, core: DaemonCore) {
        let registry = try SiteCommands.registry(store)
        let access = PartitionAccess(registry: registry)
        let core = DaemonCore(home: store.home.path, registry: registry, access: access)
        let state = core.state
        let vaults = CoreVaultAccess(library: VaultCommands.library(store))
        // Locking drops the open partitions: when-unlocked data must not outlive the unlock.
        _ = store.custodian.addLockObserver { access.closeAll() }
        var presence: (any PresenceService)? = nil
        if let verifier = try? AskpassPresenceVerifier.fromEnvironment(environment) {
            presence = CustodyPresenceService(window: PresenceWindow(verifier: verifier))
        }
        let team = teamKeyID ?? (try? store.custodian.listTeamKeys().first?.id) ?? nil
        let services = BridgeServices(
            sites: RegistrySiteResolver(registry: registry),
            presence: presence,
            storage: PartitionStorageService(access: access),
            tabs: PartitionTabsService(access: access),
            reading: PartitionReadingService(access: access),
            schedule: PartitionScheduleService(access: access, onChange: { _ in core.replan() }),
            notify: CoreNotifyService(access: access, state: state, onChange: { _ in core.replan() }),
            identity: SettingsIdentityService(state: state, fallback: team.map { CustodyIdentityService(custodian: store.custodian, teamKeyID: $0) }),
            signing: CustodySigningService(custodian: store.custodian),
            vault: LibraryVaultService(library: VaultCommands.library(store)),
            workflow: CoreWorkflowService(state: state) { () throws(BridgeFailure) -> any WorkflowSource in VaultWorkflowSource(vault: try vaults.vault()) },
            inbox: CoreInboxService(vaults: vaults, state: state, marks: FileInboxMarksStore(state: state)))
        return (services, core)
    }
}
