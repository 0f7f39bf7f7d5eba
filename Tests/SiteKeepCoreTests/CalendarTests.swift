import Foundation
import Testing
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport

@Suite struct CalendarTests {
    static let host = "promptugal.news"
    static let now = try! Instant(rfc3339: "2026-10-20T08:00:00Z")

    static func picks() throws -> ScheduleDocument {
        try CoreFixtures.schedule(["ps26-night-across", "ps26-night-first-0130", "ps26-night-second-0105", "ps26-su-24-0900", "9001",
                                   "ps26-cs-23-1000", "gone-2025-talk"])
    }

    @Test func oneEventPerKnownPickWithItsZoneAndAlarm() throws {
        var state = CalendarExportState()
        let out = CalendarExport.render(schedule: try Self.picks(), agenda: try CoreFixtures.agenda(), host: Self.host, state: &state, now: Self.now)
        #expect(out.skipped == ["gone-2025-talk"])
        #expect(out.exported.count == 6)
        let text = out.text
        #expect(text.components(separatedBy: "BEGIN:VEVENT").count - 1 == 6)
        #expect(text.contains("BEGIN:VTIMEZONE\r\nTZID:Europe/Lisbon\r\n"))
        #expect(text.contains("DTSTART;TZID=Europe/Lisbon:20261025T003000\r\n"))       // the session across the change
        #expect(text.contains("DTEND;TZID=Europe/Lisbon:20261025T023000\r\n"))
        #expect(text.contains("DTSTART:20261025T010500Z\r\n"), "the repeated hour's second 01:05 must be written in UTC")
        #expect(text.contains("DTSTART:20261025T003000Z\r\n"), "the first 01:30 is ambiguous as a wall clock: UTC too")
        #expect(!text.contains("TZID=Europe/Lisbon:20261025T01"), "no wall-clock time in the repeated hour")
        #expect(text.contains("TRIGGER:-PT10M\r\n"))
        #expect(text.contains("UID:pick-ps26-night-across@promptugal.news\r\n"))
        // Every line is CRLF-ended and at most 75 octets.
        let lines = text.components(separatedBy: "\r\n")
        #expect(lines.last == "")
        #expect(lines.allSatisfy { $0.utf8.count <= 75 && !$0.contains("\n") })
    }

    @Test func uidsAreStableAndSequenceMovesOnlyOnChange() throws {
        let agenda = try CoreFixtures.agenda()
        var state = CalendarExportState()
        let first = CalendarExport.render(schedule: try Self.picks(), agenda: agenda, host: Self.host, state: &state, now: Self.now)
        #expect(!first.text.contains("SEQUENCE:1"))
        let same = CalendarExport.render(schedule: try Self.picks(), agenda: agenda, host: Self.host, state: &state, now: Self.now.adding(milliseconds: 60_000))
        #expect(same.exported == first.exported)
        #expect(!same.text.contains("SEQUENCE:1"))
        // One session moves by an hour; only its SEQUENCE moves.
        let moved = try movedAgenda(agenda, id: "ps26-cs-23-1000", byMinutes: 60)
        let after = CalendarExport.render(schedule: try Self.picks(), agenda: moved, host: Self.host, state: &state, now: Self.now)
        #expect(after.exported == first.exported)
        #expect(after.text.components(separatedBy: "SEQUENCE:1\r\n").count - 1 == 1)
        // The state survives its JSON form.
        let reread = try CalendarExportState(json: JSONParser.parse(JSONSerializer.string(state.json)))
        #expect(reread == state)
        #expect(CalendarExport.uid(pickID: "a b;c,é", host: "x.test") == "pick-a%20b%3Bc%2C%C3%A9@x.test")
    }

    @Test func textIsEscapedAndLongLinesFolded() throws {
        let long = String(repeating: "Agents, vaults; and \\ newsrooms — ", count: 6)
        let agenda = try Agenda(json: ["timezone": "Europe/Lisbon", "items": [["id": "x", "title": .string(long), "stage": "Room 1, floor 2",
                                                                                "start": "2026-10-24T10:00:00", "end": "2026-10-24T10:30:00"]]])
        var state = CalendarExportState()
        let text = CalendarExport.render(schedule: try CoreFixtures.schedule(["x"]), agenda: agenda, host: Self.host, state: &state, now: Self.now).text
        #expect(text.contains("LOCATION:Room 1\\, floor 2\r\n"))
        #expect(text.contains("\r\n "))
        let unfolded = text.replacingOccurrences(of: "\r\n ", with: "")
        #expect(unfolded.contains("SUMMARY:Agents\\, vaults\\; and \\\\ newsrooms — Agents"))
        #expect(text.components(separatedBy: "\r\n").allSatisfy { $0.utf8.count <= 75 })
    }

    func movedAgenda(_ agenda: Agenda, id: String, byMinutes minutes: Int64) throws -> Agenda {
        try Agenda(zone: agenda.zone, items: agenda.items.map { i in
            i.id == id ? AgendaItem(id: i.id, title: i.title, stage: i.stage, start: i.start.adding(milliseconds: minutes * 60_000),
                                    end: i.end.adding(milliseconds: minutes * 60_000), kind: i.kind, url: i.url) : i
        })
    }
}

