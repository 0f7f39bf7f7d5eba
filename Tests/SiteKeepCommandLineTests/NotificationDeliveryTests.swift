import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Reminders delivered end to end: `sitekeep serve` as a real process on a private session bus
/// with a real freedesktop Notifications service (python3-dbusmock's `notification_daemon`
/// template, which logs every call), the test reading back each Notify with its title, body and
/// time. Then: a restarted daemon delivers nothing twice, the default action reaches the site's
/// host as `notify.opened`, and with no service on the bus the reminder is printed.
@Suite(.serialized) struct NotificationDeliveryTests {
    /// A child process with its output in a file; stopped by pid.
    final class Child: @unchecked Sendable {
        // @unchecked: pid is written once at spawn and read after.
        let pid: pid_t
        let log: String
        init(_ path: String, _ args: [String], env: [String], log: String) throws {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
            let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
            var p: pid_t = 0
            guard posix_spawn(&p, path, &actions, nil, argv, envp) == 0 else { throw CommandFailure("cannot start \(path)") }
            pid = p
            self.log = log
        }
        func stop(_ signal: Int32 = SIGTERM) {
            kill(pid, signal)
            var st: Int32 = 0
            for _ in 0..<100 { if waitpid(pid, &st, WNOHANG) == pid { return }; usleep(50_000) }
            kill(pid, SIGKILL); waitpid(pid, &st, 0)
        }
        var output: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    }

    struct NotifyCall { let time: Double; let title: String; let body: String }

