import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 33 point 8, the native core's smaller items: `agenda list`, `schedule export` with
/// iCalendar by default, every time shown naming its zone, reminders set by hand, and what
/// `unlock` says when there is no runtime folder for a daemon.
@Suite(.serialized) struct AdHocReminderCommandTests {
    static let tz = ["TZ": "Europe/Lisbon"]

    func run(_ store: CLIStore, _ args: [String]) async -> (status: Int32, out: String, err: String) {
        await runTool(args + ["--home", store.home, "--keyring", "file"], environment: Self.tz)
    }

    @Test func remindAddListAndRemoveWithClearErrors() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let added = await run(store, ["remind", "add", "Call Ana", "--in", "20m"])
        #expect(added.status == 0 && added.out.contains("Reminder r1 set for ") && added.out.contains(" Europe/Lisbon: Call Ana"), "\(added)")
        let json = await run(store, ["remind", "add", "Stretch", "--in", "1h", "--json"])
        let second = try JSONParser.parse(json.out)
        #expect(second["id"] == "r2" && second["zone"] == "Europe/Lisbon", "\(json)")
        let list = await run(store, ["remind", "list"])
        #expect(list.status == 0 && list.out.contains("Call Ana") && list.out.contains("Stretch") && list.out.contains("r1"), "\(list)")
        // Every time shown names its zone.
        for line in list.out.split(separator: "\n") where line.contains("Call Ana") || line.contains("Stretch") {
            #expect(line.contains("Europe/Lisbon"), "\(line)")
        }
        let listed = try JSONParser.parse(await run(store, ["remind", "list", "--json"]).out).arrayValue ?? []
        #expect(listed.map { $0["title"] } == ["Call Ana", "Stretch"] && listed.allSatisfy { $0["zone"] == "Europe/Lisbon" && $0["kind"] == "reminder" })

        // Bad input: a clear error naming what was wrong, and nothing is kept.
        let past = await run(store, ["remind", "add", "Too late", "--at", "2020-01-01 09:00"])
        #expect(past.status == 1 && past.err.contains("2020-01-01 09:00 Europe/Lisbon is in the past"), "\(past.err)")
        let garbled = await run(store, ["remind", "add", "x", "--at", "half past nine"])
        #expect(garbled.status == 1 && garbled.err.contains("--at") && garbled.err.contains("HH:MM"), "\(garbled.err)")
        let badIn = await run(store, ["remind", "add", "x", "--in", "20 minutes"])
        #expect(badIn.status == 1 && badIn.err.contains("--in") && badIn.err.contains("20m"), "\(badIn.err)")
        let neither = await run(store, ["remind", "add", "x"])
        #expect(neither.status == 64 && neither.err.contains("--at TIME or --in DURATION"), "\(neither.err)")
        let both = await run(store, ["remind", "add", "x", "--at", "09:00", "--in", "5m"])
        #expect(both.status == 64 && both.err.contains("not both"), "\(both.err)")
        #expect((try JSONParser.parse(await run(store, ["remind", "list", "--json"]).out).arrayValue ?? []).count == 2)

