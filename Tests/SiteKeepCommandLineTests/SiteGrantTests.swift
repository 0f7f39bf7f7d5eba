import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
import SiteKeepBridgeProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Issue 33, point 5: a site the user added gets the ops the catalogue marks grantable only when
/// the user grants them (with approval, in the audit log), at once in a running daemon, and
/// loses them at once on revoke; `site list` and `ops` show the grants.
@Suite(.serialized) struct SiteGrantTests {
    /// A store with a team key and a user-added app-bound site, and a daemon serving it whose
    /// presence dialog approves only while the file `allow` exists (each prompt is written to
    /// `prompts`).
    final class Bed: PrivateDaemon, @unchecked Sendable {
        static let origin = "https://notes.example"

        init() async throws {
            let store = try CLIStore()
            _ = try await store.initialize()
            try super.init(store: store)
            #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["site", "add", "Notes", "--origin", Self.origin, "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
            #expect(await store.run(["site", "add", "Other", "--origin", "https://other.example", "--app-bound", "--passphrase-file", store.passFile, "--host", TestHost.runner]).status == 0)
        }

        /// The daemon, unlocked, its askpass approving only while `approve(true)` holds.
        func serve() throws {
            try startDaemon(onlyWhenAllowed: true)
            let unlocked = cli(["unlock", "--passphrase-file", store.passFile])
            #expect(unlocked.status == 0, "\(unlocked.err)")
        }

        /// A connection to the daemon's bridge socket bound to `origin`.
        func connect(_ origin: String = Bed.origin) throws -> (BridgeClient, [String]) {
            let c = try TestHost.connect(socket: run + "/bridge.sock", site: origin, timeout: .seconds(30))
            return (c, try c.hello(origin: origin).ops)
        }

        func code(_ body: () throws -> JSONValue) -> String {
            do { _ = try body(); return "ok" } catch let e as BridgeError {
                if case .reply(let failure) = e { return failure.code.rawValue }
                return "\(e)"
            } catch { return "\(error)" }
        }

        func audit() throws -> [JSONValue] {
            let r = cli(["log", "show", "--json", "--limit", "1000"])
            #expect(r.status == 0, "\(r.err)")
            return try JSONParser.parse(r.out).arrayValue ?? []
        }
    }

    @Test func aGrantOpensAnOpToItsSiteAloneAtOnceAndARevokeClosesIt() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        bed.approve(true)
        // A site the user added: the catalogue gives it no schedule and no signing.
        let (page, ops) = try bed.connect()
        defer { page.close() }
        #expect(!ops.contains("schedule.get") && ops.contains("storage.get"), "\(ops)")
        #expect(bed.code { try page.call("schedule.get") } == "not_allowed")
        #expect(bed.code { try page.call("key.sign", args: ["key": "summit", "data": "aGk="]) } == "not_allowed")
        #expect(bed.prompts.isEmpty, "an op that is not allowed never prompts")

