internal import SiteKeepJSON
public import SiteKeepCore

/// The site's schedule (`nr.schedule.v1`, validated by the core's ``ScheduleDocument``).
public protocol ScheduleService: Sendable {
    func schedule(site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument
    /// Replaces the schedule; returns what is now stored.
    func setSchedule(_ schedule: ScheduleDocument, site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument
}

extension BridgeFailure {
    /// A document the core refused: `bad_request`, naming the path of the bad field.
    public init(core error: CoreFieldError) { self.init(.badRequest, error.description) }
}

enum ScheduleOps {
    static let names: Set<String> = ["schedule.get", "schedule.set"]

    static func handlers(_ s: any ScheduleService) -> [String: BridgeHandler] {
        [
            "schedule.get": { c throws(BridgeFailure) in try await s.schedule(site: c.site).json },
            "schedule.set": { c throws(BridgeFailure) in
                let doc: ScheduleDocument
                do throws(CoreFieldError) { doc = try ScheduleDocument(json: c.args, path: "args") } catch { throw BridgeFailure(core: error) }
                let stored = try await s.setSchedule(doc, site: c.site).json
                c.emit("schedule.changed", data: stored)
                return stored
            },
        ]
    }
}

/// Reminders for a site: planned by the core from the site's picks and agenda, delivered by the daemon.
public protocol NotifyService: Sendable {
    /// Sets the site's leads (when given) and returns its pending reminders, at most 64, in order.
    func plan(leads: ReminderLeads, site: BridgeSite) async throws(BridgeFailure) -> [Reminder]
}

enum NotifyOps {
    static let names: Set<String> = ["notify.plan"]

    static func handlers(_ s: any NotifyService) -> [String: BridgeHandler] {
        [
            "notify.plan": { c throws(BridgeFailure) in
                let leads: ReminderLeads
                do throws(CoreFieldError) { leads = try ReminderLeads(json: c.args, path: "args") } catch { throw BridgeFailure(core: error) }
                let plan = try await s.plan(leads: leads, site: c.site)
                return ["planned": .integer(plan.count), "reminders": .array(plan.map(\.json))]
            },
        ]
    }
}

/// The bridge module of the `schedule.*` ops: the site's `nr.schedule.v1` document.
public struct ScheduleModule: BridgeModule {
    public static let ops = ScheduleOps.names
    private let service: any ScheduleService
    public init(_ service: any ScheduleService) { self.service = service }
    public var handlers: [String: BridgeHandler] { ScheduleOps.handlers(service) }
}

/// The bridge module of `notify.plan`: the site's planned reminders.
public struct NotifyModule: BridgeModule {
    public static let ops = NotifyOps.names
    private let service: any NotifyService
    public init(_ service: any NotifyService) { self.service = service }
    public var handlers: [String: BridgeHandler] { NotifyOps.handlers(service) }
}
