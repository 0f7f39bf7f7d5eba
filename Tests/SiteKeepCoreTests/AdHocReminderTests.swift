import Foundation
import Testing
@testable import SiteKeepCore
import SiteKeepTestSupport
import SiteKeepJSON

/// Issue 33: reminders set by hand (`remind add TEXT --at TIME | --in DURATION`): the times they
/// take, the errors for a bad one, and their delivery by the same deliverer and ledger as the
/// agenda's reminders (once, at their own time, with their zone named).
@Suite struct AdHocReminderTests {
    static let lisbon = ZoneRules(identifier: "Europe/Lisbon")!

    @Test func timesAreReadInTheirZoneAndBadOnesNameTheForms() throws {
        let now = try Instant(rfc3339: "2026-07-01T08:00:00Z")   // 09:00 in Lisbon (WEST)
        #expect(try ReminderTime.at("09:30", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-01T08:30:00Z")))
        // A time of day already passed is tomorrow's (at 09:00, 08:30 and 09:00 are the next day's).
        #expect(try ReminderTime.at("08:30", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-02T07:30:00Z")))
        #expect(try ReminderTime.at("09:00", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-02T08:00:00Z")))
        // Across a month's end, and across the end of summer time in Lisbon (01:00 UTC on 25 October 2026).
        #expect(try ReminderTime.at("09:00", zone: Self.lisbon, now: try Instant(rfc3339: "2026-07-31T09:00:00Z")) == (try Instant(rfc3339: "2026-08-01T08:00:00Z")))
        #expect(try ReminderTime.at("08:00", zone: Self.lisbon, now: try Instant(rfc3339: "2026-10-24T09:00:00Z")) == (try Instant(rfc3339: "2026-10-25T08:00:00Z")))
        #expect(try ReminderTime.at("2026-07-02 09:30", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-02T08:30:00Z")))
        #expect(try ReminderTime.at("2026-07-02T09:30:15", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-02T08:30:15Z")))
        #expect(try ReminderTime.at("2026-07-02T09:30:00+02:00", zone: Self.lisbon, now: now) == (try Instant(rfc3339: "2026-07-02T07:30:00Z")))
        #expect(try ReminderTime.after("20m", now: now) == now.adding(milliseconds: 20 * 60_000))
        #expect(try ReminderTime.after("1h30m", now: now) == now.adding(milliseconds: 90 * 60_000))
        #expect(try ReminderTime.after("90s", now: now) == now.adding(milliseconds: 90_000))
        for bad in ["9.30", "25:00", "tomorrow", "2026-13-01 09:00", ""] {
            #expect(throws: CoreFieldError.self) { try ReminderTime.at(bad, zone: Self.lisbon, now: now) }
            do { _ = try ReminderTime.at(bad, zone: Self.lisbon, now: now) } catch {
                #expect(error.path == "--at" && error.problem.contains("HH:MM") && error.problem.contains("Europe/Lisbon"), "\(error)")
            }
        }
        for bad in ["20", "m", "20x", "1h-5m", "", "0m"] {
            do { _ = try ReminderTime.after(bad, now: now); Issue.record("\(bad) was accepted") } catch {
                #expect(error.path == "--in" && (error.problem.contains("20m") ), "\(error)")
            }
        }
    }

    @Test func addRefusesThePastBadTextAndTooFarAheadAndGivesShortIds() throws {
        let now = try Instant(rfc3339: "2026-07-01T08:00:00Z")
        var all = AdHocReminders()
        do { try all.add(text: "Call Ana", at: now.adding(milliseconds: -60_000), zone: Self.lisbon, now: now); Issue.record("the past was accepted") } catch {
            #expect(error.description.contains("2026-07-01 08:59 Europe/Lisbon is in the past") && error.description.contains("now 2026-07-01 09:00 Europe/Lisbon"), "\(error)")
        }
        #expect(throws: CoreFieldError.self) { try all.add(text: "Call Ana", at: now, zone: Self.lisbon, now: now) }
        #expect(throws: CoreFieldError.self) { try all.add(text: "  ", at: now.adding(milliseconds: 60_000), zone: Self.lisbon, now: now) }
        #expect(throws: CoreFieldError.self) { try all.add(text: "a\nb", at: now.adding(milliseconds: 60_000), zone: Self.lisbon, now: now) }
        #expect(throws: CoreFieldError.self) { try all.add(text: String(repeating: "x", count: 201), at: now.adding(milliseconds: 60_000), zone: Self.lisbon, now: now) }
        #expect(throws: CoreFieldError.self) { try all.add(text: "far", at: now.adding(milliseconds: 400 * 86_400_000), zone: Self.lisbon, now: now) }
        #expect(all.reminders.isEmpty, "a refused reminder was kept")
        let a = try all.add(text: "Call Ana", at: now.adding(milliseconds: 20 * 60_000), zone: Self.lisbon, now: now)
        let b = try all.add(text: "Stretch", at: now.adding(milliseconds: 10 * 60_000), zone: Self.lisbon, now: now)
        #expect(a.id == "r1" && b.id == "r2" && all.reminders.map(\.id) == ["r2", "r1"])
        // The file's JSON reads back the same.
        #expect(try AdHocReminders(json: all.json) == all)
        #expect(all.remove(id: "r1")?.text == "Call Ana" && all.remove(id: "r1") == nil)
        #expect(try all.add(text: "Again", at: now.adding(milliseconds: 60_000), zone: Self.lisbon, now: now).id == "r1")
    }

