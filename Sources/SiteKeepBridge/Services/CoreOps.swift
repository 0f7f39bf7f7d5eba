internal import SiteKeepJSON
public import SiteKeepCore

/// Workflows (the vault's `workflows/`), run as tabs by a host.
public protocol WorkflowService: Sendable {
    func catalogue(site: BridgeSite) async throws(BridgeFailure) -> WorkflowCatalogue
    /// Starts (or, with `restart` false, resumes) a run; returns where it is.
    func run(_ name: String, restart: Bool, site: BridgeSite) async throws(BridgeFailure) -> WorkflowRun
    /// "next": moves the run on; returns where it is and whether it moved.
    func next(_ name: String, site: BridgeSite) async throws(BridgeFailure) -> (run: WorkflowRun, moved: Bool)
}

/// What agents wrote into the vault since the reader last looked.
public protocol InboxService: Sendable {
    func items(site: BridgeSite) async throws(BridgeFailure) -> [InboxItem]
    /// Marks the site's inbox items `paths` read (in their current versions), all or none: a
    /// path that is not an item of the site's inbox is refused with ``BridgeFailure/notInInbox(_:)``.
    /// Not a look: what is new since the last look stays as it was. - Returns: how many were marked.
    func markRead(_ paths: [String], site: BridgeSite) async throws(BridgeFailure) -> Int
}

extension BridgeFailure {
    /// `inbox.mark`'s refusal of a path that is not an item of the calling site's inbox (a file of
    /// another site's vault answers the same: nothing says it exists).
    public static func notInInbox(_ path: String) -> BridgeFailure {
        BridgeFailure(.notFound, "args.paths: \"\(FieldSchema.printable(path))\" is not an item of this site's inbox; nothing was marked (inbox.list names the items)")
    }
}

enum WorkflowOps {
    static let names: Set<String> = ["workflow.list", "workflow.show", "workflow.run", "workflow.next"]

    static func handlers(_ s: any WorkflowService) -> [String: BridgeHandler] {
        [
            "workflow.list": { c throws(BridgeFailure) in try await s.catalogue(site: c.site).listJSON },
            "workflow.show": { c throws(BridgeFailure) in
                let name = try c.string("name")
                guard let w = try await s.catalogue(site: c.site).workflow(named: name) else {
                    throw BridgeFailure(.notFound, "no workflow \(FieldSchema.printable(name)); workflow.list names them")
                }
                return ["workflow": w.json]
            },
            "workflow.run": { c throws(BridgeFailure) in
                let run = try await s.run(try c.string("name"), restart: c.args["restart"]?.boolValue ?? false, site: c.site)
                return run.positionJSON(moved: true, withTabs: true)
            },
            "workflow.next": { c throws(BridgeFailure) in
                let (run, moved) = try await s.next(try c.string("name"), site: c.site)
                return run.positionJSON(moved: moved, withTabs: false)
            },
        ]
    }

}

enum InboxOps {
    static let names: Set<String> = ["inbox.list", "inbox.mark"]

    /// `inbox.list`: the vault's inbox items and, where the store serves lanes, the unread
    /// messages of the site's own vaults' lanes (`args.vault`: that vault's only; a vault not
    /// the site's is `not_found`, as the vault ops answer). `inbox.mark`: `paths` (inbox items)
    /// and `ids` (lane messages), all or none: every path and id is checked before anything is
    /// marked.
    static func handlers(_ s: any InboxService, lanes: (any LaneInboxService)?) -> [String: BridgeHandler] {
        [
            "inbox.list": { c throws(BridgeFailure) in
                let vault = c.optionalString("vault")
                if vault != nil, lanes == nil { throw BridgeFailure(.unsupported, "args.vault: this store serves no lanes") }
                let messages = try await lanes?.messages(vault: vault, site: c.site) ?? []
                // With args.vault the caller asks for that vault's lane; the items are the site's inbox as ever.
                return ["items": .array(try await s.items(site: c.site).prefix(1000).map(\.json)),
                        "messages": .array(messages.prefix(1000).map(\.json))]
            },
            "inbox.mark": { c throws(BridgeFailure) in
                // The catalogue checked the shape: arrays of bounded strings.
                let paths = (c.args["paths"]?.arrayValue ?? []).compactMap(\.stringValue)
                let ids = (c.args["ids"]?.arrayValue ?? []).compactMap(\.stringValue)
                guard c.args["paths"] != nil || c.args["ids"] != nil else {
                    throw BridgeFailure(.badRequest, "args: give paths (inbox items) or ids (lane messages), as inbox.list names them")
                }
                var marking: LaneMarking?
                if !ids.isEmpty {
                    guard let lanes else { throw BridgeFailure(.unsupported, "args.ids: this store serves no lanes") }
                    marking = try await lanes.prepareMark(ids, site: c.site)
                }
                let marked = c.args["paths"] == nil ? 0 : try await s.markRead(paths, site: c.site)
                return ["marked": .integer(marked + (try await marking?() ?? 0))]
            },
        ]
    }
}

/// The bridge module of the `workflow.*` ops: the vault's workflows.
public struct WorkflowModule: BridgeModule {
    public static let ops = WorkflowOps.names
    private let service: any WorkflowService
    public init(_ service: any WorkflowService) { self.service = service }
    public var handlers: [String: BridgeHandler] { WorkflowOps.handlers(service) }
}

/// The bridge module of `inbox.list` and `inbox.mark`: what agents wrote into the vault, the
/// reader's read marks, and (with `lanes`) what agents sent to the site's vaults' append lanes.
public struct InboxModule: BridgeModule {
    public static let ops = InboxOps.names
    private let service: any InboxService
    private let lanes: (any LaneInboxService)?
    /// - Parameter lanes: the site's vaults' lanes (nil: a store that serves none; `messages` is empty).
    public init(_ service: any InboxService, lanes: (any LaneInboxService)? = nil) {
        self.service = service
        self.lanes = lanes
    }
    public var handlers: [String: BridgeHandler] { InboxOps.handlers(service, lanes: lanes) }
}
