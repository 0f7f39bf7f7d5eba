import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport

@Suite struct ReminderTests {
    /// 200 picks (every item of the fixture) give exactly the next 64 reminders, in order of
    /// their time, each ten minutes before its item; computed independently from the
    /// generator's zoneinfo starts.
    @Test func twoHundredPicksGiveExactlyTheNext64InOrder() throws {
        let agenda = try CoreFixtures.agenda()
        let raw = try CoreFixtures.agendaItems()
        let ids = raw.map { $0["id"]?.stringValue ?? $0["id"]?.intValue.map { String($0) } ?? "" }
        let schedule = try CoreFixtures.schedule(ids)
        #expect(schedule.picks.count == 200)
        let now = try Instant(rfc3339: "2026-10-22T12:00:00Z")
        let plan = ReminderPlanner.plan(schedule: schedule, agenda: agenda, now: now)
        #expect(plan.count == 64)

        // The expectation, from the fixture's own numbers: (fire time, kind, start, id).
        var expected: [(Int64, String)] = []
        for (r, id) in zip(raw, ids) {
            let start = try Instant(rfc3339: r["x-start-utc"]?.stringValue ?? "").milliseconds
            let kind = r["kind"]?.stringValue ?? "session"
            expected.append((start - 600_000, "\(kind):\(start):\(id)"))
        }
        expected.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1.utf8.lexicographicallyPrecedes($1.1.utf8) }
        #expect(plan.map(\.id) == expected.prefix(64).map(\.1))
        #expect(plan.map(\.fireAt.milliseconds) == expected.prefix(64).map(\.0))
        #expect(zip(plan, plan.dropFirst()).allSatisfy { $0.fireAt <= $1.fireAt })
        #expect(plan.allSatisfy { $0.item.start.milliseconds - $0.fireAt.milliseconds == 600_000 })
    }

    @Test func theWindowMovesAsRemindersAreDelivered() throws {
        let agenda = try CoreFixtures.agenda()
        let ids = agenda.items.map(\.id)
        let schedule = try CoreFixtures.schedule(ids)
        let now = try Instant(rfc3339: "2026-10-22T12:00:00Z")
        let first = ReminderPlanner.plan(schedule: schedule, agenda: agenda, now: now)
        let delivered = Set(first.prefix(10).map(\.id))
        let next = ReminderPlanner.plan(schedule: schedule, agenda: agenda, now: now, delivered: delivered)
        #expect(next.count == 64)
        #expect(Array(next.prefix(54)) == Array(first.dropFirst(10)))
        let all = ReminderPlanner.plan(schedule: schedule, agenda: agenda, policy: ReminderPolicy(maxPending: 1000), now: now)
        #expect(Array(next.suffix(10)) == Array(all[64..<74]))
    }

    @Test func standUpsAreRemindedUnpickedAndSessionsOnlyWhenPicked() throws {
        let agenda = try CoreFixtures.agenda()
        let plan = ReminderPlanner.plan(schedule: ScheduleDocument(), agenda: agenda, now: try Instant(rfc3339: "2026-10-22T00:00:00Z"))
        #expect(plan.count == 10)
        #expect(plan.allSatisfy { $0.item.kind == .standup })
        var policy = ReminderPolicy(leads: [.session: 5 * 60_000, .standup: 15 * 60_000])
        policy.remindEveryStandup = false
        #expect(ReminderPlanner.plan(schedule: ScheduleDocument(), agenda: agenda, policy: policy, now: .earliest).isEmpty)
        let one = ReminderPlanner.plan(schedule: try CoreFixtures.schedule(["ps26-su-24-0900", "ps26-night-across"]), agenda: agenda, policy: policy, now: .earliest)
        let leads = Dictionary(uniqueKeysWithValues: one.map { ($0.item.id, $0.item.start.milliseconds - $0.fireAt.milliseconds) })
        #expect(leads == ["ps26-su-24-0900": 15 * 60_000, "ps26-night-across": 5 * 60_000])
    }

    /// Summer time ends in Lisbon on 25 October 2026 (02:00 WEST → 01:00 WET): each reminder is
    /// ten real minutes before its session, whichever side of the change, and the sessions keep
    /// their real order; likewise when it starts on 29 March (01:00 WET → 02:00 WEST).
    @Test func summerTimeChangeInLisbon() throws {
        let agenda = try CoreFixtures.lisbonAgenda([
            ("first-0130", "2026-10-25T01:30:00", 20, .session),         // first 01:30, WEST = 00:30Z
            ("second-0105", "2026-10-25T01:05:00+00:00", 30, .session),  // the repeated hour, WET = 01:05Z
            ("after-0205", "2026-10-25T02:05:00", 30, .session),         // WET = 02:05Z
            ("spring-0205", "2026-03-29T02:05:00", 30, .session),        // WEST = 01:05Z, just after the gap
            ("spring-0045", "2026-03-29T00:45:00", 30, .session),        // WET = 00:45Z
        ])
        let s = try CoreFixtures.schedule(agenda.items.map(\.id))
        let plan = ReminderPlanner.plan(schedule: s, agenda: agenda, now: try Instant(rfc3339: "2026-01-01T00:00:00Z"))
        func fire(_ id: String) throws -> String { try #require(plan.first { $0.item.id == id }).fireAt.rfc3339 }
        #expect(try fire("spring-0045") == "2026-03-29T00:35:00.000Z")
        #expect(try fire("spring-0205") == "2026-03-29T00:55:00.000Z")   // 00:55 WET: ten minutes, though the wall clock moves 70
        #expect(try fire("first-0130") == "2026-10-25T00:20:00.000Z")    // 01:20 WEST
        #expect(try fire("second-0105") == "2026-10-25T00:55:00.000Z")   // 01:55 WEST, before the clocks go back
        #expect(try fire("after-0205") == "2026-10-25T01:55:00.000Z")    // the second 01:55 (WET)
        #expect(plan.map(\.item.id) == ["spring-0045", "spring-0205", "first-0130", "second-0105", "after-0205"])
        // The body names the wall-clock time in Lisbon.
        let z = agenda.zone
        #expect(plan.first { $0.item.id == "second-0105" }?.body(zone: z) == "Starts at 01:05, Centre Stage")
        #expect(plan.first { $0.item.id == "spring-0205" }?.body(zone: z) == "Starts at 02:05, Centre Stage")
    }

    @Test func aMovedSessionIsRemindedAgainButTheSameOneNever() throws {
        let before = try CoreFixtures.lisbonAgenda([("a", "2026-10-24T10:00:00", 30, .session)])
        let after = try CoreFixtures.lisbonAgenda([("a", "2026-10-24T11:00:00", 30, .session)])
        let s = try CoreFixtures.schedule(["a"])
        let r1 = ReminderPlanner.plan(schedule: s, agenda: before, now: .earliest)
        #expect(ReminderPlanner.plan(schedule: s, agenda: before, now: .earliest, delivered: [r1[0].id]).isEmpty)
        let r2 = ReminderPlanner.plan(schedule: s, agenda: after, now: .earliest, delivered: [r1[0].id])
        #expect(r2.count == 1 && r2[0].id != r1[0].id)
    }
}

