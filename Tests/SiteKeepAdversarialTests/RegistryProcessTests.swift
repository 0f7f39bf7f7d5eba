import Foundation
import Glibc
import Testing
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport

/// The registry shared by real processes (issue 12, defect 4): `sitekeep serve` running, sites
/// added and removed by `sitekeep site` commands beside it.
@Suite(.serialized) struct RegistryProcessTests {
    /// The files process `pid` has open (the targets of /proc/<pid>/fd).
    func openFiles(_ pid: pid_t) -> [String] {
        let dir = "/proc/\(pid)/fd"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)
        }
    }

    /// Refusal of `op` on `client` as a bridge reply; nil when it was served.
    func refusal(_ client: BridgeClient, _ op: String, _ args: JSONValue = .object([])) -> BridgeFailure? {
        do {
            _ = try client.call(op, args: args)
            return nil
        } catch {
            if case .reply(let f) = error { return f }
            return BridgeFailure(.internal, "not a reply: \(error)")
        }
    }

    /// A store home in a fresh folder, and the real `sitekeep` run on it.
    struct Store {
        let exe: String, f: TempFolder, home: String, sock: String, pass: String, env: [String: String]
        init(_ tag: String, env extra: [String: String] = [:]) throws {
            exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
            f = try TempFolder(tag)
            home = f.path + "/home"
            sock = f.path + "/run/bridge.sock"
            pass = try f.file("pass.txt", Array("\(tag) passphrase".utf8))
            env = ["HOME": f.path, "SITEKEEP_SOCK": sock].merging(extra) { _, given in given }
        }
        func cli(_ args: [String]) throws -> (code: Int32?, out: String, err: String) {
            let r = try Child.run(exe, args + ["--home", home, "--keyring", "file"], in: f.path, environment: env)
            return (r.code, String(decoding: r.out, as: UTF8.self), r.err)
        }
    }

    @Test func aSiteRemovedByTheCLIIsRefusedAtOnceAndAddedSitesSurviveTheDaemonsWrites() async throws {
        let store = try Store("registry")
        let (exe, f, home, sock, pass, env) = (store.exe, store.f, store.home, store.sock, store.pass, store.env)
        func cli(_ args: [String]) throws -> (code: Int32?, out: String, err: String) { try store.cli(args) }
        func addSite(_ name: String, _ origin: String) throws -> String {
            let r = try cli(["site", "add", name, "--origin", origin, "--app-bound", "--passphrase-file", pass, "--host", TestHost.runner, "--json"])
            try #require(r.code == 0, "site add \(name): \(r.err)")
            return try #require(try JSONParser.parse(r.out)["id"]?.stringValue)
        }
        let made = try cli(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"])
        try #require(made.code == 0, "init: \(made.err)")
        let a = try addSite("A", "https://a.example")
        let b = try addSite("B", "https://b.example")
        // B was last used long ago, so the daemon writes its lastUsedAt when it first opens it.
        let registry = URL(fileURLWithPath: home + "/sites.json")
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: registry)) as? [String: Any])
        doc["sites"] = (doc["sites"] as? [[String: Any]] ?? []).map { s in
            var s = s
            if s["id"] as? String == b { s["lastUsedAt"] = "2020-01-01T00:00:00Z" }
            return s
        }
        try JSONSerialization.data(withJSONObject: doc).write(to: registry)

        // Unlocked at start: a site's entry binds once its tag is checked, which needs the unlock.
        let daemon = try Child(exe, ["serve", "--home", home, "--keyring", "file", "--unlock", "--passphrase-file", pass], stdoutPath: f.path + "/serve.out",
                               stderrPath: f.path + "/serve.err", environment: env)
        defer { daemon.kill9() }
        #expect(ChildProcess.waitForPath(f.path + "/run/control.sock"), "the daemon's control socket did not appear")
        try #require(FileManager.default.fileExists(atPath: sock), "the daemon did not start: \(daemon.stderr)")

        let siteA = try TestHost.connect(socket: sock, site: "https://a.example", timeout: .seconds(30))
        _ = try siteA.hello(origin: "https://a.example")
        _ = try siteA.call("storage.set", args: ["key": "k", "value": "value of A"])
        #expect(try siteA.call("storage.get", args: ["key": "k"])["value"] == "value of A")
        #expect(openFiles(daemon.pid).contains { $0.contains("\(a)/partition.sqlite") }, "A's partition is not open")

        let removed = try cli(["site", "remove", a, "--force", "--yes"])
        try #require(removed.code == 0, "site remove: \(removed.err)")
        // The very next message on A's connection is refused, and the connection is closed.
        let refused = refusal(siteA, "storage.get", ["key": "k"])
        #expect(refused?.code == .forbiddenOrigin && refused?.message.contains("was removed") == true, "\(String(describing: refused))")
        do {
            _ = try siteA.call("storage.set", args: ["key": "k", "value": "again"])
            Issue.record("A's connection was still served after its refusal")
        } catch {
            // Closed: EOF, or a reset when the daemon closed with this request unread.
            let closed: Bool = switch error {
            case .connectionClosed: true
            case .socket(_, let e): e == ECONNRESET || e == EPIPE
            default: false
            }
            #expect(closed, "A's connection was not closed: \(error)")
        }
        // The daemon closed A's partition (its file no longer open) and serves no new connection for A.
        for _ in 0..<100 where openFiles(daemon.pid).contains(where: { $0.contains(a) }) { usleep(20_000) }
        #expect(!openFiles(daemon.pid).contains { $0.contains(a) }, "the daemon still holds A's partition open")
        // No host is started for a removed site, and no connection binds it.
        #expect(throws: (any Error).self) {
            let again = try TestHost.connect(socket: sock, site: "https://a.example", timeout: .seconds(30))
            _ = try again.hello(origin: "https://a.example")
        }

        // A site added by the CLI while the daemon runs is served, and kept when the daemon
        // next writes sites.json (B's lastUsedAt).
        let c = try addSite("C", "https://c.example")
        let siteB = try TestHost.connect(socket: sock, site: "https://b.example", timeout: .seconds(30))
        _ = try siteB.hello(origin: "https://b.example")
        #expect(try siteB.call("storage.get", args: ["key": "k"])["value"] == .null)
        let siteC = try TestHost.connect(socket: sock, site: "https://c.example", timeout: .seconds(30))
        #expect(throws: Never.self, "the daemon does not serve a site the CLI added") {
            _ = try siteC.hello(origin: "https://c.example")
            _ = try siteC.call("storage.set", args: ["key": "k", "value": "value of C"])
        }

        let after = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: registry)) as? [String: Any])
        let sites = after["sites"] as? [[String: Any]] ?? []
        #expect(Set(sites.compactMap { $0["id"] as? String }) == [b, c], "sites.json after the daemon's write: \(sites)")
        let used = sites.first { $0["id"] as? String == b }?["lastUsedAt"] as? String
        #expect(used != nil && used != "2020-01-01T00:00:00Z", "the daemon did not write B's lastUsedAt")
        let list = try cli(["site", "list", "--json"])
        #expect(list.out.contains("https://c.example") && !list.out.contains("https://a.example"), "\(list.out)")
    }

    /// A site removed while `sitekeep serve` runs takes its core state with it at once: its
    /// folder under `core/sites/` is deleted and the daemon's "what is next" no longer shows its
    /// items within moments (not at its next round, up to 30 s later); the other site's stay.
    @Test func aRemovedSitesCoreStateIsForgottenAtOnceByARunningDaemon() async throws {
        let store = try Store("core-removal", env: ["SITEKEEP_NOTIFY": "print"])
        let (exe, f, home, sock, pass, env) = (store.exe, store.f, store.home, store.sock, store.pass, store.env)
        func cli(_ args: [String]) throws -> (code: Int32?, out: String, err: String) { try store.cli(args) }
        let made = try cli(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"])
        try #require(made.code == 0, "init: \(made.err)")
        // Each site: a stand-up two days ahead in its agenda (what is next shows it) and its own leads.
        let start = Date().addingTimeInterval(2 * 86_400)
        let stamp = ISO8601DateFormatter().string(from: start)
        var ids: [String: String] = [:]
        for name in ["A", "B"] {
            let origin = "https://\(name.lowercased()).example"
            let added = try cli(["site", "add", name, "--origin", origin, "--app-bound", "--passphrase-file", pass, "--host", TestHost.runner, "--json"])
            ids[name] = try #require(try JSONParser.parse(added.out)["id"]?.stringValue, "site add: \(added.err)")
            let agenda = try f.file("agenda-\(name).json", Array(#"{"timezone": "UTC", "items": [{"id": "s1", "title": "Stand-up \#(name)", "start": "\#(stamp)", "kind": "standup"}]}"#.utf8))
            let loaded = try cli(["agenda", "load", agenda, "--site", origin])
            try #require(loaded.code == 0, "agenda load: \(loaded.err)")
            #expect(try cli(["remind", "plan", "--site", origin, "--session-lead", "5"]).code == 0)
        }
        let coreA = home + "/core/sites/" + (ids["A"] ?? "?")
        #expect(FileManager.default.fileExists(atPath: coreA + "/reminders.json"))
        func next() -> String { (try? String(contentsOfFile: home + "/next.json", encoding: .utf8)) ?? "" }

        // Unlocked at start: a site's entry binds once its tag is checked, which needs the unlock.
        let daemon = try Child(exe, ["serve", "--home", home, "--keyring", "file", "--unlock", "--passphrase-file", pass], stdoutPath: f.path + "/serve.out",
                               stderrPath: f.path + "/serve.err", environment: env)
        defer { daemon.kill9() }
        #expect(ChildProcess.waitForPath(f.path + "/run/control.sock"), "the daemon's control socket did not appear")
        try #require(FileManager.default.fileExists(atPath: sock), "the daemon did not start: \(daemon.stderr)")
        // The daemon's first round has written what is next, with both sites' stand-ups.
        for _ in 0..<100 where !(next().contains("Stand-up A") && next().contains("Stand-up B")) { usleep(50_000) }
        #expect(next().contains("Stand-up A") && next().contains("Stand-up B"), "\(next())")
        usleep(500_000)   // past the first round: the next is 30 s away

        let removed = try cli(["site", "remove", "https://a.example", "--force", "--yes"])
        try #require(removed.code == 0, "site remove: \(removed.err)")
        #expect(!FileManager.default.fileExists(atPath: coreA), "A's core folder outlived it")
        for _ in 0..<50 where next().contains("Stand-up A") { usleep(100_000) }
        #expect(!next().contains("Stand-up A"), "the daemon still shows the removed site's items: \(next())")
        #expect(next().contains("Stand-up B"), "\(next())")
        #expect(FileManager.default.fileExists(atPath: home + "/core/sites/" + (ids["B"] ?? "?") + "/reminders.json"))
        #expect(!FileManager.default.fileExists(atPath: coreA))
    }

    /// Two processes adding sites at the same time lose none: each add holds the registry's file
    /// lock over a fresh read and its write.
    @Test func concurrentAddsFromTwoProcessesLoseNothing() throws {
        let exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
        let f = try TempFolder("adds")
        let home = f.path + "/home"
        let pass = try f.file("pass.txt", Array("adds passphrase".utf8))
        let env = ["HOME": f.path]
        let made = try Child.run(exe, ["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19",
                                       "--no-recovery", "--home", home, "--keyring", "file"], in: f.path, environment: env)
        try #require(made.code == 0, "init: \(made.err)")
        let perProcess = 8
        let loops = try ["p", "q"].map { name in
            let script = "i=0; while [ $i -lt \(perProcess) ]; do \"$0\" site add \(name)$i --origin https://\(name)$i.example --home \"$1\" --keyring file || exit 1; i=$((i+1)); done"
            return try Child("/bin/sh", ["-c", script, exe, home], stdoutPath: f.path + "/\(name).out", stderrPath: f.path + "/\(name).err", environment: env)
        }
        for loop in loops {
            let deadline = Date().addingTimeInterval(120)
            while !loop.hasExited && Date() < deadline { usleep(20_000) }
            if !loop.hasExited { loop.kill9() }
            #expect(loop.wait().code == 0, "\(loop.stderr)")
        }
        let list = try Child.run(exe, ["site", "list", "--json", "--home", home, "--keyring", "file"], in: f.path, environment: env)
        let sites = try JSONParser.parse(list.out).arrayValue ?? []
        #expect(sites.count == 2 * perProcess, "sites after concurrent adds: \(sites.count)")
    }
}
