public import SiteKeepBridge
public import SiteKeepCore
public import SiteKeepCustody
public import SiteKeepVault

/// What a store's op modules are made of: the engines the composition root opened, shared by
/// every module (one set of partitions, one vault library, one custodian).
public struct StoreParts: Sendable {
    /// Each site's partition, opened on first use and closed by lock.
    public let access: PartitionAccess
    /// The native core's state files.
    public let state: CoreStateDirectory
    /// The store's vault library.
    public let library: VaultLibrary
    /// The vault service to serve (the daemon's sync passes its own; else one on ``library``).
    public let vault: any VaultService
    /// The append lanes of the sites' vaults (the daemon passes its own; nil: none served).
    public let lanes: (any LaneInboxService)?
    /// Custody: signatures and identity, never key bytes.
    public let custodian: Custodian
    /// The bridge's kept approvals and its prompt, for the ops custody's gate approves.
    public let presence: PresenceWindow
    /// The team key `identity.get` reports when the settings name none (nil: no team key).
    public let teamKeyID: String?
    /// Called when a site's picks or leads change (the core re-plans its reminders).
    public let onPlanChange: @Sendable (BridgeSite) -> Void

    public init(access: PartitionAccess, state: CoreStateDirectory, library: VaultLibrary, vault: (any VaultService)? = nil,
                lanes: (any LaneInboxService)? = nil,
                custodian: Custodian, presence: PresenceWindow, teamKeyID: String?, onPlanChange: @escaping @Sendable (BridgeSite) -> Void) {
        self.lanes = lanes
        self.access = access
        self.state = state
        self.library = library
        self.vault = vault ?? LibraryVaultService(library: library)
        self.custodian = custodian
        self.presence = presence
        self.teamKeyID = teamKeyID
        self.onPlanChange = onPlanChange
    }
}

/// A bridge module a store can serve: how it is made from the store's engines.
///
/// The one list of module kinds is ``BridgeModules/shipped`` (the bridge's catalogue check reads
/// it); a kind takes part in a store's bridge by conforming to this protocol beside its adapter,
/// so adding an op group is: its module and service protocol in the bridge, listed in `shipped`,
/// and its adapter with this conformance here. No second list.
public protocol StoreModule: BridgeModule {
    /// The module on `parts`, or nil when this store cannot serve it (its engine is not set up).
    static func make(_ parts: StoreParts) -> Self?
}

/// The modules of one store, in ``BridgeModules/shipped`` order.
public enum StoreModules {
    /// Every shipped module kind that conforms to ``StoreModule``, made on `parts`.
    public static func make(_ parts: StoreParts) -> [any BridgeModule] {
        BridgeModules.shipped.compactMap { kind -> (any BridgeModule)? in
            guard let wired = kind as? any StoreModule.Type else { return nil }
            return wired.make(parts)
        }
    }

    /// The shipped kinds a store does not serve, by design: `sealed.open` needs a team content
    /// key that custody does not hold yet (the op answers `not_configured`).
    public static let unwired: [any BridgeModule.Type] = [SealedModule.self]
}

extension StorageModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(PartitionStorageService(access: p.access)) }
}

extension TabsModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(PartitionTabsService(access: p.access)) }
}

extension ReadingModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(PartitionReadingService(access: p.access)) }
}

extension ScheduleModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? {
        let change = p.onPlanChange
        return Self(PartitionScheduleService(access: p.access, mirror: VaultPicksMirror(library: p.library), onChange: { change($0) }))
    }
}

extension NotifyModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? {
        let change = p.onPlanChange
        return Self(CoreNotifyService(access: p.access, state: p.state, onChange: { change($0) }))
    }
}

extension IdentityModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? {
        let custodian = p.custodian
        return Self(SettingsIdentityService(state: p.state, fallback: p.teamKeyID.map { CustodyIdentityService(custodian: custodian, teamKeyID: $0) }))
    }
}

extension SigningModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(CustodySigningService(custodian: p.custodian, presence: p.presence)) }
}

extension VaultModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(p.vault) }
}

extension WorkflowModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(CoreWorkflowService(state: p.state, vaults: CoreVaultAccess(library: p.library))) }
}

extension InboxModule: StoreModule {
    public static func make(_ p: StoreParts) -> Self? { Self(CoreInboxService(vaults: CoreVaultAccess(library: p.library), state: p.state), lanes: p.lanes) }
}
