import Foundation
import Synchronization
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// `vault clone|push|pull` through the real vault server (tools/test starts it), with the keys
/// and the access token kept in custody, and the durable push queue.
@Suite(.serialized) struct VaultSyncCommandTests {
    static var server: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER"] }
    static var token: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"] }

    func sh(_ script: String) -> (Int32, String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", script]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try? p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Every regular file under `dir`, recursively.
    func files(_ dir: String) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir) else { return [] }
        return e.compactMap { $0 as? String }.map { dir + "/" + $0 }.filter {
            var isDir: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDir) && !isDir.boolValue
        }
    }

    func cat(_ store: CLIStore, _ path: String) async throws -> String {
        let r = await store.run(["vault", "cat", "mine", path, "--passphrase-file", store.passFile, "--json"])
        let b64 = try #require(try JSONParser.parse(r.out)["dataBase64"]?.stringValue, "\(r.err)")
        return String(decoding: Data(base64Encoded: b64) ?? Data(), as: UTF8.self)
    }

    @Test func cloneWritePushAndPullWithKeysAndTokenInCustody() async throws {
        let url = try #require(Self.server, "run through tools/test: it starts the real vault server")
        let token = try #require(Self.token)
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        let site = await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile])
        #expect(site.status == 0, "\(site.err)")
        let id = "skcli" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let passphrase = "cli sync phrase \(UUID().uuidString.prefix(6))"
        let keyText = "\(passphrase):\(id)"
        let a = store.dir.appendingPathComponent("a").path
        let env = "HOME='\(store.dir.path)'"
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", keyText]) == 0)
        try Data("from sgit\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        #expect(sh("cd '\(a)' && \(env) '\(sgit)' commit -m one && \(env) '\(sgit)' push --base-url \(url) --token \(token)").0 == 0)

        let keyFile = try store.file("vault.key", Array(keyText.utf8))
        let tokenFile = try store.file("token.txt", Array((token + "\n").utf8))
        let clone = await store.run(["vault", "clone", url, "mine", "--key-file", keyFile, "--token-file", tokenFile,
                                     "--site", "https://promptugal.news", "--passphrase-file", store.passFile, "--json"])
        #expect(clone.status == 0, "\(clone.err)")
        let path = try #require(try JSONParser.parse(clone.out)["path"]?.stringValue)
        #expect(try await cat(store, "hello.txt") == "from sgit\n")
        // Nothing secret in plain text: not in the clone, not in the SiteKeep home.
        for f in files(path) + files(store.home) {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: f))) ?? Data()
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains(token), "the access token is in \(f)")
            #expect(!text.contains(passphrase), "the vault passphrase is in \(f)")
            #expect(!f.hasSuffix(".pem"), "a private key file \(f)")
        }
        let remotes = await store.run(["vault", "remote", "list", "mine", "--json"])
        #expect(try JSONParser.parse(remotes.out).arrayValue?.first?["token"] == .bool(true))

        // Write and push; sgit pulls it.
        #expect(await store.run(["vault", "write", "mine", "notes/sk.md", "--passphrase-file", store.passFile], stdin: Array("# SiteKeep\n".utf8)).status == 0)
        let pushed = await store.run(["vault", "push", "mine", "--passphrase-file", store.passFile, "--json"])
        #expect(pushed.status == 0, "\(pushed.err)")
        #expect(sh("cd '\(a)' && \(env) '\(sgit)' pull --base-url \(url) --token \(token)").0 == 0)
        #expect(sh("cd '\(a)' && \(env) '\(sgit)' cat notes/sk.md").1 == "# SiteKeep\n")

        // A push that cannot reach its remote stays queued (shown by status), then goes.
        #expect(await store.run(["vault", "remote", "add", "mine", "http://127.0.0.1:9", "--name", "down", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["vault", "write", "mine", "notes/queued.md", "--passphrase-file", store.passFile], stdin: Array("later\n".utf8)).status == 0)
        let failed = await store.run(["vault", "push", "mine", "--remote", "down", "--passphrase-file", store.passFile])
        #expect(failed.status == 1 && failed.err.contains("a temporary failure: try again"), "\(failed.err)")
        let status = try JSONParser.parse(await store.run(["vault", "status", "mine", "--passphrase-file", store.passFile, "--json"]).out)
        #expect(status["pushQueue"]?.arrayValue?.first?["remote"] == .string("down"))
        #expect(status["pushQueue"]?.arrayValue?.first?["attempts"] == .int(1))
        #expect(await store.run(["vault", "push", "mine", "--passphrase-file", store.passFile]).status == 0)
        #expect(sh("cd '\(a)' && \(env) '\(sgit)' pull --base-url \(url) --token \(token) && \(env) '\(sgit)' cat notes/queued.md").1.hasSuffix("later\n"))

        // sgit pushes; SiteKeep pulls.
        try Data("sgit again\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        #expect(sh("cd '\(a)' && \(env) '\(sgit)' commit -m two && \(env) '\(sgit)' push --base-url \(url) --token \(token)").0 == 0)
        let pulled = await store.run(["vault", "pull", "mine", "--passphrase-file", store.passFile, "--json"])
        #expect(pulled.status == 0, "\(pulled.err)")
        #expect(try JSONParser.parse(pulled.out)["merge"] == .string("fast-forward"))
        #expect(try await cat(store, "hello.txt") == "sgit again\n")
    }

    /// tools/vault-server (issue 33): the real server started through the script on loopback,
    /// with its storage in a folder of the test's, a vault pushed to it by `sitekeep` with the
    /// token the script wrote, cloned back into a folder path, then the server stopped by its pid.
    @Test func theVaultServerScriptStartsAServerSitekeepPushesToAndStopsIt() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let script = DocsCommandTests.repository.appendingPathComponent("tools/vault-server").path
        let store = try CLIStore()
        _ = try await store.initialize()
        let dir = store.dir.appendingPathComponent("server").path
        let started = sh("'\(script)' start '\(dir)'")
        #expect(started.0 == 0, "\(started.1)")
        defer { _ = sh("'\(script)' stop '\(dir)'") }
        let url = try String(contentsOfFile: dir + "/url", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let token = try String(contentsOfFile: dir + "/token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url.hasPrefix("http://127.0.0.1:") && started.1.contains(url) && started.1.contains(dir + "/token"), "\(started.1)")
        #expect(!started.1.contains(token), "the token is in DIR/token only, never printed: \(started.1)")
        // The stop command it prints works from any folder (issue 47: it printed tools/vault-server, relative).
        #expect(started.1.contains("Stop it with: \(script) stop \(dir)"), "\(started.1)")
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/token")[.posixPermissions] as? Int
        #expect(mode == 0o600, "the token file is the owner's only")
        let pid = try #require(Int32(try String(contentsOfFile: dir + "/server.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(sh("'\(script)' status '\(dir)'").1.contains("running (pid \(pid)) at \(url)"))
        let again = sh("'\(script)' start '\(dir)'")
        #expect(again.0 != 0 && again.1.contains("already runs"), "\(again.1)")

        let id = "skvs" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyText = "vault server script phrase:\(id)"
        let a = store.dir.appendingPathComponent("a").path
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", keyText]) == 0)
        try Data("pushed by sitekeep\n".utf8).write(to: URL(fileURLWithPath: a + "/hello.txt"))
        #expect(sh("cd '\(a)' && HOME='\(store.dir.path)' '\(sgit)' commit -m one").0 == 0)
        let keyFile = try store.file("vault.key", Array(keyText.utf8))
        #expect(await store.run(["vault", "add", "mine", "--path", a, "--key-file", keyFile, "--passphrase-file", store.passFile]).status == 0)
        let remote = await store.run(["vault", "remote", "add", "mine", url, "--token-file", dir + "/token", "--passphrase-file", store.passFile])
        #expect(remote.status == 0, "\(remote.err)")
        // A commit of SiteKeep's own (sgit's commit stays on sgit's clone branch), then pushed.
        #expect(await store.run(["vault", "write", "mine", "notes/sk.md", "--passphrase-file", store.passFile], stdin: Array("# SiteKeep\n".utf8)).status == 0)
        let pushed = await store.run(["vault", "push", "mine", "--passphrase-file", store.passFile])
        #expect(pushed.status == 0, "\(pushed.err)")
        // Back from the server, into a folder named as git users name one.
        let copy = store.dir.appendingPathComponent("copy").path
        let clone = await store.run(["vault", "clone", url, copy, "--key-file", keyFile, "--token-file", dir + "/token", "--passphrase-file", store.passFile])
        #expect(clone.status == 0, "\(clone.err)")
        #expect(try await cat(store, "hello.txt") == "pushed by sitekeep\n")
        let r = await store.run(["vault", "cat", "copy", "notes/sk.md", "--passphrase-file", store.passFile, "--json"])
        let b64 = try #require(try JSONParser.parse(r.out)["dataBase64"]?.stringValue, "\(r.err)")
        #expect(Data(base64Encoded: b64) == Data("# SiteKeep\n".utf8))
        #expect(FileManager.default.fileExists(atPath: dir + "/data"), "the vaults are stored in the folder named")

        let stopped = sh("'\(script)' stop '\(dir)'")
        #expect(stopped.0 == 0 && stopped.1.contains("Stopped the vault server (pid \(pid))"), "\(stopped.1)")
        #expect(kill(pid, 0) != 0, "the server process is gone")
        let status = sh("'\(script)' status '\(dir)'")
        #expect(status.0 == 3 && status.1.contains("not running"), "\(status.1)")
    }

    /// Issue 45, defect 5 (T141): another user's `ps` reads every process's command line
    /// (/proc/PID/cmdline is world-readable; /proc/PID/environ is not). A watcher reads every
    /// command line on the machine, as such an outside process would, the whole time
    /// `tools/vault-server start` runs (the server's launch and every health-check probe),
    /// then the token the script wrote is looked for in what it saw. Red before the fix: the
    /// health check's `curl -H "x-sgraph-access-token: …"` showed it.
    @Test func theVaultServerScriptNeverPutsItsTokenOnACommandLine() async throws {
        let script = DocsCommandTests.repository.appendingPathComponent("tools/vault-server").path
        let store = try CLIStore()
        let dir = store.dir.appendingPathComponent("server").path
        let watcher = CommandLineWatcher()
        let started = sh("'\(script)' start '\(dir)'")
        let seen = watcher.stop()
        defer { _ = sh("'\(script)' stop '\(dir)'") }
        #expect(started.0 == 0, "\(started.1)")
        let token = try String(contentsOfFile: dir + "/token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.count >= 24)
        #expect(seen.contains { $0.contains("vault-server") && $0.contains(dir) }, "the watcher saw the script run (it saw \(seen.count) command lines)")
        let leaks = seen.filter { $0.contains(token) }
        #expect(leaks.isEmpty, "the access token was on these command lines: \(leaks.map { $0.replacingOccurrences(of: token, with: "<token>") })")
        // The server has it all the same (in its environment, which only its user reads).
        let pid = try #require(Int32(try String(contentsOfFile: dir + "/server.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        let environ = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))) ?? Data()
        #expect(String(decoding: environ, as: UTF8.self).split(separator: "\0").contains { $0 == "SGRAPH_SEND__ACCESS_TOKEN=" + token },
                "the server got the token in its environment")
        // A token given by the caller comes from a file; `--token T` is refused, naming the file form.
        defer { _ = sh("'\(script)' stop '\(store.dir.path)/other'") }
        let onArgv = sh("'\(script)' start '\(store.dir.path)/other' --token abcdef")
        #expect(onArgv.0 != 0 && onArgv.1.contains("--token-file"), "\(onArgv.1)")
    }
}

/// Reads every process's `/proc/PID/cmdline` (what any user of the machine can read) in a loop
/// on a thread of its own until ``stop()``, and answers every distinct command line it saw
/// (arguments joined by spaces).
final class CommandLineWatcher: Sendable {
    private let seen = Mutex<Set<String>>([])
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init() {
        Thread.detachNewThread { [self] in
            while !stopping.load(ordering: .relaxed) { scan() }
            finished.signal()
        }
    }

    private func scan() {
        guard let pids = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return }
        var lines: [String] = []
        for pid in pids where pid.allSatisfy(\.isNumber) {
            guard let fd = FileHandle(forReadingAtPath: "/proc/\(pid)/cmdline") else { continue }
            let bytes = (try? fd.readToEnd()) ?? Data()
            try? fd.close()
            if !bytes.isEmpty { lines.append(String(decoding: bytes.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)) }
        }
        seen.withLock { $0.formUnion(lines) }
    }

    /// Stops the watching thread (after one last pass) and answers what it saw.
    func stop() -> Set<String> {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
        return seen.withLock { $0 }
    }
}
