import Foundation
internal import SiteKeepBridge
internal import SiteKeepCustody

enum DaemonServices {
    /// The services of `store` for the bridge.
    static func make(_ store: StoreContext, teamKeyID: String?, environment: [String: String]) throws -> BridgeServices {
        let registry = try SiteCommands.registry(store)
        // Every holder of keys, decrypted bytes or proofs takes its storage from custody's lock
        // scope, so lock, the idle lock, unlock and the daemon's exit clear them all: the open
        // partitions here, the presence window, and the vault library (through its key store).
        let scope = store.custodian.lockScope
        let access = PartitionAccess(registry: registry, lockScope: scope)
        // The CLI changes sites.json while the daemon runs: see it at once, close what it removed.
        access.followRegistryChanges()
        var presence: (any PresenceService)? = nil
        if let verifier = try? AskpassPresenceVerifier.fromEnvironment(environment) {
            presence = CustodyPresenceService(window: PresenceWindow(verifier: verifier, lockScope: scope))
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
