public import SiteKeepJSON

/// One pick of an nr.schedule.v1 schedule.
public struct SchedulePick: Sendable, Equatable {
    public var id: String
    /// When it was picked, ISO 8601 UTC.
    public var at: String
    public init(id: String, at: String) {
        self.id = id
        self.at = at
    }
}

/// A site's schedule in the nr.schedule.v1 shape `{v: 1, picks: [{id, at}]}`.
public struct Schedule: Sendable, Equatable {
    public var picks: [SchedulePick]
    public init(picks: [SchedulePick] = []) { self.picks = picks }

    /// `{v: 1, picks: [...]}`.
    public var json: JSONValue {
        ["v": 1, "picks": .array(picks.map { ["id": .string($0.id), "at": .string($0.at)] })]
    }

    /// Reads the validated shape back.
    init(json: JSONValue) throws(BridgeFailure) {
        var picks: [SchedulePick] = []
        for p in json["picks"]?.arrayValue ?? [] {
            guard let id = p["id"]?.stringValue, let at = p["at"]?.stringValue else {
                throw BridgeFailure(.badRequest, "each pick needs an id and an at")
            }
            picks.append(SchedulePick(id: id, at: at))
        }
        self.picks = picks
    }
}

/// The site's schedule (the core layer's; the vault keeps it).
public protocol ScheduleService: Sendable {
    func schedule(site: BridgeSite) async throws(BridgeFailure) -> Schedule
    /// Replaces the schedule; returns what is now stored.
    func setSchedule(_ schedule: Schedule, site: BridgeSite) async throws(BridgeFailure) -> Schedule
}

enum ScheduleOps {
    static let names: Set<String> = ["schedule.get", "schedule.set"]

    static func handlers(_ s: any ScheduleService) -> [String: BridgeHandler] {
        [
            "schedule.get": { c throws(BridgeFailure) in try await s.schedule(site: c.site).json },
            "schedule.set": { c throws(BridgeFailure) in
                let stored = try await s.setSchedule(try Schedule(json: c.args), site: c.site).json
                c.emit("schedule.changed", data: stored)
                return stored
            },
        ]
    }
}

/// One local notification to plan.
public struct PlannedNotification: Sendable, Equatable {
    public var id: String
    public var at: String
    public var title: String
    public var body: String?
    public init(id: String, at: String, title: String, body: String? = nil) {
        self.id = id
        self.at = at
        self.title = title
        self.body = body
    }
}

/// Local notifications for a site.
public protocol NotifyService: Sendable {
    /// Replaces the site's planned notifications; returns how many are planned.
    func plan(_ notifications: [PlannedNotification], site: BridgeSite) async throws(BridgeFailure) -> Int
}

enum NotifyOps {
    static let names: Set<String> = ["notify.plan"]

    static func handlers(_ s: any NotifyService) -> [String: BridgeHandler] {
        [
            "notify.plan": { c throws(BridgeFailure) in
                let list = try c.array("notifications").map { n in
                    PlannedNotification(id: n["id"]?.stringValue ?? "", at: n["at"]?.stringValue ?? "",
                                        title: n["title"]?.stringValue ?? "", body: n["body"]?.stringValue)
                }
                return ["planned": .integer(try await s.plan(list, site: c.site))]
            },
        ]
    }
}
