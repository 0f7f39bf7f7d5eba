import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 34 item 6: the real `sitekeep vault clone` binary against a remote that answers 429
/// with `Retry-After: 1` to its first three requests (bad_vault_server.py of the remote tests,
/// a real process on loopback in front of the real vault server): it waits and succeeds, as the
/// sgit CLI does. (With a count of three attempts it failed.)
@Suite(.serialized) struct VaultRateLimitCommandTests {
    /// bad_vault_server.py on a free loopback port, forwarding to `upstream`; stopped by pid.
    final class RateLimiter {
        let pid: pid_t
        let url: String
        init(upstream: String) throws {
            let venv = try #require(ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER_VENV"],
                                    "SITEKEEP_TEST_VAULT_SERVER_VENV is not set: run the tests through tools/test")
            let python = venv + "/bin/python"
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("SiteKeepVaultRemotesTests/bad_vault_server.py").path
            let port = try PrivateVaultServer.freePort()
            url = "http://127.0.0.1:\(port)"
            let words = [python, script, String(port), upstream]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var p: pid_t = 0
            guard posix_spawn(&p, python, nil, nil, argv, environ) == 0 else { throw CrashRigFailure("cannot start \(script)") }
            pid = p
            for _ in 0..<100 {
                if ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-m", "1", url + "/401/x"]) == 0 { return }
                usleep(50_000)
            }
            kill(p, SIGKILL); var st: Int32 = 0; waitpid(p, &st, 0)
            throw CrashRigFailure("the rate limiting server did not start")
        }
        deinit { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
    }

    @Test func cloneWaitsForARateLimitingRemote() async throws {
        let url = try #require(VaultSyncCommandTests.server, "run through tools/test: it starts the real vault server")
        let token = try #require(VaultSyncCommandTests.token)
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let binary = try #require(BuiltProducts.sitekeep, "build the package first: .build/debug/sitekeep")
        let store = try CLIStore()
        _ = try await store.initialize()
        let id = "skrl" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyText = "rate limit phrase:\(id)"
        let a = store.dir.appendingPathComponent("a").path
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", keyText]) == 0)
        try Data("waited for\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        let env = "HOME='\(store.dir.path)'"
        #expect(VaultSyncCommandTests().sh("cd '\(a)' && \(env) '\(sgit)' commit -m one && \(env) '\(sgit)' push --base-url \(url) --token \(token)").0 == 0)

        let limiter = try RateLimiter(upstream: url)
        let keyFile = try store.file("vault.key", Array(keyText.utf8))
        let tokenFile = try store.file("token.txt", Array((token + "\n").utf8))
        let start = Date()
        let clone = ChildProcess.capture(binary, ["vault", "clone", limiter.url + "/rl-3-1-cli", "mine", "--key-file", keyFile, "--token-file", tokenFile,
                                          "--passphrase-file", store.passFile, "--home", store.home, "--keyring", "file", "--json"])
        #expect(clone.status == 0, "\(clone.err)")
        #expect(Date().timeIntervalSince(start) >= 1.0, "Retry-After was honoured")
        let cat = await store.run(["vault", "cat", "mine", "hello.txt", "--passphrase-file", store.passFile, "--json"])
        let b64 = try #require(try JSONParser.parse(cat.out)["dataBase64"]?.stringValue, "\(cat.err)")
        #expect(Data(base64Encoded: b64) == Data("waited for\n".utf8))
        withExtendedLifetime(limiter) {}
    }
}
