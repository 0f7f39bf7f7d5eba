import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The inbox, the workflow runs and the picks belong to a site and its vault: through the CLI
/// (`--site`) and the daemon's bridge, site A never sees or changes site B's state; read marks
/// and picks go into the site's vault and travel to another device by push and pull.
@Suite(.serialized) struct SiteCoreStateTests {
    static let promptugal = "https://promptugal.news", summit = "https://web-summit.sgit.ai"
    static let morning = #"{"format": "sitekeep.workflow.v1", "name": "morning", "title": "Morning run", "steps": [{"page": "https://x.test/1"}, {"page": "https://x.test/2"}, {"page": "https://x.test/3"}]}"#

    /// A vault made by the real sgit at `dir` with `files`, committed.
    static func sgitVault(_ sgit: String, _ dir: String, key: String, files: [String: String], home: String) throws {
        #expect(ChildProcess.run(sgit, ["init", dir, "--vault-key", key]) == 0)
        for (p, text) in files {
            let url = URL(fileURLWithPath: dir + "/" + p)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: url)
        }
        #expect(sg(sgit, dir, ["commit", "-m", "agent items"], home: home).status == 0)
    }

    static func sg(_ sgit: String, _ dir: String, _ args: [String], home: String) -> (status: Int32, out: String, err: String) {
        ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", dir, sgit] + args, environment: ["HOME": home, "NO_COLOR": "1"])
    }

    static func siteIDs(_ store: CLIStore) async throws -> [String: String] {
        let r = await store.run(["site", "list", "--json"])
        var out: [String: String] = [:]
        for s in try JSONParser.parse(r.out).arrayValue ?? [] {
            if let o = s["origins"]?.arrayValue?.first?.stringValue, let id = s["id"]?.stringValue { out[o.replacingOccurrences(of: ":443", with: "")] = id }
        }
        return out
    }

    static func inbox(_ store: CLIStore, _ extra: [String]) async throws -> [String: (unread: Bool, new: Bool)] {
        let r = await store.run(["inbox", "--json", "--passphrase-file", store.passFile] + extra)
        #expect(r.status == 0, "inbox \(extra): \(r.err)")
        var out: [String: (unread: Bool, new: Bool)] = [:]
        for i in (try? JSONParser.parse(r.out).arrayValue) ?? [] {
            if let p = i["path"]?.stringValue { out[p] = (i["unread"] == .bool(true), i["new"] == .bool(true)) }
        }
        return out
    }

    /// A store with Promptugal (vault `va`: `inbox/briefs/a.md` and the morning workflow) and
    /// Summit (vault `vb`: `inbox/briefs/b.md` and the same workflow), each vault made by sgit
    /// and given to its site; answers the store and the two sites' ids.
    static func twoSitesWithVaults(_ sgit: String) async throws -> (store: CLIStore, a: String, b: String) {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Promptugal", "--origin", Self.promptugal, "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        #expect(await store.run(["site", "add", "Summit", "--origin", Self.summit, "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        let ids = try await Self.siteIDs(store)
        let (a, b) = (try #require(ids[Self.promptugal]), try #require(ids[Self.summit]))
        for (name, origin, item) in [("va", Self.promptugal, "inbox/briefs/a.md"), ("vb", Self.summit, "inbox/briefs/b.md")] {
            let dir = store.dir.appendingPathComponent(name).path
            try Self.sgitVault(sgit, dir, key: "site state \(name):sstate\(name)", files: [item: "for \(origin)\n", "workflows/morning.json": Self.morning], home: store.dir.path)
            let key = try store.file("\(name).key", Array("site state \(name):sstate\(name)".utf8))
            let add = await store.run(["vault", "add", name, "--path", dir, "--key-file", key, "--site", origin, "--passphrase-file", store.passFile])
            #expect(add.status == 0, "\(add.err)")
        }
        return (store, a, b)
    }

    /// A daemon on `store`, unlocked, with a bridge connection bound to each site.
    static func daemonServingBothSites(_ store: CLIStore, tag: String) async throws -> (ServedDaemon, BridgeClient, BridgeClient) {
        let daemon = try ServedDaemon.start(store, [], tag: tag, tool: daemonTool)
        try await daemon.unlock(store.passFile)
        do {
            let clients = try [Self.promptugal, Self.summit].map { origin in
                let c = try TestHost.connect(socket: daemon.sock, site: origin, timeout: .seconds(30))
                _ = try c.hello(origin: origin)
                return c
            }
            return (daemon, clients[0], clients[1])
        } catch {
            daemon.stop()
            throw error
        }
    }

    @Test func eachSiteHasItsOwnInboxAndWorkflowRunsThroughTheCommandLineAndTheBridge() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let (store, a, b) = try await Self.twoSitesWithVaults(sgit)

        // The CLI: reading site A's inbox and stepping its run leaves site B's as they were.
        #expect(try await Self.inbox(store, ["--site", Self.promptugal, "--all-read"])["inbox/briefs/a.md"]?.unread == true)
        let seenA = try await Self.inbox(store, ["--site", Self.promptugal])
        #expect(seenA.count == 2 && seenA["inbox/briefs/a.md"]?.unread == false && seenA["inbox/briefs/a.md"]?.new == false)
        let seenB = try await Self.inbox(store, ["--site", Self.summit])
        #expect(seenB["inbox/briefs/b.md"]?.unread == true && seenB["inbox/briefs/b.md"]?.new == true && seenB["inbox/briefs/a.md"] == nil)
        let wrong = await store.run(["inbox", "--site", Self.summit, "--vault", "va", "--passphrase-file", store.passFile])
        #expect(wrong.status != 0 && wrong.err.contains("va"), "site B cannot name site A's vault: \(wrong.err)")
        let runA = await store.run(["workflow", "run", "morning", "--next", "--site", Self.promptugal, "--json", "--passphrase-file", store.passFile])
        #expect(try JSONParser.parse(runA.out)["position"] == .integer(1), "\(runA.err)")
        let runB = await store.run(["workflow", "run", "morning", "--site", Self.summit, "--json", "--passphrase-file", store.passFile])
        #expect(try JSONParser.parse(runB.out)["position"] == .integer(0), "\(runB.err)")
        let core = store.home + "/core"
        #expect(FileManager.default.fileExists(atPath: "\(core)/sites/\(a)/vaults/va/inbox-read.json"))
        #expect(FileManager.default.fileExists(atPath: "\(core)/sites/\(b)/vaults/vb/inbox-seen.json"))
        for f in ["inbox-read.json", "inbox-seen.json", "workflow-runs.json"] { #expect(!FileManager.default.fileExists(atPath: "\(core)/\(f)")) }

        // The read marks are in site A's vault, and the real sgit reads them.
        let marks = Self.sg(sgit, store.dir.appendingPathComponent("va").path, ["cat", "sitekeep/inbox-read.json"], home: store.dir.path)
        #expect(marks.status == 0 && marks.out.contains("inbox/briefs/a.md") && marks.out.contains("sitekeep.inbox-read.v1"), "\(marks.err)")
        #expect(!Self.sg(sgit, store.dir.appendingPathComponent("vb").path, ["cat", "sitekeep/inbox-read.json"], home: store.dir.path).out.contains("a.md"))

        // The bridge: each connection answers for its own site, sharing the CLI's state of that site.
        let (daemon, ca, cb) = try await Self.daemonServingBothSites(store, tag: "scope")
        defer { ca.close(); cb.close(); daemon.stop() }
        func items(_ c: BridgeClient) throws -> [String: Bool] {
            var out: [String: Bool] = [:]
            for i in try c.call("inbox.list")["items"]?.arrayValue ?? [] { if let p = i["path"]?.stringValue { out[p] = i["unread"] == .bool(true) } }
            return out
        }
        #expect(try items(ca) == ["inbox/briefs/a.md": false, "workflows/morning.json": false], "site A read all of its own with --all-read")
        #expect(try items(cb) == ["inbox/briefs/b.md": true, "workflows/morning.json": true])
        #expect(try cb.call("workflow.next", args: ["name": "morning"])["position"] == .integer(1))
        #expect(try cb.call("workflow.next", args: ["name": "morning"])["position"] == .integer(2))
        #expect(try ca.call("workflow.run", args: ["name": "morning"])["position"] == .integer(1), "site A's run is where the CLI left it")
        #expect(try ca.call("workflow.next", args: ["name": "morning"])["position"] == .integer(2))
        daemon.stop()
        let again = await store.run(["workflow", "run", "morning", "--site", Self.summit, "--json", "--passphrase-file", store.passFile])
        #expect(try JSONParser.parse(again.out)["position"] == .integer(2), "the CLI sees the bridge's run of site B")
    }

    /// `inbox.mark` through the daemon: a page marks an item of its own site's inbox read; the
    /// mark is committed to that site's vault (the real sgit reads it) and the CLI sees it; the
    /// mark is not a look; another site naming that item, or any path not in the inbox, is
    /// refused as `not_found` and writes nothing.
    @Test func aPageMarksItsOwnInboxItemsReadInItsVaultThroughTheDaemon() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let (store, a, _) = try await Self.twoSitesWithVaults(sgit)
        let (daemon, ca, cb) = try await Self.daemonServingBothSites(store, tag: "mark")
        defer { ca.close(); cb.close(); daemon.stop() }
        func refusal(_ c: BridgeClient, _ paths: [String]) -> BridgeFailure? {
            do { _ = try c.call("inbox.mark", args: ["paths": .array(paths.map { .string($0) })]); return nil } catch {
                if case .reply(let f) = error { return f }
                return BridgeFailure(.internal, "not a reply: \(error)")
            }
        }
        func marksFile(_ vault: String) -> (status: Int32, out: String, err: String) {
            Self.sg(sgit, store.dir.appendingPathComponent(vault).path, ["cat", "sitekeep/inbox-read.json"], home: store.dir.path)
        }

        // Refused before anything is written: Summit naming Promptugal's item, and unknown paths.
        let fromB = refusal(cb, ["inbox/briefs/a.md"])
        #expect(fromB?.code == .notFound && fromB?.message.contains("inbox/briefs/a.md") == true, "\(String(describing: fromB))")
        let unknown = refusal(ca, ["inbox/briefs/a.md", "inbox/briefs/nope.md"])
        #expect(unknown?.code == .notFound && unknown?.message.contains("\"inbox/briefs/nope.md\" is not an item") == true, "\(String(describing: unknown))")
        #expect(marksFile("va").status != 0 && marksFile("vb").status != 0, "a refused mark wrote no read marks")

        // Marked, before any look.
        #expect(try ca.call("inbox.mark", args: ["paths": ["inbox/briefs/a.md"]])["marked"] == .integer(1))
        let marks = marksFile("va")
        #expect(marks.status == 0 && marks.out.contains("inbox/briefs/a.md") && !marks.out.contains("morning"), "\(marks.err)")
        #expect(marksFile("vb").status != 0, "Summit's vault is untouched")
        var seen: [String: (unread: Bool, new: Bool)] = [:]
        for i in try ca.call("inbox.list")["items"]?.arrayValue ?? [] {
            if let p = i["path"]?.stringValue { seen[p] = (i["unread"] == .bool(true), i["new"] == .bool(true)) }
        }
        #expect(seen["inbox/briefs/a.md"]?.unread == false && seen["inbox/briefs/a.md"]?.new == true, "marking is not a look: \(seen)")
        #expect(seen["workflows/morning.json"]?.unread == true)
        #expect(FileManager.default.fileExists(atPath: "\(store.home)/core/sites/\(a)/vaults/va/inbox-read.json"))
        daemon.stop()

        // The CLI on Promptugal's vault sees the page's mark; Summit's item is still unread.
        #expect(try await Self.inbox(store, ["--site", Self.promptugal])["inbox/briefs/a.md"]?.unread == false)
        #expect(try await Self.inbox(store, ["--site", Self.summit])["inbox/briefs/b.md"]?.unread == true)
    }

    @Test func aStoreWithStoreWideStateFromBeforeOpensKeepsItsReadMarksAndIsNotWritten() async throws {
        let source = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/core-state-store-wide")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-storewide-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let fm = FileManager.default
        for part in ["home", "vault"] { try fm.copyItem(at: source.appendingPathComponent(part), to: dir.appendingPathComponent(part)) }
        let home = dir.appendingPathComponent("home").path, vault = dir.appendingPathComponent("vault").path
        for root in [home, vault] {
            chmod(root, 0o700)
            for sub in try fm.subpathsOfDirectory(atPath: root) {
                var isDir: ObjCBool = false
                _ = fm.fileExists(atPath: root + "/" + sub, isDirectory: &isDir)
                chmod(root + "/" + sub, isDir.boolValue ? 0o700 : 0o600)
            }
        }
        let pass = dir.appendingPathComponent("pass.txt").path
        try Data("store wide state pass phrase\n".utf8).write(to: URL(fileURLWithPath: pass))
        func run(_ args: [String]) async -> (status: Int32, out: String, err: String) {
            await runTool(args + ["--home", home, "--keyring", "file", "--passphrase-file", pass], environment: ["SITEKEEP_NO_DAEMON": "1"])
        }
        // The vault was registered at the folder it was made in: register this copy the same way
        // (the record is authenticated, so it is not edited); the core state files are untouched.
        #expect(await run(["vault", "remove", "notes"]).status == 0)
        let key = dir.appendingPathComponent("vault.key").path
        try Data("fixture vault passphrase:corestate2026".utf8).write(to: URL(fileURLWithPath: key))
        let added = await run(["vault", "add", "notes", "--path", vault, "--key-file", key, "--site", Self.promptugal])
        #expect(added.status == 0, "\(added.err)")
        let before = try ["inbox-read.json", "inbox-seen.json", "workflow-runs.json"].map { try Data(contentsOf: URL(fileURLWithPath: home + "/core/" + $0)) }

        let r = await run(["inbox", "--site", Self.promptugal, "--json"])
        #expect(r.status == 0, "\(r.err)")
        let items = try JSONParser.parse(r.out).arrayValue ?? []
        func item(_ p: String) -> JSONValue? { items.first { $0["path"]?.stringValue == p } }
        #expect(item("inbox/briefs/monday.md")?["unread"] == .bool(false), "the store-wide read mark is kept: \(r.out)")
        #expect(item("inbox/answers/q1.md")?["unread"] == .bool(true))
        #expect(item("inbox/answers/q1.md")?["new"] == .bool(true), "the store-wide last look is not the site's: every item is new once")
        let w = await run(["workflow", "run", "morning", "--site", Self.promptugal, "--json"])
        #expect(try JSONParser.parse(w.out)["position"] == .integer(0), "the store-wide run is not the site's: \(w.err)")
        let other = await run(["workflow", "run", "morning", "--site", Self.summit, "--json"])
        #expect(other.status != 0, "Summit has no vault: nothing of Promptugal's answers for it")
        let after = try ["inbox-read.json", "inbox-seen.json", "workflow-runs.json"].map { try Data(contentsOf: URL(fileURLWithPath: home + "/core/" + $0)) }
        #expect(after == before, "the store-wide files are never written")
        // The marks moved into the site's vault.
        let cat = await run(["vault", "cat", "notes", "sitekeep/inbox-read.json", "--json"])
        #expect(cat.status == 0, "\(cat.err)")
        let bytes = Data(base64Encoded: try JSONParser.parse(cat.out)["dataBase64"]?.stringValue ?? "") ?? Data()
        #expect(String(decoding: bytes, as: UTF8.self).contains("inbox/briefs/monday.md"))
    }
}
