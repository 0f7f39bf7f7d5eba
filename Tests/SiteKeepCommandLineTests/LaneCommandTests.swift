import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 48, items 2 and 3: an agent's whole round trip through the real `sitekeep` and the
/// real vault server: the owner mints a token, the agent sends with nothing but it (no store),
/// the owner lists, reads and marks; a revoked token sends nothing; a lane record changed
/// outside SiteKeep is refused.
@Suite(.serialized) struct LaneCommandTests {
    @Test func anAgentsRoundTrip() async throws {
        let bed = try await WebVaultClientInteropTests.Bed()
        let sk = bed.sitekeep
        let key = try bed.webVault("v0.2.3", "lanes")
        let clone = sk.clone(bed.url, "notes", keyFile: key, tokenFile: bed.tokenFile, extra: WebVaultClientInteropTests.allowUnsigned)
        #expect(clone.status == 0, "vault clone: \(clone.err)")
        let pass = ["--passphrase-file", sk.store.passFile]

        // The owner mints a token (printed once, as JSON here) and the lane is configured with it.
        let add = sk.run(["inbox", "token", "add", "notes", "--label", "brief-bot", "--json"] + pass)
        #expect(add.status == 0, "token add: \(add.err)")
        let grant = try JSONParser.parse(add.out)
        #expect(grant["token"]?.stringValue?.count == 64 && grant["laneKey"]?.stringValue?.count == 64 && grant["server"]?.stringValue == bed.url)
        let tokenFile = try sk.store.file("brief.token", Array(add.out.utf8))
        let stored = try String(contentsOfFile: sk.store.home + "/append-lanes.json", encoding: .utf8)
        #expect(!stored.contains(try #require(grant["token"]?.stringValue)), "only the anchor is kept")

        // The agent: another folder, no store, the token file and the server's access token.
        let body = try sk.store.file("brief.md", Array("Three things today.\n".utf8))
        let agent = ChildProcess.capture(sk.binary, ["inbox", "send", "--token-file", tokenFile, "--access-token-file", bed.tokenFile,
                                                     "--title", "Daily brief", "--from", "brief-bot", "--body-file", body, "--json"],
                                         environment: ["HOME": "/nonexistent", "NO_COLOR": "1"])
        #expect(agent.status == 0, "inbox send: \(agent.err)")

        // The owner reads it: sealed, from the token's label, titled; then marks it.
        let list = sk.run(["inbox", "lane", "list", "notes", "--json"] + pass)
        #expect(list.status == 0, "lane list: \(list.err)")
        let rows = try JSONParser.parse(list.out).arrayValue ?? []
        #expect(rows.count == 1)
        #expect(rows.first?["sender"]?.stringValue == "brief-bot" && rows.first?["kind"]?.stringValue == "sealed" && rows.first?["title"]?.stringValue == "Daily brief")
        let id = try #require(rows.first?["id"]?.stringValue)
        let show = sk.run(["inbox", "lane", "show", "notes", id] + pass)
        #expect(show.status == 0 && show.out.contains("Three things today."), "lane show: \(show.out) \(show.err)")
        #expect(sk.run(["inbox", "lane", "mark", "notes", "all"] + pass).status == 0)
        #expect(try JSONParser.parse(sk.run(["inbox", "lane", "list", "notes", "--json"] + pass).out).arrayValue?.isEmpty == true)

        // Revoked: the agent's next send is refused, naming what to do.
        #expect(sk.run(["inbox", "token", "revoke", "notes", "--label", "brief-bot"] + pass).status == 0)
        let again = ChildProcess.capture(sk.binary, ["inbox", "send", "--token-file", tokenFile, "--access-token-file", bed.tokenFile, "--title", "x", "--body-file", body],
                                         environment: ["HOME": "/nonexistent", "NO_COLOR": "1"])
        #expect(again.status != 0 && again.err.contains("refused the append token"), "\(again.err)")

        // A lane record changed outside SiteKeep (an anchor of someone else's added) is refused.
        let path = sk.store.home + "/append-lanes.json"
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var record = try #require(doc["body"] as? [String: Any])
        record["notes"] = [["label": "x", "anchor": String(repeating: "0", count: 64), "created": 1]]
        doc["body"] = record
        try JSONSerialization.data(withJSONObject: doc).write(to: URL(fileURLWithPath: path))
        let open = sk.run(["inbox", "lane", "open", "notes"] + pass)
        #expect(open.status != 0 && open.err.contains("changed outside SiteKeep"), "\(open.err)")
    }
}
