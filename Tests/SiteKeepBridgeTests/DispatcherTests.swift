import Testing
import Foundation
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepBridge
import SiteKeepWiring
import SiteKeepTestSupport

@Suite struct CatalogueTests {
    @Test func bundledCatalogueHasTheDesignOps() throws {
        let c = try OpCatalogue.bundled()
        let expected = ["hello", "schedule.get", "schedule.set", "schedule.changed", "notify.plan", "vault.status",
                        "vault.load", "vault.save", "vault.list", "key.sign", "identity.get", "storage.get", "storage.set",
                        "storage.remove", "storage.keys", "storage.clear", "tabs.get", "tabs.set", "reading.get",
                        "reading.set", "sealed.open", "capture.save", "capture.open", "share",
                        "notify.opened", "workflow.list", "workflow.show", "workflow.run", "workflow.next", "inbox.list", "inbox.mark", "vault.changed"]
        #expect(Set(c.ops.map(\.name)) == Set(expected))
        #expect(c["key.sign"]?.presence == true)
        #expect(c["sealed.open"]?.presence == true)
        #expect(c["schedule.changed"]?.direction == .event)
        #expect(c["share"]?.unsupportedMessage == "unsupported on this platform")
        #expect(c["capture.open"]?.unsupportedMessage == "unsupported on this platform")
        #expect(c["key.sign"]?.sites == [.origin("https://web-summit.sgit.ai")])
        #expect(c["vault.load"]?.sites == [.origin("https://promptugal.news")])
        #expect(c["schedule.set"]?.sites == [.origin("https://promptugal.news"), .origin("https://web-summit.sgit.ai")])
        for op in ["storage.get", "tabs.set", "reading.get"] { #expect(c[op]?.sites == [.appBound]) }
    }

    @Test func opsDocumentMatchesTheGenerator() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let generated = try OpCatalogue.bundled().markdown()
        if ProcessInfo.processInfo.environment["SITEKEEP_REGENERATE_OPS"] == "1" {
            try generated.write(to: root.appendingPathComponent("docs/OPS.md"), atomically: true, encoding: .utf8)
        }
        let doc = try String(contentsOf: root.appendingPathComponent("docs/OPS.md"), encoding: .utf8)
        #expect(doc == generated, "docs/OPS.md is stale: regenerate it with OpCatalogue.markdown() (sitekeep ops --markdown)")
        for code in BridgeErrorCode.allCases { #expect(doc.contains("`\(code.rawValue)`")) }
    }

    static let minimalOp = #"{"name":"a.b","version":1,"direction":"request","summary":"s","sites":["*app-bound*"],"presence":false,"maxRequestBytes":100,"rateLimit":{"burst":1,"perSecond":1},"args":{ARGS},"result":{}"#

    static func catalogue(_ op: String, args: String = "") -> [UInt8] {
        Array(#"{"format":"sitekeep.ops.v1","protocolVersion":1,"ops":["#.utf8) + Array(op.replacingOccurrences(of: "ARGS", with: args).utf8) + Array("}]}".utf8)
    }

    @Test func loadsAMinimalCatalogue() throws {
        let c = try OpCatalogue.load(Self.catalogue(Self.minimalOp, args: #""k":{"type":"string","maxLength":4}"#))
        #expect(c["a.b"]?.args.fields.first?.name == "k")
    }

    @Test(arguments: [
        (#","extra":1"#, ""),                                                  // unknown op member
        ("", #""k":{"type":"string"}"#),                                         // unbounded string
        ("", #""k":{"type":"str","maxLength":1}"#),                              // unknown type
        ("", #""k":{"type":"string","maxLength":1,"colour":"red"}"#),           // unknown field member
        ("", #""k":{"type":"array","maxItems":2}"#),                             // untyped array
        ("", #""k":{"type":"integer","maxLength":2}"#),                          // limit on the wrong type
        ("", #""bad-name":{"type":"boolean"}"#),                                 // field name
        (#","grantable":"yes""#, ""),                                            // grantable not a boolean
    ])
    func refusesBadCatalogues(extra: String, args: String) {
        let op = Self.minimalOp.replacingOccurrences(of: #""result":{}"#, with: #""result":{}"# + extra)
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Self.catalogue(op, args: args)) }
    }

    /// Events and hello can never be granted: a catalogue saying otherwise is refused.
    @Test func eventsAndHelloAreNeverGrantable() throws {
        let event = #"{"name":"a.changed","version":1,"direction":"event","summary":"s","sites":["*app-bound*"],"grantable":true,"data":{}}"#
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Self.catalogue(event)) }
        let hello = Self.minimalOp.replacingOccurrences(of: #""name":"a.b""#, with: #""name":"hello""#)
            .replacingOccurrences(of: #""result":{}"#, with: #""result":{},"grantable":true"#)
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Self.catalogue(hello)) }
        let plain = try OpCatalogue.load(Self.catalogue(Self.minimalOp))
        #expect(plain["a.b"]?.grantable == false, "an op the catalogue does not mark is not grantable")
        let marked = try OpCatalogue.load(Self.catalogue(Self.minimalOp.replacingOccurrences(of: #""result":{}"#, with: #""result":{},"grantable":true"#)))
        #expect(marked["a.b"]?.grantable == true)
    }

    @Test func refusesUnknownTopLevelMembersAndWrongFormat() {
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Array(#"{"format":"sitekeep.ops.v1","protocolVersion":1,"ops":[],"x":1}"#.utf8)) }
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Array(#"{"format":"v0","protocolVersion":1,"ops":[]}"#.utf8)) }
        #expect(throws: BridgeError.self) { try OpCatalogue.load(Array("not json".utf8)) }
    }

    @Test func dispatcherRefusesAnOpWithoutHandler() throws {
        let c = try OpCatalogue.load(Self.catalogue(Self.minimalOp))
        #expect(throws: BridgeError.self) { try BridgeDispatcher(catalogue: c, sites: InMemoryBridge.resolver, modules: InMemoryBridge.modules()) }
    }
}

@Suite struct DispatcherTests {
    @Test func everyOpRoundTripsFromAnAllowedSite() async throws {
        let bed = try Bed()
        // Seed the vault so vault.load and vault.list find a file.
        let p = try await bed.connect(InMemoryBridge.promptugal)
        #expect(result(await bed.send(p, op: "vault.save", args: ["path": "notes/a.md", "content": "aGk="])) != nil)
        var covered = 0
        for op in bed.dispatcher.catalogue.ops where op.direction == .request {
            let site = try #require(allowedSite(op.name, bed.dispatcher), "\(op.name) allows no test site")
            let c = try await bed.connect(site)
            let reply = await bed.send(c, op: op.name, args: try workingArgs(op.name, bed: bed))
            if op.unsupportedMessage != nil {
                #expect(code(reply) == .unsupported, "\(op.name)")
            } else {
                let r = try #require(result(reply), "\(op.name) from \(site.name): \(reply)")
                #expect((try? op.result.validate(r, path: "result")) != nil)
            }
            covered += 1
        }
        #expect(covered == bed.dispatcher.catalogue.ops.filter { $0.direction == .request }.count)
    }

    @Test func helloListsTheSitesOps() async throws {
        let bed = try Bed()
        let c = BridgeConnection()
        let r = try #require(result(await bed.send(c, op: "hello", args: ["origin": "https://web-summit.sgit.ai"])))
        #expect(r["version"] == 1)
        let ops = r["ops"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(ops.contains("key.sign") && ops.contains("schedule.get") && ops.contains("storage.get"))
        #expect(!ops.contains("vault.load") && !ops.contains("schedule.changed"))
        #expect(c.site?.id == InMemoryBridge.webSummit.id)
    }

    @Test func everyOpIsRefusedFromASiteNotAllowed() async throws {
        let bed = try Bed()
        var refusals = 0
        for op in bed.dispatcher.catalogue.ops {
            for site in InMemoryBridge.sites where !(site.isAppBound && op.direction == .request && bed.dispatcher.isAllowed(op.name, site: site)) {
                if site.isAppBound {
                    let c = try await bed.connect(site)
                    let reply = await bed.send(c, op: op.name, args: op.args.sample())
                    #expect(code(reply) == .notAllowed, "\(op.name) from \(site.name): \(reply)")
                } else {
                    let c = BridgeConnection()
                    #expect(code(await bed.send(c, op: "hello", args: ["origin": .string(site.origins[0])])) == .forbiddenOrigin)
                    let expected: BridgeErrorCode = op.name == "hello" ? .forbiddenOrigin : .helloRequired
                    #expect(code(await bed.send(c, op: op.name, args: op.args.sample())) == expected)
                }
                refusals += 1
            }
        }
        #expect(refusals > 40)
    }

    @Test func refusesBadMessagesAndGoesOn() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.reader)
        let cases: [(String, BridgeErrorCode)] = [
            (#"{"v":1,"id":1,"op":"storage.nope","args":{}}"#, .unknownOp),
            (#"{"v":1,"id":1,"op":"storage.get","args":{"key":"k","extra":1}}"#, .unknownField),
            (#"{"v":1,"id":1,"op":"storage.get","args":{"key":"k"},"site":"x"}"#, .unknownField),
            (#"{"v":2,"id":1,"op":"storage.get","args":{"key":"k"}}"#, .unsupportedVersion),
            (#"{"v":1,"id":1,"op":"storage.get""#, .badRequest),
            (#"{"v":1,"id":1,"op":"storage.get","args":{"key":5}}"#, .badRequest),
            (#"{"v":1,"id":1,"op":"storage.get","args":{}}"#, .badRequest),
            (#"{"v":1,"id":[1],"op":"storage.get","args":{"key":"k"}}"#, .badRequest),
            (#"[1,2]"#, .badRequest),
            ("\u{0}\u{1}garbage", .badRequest),
            (#"{"v":1,"id":1,"op":"storage.set","args":{"key":"k","value":"\#(String(repeating: "a", count: 70_000))"}}"#, .tooLarge),
        ]
        for (frame, expected) in cases {
            let reply = await bed.sendFrame(c, Array(frame.utf8))
            #expect(code(reply) == expected, "\(frame.prefix(80)) → \(reply)")
            #expect(result(await bed.send(c, op: "storage.keys")) != nil, "the connection goes on serving")
        }
        // The id is echoed even on refusal.
        if case .failure(let id, _) = await bed.sendFrame(c, Array(#"{"v":1,"id":"abc","op":"nope"}"#.utf8)) { #expect(id == "abc") }
    }

    @Test func helloFirstAndOriginBinding() async throws {
        let bed = try Bed()
        let c = BridgeConnection()
        #expect(code(await bed.send(c, op: "storage.keys")) == .helloRequired)
        #expect(code(await bed.send(c, op: "hello", args: ["origin": "file:///etc/passwd"])) == .forbiddenOrigin)
        #expect(code(await bed.send(c, op: "hello", args: ["origin": "https://unknown.example"])) == .forbiddenOrigin)
        #expect(code(await bed.send(c, op: "hello", args: ["origin": "https://stranger.example"])) == .forbiddenOrigin)
        #expect(result(await bed.send(c, op: "hello", args: ["origin": "HTTPS://Promptugal.News."])) != nil)
        // Same site, any spelling: fine. Another site: refused, and the binding stays.
        #expect(result(await bed.send(c, op: "storage.keys", origin: "https://promptugal.news:443")) != nil)
        #expect(code(await bed.send(c, op: "storage.keys", origin: "https://newsroom.sgit.ai")) == .forbiddenOrigin)
        #expect(code(await bed.send(c, op: "hello", args: ["origin": "https://newsroom.sgit.ai"])) == .forbiddenOrigin)
        #expect(code(await bed.send(c, op: "storage.keys", origin: "https://promptugal.news.evil.example")) == .forbiddenOrigin)
        #expect(c.site?.id == InMemoryBridge.promptugal.id)
        #expect(result(await bed.send(c, op: "storage.keys")) != nil)
    }

    @Test func storageIsPerSite() async throws {
        let bed = try Bed()
        let a = try await bed.connect(InMemoryBridge.promptugal)
        let b = try await bed.connect(InMemoryBridge.newsroom)
        _ = await bed.send(a, op: "storage.set", args: ["key": "k", "value": "A"])
        #expect(result(await bed.send(a, op: "storage.get", args: ["key": "k"]))?["value"] == "A")
        #expect(result(await bed.send(b, op: "storage.get", args: ["key": "k"]))?["value"] == .null)
        #expect(result(await bed.send(b, op: "storage.keys"))?["keys"] == .array([]))
    }

    @Test func rateLimitIsPerConnection() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.reader)
        let burst = try #require(bed.dispatcher.catalogue["storage.clear"]?.rateLimit.burst)
        for _ in 0..<burst { #expect(result(await bed.send(c, op: "storage.clear")) != nil) }
        #expect(code(await bed.send(c, op: "storage.clear")) == .rateLimited)
        #expect(result(await bed.send(c, op: "storage.keys")) != nil, "other ops have their own bucket")
        let other = try await bed.connect(InMemoryBridge.reader)
        #expect(result(await bed.send(other, op: "storage.clear")) != nil, "another connection has its own bucket")
    }

    @Test func keySignNeedsFreshPresenceAndLogsFirst() async throws {
        let presence = InMemoryPresence(mode: .deny)
        let bed = try Bed(presence: presence)
        let c = try await bed.connect(InMemoryBridge.webSummit)
        let data = Array("sign me".utf8)
        let args: JSONValue = ["key": "team-ed", "data": .string(Base64.encode(data))]
        #expect(code(await bed.send(c, op: "key.sign", args: args)) == .presenceDenied)
        presence.setMode(.unanswered)
        #expect(code(await bed.send(c, op: "key.sign", args: args)) == .presenceRequired)
        #expect(bed.audit.entries.isEmpty)
        presence.setMode(.approve)
        let r = try #require(result(await bed.send(c, op: "key.sign", args: args)))
        let sig = try Base64.decode(try #require(r["signature"]?.stringValue))
        #expect(try TestKeys.ed25519().isValidSignature(sig, for: data))
        #expect(r["algorithm"] == "ed25519")
        let p = try #require(result(await bed.send(c, op: "key.sign", args: ["key": "team-p256", "data": .string(Base64.encode(data))])))
        #expect(try TestKeys.p256().isValidSignature(try Base64.decode(p["signature"]?.stringValue ?? ""), for: data))
        #expect(presence.prompts == 4, "another key asks again (issue 12)")
        _ = try #require(result(await bed.send(c, op: "key.sign", args: args)))
        #expect(presence.prompts == 4, "the same site, op and key reuse the 60 s window")
        #expect(bed.audit.entries.count == 3 && bed.audit.entries.allSatisfy { $0.ok && $0.site == InMemoryBridge.webSummit.id })
        #expect(code(await bed.send(c, op: "key.sign", args: ["key": "nope", "data": "AA=="])) == .notFound)
        #expect(presence.prompts == 4, "a key that does not exist is refused before any prompt")
        // An approval older than 60 s is not reused: the user is asked again.
        presence.backdate(site: InMemoryBridge.webSummit.id, ageNanos: 61_000_000_000)
        #expect(result(await bed.send(c, op: "key.sign", args: args)) != nil)
        #expect(presence.prompts == 5)
    }

    @Test func sealedOpenRoundTripsAndRefusesTampering() async throws {
        let bed = try Bed()
        let c = try await bed.connect(InMemoryBridge.newsroom)
        let envelope = try bed.sealed.seal(Array("for the team".utf8))
        let r = try #require(result(await bed.send(c, op: "sealed.open", args: ["envelope": .string(envelope)])))
        #expect(try Base64.decode(r["plaintext"]?.stringValue ?? "") == Array("for the team".utf8))
        var tampered = Array(envelope.utf8)
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(code(await bed.send(c, op: "sealed.open", args: ["envelope": .string(String(decoding: tampered, as: UTF8.self))])) == .badRequest)
        let other = envelope.replacingOccurrences(of: ".team-nr.", with: ".team-xx.")
        #expect(code(await bed.send(c, op: "sealed.open", args: ["envelope": .string(other)])) == .notFound)
    }

    @Test func unconfiguredServicesAnswerNotConfigured() async throws {
        let bed = try Bed(withVault: false, withSealed: false)
        let p = try await bed.connect(InMemoryBridge.promptugal)
        for op in ["vault.status", "vault.list", "vault.load", "vault.save", "capture.save", "sealed.open"] {
            let args = bed.dispatcher.catalogue[op]?.args.sample() ?? .object([])
            #expect(code(await bed.send(p, op: op, args: args)) == .notConfigured, "\(op)")
        }
    }

    @Test func vaultPathsAreChecked() async throws {
        let bed = try Bed()
        let p = try await bed.connect(InMemoryBridge.promptugal)
        for path in ["../x", "/etc/passwd", "a//b", "a/./b", "a\u{0}b", ""] {
            #expect(code(await bed.send(p, op: "vault.load", args: ["path": .string(path)])) == .badRequest, "\(path)")
        }
        #expect(code(await bed.send(p, op: "vault.load", args: ["path": "missing.md"])) == .notFound)
        let saved = try #require(result(await bed.send(p, op: "capture.save", args: ["title": "A Note!", "text": "body", "url": "https://x"])))
        let path = try #require(saved["path"]?.stringValue)
        #expect(path.hasPrefix("captures/") && path.hasSuffix(".md"))
        let loaded = try #require(result(await bed.send(p, op: "vault.load", args: ["path": .string(path)])))
        #expect(String(decoding: try Base64.decode(loaded["content"]?.stringValue ?? ""), as: UTF8.self).contains("body"))
    }

    @Test func eventsReachOtherConnectionsOfTheSameSiteOnly() async throws {
        let bed = try Bed()
        let inbox = InboxBox()
        let a1 = try await bed.connect(InMemoryBridge.promptugal) { inbox.add("a1", $0) }
        let a2 = try await bed.connect(InMemoryBridge.promptugal) { inbox.add("a2", $0) }
        let w = try await bed.connect(InMemoryBridge.webSummit) { inbox.add("w", $0) }
        defer { withExtendedLifetime((a2, w)) {} }
        let schedule: JSONValue = ["v": 1, "picks": [["id": "p1", "at": "2026-11-29T10:00:00Z"]]]
        #expect(result(await bed.send(a1, op: "schedule.set", args: schedule)) == schedule)
        let got = inbox.all
        #expect(got.map(\.0) == ["a2"])
        let event = try BridgeMessage.parse(try #require(got.first?.1))
        #expect(event == .event(name: "schedule.changed", data: schedule))

        // A save that commits is vault.changed to the site's other tabs; one that changes nothing is not.
        inbox.clear()
        let saved = try #require(result(await bed.send(a2, op: "vault.save", args: ["path": "notes/a.md", "content": .string(Base64.encode(Array("one".utf8)))])))
        #expect(inbox.all.map(\.0) == ["a1"])
        let changed = try BridgeMessage.parse(try #require(inbox.all.first?.1))
        #expect(changed == .event(name: "vault.changed", data: ["vault": "default", "head": saved["commit"]!, "merge": "saved", "fetched": 0, "conflicts": []]))
        inbox.clear()
        _ = try #require(result(await bed.send(a2, op: "vault.save", args: ["path": "notes/a.md", "content": .string(Base64.encode(Array("one".utf8)))])))
        #expect(inbox.all.isEmpty, "the same content again: no commit, no event")
    }

    @Test func probesFindNoLeak() async throws {
        let bed = try Bed()
        let results = await BridgeProbes.run(dispatcher: bed.dispatcher, sites: InMemoryBridge.sites)
        #expect(results.count > 300)
        for r in results where !r.passed { Issue.record("LEAK \(r.probe) \(r.site) \(r.op): \(r.detail)") }
        #expect(Set(results.map(\.probe)) == [BridgeProbes.foreignSite, BridgeProbes.originMismatch])
    }

    @Test func probesReportALoosenedAllowList() async throws {
        // A build whose catalogue opens key.sign to every app-bound site, audited against the
        // shipped policy: the probe must report LEAKs for the sites the policy excludes.
        var catalogue = try OpCatalogue.bundled()
        let i = try #require(catalogue.ops.firstIndex { $0.name == "key.sign" })
        catalogue.ops[i].sites = [.appBound]
        let broken = try Bed(catalogue: catalogue)
        let strict = try Bed()
        let results = await BridgeProbes.run(dispatcher: broken.dispatcher, sites: InMemoryBridge.sites, policy: strict.dispatcher)
        let leaks = results.filter { !$0.passed }
        #expect(Set(leaks.map(\.op)) == ["key.sign"])
        #expect(Set(leaks.map(\.site)) == ["Promptugal", "Newsroom", "Reader"])
    }

    @Test func repliesNeverCarryKeyMaterial() async throws {
        let bed = try Bed()
        let w = try await bed.connect(InMemoryBridge.webSummit)
        for key in ["team-ed", "team-p256"] {
            for data in [[UInt8](), TestKeys.ed25519Seed, Array(repeating: 0, count: 1000)] {
                _ = await bed.send(w, op: "key.sign", args: ["key": .string(key), "data": .string(Base64.encode(data))])
            }
        }
        _ = await bed.send(w, op: "sealed.open", args: ["envelope": .string(try bed.sealed.seal(TestKeys.p256Scalar.reversed()))])
        _ = await bed.send(w, op: "identity.get")
        // The scanner itself finds a planted key in each encoding.
        #expect(TestKeys.leaks(in: Array("x\(Hex.encode(TestKeys.p256Scalar))y".utf8)))
        #expect(TestKeys.leaks(in: Array(Base64.encode([1] + TestKeys.ed25519Seed, variant: .urlSafeNoPadding).utf8)))
        #expect(TestKeys.leaks(in: Array(Base64.encode([1, 2] + TestKeys.sealKeyBytes).utf8)))
        #expect(ReplyScan.scanned.load(ordering: .relaxed) > 0)
    }
}

final class InboxBox: Sendable {
    private let items = Mutex<[(String, [UInt8])]>([])
    func add(_ who: String, _ bytes: [UInt8]) { items.withLock { $0.append((who, bytes)) } }
    var all: [(String, [UInt8])] { items.withLock { $0 } }
    func clear() { items.withLock { $0 = [] } }
}

@Suite struct FuzzSeedTests {
    /// The FuzzBridge seeds: one file per op (hello then the op with sample args) plus malformed
    /// frames. `SITEKEEP_REGENERATE_SEEDS=1 swift test --filter FuzzSeedTests` rewrites them.
    static func seeds() throws -> [(String, [UInt8])] {
        let c = try OpCatalogue.bundled()
        var out: [(String, [UInt8])] = []
        for (i, op) in c.ops.enumerated() {
            let frame = JSONSerializer.bytes(BridgeRequest(id: .int(Int64(i)), op: op.name, args: op.args.sample()).json)
            out.append(("op-\(op.name)", [UInt8(i % 5)] + frame))
        }
        out.append(("claim-other-origin", [1] + Array(#"{"v":1,"id":1,"op":"storage.keys","origin":"https://web-summit.sgit.ai"}"#.utf8)))
        out.append(("hello-then-ops", [0] + Array("{\"v\":1,\"id\":1,\"op\":\"hello\",\"args\":{\"origin\":\"https://promptugal.news\"}}\n{\"v\":1,\"id\":2,\"op\":\"schedule.set\",\"args\":{\"v\":1,\"picks\":[{\"id\":\"a\",\"at\":\"b\"}]}}".utf8)))
        out.append(("malformed", [2] + Array("{\"v\":1,\"id\":1,\"op\":\n[1,2\n\"\\ud800\"\n{\"v\":1e400}".utf8)))
        return out
    }

    @Test func seedCorpusIsCommittedAndEverySeedGetsReplies() async throws {
        let dir = URL(fileURLWithPath: packageRoot).appendingPathComponent("Fixtures/fuzz-corpus/FuzzBridge")
        let seeds = try Self.seeds()
        if ProcessInfo.processInfo.environment["SITEKEEP_REGENERATE_SEEDS"] == "1" {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            for (name, bytes) in seeds { try Data(bytes).write(to: dir.appendingPathComponent(name)) }
        }
        for (name, bytes) in seeds {
            #expect(FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) == Data(bytes), "\(name)")
        }
        // The fuzz body, in-process: every frame gets one parseable reply.
        let bed = try Bed()
        for (_, bytes) in seeds {
            let c = BridgeConnection()
            for frame in bytes.dropFirst().split(separator: 0x0a) {
                let m = try BridgeMessage.parse(await bed.dispatcher.handle(Array(frame), connection: c))
                if case .event = m { Issue.record("event as reply") }
            }
        }
    }
}