    /// dbusmock's log lines: `TIME Notify "app" 0 "" "summary" "body" [actions] {hints} -1`.
    static func calls(_ log: String) -> [NotifyCall] {
        log.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, parts[1] == "Notify", let t = Double(parts[0]) else { return nil }
            let quoted = String(parts[2]).components(separatedBy: "\"")
            guard quoted.count >= 8 else { return nil }
            return NotifyCall(time: t, title: quoted[5], body: quoted[7])
        }
    }

    static func item(_ id: String, startIn seconds: Double, kind: String = "session") -> JSONValue {
        let start = Date().addingTimeInterval(seconds)
        let f = ISO8601DateFormatter()
        return ["id": .string(id), "title": .string("Talk \(id)"), "stage": "Centre Stage", "kind": .string(kind),
                "start": .string(f.string(from: start)), "end": .string(f.string(from: start.addingTimeInterval(1800))),
                "url": .string("https://promptugal.news/agenda/\(id)/")]
    }

    static func wait(_ seconds: Double, until done: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end { if done() { return true }; usleep(100_000) }
        return done()
    }

    @Test func remindersReachARealNotificationServiceOnceAndFallBackToPrinting() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"), "dbus-daemon is missing: run tools/setup")
        #expect(ChildProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]) == 0, "python3-dbusmock is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        // Ten-minute leads: "soon" is due in 6 s, "late" was due 2 minutes ago (its session has
        // not started), the stand-up (not picked) in 8 s, "printed" (picked later) in 28 s, all
        // counted from here (the setup below can take seconds on a busy machine).
        let created = Date().timeIntervalSince1970
        let agenda: JSONValue = ["timezone": "Europe/Lisbon", "items": [
            Self.item("soon", startIn: 606), Self.item("late", startIn: 480), Self.item("su", startIn: 608, kind: "standup"),
            Self.item("printed", startIn: 628)]]
        let agendaFile = try store.file("agenda.json", JSONSerializer.bytes(agenda))
        #expect(await store.run(["agenda", "load", agendaFile, "--site", "https://promptugal.news"]).status == 0)
        for id in ["soon", "late"] { #expect(await store.run(["schedule", "add", id, "--site", "https://promptugal.news"]).status == 0) }
        let pending = await store.run(["remind", "list", "--json"])
        #expect(try JSONParser.parse(pending.out).arrayValue?.count == 3, "\(pending.out) \(pending.err)")

        // A private session bus and a real Notifications service on it.
        let run = store.dir.appendingPathComponent("r")
        let notifications = try NotificationBus(in: run, home: store.dir.path)
        defer { notifications.stop() }
        let busEnv = notifications.env
        let notifyLog = notifications.logPath

        let sock = run.appendingPathComponent("bridge.sock").path
        let env = busEnv + ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "NO_COLOR=1"]
        let started = Date().timeIntervalSince1970
        // Unlocked at start: a site's entry binds once its tag is checked, which needs the unlock.
        var daemon = try Child(sitekeep, ["serve", "--keyring", "file", "--unlock", "--passphrase-file", store.passFile], env: env,
                               log: run.appendingPathComponent("serve1.log").path)
        defer { daemon.stop() }
        #expect(Self.wait(5) { FileManager.default.fileExists(atPath: sock) }, "\(daemon.output)")
        let serving = Date().timeIntervalSince1970
        let host = try TestHost.connect(socket: sock, site: "https://promptugal.news", timeout: .seconds(10))
        defer { host.close() }
        _ = try host.hello(origin: "https://promptugal.news")

        #expect(Self.wait(20) { Self.calls((try? String(contentsOfFile: notifyLog, encoding: .utf8)) ?? "").count >= 3 }, "\(daemon.output)")
        let calls = Self.calls(try String(contentsOfFile: notifyLog, encoding: .utf8))
        #expect(calls.map(\.title) == ["Talk late", "Talk soon", "Talk su"], "\(calls.map(\.title))")
        let byTitle = Dictionary(uniqueKeysWithValues: calls.map { ($0.title, $0) })
        // The late one at once, marked late; the others at their time, not before.
        #expect(byTitle["Talk late"]?.body.hasPrefix("Late reminder, due at ") == true)
        #expect((byTitle["Talk late"]?.time ?? 0) - started < 5)
        #expect(byTitle["Talk soon"]?.body.hasPrefix("Starts at ") == true && byTitle["Talk soon"]?.body.hasSuffix(", Centre Stage") == true)
        // Due 6 s after the agenda was made: never before then, and soon after then or after the
        // daemon began serving, whichever came last (a busy machine can take longer to get here).
        let soonAt = created + 6
        let soonBy = max(soonAt, serving) + 4
        #expect((byTitle["Talk soon"]?.time ?? 0) >= soonAt - 1.5 && (byTitle["Talk soon"]?.time ?? 0) <= soonBy,
                "soon at \(byTitle["Talk soon"]?.time ?? 0), due \(soonAt), the daemon serving from \(serving)")
        #expect(byTitle["Talk su"]?.body.hasPrefix("Stand-up at ") == true)

        // The default action of notification 1 ("Talk late") opens its page through the host.
        let emitted = ChildProcess.run("/usr/bin/gdbus", ["call", "--session", "--dest", "org.freedesktop.Notifications", "--object-path",
                                                         "/org/freedesktop/Notifications", "--method", "org.freedesktop.DBus.Mock.EmitSignal",
                                                         "org.freedesktop.Notifications", "ActionInvoked", "us", "[<uint32 1>, <'default'>]"], environment: busEnv)
        #expect(emitted == 0)
        let opened = try host.nextEvent(timeout: .seconds(10))
        #expect(opened.name == "notify.opened")
        #expect(opened.data["url"] == "https://promptugal.news/agenda/late/")

        // A restart delivers nothing twice.
        daemon.stop()
        daemon = try Child(sitekeep, ["serve", "--keyring", "file", "--unlock", "--passphrase-file", store.passFile], env: env,
                           log: run.appendingPathComponent("serve2.log").path)
        #expect(Self.wait(5) { FileManager.default.fileExists(atPath: sock) })
        usleep(2_000_000)
        #expect(Self.calls(try String(contentsOfFile: notifyLog, encoding: .utf8)).count == 3, "a reminder was delivered twice")

        // With no service on the bus, a reminder is printed; picking through the bridge re-plans at once.
        notifications.stopService()
        let client = try TestHost.connect(socket: sock, site: "https://promptugal.news", timeout: .seconds(10))
        defer { client.close() }
        _ = try client.hello(origin: "https://promptugal.news")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try client.call("schedule.set", args: ["v": 1, "picks": [["id": "soon", "at": .int(now)], ["id": "late", "at": .int(now)], ["id": "printed", "at": .int(now)]]])
        #expect(throws: BridgeError.self) { try client.call("schedule.set", args: ["v": 1, "picks": [["id": "x", "at": "not a date"]]]) }
        let plan = try client.call("notify.plan")
        #expect(plan["reminders"]?.arrayValue?.map { $0["item"] } == ["printed"])
        #expect(Self.wait(40) { daemon.output.contains("reminder: Talk printed: Starts at ") }, "\(daemon.output)")
        #expect(daemon.output.contains("no desktop notification"))
        // And the snapshot a widget reads names what is next, with no key.
        let next = await store.run(["next", "--json"])
        #expect(next.status == 0 && next.out.contains("Talk printed"), "\(next.out) \(next.err)")
    }
}