/// The export read back by two independent parsers: Python's `icalendar` (PyPI) and Debian's
/// libical3 (a C checker built here; libical marks RFC violations as X-LIC-ERROR). Both must see
/// the same events, at the instants the agenda gives, with no errors; a re-export after a change
/// keeps every UID and bumps the changed event's SEQUENCE.
@Suite(.serialized) struct CalendarInteropTests {
    struct Seen: Equatable, CustomStringConvertible {
        let uid: String, summary: String, location: String, start: Int64, end: Int64, sequence: Int64, trigger: Int64?
        var description: String { "\(uid) \(start)-\(end) seq \(sequence) trigger \(trigger.map(String.init) ?? "-")" }
    }

    static func parse(_ output: String) throws -> (errors: [String], events: [Seen]) {
        let v = try JSONParser.parse(output.trimmingCharacters(in: .whitespacesAndNewlines))
        let errors = (v["errors"]?.arrayValue ?? []).map { "\($0["in"]?.stringValue ?? ""): \($0["error"]?.stringValue ?? "")" }
        let events = (v["events"]?.arrayValue ?? []).map { e in
            Seen(uid: e["uid"]?.stringValue ?? "", summary: e["summary"]?.stringValue ?? "", location: e["location"]?.stringValue ?? "",
                 start: e["start"]?.intValue ?? -1, end: e["end"]?.intValue ?? -1, sequence: e["sequence"]?.intValue ?? -1, trigger: e["trigger"]?.intValue)
        }
        return (errors, events.sorted { $0.uid < $1.uid })
    }

    static func libicalChecker(in dir: URL) throws -> String {
        let root = try Fixtures.packageRoot()
        let src = root.appendingPathComponent("Fixtures/tools/ical-check-libical.c").path
        let bin = dir.appendingPathComponent("ical-check").path
        let built = try Shell.run("cc -O1 -o \(Shell.quote(bin)) \(Shell.quote(src)) $(pkg-config --cflags --libs libical)")
        guard built.status == 0 else { throw CoreFieldError("libical", "checker did not build (install libical-dev: run tools/setup): \(built.output)") }
        // The linker's output mode follows the umask; a strict one (0177) leaves it unrunnable.
        guard chmod(bin, 0o700) == 0 else { throw CoreFieldError("libical", "cannot make \(bin) executable") }
        return bin
    }

    @Test func bothParsersSeeTheSameEventsWithNoErrors() throws {
        let python = try #require(Shell.venvPython, "no .venv: run tools/setup (it installs icalendar)")
        let dir = try Fixtures.temporaryDirectory("sitekeep-ical")
        defer { try? FileManager.default.removeItem(at: dir) }
        let libical = try Self.libicalChecker(in: dir)
        let pyChecker = try Fixtures.packageRoot().appendingPathComponent("Fixtures/tools/ical-check-icalendar.py").path
        let agenda = try CoreFixtures.agenda()
        let schedule = try CalendarTests.picks()
        var state = CalendarExportState()

        func check(_ agenda: Agenda, _ label: String) throws -> [Seen] {
            let text = CalendarExport.render(schedule: schedule, agenda: agenda, host: CalendarTests.host, state: &state, now: CalendarTests.now).text
            let file = dir.appendingPathComponent("\(label).ics").path
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let a = try Shell.run("\(Shell.quote(libical)) \(Shell.quote(file))")
            let b = try Shell.run("\(Shell.quote(python)) \(Shell.quote(pyChecker)) \(Shell.quote(file))")
            #expect(a.status == 0 && b.status == 0, "\(a.output)\n\(b.output)")
            let l = try Self.parse(a.output), p = try Self.parse(b.output)
            #expect(l.errors.isEmpty, "libical: \(l.errors)")
            #expect(p.errors.isEmpty, "icalendar: \(p.errors)")
            #expect(l.events == p.events, "the two parsers disagree:\nlibical   \(l.events)\nicalendar \(p.events)")
            // …and both agree with the agenda itself.
            let expected = schedule.entries(in: agenda).compactMap { e in e.item.map { i in
                Seen(uid: CalendarExport.uid(pickID: i.id, host: CalendarTests.host), summary: i.title, location: i.stage ?? "",
                     start: i.start.seconds, end: i.end.seconds, sequence: -1, trigger: -600)
            } }.sorted { $0.uid < $1.uid }
            #expect(l.events.map { Seen(uid: $0.uid, summary: $0.summary, location: $0.location, start: $0.start, end: $0.end, sequence: -1, trigger: $0.trigger) } == expected)
            return l.events
        }

        let first = try check(agenda, "first")
        #expect(first.count == 6)
        #expect(first.allSatisfy { $0.sequence == 0 })
        let moved = try CalendarTests().movedAgenda(agenda, id: "ps26-night-across", byMinutes: 30)
        let second = try check(moved, "second")
        #expect(second.map(\.uid) == first.map(\.uid), "a re-export must keep every UID")
        #expect(second.filter { $0.sequence == 1 }.map(\.uid) == ["pick-ps26-night-across@promptugal.news"])
    }
}
