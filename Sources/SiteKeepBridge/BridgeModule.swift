/// One group of ops and the service behind them, registered with a ``BridgeDispatcher``.
///
/// A module declares the ops it serves (``ops``, known without an instance, so the catalogue
/// check can see every op some module could serve) and their handlers. Adding an op group means adding a module beside its service
/// protocol (`Services/*Ops.swift`), listing its kind once in ``BridgeModules/shipped``, and
/// giving it an adapter with its `StoreModule` conformance in SiteKeepWiring (how a store makes
/// it); the dispatcher, the daemon and the other modules do not change. An op whose module is
/// not registered answers `not_configured`.
///
/// ```swift
/// let d = try BridgeDispatcher(catalogue: .bundled(), sites: resolver,
///                              modules: [StorageModule(storage), VaultModule(vault)])
/// ```
public protocol BridgeModule: Sendable {
    /// The ops this module serves: exactly the keys of ``handlers``.
    static var ops: Set<String> { get }
    /// Each op's handler, by op name.
    var handlers: [String: BridgeHandler] { get }
}

/// The module kinds SiteKeepBridge ships, the one list of them: what the catalogue consistency
/// check counts as able to serve an op, and what a store's bridge is made of (SiteKeepWiring's
/// `StoreModules` makes each kind that conforms to its `StoreModule`).
public enum BridgeModules {
    public static let shipped: [any BridgeModule.Type] = [
        StorageModule.self, TabsModule.self, ReadingModule.self, ScheduleModule.self, NotifyModule.self,
        IdentityModule.self, SigningModule.self, VaultModule.self, SealedModule.self, WorkflowModule.self,
        InboxModule.self,
    ]
}
