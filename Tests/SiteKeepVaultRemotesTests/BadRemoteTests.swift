import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepHTTP
import SiteKeepJSON
import SiteKeepVault
@testable import SiteKeepVaultRemotes
#if canImport(Glibc)
import Glibc
#endif

/// A misbehaving server between SiteKeep and the real vault server (bad_vault_server.py, a
/// real process on loopback, stopped by pid): each failure is a clear error or a retry, nothing
/// is written to the vault, and nothing queued is lost.
@Suite("Bad remotes", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct BadRemoteTests {
    final class BadServer {
        let pid: pid_t
        let url: String
        init(upstream: String) throws {
            let python = VaultServer.packageRoot + "/.venv-server/bin/python"
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("bad_vault_server.py").path
            let port = 20_000 + Int(getpid() % 20_000) + Int.random(in: 0..<5_000)
            url = "http://127.0.0.1:\(port)"
            var p: pid_t = 0
            let words: [String] = [python, script, String(port), upstream]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            guard posix_spawn(&p, python, nil, nil, argv, environ) == 0 else { throw SetupFailure(description: "could not start \(script)") }
            pid = p
            for _ in 0..<100 {
                if (try? HTTPClient.send(HTTPRequest(method: "GET", url: url + "/401/x", timeoutMs: 500))) != nil { return }
                usleep(50_000)
            }
            throw SetupFailure(description: "the bad server did not start")
        }
        // SIGKILL: a child spawned from a dispatch thread inherits its blocked SIGTERM.
        deinit { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
    }

    /// Every file under the vault's `.sg_vault/bare` with its size: what "nothing written" compares.
    func snapshot(_ root: String) -> [String: Int] {
        var out: [String: Int] = [:]
        let base = root + "/.sg_vault/bare"
        for f in FileManager.default.enumerator(atPath: base)?.compactMap({ $0 as? String }) ?? [] {
            if let a = try? FileManager.default.attributesOfItem(atPath: base + "/" + f), a[.type] as? FileAttributeType == .typeRegular {
                out[f] = (a[.size] as? Int) ?? -1
            }
        }
        return out
    }

    @Test("garbage, truncated, id mismatch, unpinned signer, 401, 403, 500, 429 Retry-After")
    func badRemotes() throws {
        let upstream = try VaultServer.url(), token = try VaultServer.token()
        let bad = try BadServer(upstream: upstream)
        let dir = try Scratch("bad")
        let sgit = try Sgit(home: dir.path + "/home")
        let id = VaultServer.freshVaultID(), keyText = "bad remote phrase:\(id)"
        let k = try keys(keyText)
        try sgit.must(["init", "a", "--vault-key", keyText], in: dir.path)
        try dir.write("a/one.txt", "one\n")
        try sgit.must(["commit", "-m", "one"], in: dir.path + "/a")
        try sgit.must(["push", "--base-url", upstream, "--token", token], in: dir.path + "/a")
        func remote(_ base: String, retry: RetryPolicy = RetryPolicy()) throws -> SGSendRemote {
            try SGSendRemote(baseURL: base, vaultID: id, credentials: TestCredentials(token: token, keys: k), retry: retry)
        }
        let signer = try MemorySigner()
        let (mine, _) = try Vault.clone(from: try remote(upstream), into: dir.path + "/sk", keys: k, signer: signer)
        // Something new to pull: enough files that their blobs come in several batches.
        try dir.write("a/two.txt", "two\n")
        for i in 0..<250 { try dir.write("a/many/f\(i).txt", "file \(i)\n") }
        try sgit.must(["commit", "-m", "two"], in: dir.path + "/a")
        try sgit.must(["push", "--base-url", upstream, "--token", token], in: dir.path + "/a")

        var fast = RetryPolicy()
        fast.budgetMs = 100
        fast.noAnswerBudgetMs = 100
        fast.backoffMs = [50]
        let before = snapshot(mine.root), head = try mine.status().headCommit
        let tmp = mine.root + "/.sg_vault/local/tmp"
        for (mode, expectTransient) in [("garbage", true), ("truncated", true), ("mismatch", false), ("mismatch-big", false), ("401", false), ("500", true)] {
            let e = #expect(throws: VaultError.self, "pull through \(mode)") { try mine.pull(from: try remote(bad.url + "/" + mode, retry: fast), signer: signer) }
            switch e {
            case .remote(_, let reason, let transient, _)?:
                #expect(transient == expectTransient, "\(mode): \(reason)")
                #expect(!reason.contains(token), "\(mode): the token is in the message")
            case .idMismatch(let object, _)?: #expect(mode.hasPrefix("mismatch"), "\(object)")
            case .decryptionFailed?: #expect(mode == "garbage" || mode == "truncated")
            default: Issue.record("\(mode): unexpected \(String(describing: e))")
            }
            #expect(snapshot(mine.root) == before, "\(mode): nothing was written")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []).isEmpty, "\(mode): no temporary file is left")
            #expect(try mine.status().headCommit == head)
        }

        // 429 with Retry-After: 1 — waited for, then it works.
        let start = Date()
        let p = try mine.pull(from: try remote(bad.url + "/429"), signer: signer)
        #expect(Date().timeIntervalSince(start) >= 1.0, "Retry-After was honoured")
        #expect(p.merge?.kind == .fastForward)
        #expect(try mine.read(path: "two.txt") == Array("two\n".utf8))
        #expect(try mine.read(path: "many/f249.txt") == Array("file 249\n".utf8))

        // Pushes that fail stay queued; nothing queued is lost; the good remote takes them.
        _ = try mine.commit([(try vp("queued.txt"), .write(Array("queued\n".utf8)))], message: "queued", signer: signer)
        let queue = PushQueue(vaultRoot: mine.root)
        for mode in ["401", "403", "500", "truncated"] {
            try queue.enqueue(remote: mode, head: try #require(try mine.status().headCommit), nowMs: 0)
            let e = #expect(throws: VaultError.self) { try mine.push(to: try remote(bad.url + "/" + mode, retry: fast), signer: signer) }
            if case .remote(_, let reason, _, _)? = e {
                if mode == "401" { #expect(reason.contains("401") && reason.contains("access token")) }
                if mode == "403" { #expect(reason.contains("403") && reason.contains("write key")) }
            } else if mode != "truncated" { Issue.record("\(mode): \(String(describing: e))") }
        }
        #expect(try queue.entries().count == 4, "every failed push is still queued")
        _ = try mine.push(to: try remote(upstream), signer: signer)
        try sgit.must(["pull", "--base-url", upstream, "--token", token], in: dir.path + "/a")
        #expect(try sgit.must(["cat", "queued.txt"], in: dir.path + "/a").out == "queued\n")

        // A ref pointing at a commit signed by a key the vault's index does not list.
        let (other, _) = try Vault.clone(from: try remote(upstream), into: dir.path + "/rogue", keys: k, signer: try MemorySigner())
        let forged = try other.commit([(try vp("forged.txt"), .write(Array("forged\n".utf8)))], message: "forged", signer: try MemorySigner())
        let server = try remote(upstream)
        let stored = LocalObjectStore(vaultRoot: other.root)
        let files = try stored.list(prefix: "bare/data/") + (try stored.list(prefix: "bare/keys/"))
        try server.write(try stored.read(files).map { StoredFile(fileID: $0.key, bytes: $0.value) })
        let refID = "bare/refs/" + k.namedRefFileID
        let current = try server.read([refID])[refID]
        let newRef = try #require(try LocalObjectStore(vaultRoot: other.root).read(["bare/refs/" + otherRef(other)]).values.first)
        #expect(try server.writeIfMatch(fileID: refID, bytes: newRef, expected: current))
        _ = forged
        let snap = snapshot(mine.root), myHead = try mine.status().headCommit
        let e = #expect(throws: VaultError.self) { try mine.pull(from: try remote(upstream), signer: signer) }
        if case .unverifiedCommit(_, let trust, _, _)? = e, case .notInIndex = trust {} else { Issue.record("unpinned signer: \(String(describing: e))") }
        #expect(snapshot(mine.root) == snap, "nothing from the forged commit was written")
        #expect(try mine.status().headCommit == myHead)
        withExtendedLifetime(bad) {}
    }

    /// The ref file id of a vault's own clone branch.
    func otherRef(_ v: Vault) throws -> String {
        let json = try JSONParser.parse(try Data(contentsOf: URL(fileURLWithPath: v.root + "/.sg_vault/local/sitekeep.json")))
        return try #require(json["head_ref_id"]?.stringValue)
    }
}