        // Removal, and an id that is not there.
        let removed = await run(store, ["remind", "remove", "r1"])
        #expect(removed.status == 0 && removed.out.contains("Removed r1"), "\(removed)")
        let again = await run(store, ["remind", "remove", "r1"])
        #expect(again.status == 1 && again.err.contains("no reminder r1") && again.err.contains("r2"), "\(again.err)")
        let left = try JSONParser.parse(await run(store, ["remind", "list", "--json"]).out).arrayValue ?? []
        #expect(left.map { $0["title"] } == ["Stretch"])
    }

    /// `agenda list` shows what there is to pick, with ids, zoned times and whether picked;
    /// `schedule list` and `next` name the zone of their times; `schedule export` writes
    /// iCalendar without being told `--ics` (and still takes it).
    @Test func agendaListZonedTimesAndExportWithoutIcs() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await run(store, ["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let site = ["--site", "https://promptugal.news"]
        let none = await run(store, ["agenda", "list"] + site)
        #expect(none.status == 0 && none.out.contains("No agenda loaded"), "\(none)")
        #expect(await run(store, ["agenda", "load", try CoreCommandTests.agendaFixture()] + site).status == 0)
        #expect(await run(store, ["schedule", "add", "ps26-night-across"] + site).status == 0)
        let all = await run(store, ["agenda", "list", "--all"] + site)
        #expect(all.status == 0 && all.out.contains("ps26-night-across") && all.out.contains("PICKED"), "\(all)")
        let row = try #require(all.out.split(separator: "\n").first { $0.contains("ps26-night-across") })
        #expect(row.contains("Europe/Lisbon") && row.contains("yes"), "\(row)")
        let json = try JSONParser.parse(await run(store, ["agenda", "list", "--all", "--json"] + site).out).arrayValue ?? []
        #expect(json.count == 200)
        #expect(json.filter { $0["picked"] == .bool(true) }.map { $0["id"] } == ["ps26-night-across"])
        #expect(json.allSatisfy { $0["zone"] == "Europe/Lisbon" })
        let picked = try JSONParser.parse(await run(store, ["agenda", "list", "--all", "--picked", "--json"] + site).out).arrayValue ?? []
        #expect(picked.count == 1)

        let sched = await run(store, ["schedule", "list"] + site)
        let pickRow = try #require(sched.out.split(separator: "\n").first { $0.contains("ps26-night-across") })
        #expect(pickRow.contains("Europe/Lisbon"), "\(sched.out)")

        let plain = await run(store, ["schedule", "export"] + site)
        #expect(plain.status == 0 && plain.out.hasPrefix("BEGIN:VCALENDAR\r\n"), "\(plain.err)")
        let ics = await run(store, ["schedule", "export", "--ics"] + site)
        #expect(ics.status == 0 && ics.out.hasPrefix("BEGIN:VCALENDAR\r\n"), "\(ics.err)")

        // `next`: an ad-hoc reminder is not an agenda item, but the stand-ups and picks are shown zoned.
        let next = await run(store, ["next", "--refresh"])
        #expect(next.status == 0, "\(next.err)")
        for line in next.out.split(separator: "\n").dropFirst() where line.contains(":") && !line.contains("·") {
            #expect(line.contains("Europe/Lisbon"), "\(next.out)")
        }
    }

    /// Issue 47: `remind plan` and `remind list` show every reminder's id, an agenda item's too
    /// (what `schedule add|remove` take), never `-`.
    @Test func remindPlanShowsAnIdInEveryRow() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let site = ["--site", "https://promptugal.news"]
        #expect(await run(store, ["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let agenda: JSONValue = ["timezone": "Europe/Lisbon", "items": [
            NotificationDeliveryTests.item("ps-future-talk", startIn: 86_400), NotificationDeliveryTests.item("ps-future-su", startIn: 90_000, kind: "standup")]]
        let agendaFile = try store.file("agenda.json", JSONSerializer.bytes(agenda))
        #expect(await run(store, ["agenda", "load", agendaFile] + site).status == 0)
        #expect(await run(store, ["schedule", "add", "ps-future-talk"] + site).status == 0)
        #expect(await run(store, ["remind", "add", "Call Ana", "--in", "2h"]).status == 0)
        for command in [["remind", "plan"], ["remind", "list"]] {
            let shown = await run(store, command)
            let rows = shown.out.split(separator: "\n").dropFirst()
            #expect(shown.status == 0 && rows.count == 3, "\(shown)")
            for (title, id) in [("Talk ps-future-talk", "ps-future-talk"), ("Talk ps-future-su", "ps-future-su"), ("Call Ana", "r1")] {
                let row = try #require(rows.first { $0.contains(title) }, "\(shown.out)")
                #expect(row.split(separator: " ").last.map(String.init) == id, "\(command): \(row)")
            }
            #expect(!rows.contains { $0.split(separator: " ").last == "-" }, "\(shown.out)")
        }
    }

    /// Issue 47: `next`'s reminders badge counts what `remind list` lists (a reminder set by
    /// hand included), whether the snapshot was written by `next --refresh` or `remind plan`.
    @Test func nextCountsTheRemindersRemindListLists() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let site = ["--site", "https://promptugal.news"]
        #expect(await run(store, ["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let agenda: JSONValue = ["timezone": "Europe/Lisbon", "items": [NotificationDeliveryTests.item("ps-later", startIn: 86_400)]]
        #expect(await run(store, ["agenda", "load", try store.file("agenda.json", JSONSerializer.bytes(agenda))] + site).status == 0)
        #expect(await run(store, ["schedule", "add", "ps-later"] + site).status == 0)
        #expect(await run(store, ["remind", "add", "Call Ana", "--in", "2h"]).status == 0)
        let listed = try JSONParser.parse(await run(store, ["remind", "list", "--json"]).out).arrayValue ?? []
        #expect(listed.count == 2, "\(listed)")
        let refreshed = try JSONParser.parse(await run(store, ["next", "--refresh", "--json"]).out)
        #expect(refreshed["badges"]?["reminders"]?.intValue == Int64(listed.count), "\(refreshed)")
        #expect(await run(store, ["remind", "plan"]).status == 0)
        let planned = try JSONParser.parse(await run(store, ["next", "--json"]).out)
        #expect(planned["badges"]?["reminders"]?.intValue == Int64(listed.count), "\(planned)")
    }

    /// `unlock` with neither XDG_RUNTIME_DIR nor SITEKEEP_SOCK says so and what to do, not
    /// "without --no-autostart" (never given). Through the real binary, which may start a daemon.
    @Test func unlockWithNoRuntimeFolderSaysWhatHappened() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        // capture adds this process's environment (tools/test's XDG_RUNTIME_DIR): empty them here.
        let env = ["SITEKEEP_HOME": store.home, "SITEKEEP_KEYRING": "file", "HOME": store.dir.path, "NO_COLOR": "1",
                   "PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": "", "SITEKEEP_SOCK": "", "SITEKEEP_NO_AUTOSTART": ""]
        defer {
            // Should a daemon have been started after all, stop it by its pid.
            let status = ChildProcess.capture(sitekeep, ["status", "--json"], stdin: "", environment: env)
            if let pid = (try? JSONParser.parse(status.out))?["daemonPid"]?.intValue { kill(pid_t(pid), SIGTERM) }
        }
        let r = ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile], stdin: "", environment: env)
        #expect(r.status == 0, "\(r.err)")
        let said = r.out + r.err
        #expect(said.contains("neither XDG_RUNTIME_DIR nor SITEKEEP_SOCK is set") && said.contains("Set XDG_RUNTIME_DIR"), "\(said)")
        #expect(!said.contains("--no-autostart"), "\(said)")
        let given = ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile, "--no-autostart"], stdin: "", environment: env)
        #expect(given.status == 0 && (given.out + given.err).contains("--no-autostart was given"), "\(given)")
    }

    /// A reminder set by hand is shown by the real daemon, as the agenda's are (printed here:
    /// SITEKEEP_NOTIFY=print), once, and is then no longer pending.
    @Test func theDaemonShowsAReminderSetByHandOnce() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        let dir = store.dir.appendingPathComponent("r")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let sock = dir.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "SITEKEEP_NOTIFY=print", "TZ=Europe/Lisbon"]
        #expect(await run(store, ["remind", "add", "Stand up and stretch", "--in", "2s"]).status == 0)
        let daemon = try NotificationDeliveryTests.Child(sitekeep, ["serve", "--keyring", "file"], env: env, log: dir.appendingPathComponent("serve.log").path)
        defer { daemon.stop() }
        #expect(NotificationDeliveryTests.wait(40) { daemon.output.contains("Stand up and stretch") }, "\(daemon.output)")
        #expect(daemon.output.contains("reminder ~reminders/reminder:"), "\(daemon.output)")
        usleep(1_500_000)
        #expect(daemon.output.components(separatedBy: "reminder ~reminders/").count == 2, "shown twice: \(daemon.output)")
        let left = try JSONParser.parse(await run(store, ["remind", "list", "--json"]).out).arrayValue ?? []
        #expect(left.isEmpty, "\(left)")
    }
}
