import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepHTTP
import SiteKeepVault
@testable import SiteKeepVaultRemotes
#if canImport(Glibc)
import Glibc
#endif

/// Issue 32: the vault remote against a hostile HTTP server (hostile_http_server.py, a real
/// process on loopback, stopped by pid). A redirect is never followed, so no credential reaches
/// the origin it points to; an endless answer is cut at its bound while it streams; plain http
/// goes to loopback only, as libcurl parses the URL, on every request.
@Suite("Hostile HTTP servers", .serialized)
struct HostileServerTests {
    /// The hostile server and its recorder (the listener its redirects point to).
    final class Hostile {
        let pid: pid_t
        let port: Int
        let recorderPort: Int
        let record: String
        let dir: Scratch

        init(tls: (cert: String, key: String)? = nil) throws {
            dir = try Scratch("hostile")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("hostile_http_server.py").path
            let ports = dir.path + "/ports"
            record = dir.path + "/record.jsonl"
            _ = FileManager.default.createFile(atPath: record, contents: nil)
            let words = ["/usr/bin/python3", script, ports, record] + (tls.map { [$0.cert, $0.key] } ?? [])
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var p: pid_t = 0
            guard posix_spawn(&p, words[0], nil, nil, argv, environ) == 0 else { throw SetupFailure(description: "could not start \(script)") }
            pid = p
            for _ in 0..<200 {
                if let text = try? String(contentsOfFile: ports, encoding: .utf8) {
                    let parts = text.split(separator: " ").compactMap { Int($0) }
                    if parts.count == 2 { port = parts[0]; recorderPort = parts[1]; return }
                }
                usleep(50_000)
            }
            kill(p, SIGKILL); var st: Int32 = 0; waitpid(p, &st, 0)
            throw SetupFailure(description: "the hostile server did not start")
        }
        deinit { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }

        var url: String { "http://127.0.0.1:\(port)" }
        /// Everything the recorder and the streaming modes wrote, one object a line.
        var recordText: String { (try? String(contentsOfFile: record, encoding: .utf8)) ?? "" }
        var entries: [[String: Any]] {
            recordText.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        /// Requests that reached the recorder (a followed redirect).
        var recorded: [[String: Any]] { entries.filter { $0["method"] != nil } }
        /// The streaming answers' ends: bytes sent before the client hung up, and whether the cap was reached.
        /// In the order the server saw them end (a stream's end is recorded when the client hangs up).
        func streamed(atLeast count: Int = 1, waiting seconds: Double = 30) -> [(sent: Int, completed: Bool, path: String)] {
            let end = Date().addingTimeInterval(seconds)
            while true {
                let out = entries.compactMap { e -> (sent: Int, completed: Bool, path: String)? in
                    guard let sent = e["sent"] as? Int else { return nil }
                    return (sent, (e["completed"] as? Bool) ?? false, (e["path"] as? String) ?? "")
                }
                if out.count >= count || Date() > end { return out }
                usleep(50_000)
            }
        }
    }

    static var fast: RetryPolicy {
        var p = RetryPolicy()
        p.budgetMs = 100
        p.noAnswerBudgetMs = 100
        p.backoffMs = [50]
        return p
    }

