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

    static func handlers(_ s: any InboxService) -> [String: BridgeHandler] {
        [
            "inbox.list": { c throws(BridgeFailure) in
                ["items": .array(try await s.items(site: c.site).prefix(1000).map(\.json))]
            },
            "inbox.mark": { c throws(BridgeFailure) in
                // The catalogue checked the shape: an array of bounded strings.
                let paths = (c.args["paths"]?.arrayValue ?? []).compactMap(\.stringValue)
                return ["marked": .integer(try await s.markRead(paths, site: c.site))]
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

/// The bridge module of `inbox.list` and `inbox.mark`: what agents wrote into the vault, and the reader's read marks.
public struct InboxModule: BridgeModule {
    public static let ops = InboxOps.names
    private let service: any InboxService
    public init(_ service: any InboxService) { self.service = service }
    public var handlers: [String: BridgeHandler] { InboxOps.handlers(service) }
}
