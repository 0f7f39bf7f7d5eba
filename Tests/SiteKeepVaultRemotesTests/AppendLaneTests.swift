import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepVault
@testable import SiteKeepVaultRemotes
#if canImport(Glibc)
import Glibc
#endif

/// Issue 48, item 1: the vault server's append lanes through SiteKeep's lane client, against
/// the real server (sgraph-ai-app-send 0.34.0, started by tools/test on loopback).
@Suite("Append lanes on the real vault server", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct AppendLaneTests {
    struct Token: RemoteCredentials {
        let token: String?
        func accessToken() throws(VaultError) -> String? { token }
        func writeKeyHex() throws(VaultError) -> String? { nil }
    }

    /// A vault on the server (its manifest made by a first write with its write key) and its keys.
    static func serverVault(keyText: String = "lane test phrase \(UUID().uuidString):\(VaultServer.freshVaultID())") throws -> SgitKeys {
        let k = try keys(keyText)
        let remote = try SGSendRemote(baseURL: try VaultServer.url(), vaultID: k.vaultID,
                                      credentials: TestCredentials(token: try VaultServer.token(), keys: k))
        try remote.write([StoredFile(fileID: "bare/data/obj-cas-imm-\(String(repeating: "a", count: 12))", bytes: Array("x".utf8))])
        return k
    }

    static func owner(_ k: SgitKeys, token: String? = nil) throws -> AppendLane {
        try AppendLane(baseURL: try VaultServer.url(), vaultID: k.vaultID,
                       credentials: VaultLaneCredentials(keys: k, server: Token(token: token ?? (try VaultServer.token()))))
    }

    /// An agent: the append token and the server's access token, nothing of the vault.
    static func agent(_ vaultID: String) throws -> AppendLane {
        try AppendLane(baseURL: try VaultServer.url(), vaultID: vaultID,
                       credentials: VaultLaneCredentials(keys: nil, server: Token(token: try VaultServer.token())))
    }

    static func freshToken() -> String { Hex.encode(SecureRandom.bytes(count: 32)) }

    static func error(_ body: () throws -> Void) -> AppendLaneError? {
        do { try body(); return nil } catch let e as AppendLaneError { return e } catch {
            Issue.record("not a lane error: \(error)")
            return nil
        }
    }

    @Test func configureWriteListFetchMarkPurge() throws {
        let k = try Self.serverVault()
        let lane = try Self.owner(k), agent = try Self.agent(k.vaultID)
        let t1 = Self.freshToken(), t2 = Self.freshToken()
        try lane.configure(anchors: [AppendLane.anchor(of: t1), AppendLane.anchor(of: t2)])

        let sent = (0..<3).map { Array("message \($0)".utf8) }
        for p in sent { try agent.write(appendToken: t1, payload: p) }
        try agent.write(appendToken: t2, payload: Array("from t2".utf8))
        #expect(Self.error { try agent.write(appendToken: Self.freshToken(), payload: [1]) } == .appendTokenRefused)

        let all = try lane.listAll()
        #expect(all.count == 4)
        let mine = try lane.listAll(inbox: t1)
        #expect(mine.count == 3 && mine.allSatisfy { $0.inbox == t1 })
        let fetched = try lane.fetch(inbox: t1, ids: mine.map(\.id))
        #expect(fetched.missing.isEmpty)
        #expect(Set(fetched.messages.map(\.bytes)) == Set(sent))

        // Bounds checked before anything is sent.
        #expect(Self.error { _ = try lane.fetch(inbox: t1, ids: Array(repeating: mine[0].id, count: 101)) } == .tooManyIDs(101))
        #expect(Self.error { _ = try lane.fetch(inbox: t1, ids: ["../../etc/passwd"]) } == .invalidMessageID("../../etc/passwd"))
        #expect(Self.error { try agent.write(appendToken: t1, payload: [UInt8](repeating: 0, count: AppendLane.maxPayloadBytes + 1)) }
                == .payloadTooLarge(bytes: AppendLane.maxPayloadBytes + 1))
        #expect(Self.error { try agent.write(appendToken: "not-hex", payload: [1]) } == .invalidAppendToken)

        // Marked: off the pending list, once; a second mark finds it missing.
        let marked = try lane.markProcessed(inbox: t1, ids: [mine[0].id])
        #expect(marked.moved == [mine[0].id] && marked.missing.isEmpty)
        #expect(try lane.markProcessed(inbox: t1, ids: [mine[0].id]).missing == [mine[0].id])
        #expect(try lane.listAll(inbox: t1).map(\.id) == Array(mine.dropFirst()).map(\.id))

        // Purged: the processed one goes; pending ones stay until purged by id.
        #expect(try lane.purge(.processed, inbox: t1, ids: nil).purged == [mine[0].id])
        #expect(try lane.purge(.pending, inbox: t1, ids: [mine[1].id]).purged == [mine[1].id])
        #expect(try lane.listAll(inbox: t1).map(\.id) == [mine[2].id])

        // Revoked by re-configuring without its anchor: t1 can no longer write, t2 can.
        try lane.configure(anchors: [AppendLane.anchor(of: t2)])
        #expect(Self.error { try agent.write(appendToken: t1, payload: [1]) } == .appendTokenRefused)
        try agent.write(appendToken: t2, payload: [2])
    }

    @Test func credentialsAreCheckedByTheServer() throws {
        let k = try Self.serverVault(), other = try Self.serverVault()
        try Self.owner(k).configure(anchors: [])
        // Another vault's enumeration key lists nothing here; its write key configures nothing.
        let wrong = try AppendLane(baseURL: try VaultServer.url(), vaultID: k.vaultID,
                                   credentials: VaultLaneCredentials(keys: other, server: Token(token: try VaultServer.token())))
        #expect(Self.error { _ = try wrong.list() } == .enumKeyRefused)
        #expect(Self.error { try wrong.configure(anchors: []) } == .writeKeyRefused)
        // A lane never configured: its enumeration key is refused too.
        #expect(Self.error { _ = try Self.owner(other).list() } == .enumKeyRefused)
        // Without the server's access token (the self-hosted server guards its whole API).
        #expect(Self.error { _ = try Self.owner(k, token: "").list() } == .accessTokenRefused)
        // An agent has no vault key: the owner's verbs are refused before anything is sent.
        #expect(Self.error { _ = try Self.agent(k.vaultID).list() } == .readOnly)
        #expect(Self.error { _ = try AppendLane(baseURL: "http://example.com", vaultID: k.vaultID, credentials: VaultLaneCredentials(keys: nil, server: nil)) } != nil)
        #expect(Self.error { _ = try AppendLane(baseURL: try VaultServer.url(), vaultID: "Bad-ID", credentials: VaultLaneCredentials(keys: nil, server: nil)) } == .invalidVaultID("Bad-ID"))
    }

    /// An agent with the token and the lane key only: its sealed message crosses the server as
    /// ciphertext and opens with the vault's keys.
    @Test func aSealedMessageCrossesTheServerAsCiphertext() throws {
        let k = try Self.serverVault()
        let lane = try Self.owner(k)
        let t = Self.freshToken()
        try lane.configure(anchors: [AppendLane.anchor(of: t)])
        let e = try LaneEnvelope(title: "Review", from: "review-bot", body: "looks good", links: ["https://example.com/pr/1"])
        try Self.agent(k.vaultID).write(appendToken: t, payload: try e.sealed(to: try k.appendLanePublicKey()))
        let listed = try lane.listAll()
        let got = try lane.fetch(inbox: t, ids: listed.map(\.id)).messages
        #expect(got.count == 1)
        #expect(!String(decoding: got[0].bytes, as: UTF8.self).contains("looks good"))
        #expect(LaneContent.read(got[0].bytes, keys: k) == .sealed(e))
    }

    /// Flooding: one token fills its lane to the server's cap of 1,000 pending messages; the
    /// next write is refused as full (507), and marking one read makes room for one more.
    @Test func floodingStopsAtTheServersCap() throws {
        let k = try Self.serverVault()
        let lane = try Self.owner(k), agent = try Self.agent(k.vaultID)
        let t = Self.freshToken()
        try lane.configure(anchors: [AppendLane.anchor(of: t)])
        for i in 0..<AppendLane.maxPending { try agent.write(appendToken: t, payload: Array("\(i)".utf8)) }
        #expect(Self.error { try agent.write(appendToken: t, payload: [1]) } == .laneFull)
        let all = try lane.listAll(inbox: t)
        #expect(all.count == AppendLane.maxPending, "listed page by page")
        _ = try lane.markProcessed(inbox: t, ids: [all[0].id])
        try agent.write(appendToken: t, payload: [2])
    }
}

