import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepBridge
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The inbox found by pull and diff, read marks and picks that travel: two SiteKeep devices and
/// an agent using the real `sgit`, each with its own clone of one vault on the real vault server
/// that tools/test starts.
@Suite(.serialized) struct VaultTravelTests {
    static let site = "https://promptugal.news"

    /// One side: a SiteKeep store with its clone `mine`, or the agent's sgit clone.
    struct World {
        let url: String, token: String, sgit: String
        let root: CLIStore
        let agent: String
        let keyText: String

        init() async throws {
            url = try #require(VaultSyncCommandTests.server, "run through tools/test: it starts the real vault server")
            token = try #require(VaultSyncCommandTests.token)
            sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
            root = try CLIStore()
            agent = root.dir.appendingPathComponent("agent").path
            let id = "sktravel" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
            keyText = "travel phrase \(UUID().uuidString.prefix(6)):\(id)"
            #expect(ChildProcess.run(sgit, ["init", agent, "--vault-key", keyText]) == 0)
            try agentPush(["README.md": "the agents' vault\n"])
        }

        func sg(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", agent, sgit] + args, environment: ["HOME": root.dir.path, "NO_COLOR": "1"])
        }

        /// The agent pulls, writes `files`, commits and pushes with sgit.
        func agentPush(_ files: [String: String]) throws {
            _ = sg(["pull", "--base-url", url, "--token", token])
            for (p, t) in files {
                let u = URL(fileURLWithPath: agent + "/" + p)
                try FileManager.default.createDirectory(at: u.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(t.utf8).write(to: u)
            }
            #expect(sg(["commit", "-m", "agent"]).status == 0)
            let p = sg(["push", "--base-url", url, "--token", token])
            #expect(p.status == 0, "sgit push: \(p.err)")
        }

        /// A new SiteKeep device with the site and a clone of the vault owned by it.
        func device() async throws -> CLIStore {
            let d = try CLIStore()
            _ = try await d.initialize()
            #expect(await d.run(["site", "add", "Promptugal", "--origin", VaultTravelTests.site, "--app-bound", "--passphrase-file", d.passFile, "--host", TestHost.runner]).status == 0)
            let key = try d.file("vault.key", Array(keyText.utf8)), tok = try d.file("token.txt", Array((token + "\n").utf8))
            let c = await d.run(["vault", "clone", url, "mine", "--key-file", key, "--token-file", tok, "--site", VaultTravelTests.site, "--passphrase-file", d.passFile])
            #expect(c.status == 0, "clone: \(c.err)")
            return d
        }
    }

    static func run(_ d: CLIStore, _ args: [String]) async -> (status: Int32, out: String, err: String) {
        await d.run(args + ["--passphrase-file", d.passFile])
    }

    /// A vault file's text, through `sitekeep vault cat --json`.
    static func cat(_ d: CLIStore, _ path: String) async -> String? {
        let r = await run(d, ["vault", "cat", "mine", path, "--json"])
        guard r.status == 0, let b64 = try? JSONParser.parse(r.out)["dataBase64"]?.stringValue else { return nil }
        return String(decoding: Data(base64Encoded: b64) ?? Data(), as: UTF8.self)
    }

    static func sync(_ d: CLIStore, _ verb: String) async {
        let r = await run(d, ["vault", verb, "mine"])
        #expect(r.status == 0, "vault \(verb): \(r.err)")
    }

    /// The pull that first brings another device's commits: that device's key is a signer this
    /// store has not pinned, so the pull fails naming it and `vault trust` (issue 32); the user
    /// trusts it (it is their own device), and the caller's next pull merges.
    static func trustTheOtherDevice(_ d: CLIStore) async throws {
        let refused = await run(d, ["vault", "pull", "mine", "--json"])
        #expect(refused.status == 1 && refused.err.contains("vault_unverified") && refused.err.contains("new signer"), "\(refused.err)")
        let status = try JSONParser.parse(await run(d, ["vault", "status", "mine", "--json"]).out)
        let new = (status["signers"]?.arrayValue ?? []).filter { $0["state"] == "new" }.compactMap { $0["keyId"]?.stringValue }
        #expect(new.count == 1, "\(status)")
        for key in new {
            #expect(refused.err.contains("sitekeep vault trust mine \(key)"))
            #expect(await run(d, ["vault", "trust", "mine", key]).status == 0)
        }
    }

    static func inbox(_ d: CLIStore, _ extra: [String] = []) async throws -> [String: (unread: Bool, new: Bool)] {
        try await SiteCoreStateTests.inbox(d, ["--site", site] + extra)
    }