    /// A 307 to another origin, answered to a clone (the token) and to a push's writes (the
    /// token and the write key): nothing follows it, so the recorder behind it hears nothing;
    /// each fails naming the status and that the vault API has no redirects. (URLSession followed
    /// it with every header.)
    @Test func redirectIsNeverFollowedWithTheCredentials() throws {
        let server = try Hostile()
        let token = "tok-" + UUID().uuidString
        let id = VaultServer.freshVaultID(), k = try keys("hostile redirect phrase:\(id)")
        let writeKey = try #require(k.writeKeyHex())
        let remote = try SGSendRemote(baseURL: server.url + "/redirect", vaultID: id,
                                      credentials: TestCredentials(token: token, keys: k), retry: Self.fast)
        let dir = try Scratch("redirect")
        var reasons: [String] = []
        let clone = #expect(throws: VaultError.self) { try Vault.clone(from: remote, into: dir.path + "/c", keys: k, signer: try MemorySigner()) }
        let write = #expect(throws: VaultError.self) { try remote.write([StoredFile(fileID: "bare/data/obj-cas-imm-0123456789ab", bytes: [1, 2, 3])]) }
        let ref = #expect(throws: VaultError.self) { _ = try remote.writeIfMatch(fileID: "bare/refs/ref-pid-muw-0123456789ab", bytes: [1], expected: nil) }
        for e in [clone, write, ref] {
            guard case .remote(_, let reason, let transient, _)? = e else { Issue.record("not a remote error: \(String(describing: e))"); continue }
            reasons.append(reason)
            #expect(reason.contains("307") && reason.contains("no redirects"), "\(reason)")
            #expect(!transient, "a redirect is not retried: \(reason)")
            #expect(!reason.contains(token) && !reason.contains(writeKey))
        }
        #expect(reasons.count == 3)
        #expect(server.recorded.isEmpty, "a redirect was followed: \(server.recordText)")
        #expect(!server.recordText.contains(token) && !server.recordText.contains(writeKey), "a credential reached the other origin")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/c/.sg_vault"), "the failed clone left nothing")
    }

    /// An https remote that redirects to plain http (a TLS server with its own CA on loopback):
    /// refused the same way, nothing reaches the http listener. The same server without its CA
    /// is refused by certificate verification.
    @Test func httpsRemoteRedirectedToPlainHTTPIsRefused() throws {
        let tls = try Scratch("tls")
        let cert = tls.path + "/cert.pem", key = tls.path + "/key.pem"
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0, "openssl could not make a test certificate")
        let server = try Hostile(tls: (cert, key))
        let token = "tok-" + UUID().uuidString
        let id = VaultServer.freshVaultID(), k = try keys("hostile https phrase:\(id)")
        var remote = try SGSendRemote(baseURL: "https://127.0.0.1:\(server.port)/redirect", vaultID: id,
                                      credentials: TestCredentials(token: token, keys: k), retry: Self.fast)
        remote.caFile = cert
        let dir = try Scratch("https-redirect")
        let e = #expect(throws: VaultError.self) { try Vault.clone(from: remote, into: dir.path + "/c", keys: k, signer: try MemorySigner()) }
        if case .remote(_, let reason, _, _)? = e {
            #expect(reason.contains("307") && reason.contains("no redirects") && reason.contains("http://127.0.0.1:\(server.recorderPort)"), "\(reason)")
        } else { Issue.record("https to http: \(String(describing: e))") }
        #expect(server.recorded.isEmpty, "the redirect to plain http was followed: \(server.recordText)")
        #expect(!server.recordText.contains(token))

        remote.caFile = nil
        let untrusted = #expect(throws: VaultError.self) { try Vault.clone(from: remote, into: dir.path + "/d", keys: k, signer: try MemorySigner()) }
        if case .remote(_, let reason, _, _)? = untrusted {
            #expect(reason.lowercased().contains("certificate"), "\(reason)")
        } else { Issue.record("an unknown CA: \(String(describing: untrusted))") }
    }