@Suite struct DeliveryTests {
    static func ledgerPath() throws -> String {
        try Fixtures.temporaryDirectory("sitekeep-core").appendingPathComponent("delivered.json").path
    }

    /// A suspended laptop wakes after the reminder time: the reminder is delivered once, marked
    /// late; never again, not in the next round and not after a restart (the ledger is on disk).
    @Test func aWakeAfterTheReminderTimeDeliversOnceMarkedLate() throws {
        let agenda = try CoreFixtures.lisbonAgenda([("talk", "2026-10-24T10:00:00Z", 30, .session)])
        let input = ReminderInput(siteID: "site-1", schedule: try CoreFixtures.schedule(["talk"]), agenda: agenda)
        let path = try Self.ledgerPath()
        let clock = try ManualClock("2026-10-24T09:40:00Z")
        let sink = RecordingSink()
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: path), sink: sink, clock: clock)
        let r0 = try d.deliverDue([input])
        #expect(r0.delivered.isEmpty)
        #expect(r0.nextFireAt == (try Instant(rfc3339: "2026-10-24T09:50:00Z")))
        // Suspended at 09:41, woken at 09:57: seven minutes after the reminder's time.
        try clock.set("2026-10-24T09:57:00Z")
        let r1 = try d.deliverDue([input])
        #expect(r1.delivered.count == 1)
        #expect(r1.delivered.first?.late == true)
        #expect(r1.delivered.first?.body.hasPrefix("Late reminder, due at 10:50. Starts at 11:00") == true, "\(r1.delivered)")
        #expect(r1.delivered.first?.url == "https://promptugal.news/agenda/talk/")
        #expect(try d.deliverDue([input]).delivered.isEmpty)
        clock.advance(minutes: 1)
        // A restart: a new deliverer and ledger object on the same file.
        let again = ReminderDeliverer(ledger: FileDeliveryLedger(path: path), sink: sink, clock: clock)
        #expect(try again.deliverDue([input]).delivered.isEmpty)
        #expect(sink.notifications.count == 1)
        #expect(try again.pending(input).isEmpty)
    }

    @Test func onTimeIsNotLateAndAnEndedSessionIsNotShownAfterALongSleep() throws {
        let agenda = try CoreFixtures.lisbonAgenda([("a", "2026-10-24T10:00:00Z", 30, .session), ("b", "2026-10-24T12:00:00Z", 30, .session)])
        let input = ReminderInput(siteID: "s", schedule: try CoreFixtures.schedule(["a", "b"]), agenda: agenda)
        let clock = try ManualClock("2026-10-24T09:50:20Z")
        let sink = RecordingSink()
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: try Self.ledgerPath()), sink: sink, clock: clock)
        let r = try d.deliverDue([input])
        #expect(r.delivered.map(\.late) == [false])
        #expect(r.pending["s"]?.map(\.item.id) == ["b"])
        // Asleep from 10:00 until 13:00: b has ended, so nothing is shown.
        try clock.set("2026-10-24T13:00:00Z")
        #expect(try d.deliverDue([input]).delivered.isEmpty)
        #expect(sink.notifications.count == 1)
    }

    @Test func replanningAfterEachDeliveryKeeps64Pending() throws {
        let items = (0..<100).map { i in ("s\(i)", Instant(milliseconds: 1_792_800_000_000 + Int64(i) * 600_000)!.rfc3339, 5, AgendaItemKind.session) }
        let agenda = try CoreFixtures.lisbonAgenda(items)
        let input = ReminderInput(siteID: "s", schedule: try CoreFixtures.schedule(agenda.items.map(\.id)), agenda: agenda)
        let clock = ManualClock(Instant(milliseconds: 1_792_800_000_000 - 600_000)!)
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: try Self.ledgerPath()), sink: RecordingSink(), clock: clock)
        let r = try d.deliverDue([input])
        #expect(r.delivered.map { $0.key } == ["s/session:1792800000000:s0"])
        #expect(r.pending["s"]?.count == 64)
        #expect(r.pending["s"]?.last?.item.id == "s64")
    }

    @Test func aFailedDeliveryIsRecordedAndNeverRetried() throws {
        let agenda = try CoreFixtures.lisbonAgenda([("a", "2026-10-24T10:00:00Z", 30, .session)])
        let input = ReminderInput(siteID: "s", schedule: try CoreFixtures.schedule(["a"]), agenda: agenda)
        let clock = try ManualClock("2026-10-24T09:50:00Z")
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: try Self.ledgerPath()), sink: RecordingSink(failing: true), clock: clock)
        let r = try d.deliverDue([input])
        #expect(r.failed.map(\.key) == ["s/session:1792836000000:a"])
        #expect(try d.deliverDue([input]).failed.isEmpty)
    }

    @Test func aDamagedLedgerIsAnErrorNotAFreshStart() throws {
        let path = try Self.ledgerPath()
        try Data("not json".utf8).write(to: URL(fileURLWithPath: path))
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: path), sink: RecordingSink(), clock: ManualClock(.earliest))
        #expect(throws: CoreFileError.self) { try d.deliverDue([]) }
    }

    @Test func theLoopDeliversOnItsThreadAndStops() throws {
        let now = SystemClock().now()
        let start = now.adding(milliseconds: 10 * 60_000 + 300)
        let agenda = try CoreFixtures.lisbonAgenda([("soon", start.rfc3339, 30, .session)])
        let input = ReminderInput(siteID: "s", schedule: try CoreFixtures.schedule(["soon"]), agenda: agenda)
        let sink = RecordingSink()
        let loop = DeliveryLoop(deliverer: ReminderDeliverer(ledger: FileDeliveryLedger(path: try Self.ledgerPath()), sink: sink, clock: SystemClock()),
                                maxNap: .seconds(5), inputs: { [input] })
        loop.start()
        for _ in 0..<50 where sink.notifications.isEmpty { usleep(100_000) }
        loop.stop()
        #expect(sink.notifications.map(\.title) == ["Session soon"])
        #expect(sink.notifications.first?.late == false)
    }
}
