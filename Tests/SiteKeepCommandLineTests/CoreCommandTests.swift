import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The core's commands against real stores, a real HTTP server on loopback and a real daemon.
@Suite(.serialized) struct CoreCommandTests {
    static func agendaFixture() throws -> String {
        try Fixtures.directory().appendingPathComponent("core/promptugal-agenda-2026.json").path
    }

    /// `agenda load URL` sends the cached copy's ETag as If-None-Match; a 304 keeps the cache,
    /// a refused agenda never replaces it. The server is Python's http.server on loopback, with
    /// an ETag handler, started here and stopped by pid.
    @Test func agendaLoadByURLUsesIfNoneMatch() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let root = store.dir.appendingPathComponent("www")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try Self.agendaFixture(), toPath: root.appendingPathComponent("agenda.json").path)
        let script = try store.file("server.py", Array("""
        import http.server, hashlib, os, sys
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = open(os.path.join(sys.argv[2], self.path.lstrip('/')), 'rb').read()
                tag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                with open(os.path.join(sys.argv[2], 'requests.log'), 'a') as log:
                    log.write((self.headers.get('If-None-Match') or '-') + '\\n')
                if self.headers.get('If-None-Match') == tag:
                    self.send_response(304); self.send_header('ETag', tag); self.end_headers(); return
                self.send_response(200); self.send_header('ETag', tag); self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
            def log_message(self, *a): pass
        s = http.server.HTTPServer(('127.0.0.1', 0), H)
        open(sys.argv[1], 'w').write(str(s.server_address[1]))
        s.serve_forever()
        """.utf8))
        let portFile = store.dir.appendingPathComponent("port").path
        let server = try NotificationDeliveryTests.Child("/usr/bin/python3", [script, portFile, root.path], env: ["PATH=/usr/bin:/bin"],
                                                         log: store.dir.appendingPathComponent("server.log").path)
        defer { server.stop() }
        #expect(NotificationDeliveryTests.wait(10) { FileManager.default.fileExists(atPath: portFile) && ((try? String(contentsOfFile: portFile, encoding: .utf8)) ?? "") != "" })
        let port = try String(contentsOfFile: portFile, encoding: .utf8)
        let url = "http://127.0.0.1:\(port)/agenda.json"
        let first = await store.run(["agenda", "load", url, "--site", "https://promptugal.news"])
        #expect(first.status == 0 && first.out.contains("Loaded 200 agenda items"), "\(first.err)")
        let second = await store.run(["agenda", "load", url, "--site", "https://promptugal.news"])
        #expect(second.status == 0 && second.out.contains("unchanged"), "\(second.out) \(second.err)")
        // A broken agenda at the same URL is refused and the cached one stays.
        try Data("{\"items\": [{\"id\": 1}]}".utf8).write(to: root.appendingPathComponent("agenda.json"))
        let third = await store.run(["agenda", "load", url, "--site", "https://promptugal.news"])
        #expect(third.status == 1 && third.err.contains("agenda.items[0].title"), "\(third.err)")
        let log = try String(contentsOf: root.appendingPathComponent("requests.log"), encoding: .utf8).split(separator: "\n")
        #expect(log.count == 3 && log[0] == "-" && log[1].hasPrefix("\"") && log[1] == log[2])
        let list = await store.run(["schedule", "add", "ps26-night-across", "--site", "https://promptugal.news"])
        #expect(list.out.contains("Late-night newsroom"))
    }

    @Test func scheduleCommandsKeepPicksTheAgendaLacksAndExportCalendars() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        #expect(await store.run(["agenda", "load", try Self.agendaFixture(), "--site", "https://promptugal.news"]).status == 0)
        for id in ["ps26-night-across", "gone-2025-talk", "ps26-su-24-0900"] {
            #expect(await store.run(["schedule", "add", id, "--site", "https://promptugal.news"]).status == 0)
        }
        #expect(await store.run(["schedule", "add", "bad\u{7}id", "--site", "https://promptugal.news"]).status == 1)
        let list = await store.run(["schedule", "list", "--site", "https://promptugal.news", "--json"])
        let entries = try JSONParser.parse(list.out).arrayValue ?? []
        #expect(entries.map { $0["id"] } == ["ps26-su-24-0900", "ps26-night-across", "gone-2025-talk"])
        #expect(entries.map { $0["inAgenda"] } == [true, true, false])
        let human = await store.run(["schedule", "list", "--site", "https://promptugal.news"])
        #expect(human.out.contains("(not in the agenda)"))
        let first = await store.run(["schedule", "export", "--ics", "--site", "https://promptugal.news"])
        #expect(first.status == 0 && first.out.hasPrefix("BEGIN:VCALENDAR\r\n") && first.err.contains("gone-2025-talk"))
        #expect(await store.run(["schedule", "remove", "ps26-su-24-0900", "--site", "https://promptugal.news"]).status == 0)
        let second = await store.run(["schedule", "export", "--ics", "--site", "https://promptugal.news"])
        #expect(second.out.contains("UID:pick-ps26-night-across@promptugal.news") && !second.out.contains("ps26-su-24-0900"))
        // The page's own bad write is reported with its path, not hidden.
        #expect(await store.run(["site", "storage", "set", "https://promptugal.news", "nr.schedule.v1", #"{"v":1,"picks":[{"id":"a","at":"soon"}]}"#]).status == 0)
        let refused = await store.run(["schedule", "list", "--site", "https://promptugal.news"])
        #expect(refused.status == 1 && refused.err.contains("nr.schedule.v1.picks[0].at"))
    }

    /// The design's relaunch test on today's daemon: two tabs with their scroll positions set
    /// through tabs.set, the daemon killed with SIGKILL, restarted, and both tabs and positions back.
    @Test func tabsAndScrollPositionsSurviveAKilledDaemon() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Newsroom", "--origin", "https://newsroom.sgit.ai", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let run = store.dir.appendingPathComponent("r")
        try FileManager.default.createDirectory(at: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "SITEKEEP_NOTIFY=print"]
        // Unlocked at start: a site's entry binds once its tag is checked, which needs the unlock.
        let serve = ["serve", "--keyring", "file", "--unlock", "--passphrase-file", store.passFile]
        var daemon = try NotificationDeliveryTests.Child(sitekeep, serve, env: env, log: run.appendingPathComponent("s1.log").path)
        defer { daemon.stop(SIGKILL) }
        #expect(NotificationDeliveryTests.wait(5) { FileManager.default.fileExists(atPath: sock) })
        let tabs: JSONValue = ["tabs": [["url": "https://newsroom.sgit.ai/articles/a-browser-for-one.html", "title": "A browser for one", "scroll": 0.42],
                                        ["url": "https://newsroom.sgit.ai/wires/", "scroll": 0.9]], "active": 1]
        do {
            let c = try TestHost.connect(socket: sock, site: "https://newsroom.sgit.ai", timeout: .seconds(10))
            defer { c.close() }
            _ = try c.hello(origin: "https://newsroom.sgit.ai")
            _ = try c.call("tabs.set", args: tabs)
        }
        daemon.stop(SIGKILL)
        // (the stale socket file is left as a crash leaves it)
        daemon = try NotificationDeliveryTests.Child(sitekeep, serve, env: env, log: run.appendingPathComponent("s2.log").path)
        // The restarted daemon replaces the stale socket file the killed one left.
        #expect(NotificationDeliveryTests.wait(5) { (try? BridgeClient.connect(path: sock, timeout: .seconds(1)))?.close() != nil }, "\(daemon.output)")
        let c = try TestHost.connect(socket: sock, site: "https://newsroom.sgit.ai", timeout: .seconds(10))
        defer { c.close() }
        _ = try c.hello(origin: "https://newsroom.sgit.ai")
        let back = try c.call("tabs.get")
        #expect(back == tabs, "\(back)")
    }

    /// Issue 32: `agenda load URL` against a hostile server (the vault remotes' hostile_http_server.py
    /// on loopback, stopped by pid). An endless chunked answer is cut at the 16 MiB bound while it
    /// streams, with a clear error, and nothing lands in $TMPDIR (the `curl` child it replaces
    /// applied --max-filesize to declared lengths only and wrote on into $TMPDIR); a redirect is
    /// not followed; plain http to another host is refused.
    @Test func agendaLoadByURLIsBoundedWhileItStreamsAndFollowsNoRedirect() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let main = URL(fileURLWithPath: sitekeep).deletingLastPathComponent().appendingPathComponent("sitekeep-main").path
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("SiteKeepVaultRemotesTests/hostile_http_server.py").path
        let ports = store.dir.appendingPathComponent("ports").path, record = store.dir.appendingPathComponent("record.jsonl").path
        _ = FileManager.default.createFile(atPath: record, contents: nil)
        let server = try NotificationDeliveryTests.Child("/usr/bin/python3", [script, ports, record], env: ["PATH=/usr/bin:/bin"],
                                                         log: store.dir.appendingPathComponent("server.log").path)
        defer { server.stop(SIGKILL) }
        #expect(NotificationDeliveryTests.wait(10) { ((try? String(contentsOfFile: ports, encoding: .utf8)) ?? "").contains(" ") })
        let port = try #require(try String(contentsOfFile: ports, encoding: .utf8).split(separator: " ").first.flatMap { Int($0) })
        func recorded() -> [[String: Any]] {
            ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").split(separator: "\n")
                .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        // The endless answer, through the real executable with its own $TMPDIR, watched while it runs.
        let tmp = store.dir.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        func bytes(under dir: URL) -> Int {
            (FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []).reduce(0) { sum, name in
                sum + (((try? FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(name).path))?[.size] as? Int) ?? 0)
            }
        }
        let log = store.dir.appendingPathComponent("load.log").path
        let load = try NotificationDeliveryTests.Child(main, ["agenda", "load", "http://127.0.0.1:\(port)/endless/agenda.json", "--site", "https://promptugal.news",
                                                              "--home", store.home, "--keyring", "file"],
                                                       env: ["PATH=/usr/bin:/bin", "HOME=\(store.dir.path)", "TMPDIR=\(tmp.path)"], log: log)
        var status: Int32 = 0, most = 0
        let end = Date().addingTimeInterval(120)
        while Date() < end {
            most = max(most, bytes(under: tmp))
            if waitpid(load.pid, &status, WNOHANG) == load.pid { break }
            usleep(20_000)
        }
        let err = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status != 0 && err.contains("larger than 16 MiB"), "\(status): \(err)")
        #expect(most <= 16 << 20, "\(most) bytes reached $TMPDIR")
        #expect(bytes(under: tmp) == 0, "nothing is left in $TMPDIR")
        #expect(NotificationDeliveryTests.wait(10) { recorded().contains { $0["sent"] != nil } })
        for s in recorded() where s["sent"] != nil {
            #expect((s["completed"] as? Bool) == false && ((s["sent"] as? Int) ?? .max) <= 32 << 20, "the server sent \(s)")
        }

        // A redirect is an error naming it; the listener it points to hears nothing.
        let moved = await store.run(["agenda", "load", "http://127.0.0.1:\(port)/redirect/agenda.json", "--site", "https://promptugal.news"])
        #expect(moved.status == 1 && moved.err.contains("307") && moved.err.contains("follows no redirects"), "\(moved.err)")
        #expect(!recorded().contains { $0["method"] != nil }, "the redirect was followed")
        // Plain http to a host that is not loopback.
        let plain = await store.run(["agenda", "load", "http://example.invalid/agenda.json", "--site", "https://promptugal.news"])
        #expect(plain.status == 1 && plain.err.contains("plain http only to loopback"), "\(plain.err)")
    }
}
