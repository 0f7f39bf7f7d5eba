import Foundation
internal import SiteKeepJSON
import Synchronization
import SiteKeepSystem

/// The wall clock, injectable: tests pass a clock they move by hand.
public protocol CoreClock: Sendable {
    func now() -> Instant
}

/// The system's real-time clock (`CLOCK_REALTIME`, which keeps counting through a suspend).
public struct SystemClock: CoreClock {
    public init() {}
    public func now() -> Instant {
        Instant(milliseconds: Clocks.wallMilliseconds()) ?? .earliest
    }
}

/// A desktop notification for one reminder.
public struct DesktopNotification: Sendable, Equatable {
    /// The ledger id (`SITE/REMINDER`).
    public let key: String
    public let siteID: String
    public let title: String
    public let body: String
    /// The item's page, opened through the host by the default action.
    public let url: String?
    /// Delivered later than its time (after a suspend, or a daemon that was not running).
    public let late: Bool
    public let fireAt: Instant

    /// A notification of something other than a reminder (new lane messages): no page to open
    /// unless `url` is given, never late.
    public init(key: String, siteID: String, title: String, body: String, url: String? = nil, late: Bool = false, fireAt: Instant) {
        self.key = key
        self.siteID = siteID
        self.title = title
        self.body = body
        self.url = url
        self.late = late
        self.fireAt = fireAt
    }
}

/// Why a notification could not be shown.
public struct DeliveryError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Shows a notification (the freedesktop Notifications service, or the terminal).
public protocol NotificationSink: Sendable {
    func deliver(_ notification: DesktopNotification) throws(DeliveryError)
}

/// One delivery, as the ledger keeps it.
public struct DeliveryRecord: Sendable, Equatable {
    public let key: String
    public let fireAt: Instant
    public let deliveredAt: Instant
    public let late: Bool
}

/// The persisted set of reminders already delivered: what makes "never twice" survive a
/// restart, a crash and a suspend.
public protocol DeliveryLedger: Sendable {
    /// Every delivered key.
    func deliveredKeys() throws(CoreFileError) -> Set<String>
    /// Records a delivery durably (it is on disk when this returns).
    func record(_ record: DeliveryRecord) throws(CoreFileError)
}

/// A ``DeliveryLedger`` in one JSON file (`sitekeep.reminders.delivered.v1`), rewritten
/// atomically on each record; records whose reminder time is more than 30 days before the newest
/// delivery are dropped (their items have ended, so they cannot be planned again).
public final class FileDeliveryLedger: DeliveryLedger {
    public let path: String
    private let lock = Mutex<[String: DeliveryRecord]?>(nil)
    static let keepMilliseconds: Int64 = 30 * 86_400_000
    static let format = "sitekeep.reminders.delivered.v1"

    public init(path: String) { self.path = path }

    private func load() throws(CoreFileError) -> [String: DeliveryRecord] {
        guard let bytes = try CoreFiles.read(path, limit: 16 << 20) else { return [:] }
        guard let v = try? JSONParser.parse(bytes), v["format"]?.stringValue == Self.format, let list = v["delivered"]?.arrayValue else {
            throw CoreFileError(path: path, reason: "is not a \(Self.format) file; move it aside to start a new ledger (reminders already shown may then show again)")
        }
        var out: [String: DeliveryRecord] = [:]
        for e in list {
            guard let key = e["key"]?.stringValue, let f = e["fireAt"]?.intValue.flatMap(Instant.init(milliseconds:)),
                  let d = e["deliveredAt"]?.intValue.flatMap(Instant.init(milliseconds:)) else { continue }
            out[key] = DeliveryRecord(key: key, fireAt: f, deliveredAt: d, late: e["late"]?.boolValue ?? false)
        }
        return out
    }

    private func withRecords<R>(_ body: (inout [String: DeliveryRecord]) throws(CoreFileError) -> R) throws(CoreFileError) -> R {
        try lock.withLock { (cache: inout [String: DeliveryRecord]?) throws(CoreFileError) -> R in
            var records: [String: DeliveryRecord]
            if let cache { records = cache } else { records = try load() }
            defer { cache = records }
            return try body(&records)
        }
    }

    public func deliveredKeys() throws(CoreFileError) -> Set<String> {
        try withRecords { Set($0.keys) }
    }

    public func record(_ record: DeliveryRecord) throws(CoreFileError) {
        let path = self.path
        try withRecords { (records: inout [String: DeliveryRecord]) throws(CoreFileError) in
            var next = records
            next[record.key] = record
            let horizon = record.deliveredAt.adding(milliseconds: -Self.keepMilliseconds)
            next = next.filter { $0.value.fireAt >= horizon }
            let sorted = next.values.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            let doc: JSONValue = .object([
                JSONMember(key: "format", value: .string(Self.format)),
                JSONMember(key: "delivered", value: .array(sorted.map { r in
                    .object([JSONMember(key: "key", value: .string(r.key)), JSONMember(key: "fireAt", value: .int(r.fireAt.milliseconds)),
                             JSONMember(key: "deliveredAt", value: .int(r.deliveredAt.milliseconds)), JSONMember(key: "late", value: .bool(r.late))])
                })),
            ])
            try CoreFiles.writeAtomically(JSONSerializer.bytes(doc, style: .pretty), to: path)
            records = next
        }
    }
}

