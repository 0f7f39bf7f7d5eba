import Foundation
internal import SiteKeepBridge
internal import SiteKeepCustody
internal import SiteKeepPartitions

enum DaemonServices {
    /// The services of `store` for the bridge.
    static func make(_ store: StoreContext, registry: SiteRegistry, teamKeyID: String?, environment: [String: String]) throws -> BridgeServices {
        let access = PartitionAccess(registry: registry)
        // Locking drops the open partitions: when-unlocked data must not outlive the unlock.
        _ = store.custodian.addLockObserver { access.closeAll() }
        var presence: (any PresenceService)? = nil
        if let verifier = try? AskpassPresenceVerifier.fromEnvironment(environment) {
            presence = CustodyPresenceService(window: PresenceWindow(verifier: verifier))
        }
        let team = teamKeyID ?? (try? store.custodian.listTeamKeys().first?.id) ?? nil
        return BridgeServices(
            sites: RegistrySiteResolver(registry: registry),
            presence: presence,
            storage: PartitionStorageService(access: access),
            tabs: PartitionTabsService(access: access),
            reading: PartitionReadingService(access: access),
            schedule: PartitionScheduleService(access: access),
            notify: PartitionNotifyService(access: access),
            identity: team.map { CustodyIdentityService(custodian: store.custodian, teamKeyID: $0) },
            signing: CustodySigningService(custodian: store.custodian),
            vault: LibraryVaultService(library: VaultCommands.library(store)))
    }
}
