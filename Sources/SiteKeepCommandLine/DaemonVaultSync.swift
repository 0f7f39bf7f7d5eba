import Foundation
import Synchronization
internal import SiteKeepBridge
internal import SiteKeepCustody
internal import SiteKeepKeyring
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepVaultRemotes

/// The daemon's periodic vault sync (issue 14, item 7): a ``VaultSyncScheduler`` over the
/// store's vaults and remotes, its `vault.changed` events sent to the owning site's bridge
/// connections, its state in `vault.status`. (Issue 13 moves this wiring into SiteKeepDaemon.)
final class DaemonVaultSync: Sendable {
    let scheduler: VaultSyncScheduler
    private let holder: DispatcherHolder

    static let everyOption = OptionSpec.option("--sync-every", value: "SECONDS",
                                               "sync the vaults that have a remote this often while unlocked, and at unlock (default 300; 0: never)")
    static let meteredOption = OptionSpec.flag("--metered", "treat the network as metered: no background sync (NetworkManager's Metered is also honoured)")

    /// The sync `inv` asks for, nil with `--sync-every 0`.
    static func make(_ store: StoreContext, inv: Invocation) throws -> DaemonVaultSync? {
        let seconds = try inv.intOption("--sync-every", default: 300, range: 0...24 * 3600)
        guard seconds > 0 else { return nil }
        let forced = inv.flag("--metered")
        let service = VaultSyncService(library: VaultCommands.library(store), remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                       custodian: store.custodian)
        let custodian = store.custodian
        return DaemonVaultSync(service: service, interval: .seconds(seconds), isUnlocked: { custodian.isUnlocked },
                               isMetered: { forced || NetworkMetering.networkManagerSaysMetered() }, note: { inv.note($0) })
    }

    private init(service: VaultSyncService, interval: Duration, isUnlocked: @escaping @Sendable () -> Bool,
                 isMetered: @escaping @Sendable () -> Bool, note: @escaping @Sendable (String) -> Void) {
        let holder = DispatcherHolder()
        scheduler = VaultSyncScheduler(service: service, interval: interval, isUnlocked: isUnlocked, isMetered: isMetered,
                                       onChanged: { vault, siteID, outcome in
            guard let siteID else { return }
            holder.get()?.broadcast("vault.changed", data: [
                "vault": .string(vault), "head": .string(outcome.merge?.head.map { "\($0)" }),
                "merge": .string(outcome.merge?.kind.rawValue ?? "up-to-date"), "fetched": .integer(outcome.fetched.objects),
                "conflicts": .array((outcome.merge?.conflicts ?? []).map { .string($0) }),
            ], siteID: siteID)
        }, note: note)
        self.holder = holder
    }

    /// The bridge's vault service on the sync's own library (one cache of vault handles, which
    /// custody's lock scope clears), with this sync's state in `vault.status`.
    func vaultService() -> LibraryVaultService {
        let scheduler = self.scheduler
        return LibraryVaultService(library: scheduler.service.library, syncStatus: { name in
            let s = scheduler.status(vault: name)
            return BridgeVaultSync(queued: s.queued, lastSyncMs: s.lastSyncMs, lastSyncError: s.lastError)
        })
    }

    func start(_ d: BridgeDispatcher) {
        holder.set(d)
        scheduler.start()
    }

    func stop() { scheduler.stop() }
}

/// The dispatcher, set once it exists (the services are made before it).
final class DispatcherHolder: Sendable {
    private let value = Mutex<BridgeDispatcher?>(nil)
    func set(_ d: BridgeDispatcher) { value.withLock { $0 = d } }
    func get() -> BridgeDispatcher? { value.withLock { $0 } }
}
