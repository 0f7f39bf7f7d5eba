import Synchronization
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepJSON
import SiteKeepVault
import SiteKeepVaultRemotes

/// The daemon's periodic vault sync (issue 14, item 7): a ``VaultSyncScheduler`` over the
/// store's vaults and remotes, its `vault.changed` events sent to the owning site's bridge
/// connections, its state in `vault.status`; after each round the lanes are checked and new
/// messages notified (``LaneWatch``, ``LaneNotice``).
final class VaultSync: Sendable {
    let scheduler: VaultSyncScheduler
    /// The lane checks, after each round and on unlock (the notifier is attached at start).
    let lanes: LaneWatch
    private let holder: DispatcherHolder

    /// A sync of `store`'s vaults every `interval` while unlocked; no round while the network is
    /// metered (`metered`, or NetworkManager's Metered).
    init(store: OpenStore, interval: Duration, metered forced: Bool, note: @escaping @Sendable (String) -> Void) {
        let service = VaultSyncService(library: store.vaultLibrary(), remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                       custodian: store.custodian)
        let custodian = store.custodian
        let holder = DispatcherHolder()
        lanes = LaneWatch(service: service, home: store.home.path, note: note)
        scheduler = VaultSyncScheduler(service: service, interval: interval, isUnlocked: { custodian.isUnlocked },
                                       isMetered: { forced || NetworkMetering.networkManagerSaysMetered() },
                                       onChanged: { vault, siteID, outcome in
            guard let siteID else { return }
            holder.get()?.broadcast("vault.changed", data: [
                "vault": .string(vault), "head": .string(outcome.merge?.head.map { "\($0)" }),
                "merge": .string(outcome.merge?.kind.rawValue ?? "up-to-date"), "fetched": .integer(outcome.fetched.objects),
                "conflicts": .array((outcome.merge?.conflicts ?? []).map { .string($0) }),
            ], siteID: siteID)
        }, note: note, lanes: lanes)
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

/// The dispatcher, set once it exists (the sync is made before it).
final class DispatcherHolder: Sendable {
    private let value = Mutex<BridgeDispatcher?>(nil)
    func set(_ d: BridgeDispatcher) { value.withLock { $0 = d } }
    func get() -> BridgeDispatcher? { value.withLock { $0 } }
}