/// Issue 48, item 5: a hostile server's lane answers (hostile_lane_server.py, a real process on
/// loopback, stopped by pid). Each lie is refused as not the vault server's answer, and nothing
/// of it is returned.
@Suite("A hostile server's lane answers", .serialized)
struct HostileLaneTests {
    final class Server {
        let pid: pid_t
        let port: Int
        let dir: Scratch
        init() throws {
            dir = try Scratch("hostile-lane")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("hostile_lane_server.py").path
            let portFile = dir.path + "/port"
            let words = ["/usr/bin/python3", script, portFile]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var p: pid_t = 0
            guard posix_spawn(&p, words[0], nil, nil, argv, environ) == 0 else { throw SetupFailure(description: "could not start \(script)") }
            pid = p
            for _ in 0..<200 {
                if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let n = Int(text) { port = n; return }
                usleep(50_000)
            }
            kill(p, SIGKILL); var st: Int32 = 0; waitpid(p, &st, 0)
            throw SetupFailure(description: "the hostile lane server did not start")
        }
        deinit { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }

        func lane(_ vault: String) throws -> AppendLane {
            let k = try keys(String(repeating: "ab", count: 32) + ":" + vault)
            return try AppendLane(baseURL: "http://127.0.0.1:\(port)", vaultID: vault, credentials: VaultLaneCredentials(keys: k, server: nil))
        }
    }

    static let token = String(repeating: "ab", count: 32)
    static let ids = ["1796666150730_" + String(repeating: "a", count: 24) + ".enc", "1796666150731_" + String(repeating: "b", count: 24) + ".enc"]

    static func isMalformed(_ body: () throws -> Void) -> Bool {
        do { try body(); return false } catch {
            if case .malformedAnswer? = error as? AppendLaneError { return true }
            Issue.record("expected a malformed answer, got: \(error)")
            return false
        }
    }

    @Test func liesAreRefused() throws {
        let s = try Server()
        #expect(Self.isMalformed { _ = try s.lane("listmany1").list() })
        #expect(Self.isMalformed { _ = try s.lane("listpath1").list() })
        #expect(Self.isMalformed { _ = try s.lane("listorder1").list() })
        #expect(Self.isMalformed { _ = try s.lane("listhuge1").list() })
        #expect(Self.isMalformed { _ = try s.lane("fetchnot1").fetch(inbox: Self.token, ids: Self.ids) })
        #expect(Self.isMalformed { _ = try s.lane("fetchsize1").fetch(inbox: Self.token, ids: Self.ids) })
        #expect(Self.isMalformed { _ = try s.lane("marknot1").markProcessed(inbox: Self.token, ids: Self.ids) })
        #expect(Self.isMalformed { _ = try s.lane("garbage1").listAll() })
    }
}
