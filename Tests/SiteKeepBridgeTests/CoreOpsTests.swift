import Foundation
import Testing
@testable import SiteKeepBridge
import SiteKeepCore
import SiteKeepJSON
import SiteKeepTestSupport

/// The native core's ops through the dispatcher: `schedule.set` refuses what the core refuses,
/// naming the field's path, and stores nothing; workflows step with next.
@Suite struct CoreOpsTests {
    /// The hostile corpus through the bridge: every document is refused as `bad_request` (or
    /// `too_large` for counts the catalogue bounds first), the message names `args.` + the path,
    /// and the stored schedule is unchanged.
    @Test func theHostileScheduleCorpusIsRefusedOnTheBridgeWithThePath() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.promptugal)
        let good: JSONValue = ["v": 1, "picks": [["id": "kept", "at": 1_793_000_000_000]]]
        #expect(result(await bed.send(c, op: "schedule.set", args: good)) == good)
        let data = try Fixtures.data("core/schedule-hostile.json")
        let cases = try JSONParser.parse(Array(data))["cases"]?.arrayValue ?? []
        var checked = 0
        for k in cases {
            guard let doc = k["document"], case .object = doc, let path = k["path"]?.stringValue else { continue }
            // A connection per case: schedule.set allows 20 at once on one connection.
            let reply = await bed.send(try await bed.connect(InMemoryBridge.promptugal), op: "schedule.set", args: doc)
            guard case .failure(_, let failure) = reply else { Issue.record("\(k["name"] ?? "?") was accepted"); continue }
            let expected = "args" + path.dropFirst("schedule".count)
            if failure.code == .badRequest {
                #expect(failure.message.hasPrefix(expected + " "), "\(k["name"] ?? "?"): \(failure.message)")
            } else {
                // The catalogue refuses first what it bounds (more than 1000 picks, unknown members, wrong types).
                #expect([.tooLarge, .unknownField].contains(failure.code) && failure.message.contains(expected), "\(k["name"] ?? "?"): \(failure)")
            }
            checked += 1
        }
        #expect(checked >= 35)
        #expect(result(await bed.send(c, op: "schedule.get", args: .object([]))) == good)
    }

    @Test func notAtDateIsRefusedThoughItWasAcceptedBefore() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.promptugal)
        let reply = await bed.send(c, op: "schedule.set", args: ["v": 1, "picks": [["id": "a", "at": "not a date"]]])
        #expect(code(reply) == .badRequest)
        if case .failure(_, let f) = reply { #expect(f.message.hasPrefix("args.picks[0].at ")) }
    }

    /// `inbox.mark` marks the named items read for the calling site only, refuses a path that
    /// is not an item of its inbox (naming it) without marking anything, and refuses what the
    /// catalogue bounds (a path that is not a string, too many paths, unknown members).
    @Test func inboxMarkMarksTheNamedItemsForItsSiteAllOrNone() async throws {
        let bed = try Bed()
        let a = try await bed.connect(InMemoryBridge.promptugal)
        let b = try await bed.connect(InMemoryBridge.newsroom)
        func unread(_ c: BridgeConnection) async throws -> [String: Bool] {
            var out: [String: Bool] = [:]
            for i in try #require(result(await bed.send(c, op: "inbox.list", args: .object([]))))["items"]?.arrayValue ?? [] {
                if let p = i["path"]?.stringValue { out[p] = i["unread"] == .bool(true) }
            }
            return out
        }
        let all = ["inbox/briefs/today.md": true, "inbox/reviews/draft.md": true]
        #expect(try await unread(a) == all)

        // One unknown path: refused, named, and the known one beside it stays unread.
        for bad in ["inbox/briefs/missing.md", "sitekeep/inbox-read.json", "notes/today.md", ""] {
            let reply = await bed.send(a, op: "inbox.mark", args: ["paths": ["inbox/briefs/today.md", .string(bad)]])
            guard case .failure(_, let f) = reply else { Issue.record("\(bad) was accepted"); continue }
            #expect(f.code == .notFound && f.message.contains("args.paths: \"\(bad)\" is not an item"), "\(f)")
        }
        #expect(try await unread(a) == all, "a refused request marks nothing")

        let marked = try #require(result(await bed.send(a, op: "inbox.mark", args: ["paths": ["inbox/briefs/today.md", "inbox/briefs/today.md"]])))
        #expect(marked["marked"] == .integer(1))
        #expect(try await unread(a) == ["inbox/briefs/today.md": false, "inbox/reviews/draft.md": true])
        #expect(try await unread(b) == all, "another site's marks are its own")

        let shapes: [(JSONValue, BridgeErrorCode)] = [
            (["paths": "inbox/briefs/today.md"], .badRequest), (["paths": [1]], .badRequest), (.object([]), .badRequest),
            (["paths": .array(Array(repeating: "inbox/briefs/today.md", count: 201))], .tooLarge),
            (["paths": ["inbox/briefs/today.md"], "read": false], .unknownField),
        ]
        for (args, expected) in shapes {
            #expect(code(await bed.send(try await bed.connect(InMemoryBridge.promptugal), op: "inbox.mark", args: args)) == expected, "\(args)")
        }
    }

    /// `inbox.list` serves a site the messages of its own vaults' lanes and no other site's
    /// (another site's vault named is `not_found`); `inbox.mark`
    /// marks lane ids all or none, an id of another site's lane refused without marking anything.
    @Test func laneMessagesReachOnlyTheOwnerSiteAndMarkAllOrNone() async throws {
        let bed = try Bed()
        let a = try await bed.connect(InMemoryBridge.promptugal)
        let w = try await bed.connect(InMemoryBridge.webSummit)
        func ids(_ c: BridgeConnection, _ args: JSONValue = .object([])) async throws -> [String] {
            try #require(result(await bed.send(c, op: "inbox.list", args: args)))["messages"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        #expect(try await ids(a) == InMemoryLanes.notesIDs)
        #expect(try await ids(w) == [InMemoryLanes.summitID])
        #expect(try await ids(a, ["vault": "notes"]) == InMemoryLanes.notesIDs)
        let listed = try #require(result(await bed.send(a, op: "inbox.list", args: .object([]))))
        #expect(listed["messages"]?.arrayValue?.first == ["vault": "notes", "id": .string(InMemoryLanes.notesIDs[0]), "received_ms": 1_796_666_150_730,
                                                          "sender": "brief-bot", "title": "Daily brief", "kind": "sealed", "size": 300])
        #expect(listed["messages"]?.arrayValue?.last?["title"] == .null, "an opaque message has no title")
        // Another site's vault: refused as not_found, naming nothing of it (the daemon's own
        // answer is the vault ops': LaneDaemonTests).
        let asked = await bed.send(w, op: "inbox.list", args: ["vault": "notes"])
        #expect(code(asked) == .notFound)
        if case .failure(_, let f) = asked { #expect(f.message.contains("names no vault of this site") && !f.message.contains("brief")) }

        // A mark naming another site's message marks nothing, of either site.
        let mixed = await bed.send(a, op: "inbox.mark", args: ["ids": [.string(InMemoryLanes.notesIDs[0]), .string(InMemoryLanes.summitID)]])
        #expect(code(mixed) == .notFound)
        if case .failure(_, let f) = mixed { #expect(f.message.contains(InMemoryLanes.summitID)) }
        #expect(try await ids(a) == InMemoryLanes.notesIDs)
        #expect(try await ids(w) == [InMemoryLanes.summitID])
        // A bad path beside good ids marks no id.
        #expect(code(await bed.send(a, op: "inbox.mark", args: ["ids": [.string(InMemoryLanes.notesIDs[0])], "paths": ["inbox/missing.md"]])) == .notFound)
        #expect(try await ids(a) == InMemoryLanes.notesIDs)

        let marked = try #require(result(await bed.send(a, op: "inbox.mark", args: ["ids": [.string(InMemoryLanes.notesIDs[0])], "paths": ["inbox/briefs/today.md"]])))
        #expect(marked["marked"] == .integer(2))
        #expect(try await ids(a) == [InMemoryLanes.notesIDs[1]])

        let shapes: [(JSONValue, BridgeErrorCode)] = [
            (["ids": "x"], .badRequest), (["ids": [1]], .badRequest),
            (["ids": .array(Array(repeating: .string(InMemoryLanes.notesIDs[1]), count: 101))], .tooLarge),
            (["ids": [.string(String(repeating: "1", count: 65))]], .tooLarge),
        ]
        for (args, expected) in shapes {
            #expect(code(await bed.send(try await bed.connect(InMemoryBridge.promptugal), op: "inbox.mark", args: args)) == expected, "\(args)")
        }
        #expect(code(await bed.send(a, op: "inbox.list", args: ["vault": .string(String(repeating: "v", count: 129))])) == .tooLarge)
    }

    @Test func aWorkflowRunsAsTabsAndStepsWithNext() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.newsroom)
        let list = try #require(result(await bed.send(c, op: "workflow.list", args: .object([]))))
        #expect(list["workflows"]?.arrayValue?.first?["name"] == "morning")
        let run = try #require(result(await bed.send(c, op: "workflow.run", args: ["name": "morning", "restart": true])))
        #expect(run["tabs"]?.arrayValue?.count == 2)
        #expect(run["position"] == 0)
        let n1 = try #require(result(await bed.send(c, op: "workflow.next", args: ["name": "morning"])))
        #expect(n1["position"] == 1 && n1["done"] == false && n1["step"]?["query"] == "articles.unread")
        let n2 = try #require(result(await bed.send(c, op: "workflow.next", args: ["name": "morning"])))
        #expect(n2["position"] == 1 && n2["done"] == true)
        #expect(code(await bed.send(c, op: "workflow.show", args: ["name": "nightly"])) == .notFound)
    }
}