    /// They fire as the agenda's do: the same deliverer and ledger, at their own time (no lead),
    /// once, the body naming the time with its zone; late (and marked so) after a wake.
    @Test func theyAreDeliveredOnceAtTheirTimeByTheReminderDeliverer() throws {
        let clock = try ManualClock("2026-07-01T08:00:00Z")
        var all = AdHocReminders()
        try all.add(text: "Call Ana", at: try Instant(rfc3339: "2026-07-01T08:30:00Z"), zone: Self.lisbon, now: clock.now())
        try all.add(text: "Stretch", at: try Instant(rfc3339: "2026-07-01T08:45:00Z"), zone: Self.lisbon, now: clock.now())
        let input = try #require(all.input)
        let path = try Fixtures.temporaryDirectory("sitekeep-adhoc").appendingPathComponent("delivered.json").path
        let sink = RecordingSink()
        let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: path), sink: sink, clock: clock)
        let r0 = try d.deliverDue([input])
        let first = try Instant(rfc3339: "2026-07-01T08:30:00Z")
        #expect(r0.delivered.isEmpty && r0.nextFireAt == first)
        try clock.set("2026-07-01T08:30:00Z")
        let r1 = try d.deliverDue([input])
        #expect(r1.delivered.map(\.title) == ["Call Ana"])
        #expect(r1.delivered.first?.body == "Reminder set for 09:30 Europe/Lisbon", "\(r1.delivered)")
        #expect(r1.delivered.first?.key.hasPrefix(AdHocReminders.siteID + "/") == true)
        #expect(try d.deliverDue([input]).delivered.isEmpty, "delivered twice")
        // A wake ten minutes after the second: shown late, once.
        try clock.set("2026-07-01T08:55:00Z")
        let r2 = try d.deliverDue([input])
        #expect(r2.delivered.map(\.title) == ["Stretch"] && r2.delivered.first?.late == true)
        #expect(try d.pending(input).isEmpty)
        #expect(sink.notifications.count == 2)
        // A day later they are dropped from the file.
        all.prune(now: try Instant(rfc3339: "2026-07-02T09:00:00Z"))
        #expect(all.reminders.isEmpty && all.input == nil)
    }

    /// The file is held to what `remind add` allows when it is read (it may have been edited by
    /// hand or planted): a control character, an over-long text, a bad or repeated id, a zone
    /// that does not exist or another format are refused naming the member.
    @Test func aHandEditedFileIsRefusedWithTheMemberNamed() throws {
        func doc(_ entry: String, format: String = AdHocReminders.format) throws -> JSONValue {
            try JSONParser.parse(#"{"format": "\#(format)", "reminders": [\#(entry)]}"#)
        }
        let good = #"{"id": "r1", "text": "Call Ana", "at": "2026-07-01T08:30:00Z", "zone": "Europe/Lisbon"}"#
        #expect(try AdHocReminders(json: try doc(good)).reminders.map(\.text) == ["Call Ana"])
        let bad: [(String, String)] = [
            (#"{"id": "r1", "text": "Call\u0007Ana", "at": "2026-07-01T08:30:00Z", "zone": "Europe/Lisbon"}"#, "reminders.reminders[0].text"),
            (#"{"id": "r1", "text": "\#(String(repeating: "x", count: 201))", "at": "2026-07-01T08:30:00Z", "zone": "Europe/Lisbon"}"#, "reminders.reminders[0].text"),
            (#"{"id": "../x", "text": "a", "at": "2026-07-01T08:30:00Z", "zone": "Europe/Lisbon"}"#, "reminders.reminders[0].id"),
            (#"{"id": "r1", "text": "a", "at": "soon", "zone": "Europe/Lisbon"}"#, "reminders.reminders[0]"),
            (#"{"id": "r1", "text": "a", "at": "2026-07-01T08:30:00Z", "zone": "Mars/Olympus"}"#, "reminders.reminders[0]"),
            (good + ", " + good, "reminders.reminders[1].id"),
        ]
        for (entry, path) in bad {
            let json = try doc(entry)
            do { _ = try AdHocReminders(json: json); Issue.record("accepted: \(entry)") } catch {
                #expect(error.path == path, "\(error)")
            }
        }
        #expect(throws: CoreFieldError.self) { try AdHocReminders(json: try doc(good, format: "other.v1")) }
    }
}
