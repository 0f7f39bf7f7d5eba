/// How far ahead of an item its reminder fires, per kind of item, and how many are kept pending.
public struct ReminderPolicy: Sendable, Equatable {
    /// The lead per kind, in milliseconds (default 10 minutes for each).
    public var leads: [AgendaItemKind: Int64]
    /// Whether every stand-up of the agenda is reminded, picked or not (the meeting briefings).
    public var remindEveryStandup: Bool
    /// The most reminders pending at once (the app's platform allows 64).
    public var maxPending: Int
    /// A reminder delivered more than this long after its time is marked late.
    public var lateAfterMilliseconds: Int64

    public static let tenMinutes: Int64 = 10 * 60_000
    public static let standard = ReminderPolicy()

    public init(leads: [AgendaItemKind: Int64] = [.session: tenMinutes, .standup: tenMinutes], remindEveryStandup: Bool = true,
                maxPending: Int = 64, lateAfterMilliseconds: Int64 = 60_000) {
        self.leads = leads
        self.remindEveryStandup = remindEveryStandup
        self.maxPending = maxPending
        self.lateAfterMilliseconds = lateAfterMilliseconds
    }

    /// The lead for `kind` (when the policy does not name the kind: 10 minutes, none for a
    /// reminder set by hand, which fires at its own time).
    public func lead(for kind: AgendaItemKind) -> Int64 { leads[kind] ?? (kind == .reminder ? 0 : Self.tenMinutes) }
}

/// One reminder: an agenda item, the instant to warn at, and what to say.
public struct Reminder: Sendable, Hashable {
    /// Stable for one item at one start time: `KIND:START_MS:ITEM_ID`. A session moved to
    /// another time gets a new id, so it is reminded again; the same one is never reminded twice.
    public let id: String
    public let item: AgendaItem
    public let fireAt: Instant

    public init(item: AgendaItem, lead: Int64) {
        self.item = item
        self.fireAt = item.start.adding(milliseconds: -lead)
        self.id = "\(item.kind.rawValue):\(item.start.milliseconds):\(item.id)"
    }

    /// The notification's title: the item's title.
    public var title: String { item.title }

    /// The notification's body: when (wall-clock time in the agenda's zone) and where.
    public func body(zone: ZoneRules) -> String {
        let when = zone.local(item.start).hourMinute
        if item.kind == .reminder { return "Reminder set for \(when) \(zone.identifier)" }
        let kind = item.kind == .standup ? "Stand-up" : "Starts"
        return item.stage.map { "\(kind) at \(when), \($0)" } ?? "\(kind) at \(when)"
    }
}

/// Computes the pending reminders of a schedule against an agenda.
///
/// The candidates are every picked item and (with ``ReminderPolicy/remindEveryStandup``) every
/// stand-up; each fires its kind's lead before its start, in absolute time (so a lead across a
/// change of summer time is still ten real minutes). Dropped: reminders already delivered (by
/// id) and items that have ended. Kept: the next ``ReminderPolicy/maxPending``, in order of fire
/// time (then id), including those whose time has passed but whose item has not ended (a wake
/// after the time: they are due now, and the deliverer marks them late).
///
/// Re-plan whenever one fires and whenever the picks or the agenda change: the plan is a pure
/// function of its inputs.
public enum ReminderPlanner {
    public static func plan(schedule: ScheduleDocument, agenda: Agenda, policy: ReminderPolicy = .standard,
                            now: Instant, delivered: Set<String> = []) -> [Reminder] {
        var candidates: [Reminder] = []
        candidates.reserveCapacity(schedule.picks.count + 16)
        var picked = Set<[UInt8]>()
        picked.reserveCapacity(schedule.picks.count)
        for p in schedule.picks {
            guard let item = agenda.item(id: p.id) else { continue }
            picked.insert(Array(item.id.utf8))
            consider(item, policy: policy, now: now, delivered: delivered, into: &candidates)
        }
        if policy.remindEveryStandup {
            for item in agenda.items where item.kind == .standup && item.end > now && !picked.contains(Array(item.id.utf8)) {
                consider(item, policy: policy, now: now, delivered: delivered, into: &candidates)
            }
        }
        return nextInOrder(candidates, limit: max(0, policy.maxPending))
    }

    private static func consider(_ item: AgendaItem, policy: ReminderPolicy, now: Instant, delivered: Set<String>, into out: inout [Reminder]) {
        guard item.end > now else { return }
        let r = Reminder(item: item, lead: policy.lead(for: item.kind))
        guard !delivered.contains(r.id) else { return }
        out.append(r)
    }

    static func precedes(_ a: Reminder, _ b: Reminder) -> Bool {
        a.fireAt != b.fireAt ? a.fireAt < b.fireAt : a.id.utf8.lexicographicallyPrecedes(b.id.utf8)
    }

    /// The first `limit` reminders in order, without sorting them all when there are many more.
    static func nextInOrder(_ all: [Reminder], limit: Int) -> [Reminder] {
        guard all.count > limit * 4 else { return Array(all.sorted(by: precedes).prefix(limit)) }
        // Keep a sorted window of `limit`; most candidates fall after it and cost one comparison.
        var window: [Reminder] = []
        window.reserveCapacity(limit + 1)
        for r in all {
            if window.count == limit, let last = window.last, !precedes(r, last) { continue }
            var lo = 0, hi = window.count
            while lo < hi { let mid = (lo + hi) / 2; if precedes(window[mid], r) { lo = mid + 1 } else { hi = mid } }
            window.insert(r, at: lo)
            if window.count > limit { window.removeLast() }
        }
        return window
    }
}