    /// An endless chunked answer to a clone: the client stops reading at the list's 64 MiB bound
    /// (the batch reads' is 128 MiB) while the body streams, fails once without a retry and
    /// names the bound; the server saw the connection drop long before its 512 MiB cap. The same
    /// for a bound of 1 MiB on a bare request. (URLSession read it all into memory.)
    @Test func endlessAnswerIsCutAtItsBoundWhileItStreams() throws {
        let server = try Hostile()
        let id = VaultServer.freshVaultID(), k = try keys("hostile endless phrase:\(id)")
        let remote = try SGSendRemote(baseURL: server.url + "/endless", vaultID: id,
                                      credentials: TestCredentials(token: "tok", keys: k), retry: Self.fast)
        let dir = try Scratch("endless")
        let e = #expect(throws: VaultError.self) { try Vault.clone(from: remote, into: dir.path + "/c", keys: k, signer: try MemorySigner()) }
        guard case .remote(_, let reason, let transient, _)? = e else { Issue.record("endless: \(String(describing: e))"); return }
        #expect(reason.contains("larger than 64 MiB") || reason.contains("larger than 128 MiB"), "\(reason)")
        #expect(reason.contains("stopped reading"), "\(reason)")
        #expect(!transient)
        // The connection is closed when the client stops (a stopped transfer's handle is not
        // kept), so the server sees its end before any other request is made.
        let streams = server.streamed()
        #expect(streams.count == 1, "one request, no retry: \(streams)")
        for s in streams {
            #expect(!s.completed, "the client read the whole 512 MiB")
            // The bound, and what the loopback socket buffers hold besides.
            #expect(s.sent <= (128 << 20) + (16 << 20), "\(s.sent) bytes were sent before the client stopped")
        }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/c/.sg_vault"))

        do {
            _ = try HTTPClient.send(HTTPRequest(method: "GET", url: server.url + "/endless/small", maxResponseBytes: 1 << 20))
            Issue.record("an endless answer under a 1 MiB bound was accepted")
        } catch {
            #expect(error.kind == .tooLarge(limit: 1 << 20), "\(error)")
            #expect(error.description.contains("larger than 1048576 bytes"), "\(error)")
        }
        let both = server.streamed(atLeast: 2)
        let small = both.filter { $0.path == "/endless/small" }
        #expect(both.count == 2 && small.count == 1, "\(both)")
        for s in small { #expect(!s.completed && s.sent <= (1 << 20) + (16 << 20), "\(both)") }
    }

    /// Header lines that never end: stopped at the 64 KiB bound, with its own error.
    @Test func endlessHeadersAreCutAtTheirBound() throws {
        let server = try Hostile()
        do {
            _ = try HTTPClient.send(HTTPRequest(method: "GET", url: server.url + "/headers/x"))
            Issue.record("endless headers were accepted")
        } catch {
            #expect(error.kind == .headersTooLarge, "\(error)")
        }
        let streams = server.streamed()
        #expect(streams.count == 1 && streams.allSatisfy { !$0.completed && $0.sent <= 16 << 20 }, "\(streams)")
    }

    /// Plain http to anything but loopback is refused by the client itself on every request, as
    /// libcurl parses the URL (not only when a remote is configured), as are other schemes, user
    /// information and header lines with CR or LF; `http://localhost:1@host` is host's, not
    /// loopback's (the old prefix check took it for localhost).
    @Test func plainHTTPGoesToLoopbackOnlyOnEveryRequest() throws {
        for url in ["http://example.invalid/", "http://localhost:80@example.invalid/", "http://localhost.example.invalid/",
                    "HTTP://example.invalid/", "ftp://127.0.0.1/", "file:///etc/passwd", "gopher://127.0.0.1/", "https://user:pw@example.invalid/"] {
            do {
                _ = try HTTPClient.send(HTTPRequest(method: "GET", url: url, timeoutMs: 2_000))
                Issue.record("\(url) was fetched")
            } catch {
                #expect(error.kind == .refused, "\(url): \(error)")
            }
        }
        do {
            _ = try HTTPClient.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:9/", headers: [("X-Test", "a\r\nX-Injected: b")]))
            Issue.record("a header with CR LF was sent")
        } catch {
            #expect(error.kind == .refused, "\(error)")
        }
        let k = try keys("hostile scheme phrase:skscheme")
        for base in ["http://localhost:1@example.invalid", "http://example.invalid", "http://localhost.example.invalid"] {
            #expect(throws: VaultError.self, "\(base)") {
                try SGSendRemote(baseURL: base, vaultID: "skscheme", credentials: TestCredentials(token: "tok", keys: k))
            }
            #expect(throws: VaultError.self, "\(base)") { try StaticHTTPRemote(baseURL: base) }
        }
        #expect(throws: Never.self) { try SGSendRemote(baseURL: "http://[::1]:8080", vaultID: "skscheme", credentials: TestCredentials(token: "tok", keys: k)) }
    }
}