    @Test func whatAnAgentPushesShowsAfterAPullAndReadMarksTravelAndMergeByTheirUnion() async throws {
        let w = try await World()
        try w.agentPush(["inbox/briefs/mon.md": "monday\n"])
        let one = try await w.device()
        #expect(try await Self.inbox(one)["inbox/briefs/mon.md"]?.new == true)
        #expect(try await Self.inbox(one, ["--mark-read", "inbox/briefs/mon.md"])["inbox/briefs/mon.md"]?.unread == true)
        await Self.sync(one, "push")

        // The agent pushes two more; the device sees them after its pull, its mark still there.
        try w.agentPush(["inbox/reviews/r1.md": "a review\n", "inbox/answers/q.md": "an answer\n"])
        #expect(try await Self.inbox(one)["inbox/reviews/r1.md"] == nil, "nothing new before the pull")
        await Self.sync(one, "pull")
        let pulled = try await Self.inbox(one)
        #expect(pulled["inbox/reviews/r1.md"]?.unread == true && pulled["inbox/reviews/r1.md"]?.new == true)
        #expect(pulled["inbox/answers/q.md"]?.unread == true)
        #expect(pulled["inbox/briefs/mon.md"]?.unread == false && pulled["inbox/briefs/mon.md"]?.new == false, "marked read stays read after the pull")

        // A second device: the first one's mark came with the vault.
        let two = try await w.device()
        #expect(try await Self.inbox(two)["inbox/briefs/mon.md"]?.unread == false, "the read mark travelled")
        _ = try await Self.inbox(two, ["--mark-read", "inbox/reviews/r1.md"])
        await Self.sync(two, "push")
        // Meanwhile the first marks another: both changed the marks file; the pull merges them.
        _ = try await Self.inbox(one, ["--mark-read", "inbox/answers/q.md"])
        try await Self.trustTheOtherDevice(one)
        let merge = await Self.run(one, ["vault", "pull", "mine", "--json"])
        #expect(merge.status == 0, "\(merge.err)")
        #expect(!merge.out.contains("conflicts\":[\""), "the marks merge without a conflict: \(merge.out)")
        let both = try await Self.inbox(one)
        #expect(both.filter { $0.key.hasPrefix("inbox/") }.allSatisfy { !$0.value.unread }, "neither device's mark is lost: \(both)")
        await Self.sync(one, "push")
        await Self.sync(two, "pull")
        #expect(try await Self.inbox(two).filter { $0.key.hasPrefix("inbox/") }.allSatisfy { !$0.value.unread })

        // The real sgit reads the merged file back.
        #expect(w.sg(["pull", "--base-url", w.url, "--token", w.token]).status == 0)
        let marks = w.sg(["cat", "sitekeep/inbox-read.json"])
        #expect(marks.status == 0, "\(marks.err)")
        let paths = Set((try JSONParser.parse(marks.out)["read"]?.arrayValue ?? []).compactMap { $0["path"]?.stringValue })
        #expect(paths == ["inbox/briefs/mon.md", "inbox/reviews/r1.md", "inbox/answers/q.md"])
    }

    @Test func schedulePicksAreMirroredToTheVaultThroughTheDaemonAndTheCommandLineAndMergeOnPull() async throws {
        let w = try await World()
        let one = try await w.device()
        let daemon = try ServedDaemon.start(one, [], tag: "picks", tool: daemonTool)
        defer { daemon.stop() }
        try await daemon.unlock(one.passFile)
        let c = try TestHost.connect(socket: daemon.sock, site: Self.site, timeout: .seconds(30))
        defer { c.close() }
        _ = try c.hello(origin: Self.site)
        _ = try c.call("schedule.set", args: ["v": 1, "picks": [["id": "talk-1", "at": 1_796_000_000_000], ["id": "talk-2", "at": 1_796_000_000_001]]])
        _ = try c.call("schedule.set", args: ["v": 1, "picks": [["id": "talk-2", "at": 1_796_000_000_001]]])
        // Locked, the page's schedule still works; the mirror waits for the next change.
        try await daemon.lock()
        let two5: JSONValue = ["v": 1, "picks": [["id": "talk-2", "at": 1_796_000_000_001], ["id": "talk-5", "at": 1_796_000_000_005]]]
        #expect(try c.call("schedule.set", args: two5)["picks"]?.arrayValue?.count == 2, "a locked store keeps the schedule")
        try await daemon.unlock(one.passFile)
        c.close()
        daemon.stop()
        func picks(_ text: String) throws -> (picks: [String], removed: [String]) {
            let doc = try JSONParser.parse(text)
            return ((doc["picks"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }, (doc["removed"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue })
        }
        let mirrored = try #require(await Self.cat(one, "agenda/picks.json"), "schedule.set mirrored the picks")
        #expect(try picks(mirrored) == (["talk-2"], ["talk-1"]))
        await Self.sync(one, "push")
        #expect(w.sg(["pull", "--base-url", w.url, "--token", w.token]).status == 0)
        #expect(try picks(w.sg(["cat", "agenda/picks.json"]).out) == (["talk-2"], ["talk-1"]), "the real sgit reads the mirror on its clone")

        // The next change takes talk-5 up with it.
        #expect(await Self.run(one, ["schedule", "add", "talk-4", "--site", Self.site]).status == 0)
        #expect(try picks(try #require(await Self.cat(one, "agenda/picks.json"))).picks == ["talk-2", "talk-4", "talk-5"])
        await Self.sync(one, "push")

        // Two devices pick at once; the pull merges by id.
        let two = try await w.device()
        let add2 = await Self.run(two, ["schedule", "add", "talk-3", "--site", Self.site])
        #expect(add2.status == 0, "\(add2.err)")
        await Self.sync(two, "push")
        #expect(await Self.run(one, ["schedule", "add", "talk-6", "--site", Self.site]).status == 0)
        #expect(await Self.run(one, ["schedule", "remove", "talk-2", "--site", Self.site]).status == 0)
        try await Self.trustTheOtherDevice(one)
        await Self.sync(one, "pull")
        let merged = try picks(try #require(await Self.cat(one, "agenda/picks.json")))
        #expect(Set(merged.picks) == ["talk-3", "talk-4", "talk-5", "talk-6"] && Set(merged.removed) == ["talk-1", "talk-2"], "\(merged)")
    }
}
