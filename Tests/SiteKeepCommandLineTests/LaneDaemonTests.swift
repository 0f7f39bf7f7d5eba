import Foundation
import Testing
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 48's daemon must-show: an agent process holding nothing but an append token sends
/// three messages to a vault's lane on the real vault server; the daemon's next lane check (at
/// the unlock) raises one notification on a real freedesktop Notifications service on a private
/// bus (titles and the sender's label, never a body), and no later check raises another; the
/// bridge's `inbox.list` serves the three to the site that owns the vault and to no other site,
/// and `inbox.mark` marks them on the server. A seen record rewritten by another process hides
/// nothing.
@Suite(.serialized) struct LaneDaemonTests {
    typealias Child = NotificationDeliveryTests.Child

    @Test func anAgentsThreeMessagesNotifyOnceAndReachOnlyTheOwnerSite() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon"), "dbus-daemon is missing: run tools/setup")
        #expect(ChildProcess.run("/usr/bin/python3", ["-c", "import dbusmock"]) == 0, "python3-dbusmock is missing: run tools/setup")
        let bed = try await WebVaultClientInteropTests.Bed()
        let sk = bed.sitekeep
        let pass = ["--passphrase-file", sk.store.passFile]
        let owner = "https://promptugal.news", other = "https://web-summit.sgit.ai"
        for (name, origin) in [("Promptugal", owner), ("Summit", other)] {
            let added = sk.run(["site", "add", name, "--origin", origin, "--app-bound"] + TestHost.arguments + pass)
            #expect(added.status == 0, "site add \(name): \(added.err)")
        }
        // The other site may ask about vaults (so its refusal below is the vault ops' own, not the catalogue's).
        let granted = sk.run(["site", "grant", other, "vault.status"] + pass)
        #expect(granted.status == 0, "site grant: \(granted.err)")
        // The other site has a vault of its own (so its inbox.list answers, and must name none of the owner's messages).
        let theirKey = try bed.webVault("v0.2.3", "summit")
        let theirClone = sk.clone(bed.url, "summit", keyFile: theirKey, tokenFile: bed.tokenFile, extra: WebVaultClientInteropTests.allowUnsigned + ["--site", other])
        #expect(theirClone.status == 0, "vault clone: \(theirClone.err)")
        let key = try bed.webVault("v0.2.3", "lanes")
        let clone = sk.clone(bed.url, "notes", keyFile: key, tokenFile: bed.tokenFile, extra: WebVaultClientInteropTests.allowUnsigned + ["--site", owner])
        #expect(clone.status == 0, "vault clone: \(clone.err)")
        let add = sk.run(["inbox", "token", "add", "notes", "--label", "brief-bot", "--json"] + pass)
        #expect(add.status == 0, "token add: \(add.err)")
        let tokenFile = try sk.store.file("brief.token", Array(add.out.utf8))

        // A private session bus with a real Notifications service on it (as NotificationDeliveryTests).
        let run = sk.store.dir.appendingPathComponent("r")
        let notifications = try NotificationBus(in: run, home: sk.store.dir.path)
        defer { notifications.stop() }
        let busEnv = notifications.env
        func logText() -> String { notifications.logText() }
        func calls() -> [NotificationDeliveryTests.NotifyCall] { NotificationDeliveryTests.calls(logText()) }

