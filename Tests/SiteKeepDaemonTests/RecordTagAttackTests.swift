import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What binds a site and what the daemon runs with are authenticated (issue 45, defects 2 and 4;
/// threats T130, T135), against the real `sitekeep serve`, attacked as another process of the
/// same user would: by writing `sites.json` and `daemon.json` directly, with no approval.
@Suite(.serialized) struct RecordTagAttackTests {
    /// A daemon of a fresh store, started by `unlock` (so it logs to daemon.log in the store),
    /// with its bridge at `sock`.
    struct Rig {
        let store: CLIStore
        let sitekeep: String
        let sock: String
        let env: [String: String]

        init() async throws {
            sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
            store = try CLIStore()
            _ = try await store.initialize()
            let run = store.dir.appendingPathComponent("r").path
            mkdir(run, 0o700)
            sock = run + "/bridge.sock"
            env = ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path, "NO_COLOR": "1",
                   "XDG_RUNTIME_DIR": run, "SITEKEEP_AGENT_SOCK": "", "SITEKEEP_NO_DAEMON": ""]
        }

        func cli(_ args: [String]) -> (status: Int32, out: String, err: String) { ChildProcess.capture(sitekeep, args, environment: env) }
        func unlock() { #expect(cli(["unlock", "--passphrase-file", store.passFile]).status == 0) }
        var log: String { (try? String(contentsOfFile: store.home + "/daemon.log", encoding: .utf8)) ?? "" }

        /// Rewrites `name` in the store as a process of the user would: parsed, changed, written
        /// back (0600, by rename), no SiteKeep code involved.
        func edit(_ name: String, _ change: (inout [String: Any]) -> Void) throws {
            let url = URL(fileURLWithPath: store.home + "/" + name)
            var object = (try? JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]) ?? [:]
            change(&object)
            try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).write(to: url, options: .atomic)
            chmod(url.path, 0o600)
        }

        /// Changes the entry of the site with `origin` in sites.json by hand (the file keeps
        /// origins with their port: `https://host:443`).
        func editSite(_ origin: String, _ change: @escaping (inout [String: Any]) -> Void) throws {
            var found = false
            try edit("sites.json") { file in
                var sites = file["sites"] as? [[String: Any]] ?? []
                for i in sites.indices where (sites[i]["origins"] as? [String])?.contains(where: { $0.hasPrefix(origin) }) == true {
                    change(&sites[i])
                    found = true
                }
                file["sites"] = sites
            }
            #expect(found, "no entry of \(origin) in sites.json")
        }
    }

    static let python = HostBindingTests.python

    /// `hello` for `origin` from a Python host the daemon started for `site` (Python is a host
    /// the user may have added); when the daemon refuses to start it, a reply with code
    /// `not_started` and the refusal as its message.
    static func hello(_ rig: Rig, _ origin: String, startedFor site: String) throws -> JSONValue {
        let script = """
        import sys
        f = connect().makefile('rwb')
        f.write(('{"v":1,"id":1,"op":"hello","args":{"origin":"' + sys.argv[1] + '"}}\\n').encode()); f.flush()
        sys.stdout.write(f.readline().decode())
        """
        do {
            let r = try TestHost.run(socket: rig.sock, site: site, script: script, arguments: [origin])
            return try JSONParser.parse(Array(r.output.utf8))
        } catch {
            return ["ok": false, "error": ["code": "not_started", "message": .string("\(error)")]]
        }
    }

    /// A host, an origin and a grant written into sites.json by hand bind and open nothing on a
    /// running, unlocked daemon; the log names the entry and the fix; `site approve` (approved
    /// with the passphrase) makes the entry apply as it stands.
    @Test func aHandWrittenHostOriginOrGrantBindsNothing() async throws {
        let rig = try await Rig()
        let summit = "https://web-summit.sgit.ai", notes = "https://notes.example", planted = "http://localhost:8719"
        #expect(rig.cli(["site", "add", "Summit", "--origin", summit, "--app-bound", "--passphrase-file", rig.store.passFile]).status == 0)
        #expect(rig.cli(["site", "add", "Notes", "--origin", notes, "--app-bound", "--passphrase-file", rig.store.passFile]).status == 0)
        rig.unlock()
        defer { _ = rig.cli(["stop"]) }
        #expect(ChildProcess.waitForPath(rig.sock, seconds: 20), "the daemon did not start")
        let added = rig.cli(["site", "host", "add", notes, Self.python, "--passphrase-file", rig.store.passFile])
        #expect(added.status == 0, "\(added.err)")
        let before = try Self.hello(rig, notes, startedFor: notes)
        #expect(before["ok"] == true, "the approved host does not bind: \(before)")
        #expect(before["result"]?["ops"]?.arrayValue?.contains(.string("vault.list")) == false, "\(before)")
        #expect(HostBindingTests.code(try Self.hello(rig, summit, startedFor: notes)) == "forbidden_host")
        #expect(HostBindingTests.code(try Self.hello(rig, summit, startedFor: summit)) == "not_started")

        // A host written by hand: Python is not Summit's host.
        try rig.editSite(summit) { $0["hosts"] = [["path": Self.python]] }
        let host = try Self.hello(rig, summit, startedFor: summit)
        #expect(host["ok"] != true, "a host written into sites.json bound the site: \(host)")
        #expect(HostBindingTests.message(host).contains("sitekeep site approve"), "\(host)")

        // An origin and a grant written by hand into the entry of the site Python is a host of.
        try rig.editSite(notes) { site in
            site["origins"] = ((site["origins"] as? [String]) ?? []) + [planted]
            site["grants"] = ["vault.list"]
        }
        let origin = try Self.hello(rig, planted, startedFor: notes)
        #expect(origin["ok"] != true, "an origin written into sites.json bound a site: \(origin)")
        let granted = try Self.hello(rig, notes, startedFor: notes)
        let ops = granted["result"]?["ops"]?.arrayValue ?? []
        #expect(!ops.contains(.string("vault.list")), "a grant written into sites.json opened an op: \(granted)")

        // The log names each entry and the fix.
        usleep(300_000)
        #expect(rig.log.contains("the entry of Summit") && rig.log.contains("sitekeep site approve"), "\(rig.log)")
        #expect(rig.log.contains("the entry of Notes"), "\(rig.log)")
        let listed = rig.cli(["site", "list"])
        #expect(listed.out.contains("not approved"), "\(listed.out)")

        // The user checks the entry and approves it: now it applies as it stands.
        let approved = rig.cli(["site", "approve", notes, "--passphrase-file", rig.store.passFile])
        #expect(approved.status == 0 && approved.out.contains("vault.list") && approved.err.contains(planted), "\(approved.out)\(approved.err)")
        let after = try Self.hello(rig, planted, startedFor: notes)
        #expect(after["ok"] == true, "an approved entry does not apply: \(after)")
    }

    /// An entry without any tag (a planted site, or one stripped of its tag) binds nothing, and
    /// `doctor` names it without the master key.
    @Test func anUntaggedEntryIsNamedByDoctor() async throws {
        let rig = try await Rig()
        let summit = "https://web-summit.sgit.ai"
        #expect(rig.cli(["site", "add", "Summit", "--origin", summit, "--app-bound", "--passphrase-file", rig.store.passFile]).status == 0)
        try rig.editSite(summit) { site in
            site["tag"] = nil
            site["hosts"] = [["path": Self.python]]
        }
        let doctor = rig.cli(["doctor"])
        #expect(doctor.out.contains("the entry of Summit") && doctor.out.contains("carries no tag") && doctor.out.contains("sitekeep site approve"),
                "\(doctor.out)\(doctor.err)")
        rig.unlock()
        defer { _ = rig.cli(["stop"]) }
        #expect(ChildProcess.waitForPath(rig.sock, seconds: 20), "the daemon did not start")
        let hello = try Self.hello(rig, summit, startedFor: summit)
        #expect(hello["ok"] != true, "an untagged entry bound its site: \(hello)")
    }

    /// A planted daemon.json (a one-day idle lock, no lock with the session, the agent on) is not
    /// applied by a `config set` of another key, and is ignored, with the defaults in force and
    /// a message in the log and in `doctor`, at the next start.
    @Test func aPlantedSettingsFileIsNeitherAppliedLiveNorAtTheNextStart() async throws {
        let rig = try await Rig()
        rig.unlock()
        defer { _ = rig.cli(["stop"]) }
        let agent = rig.store.dir.appendingPathComponent("r").path + "/planted-agent.sock"
        func inForce(_ key: String) throws -> String? {
            let shown = rig.cli(["config", "--json"])
            let rows = try JSONParser.parse(shown.out)["settings"]?.arrayValue ?? []
            return rows.first { $0["key"]?.stringValue == key }?["value"]?.stringValue
        }
        #expect(try inForce("idle-lock") == "15m")

        try rig.edit("daemon.json") { file in
            file["idle-lock"] = "1d"
            file["lock-on-session-lock"] = "off"
            file["ssh-agent"] = "on"
            file["ssh-agent-socket"] = agent
        }
        // Narrowing, so no approval: it changes metered, and only metered.
        let metered = rig.cli(["config", "set", "metered", "on"])
        #expect(metered.status == 0, "\(metered.err)")
        #expect(try inForce("idle-lock") == "15m", "config set metered applied the planted idle lock")
        #expect(try inForce("ssh-agent") == "off", "config set metered applied the planted agent")
        #expect(try inForce("lock-on-session-lock") == "on", "config set metered applied the planted lock-on-session-lock")
        #expect(!FileManager.default.fileExists(atPath: agent), "the planted agent socket was served")

        // The next start: the defaults apply, and the log and doctor say why and what to do.
        #expect(rig.cli(["stop"]).status == 0)
        rig.unlock()
        #expect(try inForce("idle-lock") == "15m", "the planted idle lock applied at the next start")
        #expect(try inForce("ssh-agent") == "off", "the planted agent applied at the next start")
        #expect(try inForce("lock-on-session-lock") == "on")
        #expect(try inForce("metered") == "on", "the approved-free narrowing change was lost")
        #expect(!FileManager.default.fileExists(atPath: agent), "the planted agent socket was served")
        usleep(300_000)
        #expect(rig.log.contains("idle-lock '1d'") && rig.log.contains("is ignored") && rig.log.contains("sitekeep config set idle-lock 1d"), "\(rig.log)")
        let doctor = rig.cli(["doctor"])
        #expect(doctor.out.contains("ssh-agent 'on'") && doctor.out.contains("is ignored"), "\(doctor.out)")

        // Set again with the user's approval, it is tagged and applies.
        let approved = rig.cli(["config", "set", "idle-lock", "1d", "--passphrase-file", rig.store.passFile])
        #expect(approved.status == 0, "\(approved.err)")
        #expect(try inForce("idle-lock") == "1d")
    }
}