/// What one site contributes to a round of delivery.
public struct ReminderInput: Sendable {
    public let siteID: String
    public let schedule: ScheduleDocument
    public let agenda: Agenda
    /// The site's own leads; the deliverer's policy when nil.
    public let policy: ReminderPolicy?
    public init(siteID: String, schedule: ScheduleDocument, agenda: Agenda, policy: ReminderPolicy? = nil) {
        self.siteID = siteID; self.schedule = schedule; self.agenda = agenda; self.policy = policy
    }
}

/// What a round of delivery did.
public struct DeliveryRound: Sendable, Equatable {
    public var delivered: [DesktopNotification] = []
    /// Deliveries the sink refused (recorded all the same: at most once).
    public var failed: [(key: String, reason: String)] = []
    /// The earliest reminder still to come, if any.
    public var nextFireAt: Instant?
    /// Every pending reminder after the round, per site, in order (at most the policy's limit each).
    public var pending: [String: [Reminder]] = [:]

    public static func == (a: DeliveryRound, b: DeliveryRound) -> Bool {
        a.delivered == b.delivered && a.nextFireAt == b.nextFireAt && a.pending == b.pending
            && a.failed.map(\.key) == b.failed.map(\.key)
    }
}

/// Delivers due reminders: plans each site's next reminders, shows those whose time has come,
/// and records each in the ledger **before** showing it, so a crash between the two loses at most
/// one notification and none is ever shown twice. One that is shown more than the policy's
/// ``ReminderPolicy/lateAfterMilliseconds`` after its time is marked late.
///
/// ```swift
/// let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: p), sink: sink, clock: SystemClock())
/// let round = try d.deliverDue([ReminderInput(siteID: id, schedule: s, agenda: a)])
/// ```
public final class ReminderDeliverer: Sendable {
    public let ledger: any DeliveryLedger
    public let sink: any NotificationSink
    public let clock: any CoreClock
    public let policy: ReminderPolicy

    public init(ledger: any DeliveryLedger, sink: any NotificationSink, clock: any CoreClock, policy: ReminderPolicy = .standard) {
        self.ledger = ledger; self.sink = sink; self.clock = clock; self.policy = policy
    }

    /// The ledger key of `reminder` on `site`.
    public static func key(site: String, reminder: Reminder) -> String { "\(site)/\(reminder.id)" }

    /// The pending reminders of one site, without delivering anything.
    public func pending(_ input: ReminderInput) throws(CoreFileError) -> [Reminder] {
        let delivered = try ledger.deliveredKeys()
        return plan(input, delivered: delivered, now: clock.now())
    }

    private func plan(_ input: ReminderInput, delivered: Set<String>, now: Instant) -> [Reminder] {
        let prefix = input.siteID + "/"
        var mine = Set<String>()
        for k in delivered where k.hasPrefix(prefix) { mine.insert(String(k.dropFirst(prefix.count))) }
        return ReminderPlanner.plan(schedule: input.schedule, agenda: input.agenda, policy: input.policy ?? policy, now: now, delivered: mine)
    }

    /// One round: shows every reminder now due, then re-plans.
    public func deliverDue(_ inputs: [ReminderInput]) throws(CoreFileError) -> DeliveryRound {
        var round = DeliveryRound()
        var delivered = try ledger.deliveredKeys()
        for input in inputs {
            let now = clock.now()
            for r in plan(input, delivered: delivered, now: now) where r.fireAt <= now {
                let key = Self.key(site: input.siteID, reminder: r)
                let late = now.milliseconds - r.fireAt.milliseconds > (input.policy ?? policy).lateAfterMilliseconds
                try ledger.record(DeliveryRecord(key: key, fireAt: r.fireAt, deliveredAt: now, late: late))
                delivered.insert(key)
                let n = DesktopNotification(key: key, siteID: input.siteID, title: r.title,
                                            body: late ? "Late reminder, due at \(input.agenda.zone.local(r.fireAt).hourMinute). " + r.body(zone: input.agenda.zone) : r.body(zone: input.agenda.zone),
                                            url: r.item.url, late: late, fireAt: r.fireAt)
                do {
                    try sink.deliver(n)
                    round.delivered.append(n)
                } catch {
                    round.failed.append((key, error.reason))
                }
            }
            let after = plan(input, delivered: delivered, now: now)
            round.pending[input.siteID] = after
            if let next = after.first(where: { $0.fireAt > now })?.fireAt {
                round.nextFireAt = min(round.nextFireAt ?? next, next)
            }
        }
        return round
    }
}