        // The grant runs inside the daemon, asks the user (naming what is granted), and applies
        // to the open connection's next message.
        let granted = bed.cli(["site", "grant", Bed.origin, "schedule.get", "key.sign", "--json"])
        #expect(granted.status == 0, "\(granted.err)")
        #expect(try JSONParser.parse(granted.out)["grants"] == .array(["key.sign", "schedule.get"]))
        #expect(bed.prompts.count == 1 && bed.prompts[0].contains("site.grant") && bed.prompts[0].contains("schedule.get key.sign")
                && bed.prompts[0].contains("Notes"), "\(bed.prompts)")
        #expect(try page.call("schedule.get")["picks"] != nil)
        // The catalogue stays the ceiling: key.sign still asks for presence, every time it needs a proof.
        let signed = try page.call("key.sign", args: ["key": "summit", "data": .string(Base64Text.hello)])
        #expect(signed["signature"]?.stringValue?.isEmpty == false)
        #expect(bed.prompts.count == 2 && bed.prompts[1].contains("key.sign") && bed.prompts[1].contains("summit"), "\(bed.prompts)")
        let (fresh, freshOps) = try bed.connect()
        fresh.close()
        #expect(freshOps.contains("schedule.get") && freshOps.contains("key.sign"), "hello lists the granted ops: \(freshOps)")

        // Another site gets nothing from this grant.
        let (other, otherOps) = try bed.connect("https://other.example")
        defer { other.close() }
        #expect(!otherOps.contains("schedule.get") && !otherOps.contains("key.sign"))
        #expect(bed.code { try other.call("schedule.get") } == "not_allowed")

        // Shown in `site list` and `ops`.
        let list = bed.cli(["site", "list"])
        #expect(list.status == 0 && list.out.contains("GRANTED OPS") && list.out.contains("key.sign schedule.get"), "\(list.out)")
        let listed = try JSONParser.parse(bed.cli(["site", "list", "--json"]).out).arrayValue ?? []
        #expect(listed.first { $0["name"] == "Notes" }?["grants"] == .array(["key.sign", "schedule.get"]))
        #expect(listed.first { $0["name"] == "Other" }?["grants"] == .array([]))
        let catalogue = try JSONParser.parse(bed.cli(["ops", "--json"]).out)
        let schedule = try #require(catalogue["ops"]?.arrayValue?.first { $0["name"] == "schedule.get" })
        #expect(schedule["grantable"] == .bool(true))
        #expect(schedule["grantedTo"]?.arrayValue?.compactMap { $0["origin"]?.stringValue } == ["https://notes.example:443"])
        #expect(schedule["sites"]?.arrayValue?.contains("https://promptugal.news") == true)
        let table = bed.cli(["ops"])
        #expect(table.out.contains("GRANTED TO") && table.out.split(separator: "\n").contains { $0.hasPrefix("key.sign") && $0.contains("https://notes.example:443") }, "\(table.out)")

        // Revoke: no prompt, and the open connection's next message is refused.
        let revoked = bed.cli(["site", "revoke", Bed.origin, "schedule.get"])
        #expect(revoked.status == 0, "\(revoked.err)")
        #expect(bed.prompts.count == 2, "a revoke asks nothing")
        #expect(bed.code { try page.call("schedule.get") } == "not_allowed")
        #expect(try page.call("key.sign", args: ["key": "summit", "data": .string(Base64Text.hello)])["signature"] != nil, "the other grant stays")

        // Both are in the audit log, naming the site, the ops and (for the grant) the prompt.
        let entries = try bed.audit()
        let grant = try #require(entries.first { $0["op"] == "site.grant" })
        #expect(grant["result"] == "ok" && grant["prompt"]?.stringValue?.count == 16)
        #expect(grant["detail"]?.stringValue?.contains("granted schedule.get key.sign to https://notes.example:443") == true, "\(grant)")
        let revoke = try #require(entries.first { $0["op"] == "site.revoke" })
        #expect(revoke["detail"]?.stringValue?.contains("revoked schedule.get") == true, "\(revoke)")
        #expect(bed.cli(["log", "verify"]).status == 0)

        // A grant made by a process that bypasses the daemon (approved by the secret it gives)
        // reaches the daemon's open connection too: the registry is shared through sites.json.
        let bypass = bed.cli(["site", "grant", Bed.origin, "schedule.get", "--passphrase-file", bed.store.passFile], extra: ["SITEKEEP_NO_DAEMON": "1"])
        #expect(bypass.status == 0, "\(bypass.err)")
        #expect(bed.prompts.count == 2, "the secret given was the approval")
        #expect(try page.call("schedule.get")["picks"] != nil)
    }

    @Test func grantsWithoutApprovalOrBeyondTheCatalogueAreRefused() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        // The user denies: nothing is granted, the refusal is logged.
        bed.approve(false)
        let denied = bed.cli(["site", "grant", Bed.origin, "schedule.get", "--json"])
        #expect(denied.status == 1 && denied.err.contains("presence_denied"), "\(denied.err)")
        let sites = try JSONParser.parse(bed.cli(["site", "list", "--json"]).out).arrayValue ?? []
        #expect(sites.first { $0["name"] == "Notes" }?["grants"] == .array([]))
        let (page, _) = try bed.connect()
        defer { page.close() }
        #expect(bed.code { try page.call("schedule.get") } == "not_allowed")
        #expect(try bed.audit().contains { $0["op"] == "site.grant" && $0["result"] == "presence-refused" })

        bed.approve(true)
        let before = bed.prompts.count
        // Ops that can never be granted, unknown ops and unknown sites: refused before anyone is asked.
        let hello = bed.cli(["site", "grant", Bed.origin, "hello", "--json"])
        #expect(hello.status == 1 && hello.err.contains("not_grantable") && hello.err.contains("can never be granted"), "\(hello.err)")
        let event = bed.cli(["site", "grant", Bed.origin, "schedule.changed", "--json"])
        #expect(event.status == 1 && event.err.contains("not_grantable") && event.err.contains("is an event"), "\(event.err)")
        let typo = bed.cli(["site", "grant", Bed.origin, "schedule.gte"])
        #expect(typo.status == 1 && typo.err.contains("no op schedule.gte") && typo.err.contains("schedule.get") && typo.err.contains("sitekeep ops"), "\(typo.err)")
        let nobody = bed.cli(["site", "grant", "https://nobody.example", "schedule.get"])
        #expect(nobody.status == 1 && nobody.err.contains("no site has the origin https://nobody.example") && nobody.err.contains("site list"), "\(nobody.err)")
        let none = bed.cli(["site", "grant", Bed.origin])
        #expect(none.status == 64 && none.err.contains("OP"), "\(none.err)")
        let mixed = bed.cli(["site", "grant", Bed.origin, "schedule.get", "hello"])
        #expect(mixed.status == 1, "one refused op refuses the whole grant")
        #expect(bed.prompts.count == before, "nothing refused reached the prompt: \(bed.prompts)")
        let after = try JSONParser.parse(bed.cli(["site", "list", "--json"]).out).arrayValue ?? []
        #expect(after.first { $0["name"] == "Notes" }?["grants"] == .array([]))
        // A site that is not app-bound cannot use the bridge: a grant would do nothing.
        #expect(await bed.store.run(["site", "add", "Plain", "--origin", "https://plain.example"]).status == 0)
        let plain = bed.cli(["site", "grant", "https://plain.example", "schedule.get", "--json"])
        #expect(plain.status == 1 && plain.err.contains("not_app_bound") && plain.err.contains("--app-bound"), "\(plain.err)")
    }
}

enum Base64Text { static let hello = "aGVsbG8=" }