        // The daemon: unlocked at start (its first check finds nothing), syncing every 2 s.
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = busEnv + ["SITEKEEP_HOME=\(sk.store.home)", "SITEKEEP_SOCK=\(sock)", "NO_COLOR=1"]
        let daemon = try Child(sk.binary, ["serve", "--keyring", "file", "--unlock", "--sync-every", "2"] + pass, env: env,
                               log: run.appendingPathComponent("serve.log").path)
        defer { daemon.stop() }
        #expect(NotificationDeliveryTests.wait(10) { FileManager.default.fileExists(atPath: sock) }, "\(daemon.output)")
        #expect(NotificationDeliveryTests.wait(20) { FileManager.default.fileExists(atPath: sk.store.home + "/lanes-seen.json") },
                "the check at unlock wrote no seen record: \(daemon.output)")
        #expect(calls().isEmpty, "nothing was sent yet, nothing is notified")
        // The command line, as a user runs it beside the daemon.
        let ctl = { (args: [String]) in
            ChildProcess.capture(sk.binary, args + ["--home", sk.store.home, "--keyring", "file"],
                                 environment: ["HOME": sk.store.dir.path, "SITEKEEP_SOCK": sock, "NO_COLOR": "1"])
        }
        // Locked while the agent writes, so no round runs between its messages.
        #expect(ctl(["lock"]).status == 0)

        // The agent: its own process, another HOME, nothing but the token file (and the server's access token).
        let body = try sk.store.file("brief.md", Array("The body stays in the vault's lane.\n".utf8))
        for title in ["Daily brief", "Review <b>ready</b>", "Answer"] {
            let agent = ChildProcess.capture(sk.binary, ["inbox", "send", "--token-file", tokenFile, "--access-token-file", bed.tokenFile,
                                                         "--title", title, "--body-file", body],
                                             environment: ["HOME": "/nonexistent", "NO_COLOR": "1"])
            #expect(agent.status == 0, "inbox send: \(agent.err)")
        }

        // The next check (at the unlock) notifies once: the three titles and the label, no body.
        let unlocked = ctl(["unlock"] + pass)
        #expect(unlocked.status == 0, "unlock: \(unlocked.err)")
        #expect(NotificationDeliveryTests.wait(20) { !calls().isEmpty }, "no notification: \(daemon.output)")
        usleep(5_000_000)   // two more rounds of the 2 s sync, each with its lane check
        let shown = calls()
        #expect(shown.count == 1, "notified \(shown.count) times: \(shown.map(\.title)) \(daemon.output)")
        #expect(shown.first?.title == "SiteKeep: 3 new messages")
        let text = logText()
        #expect(text.contains("brief-bot: Daily brief") && text.contains("brief-bot: Answer"), "\(text)")
        #expect(text.contains("brief-bot: Review &lt;b&gt;ready&lt;/b&gt;"), "an agent's markup is escaped: \(text)")
        #expect(!text.contains("The body stays"), "a body never reaches a notification")
        let token = try #require(try JSONParser.parse(add.out)["token"]?.stringValue)
        #expect(!text.contains(token) && !((try? String(contentsOfFile: sk.store.home + "/lanes-seen.json", encoding: .utf8)) ?? "").contains(token),
                "no token in the notification or the seen record")

        // The bridge: the owner site's connection gets the three; the other site's gets none of them.
        let mine = try TestHost.connect(socket: sock, site: owner, timeout: .seconds(10))
        defer { mine.close() }
        _ = try mine.hello(origin: owner)
        let listed = try mine.call("inbox.list")
        let messages = listed["messages"]?.arrayValue ?? []
        #expect(messages.count == 3, "\(listed)")
        #expect(Set(messages.compactMap { $0["title"]?.stringValue }) == ["Daily brief", "Review <b>ready</b>", "Answer"])
        #expect(messages.allSatisfy { $0["sender"] == "brief-bot" && $0["kind"] == "sealed" && $0["vault"] == "notes" && $0["body"] == nil })
        #expect(!JSONSerializer.string(listed).contains(token), "no token in a reply")
        #expect(try mine.call("inbox.list", args: ["vault": "notes"])["messages"]?.arrayValue?.count == 3)

        let theirs = try TestHost.connect(socket: sock, site: other, timeout: .seconds(10))
        defer { theirs.close() }
        _ = try theirs.hello(origin: other)
        // Another site: its inbox.list names none of them; naming the owner's vault is refused as vault.status refuses it.
        let theirList = try theirs.call("inbox.list")
        #expect(theirList["messages"]?.arrayValue?.isEmpty == true, "\(theirList)")
        for op in ["inbox.list", "vault.status"] {
            #expect {
                _ = try theirs.call(op, args: ["vault": "notes"])
            } throws: { e in
                "\(e)".contains("not_found") && "\(e)".contains(BridgeFailure.noSuchVault)
            }
        }
        let ids = messages.compactMap { $0["id"]?.stringValue }
        #expect(throws: BridgeError.self) { try theirs.call("inbox.mark", args: ["ids": .array(ids.map { .string($0) })]) }

        // The owner marks two (on the server: the lane lists one), the other site marked nothing.
        let marked = try mine.call("inbox.mark", args: ["ids": .array(ids.prefix(2).map { .string($0) })])
        #expect(marked["marked"] == 2, "\(marked)")
        #expect(try mine.call("inbox.list")["messages"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [ids[2]])

        // A seen record rewritten by another process (claiming the unread message seen, under a
        // tag of its own) is set aside: the message is notified again, saying why; nothing is hidden.
        let seenPath = sk.store.home + "/lanes-seen.json"
        // (Once the daemon has recorded the marks: a check after the forgery has nothing to save.)
        #expect(NotificationDeliveryTests.wait(10) {
            let t = (try? String(contentsOfFile: seenPath, encoding: .utf8)) ?? ""
            return !t.contains(ids[0]) && t.contains(ids[2])
        }, "the seen record does not follow the marks")
        let forged = "{\"body\":{\"notes\":[\"\(ids[2])\"]},\"tag\":\"\(String(repeating: "0", count: 64))\"}"
        try Data(forged.utf8).write(to: URL(fileURLWithPath: seenPath))
        #expect(NotificationDeliveryTests.wait(20) { calls().count == 2 }, "\(daemon.output)")
        #expect(calls().last?.title == "SiteKeep: a new message" && logText().contains("changed outside SiteKeep"), "\(logText())")
        #expect(FileManager.default.fileExists(atPath: seenPath + ".rejected"))
        usleep(3_000_000)
        #expect(calls().count == 2, "notified again after the record was replaced: \(calls().map(\.title))")
    }
}
