import Foundation
import Glibc
import Testing
import SiteKeepBridge
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepTestSupport

/// A real `sitekeep serve` (with its ssh-agent socket) on a file-keyring store made with the
/// CLI: two team keys (summit offered over SSH for SSHSIG namespace git only), the sites
/// Promptugal and Web Summit, optionally a vault made by the real sgit, and an askpass script
/// that writes one line per prompt (its id, op and key) to `prompts.txt` and approves, unless
/// ``deny(_:)`` made it deny.
final class ServedStore: @unchecked Sendable {
    let folder: TempFolder
    var home: String { folder.path + "/home" }
    var sock: String { folder.path + "/run/bridge.sock" }
    var promptsFile: String { folder.path + "/prompts.txt" }
    var agentSock: String { folder.path + "/run/agent.sock" }
    let passFile: String
    let sitekeep: String
    static let vaultText = "vault plaintext served by the daemon\n"
    private var daemon: Child?

    init(withVault: Bool) async throws {
        folder = try TempFolder("served")
        sitekeep = try #require(builtExecutable("sitekeep"), "build the sitekeep executable first (swift build)")
        passFile = try folder.file("pass.txt", Array("served store passphrase\n".utf8))
        func cli(_ args: [String]) async throws {
            let r = await runTool(args + ["--home", home, "--keyring", "file"])
            guard r.status == 0 else { throw SpawnError("sitekeep \(args.joined(separator: " ")): \(r.err)") }
        }
        try await cli(["init", "--passphrase-file", passFile, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"])
        for key in ["summit", "other"] { try await cli(["team", "add", key, "--passphrase-file", passFile]) }
        try await cli(["team", "ssh", "enable", "summit", "--namespace", "git", "--passphrase-file", passFile])
        try await cli(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", passFile, "--host", TestHost.runner])
        try await cli(["site", "add", "Web Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", passFile, "--host", TestHost.runner])
        if withVault {
            let sgit = try sgitPath()
            let keyText = "served vault pass:served01"
            let env = ["HOME": folder.path]
            let made = try Child.run(sgit, ["init", "notes", "--vault-key", keyText], in: folder.path, environment: env, cwd: folder.path)
            guard made.code == 0 else { throw SpawnError("sgit init: \(made.err)") }
            let vault = folder.path + "/notes"
            try FileManager.default.createDirectory(atPath: vault + "/docs", withIntermediateDirectories: true)
            try Data(Self.vaultText.utf8).write(to: URL(fileURLWithPath: vault + "/docs/a.txt"))
            let committed = try Child.run(sgit, ["commit", "-m", "served"], in: folder.path, environment: env, cwd: vault)
            guard committed.code == 0 else { throw SpawnError("sgit commit: \(committed.err)") }
            let keyFile = try folder.file("vault.key", Array((keyText + "\n").utf8))
            try await cli(["vault", "add", "notes", "--path", vault, "--site", "https://promptugal.news", "--key-file", keyFile, "--passphrase-file", passFile])
        }
        let askpass = try folder.file("askpass.sh", Array("""
        #!/bin/sh
        printf '%s %s %s\\n' "$SITEKEEP_PRESENCE_PROMPT" "$SITEKEEP_PRESENCE_OP" "$SITEKEEP_PRESENCE_KEY" >> '\(promptsFile)'
        [ -e '\(folder.path)/deny' ] && exit 1
        exit 0

        """.utf8))
        chmod(askpass, 0o700)
        let child = try Child(sitekeep, ["serve", "--home", home, "--keyring", "file", "--ssh-agent"],
                              stdoutPath: folder.path + "/serve.out", stderrPath: folder.path + "/serve.err",
                              environment: ["SITEKEEP_SOCK": sock, "SITEKEEP_AGENT_SOCK": agentSock, "SITEKEEP_ASKPASS": askpass, "HOME": folder.path])
        daemon = child
        let control = folder.path + "/run/control.sock"
        #expect(ChildProcess.waitForPath(control), "the daemon's control socket did not appear")
        guard FileManager.default.fileExists(atPath: control) else { throw SpawnError("sitekeep serve did not start: \(child.stderr)") }
        try unlock()
    }

    deinit { stop() }

    /// SIGTERM, then reap (SIGKILL if it does not stop).
    func stop() {
        guard let d = daemon else { return }
        daemon = nil
        kill(d.pid, SIGTERM)
        for _ in 0..<200 where !d.hasExited { usleep(25_000) }
        if !d.hasExited { d.kill9() }
    }

    /// `sitekeep unlock` / `lock` as real processes talking to the daemon's control socket.
    func control(_ args: [String]) throws {
        let r = try Child.run(sitekeep, args + ["--home", home, "--keyring", "file"], in: folder.path,
                              environment: ["SITEKEEP_SOCK": sock, "HOME": folder.path], timeout: 60)
        guard r.code == 0 else { throw SpawnError("sitekeep \(args.joined(separator: " ")): \(r.err)") }
    }
    func unlock() throws { try control(["unlock", "--passphrase-file", passFile]) }

    /// Makes the askpass program deny (true) or approve (false) from its next prompt on.
    func deny(_ on: Bool) {
        if on { _ = FileManager.default.createFile(atPath: folder.path + "/deny", contents: Data()) } else { try? FileManager.default.removeItem(atPath: folder.path + "/deny") }
    }
    func lock() throws { try control(["lock"]) }

    func connect(_ origin: String) throws -> BridgeClient {
        let c = try TestHost.connect(socket: sock, site: origin, timeout: .seconds(30))
        _ = try c.hello(origin: origin)
        return c
    }

    /// The prompts the askpass script saw: (prompt id, op, key).
    var prompts: [(id: String, op: String, key: String)] {
        let text = (try? String(contentsOfFile: promptsFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { line in
            let f = line.split(separator: " ").map(String.init)
            return (f.first ?? "", f.count > 1 ? f[1] : "", f.count > 2 ? f[2] : "")
        }
    }

    var auditEntries: [AuditEntry] { (try? AuditLog.entries(path: home + "/audit.log")) ?? [] }
}

/// The failure a bridge call answered with (nil when it succeeded).
func failure(_ body: () throws -> JSONValue) -> BridgeFailure? {
    do {
        _ = try body()
        return nil
    } catch {
        if case BridgeError.reply(let f) = error { return f }
        return BridgeFailure(.internal, "\(error)")
    }
}

/// The error code a bridge call failed with (nil when it succeeded).
func failureCode(_ body: () throws -> JSONValue) -> BridgeErrorCode? { failure(body)?.code }

/// Issue 12 against the real daemon: lock stops vault reads (defect 1), and a presence approval
/// serves one site, op and key only (defect 2).
@Suite(.serialized) struct LockAndPresenceDaemonTests {
    @Test func vaultLoadAnswersLockedAfterSitekeepLock() async throws {
        let s = try await ServedStore(withVault: true)
        defer { s.stop() }
        let page = try s.connect("https://promptugal.news")
        defer { page.close() }
        let args: JSONValue = ["vault": "notes", "path": "docs/a.txt"]
        let loaded = try page.call("vault.load", args: args)
        #expect(loaded["content"]?.stringValue.flatMap { try? Base64.decode($0) } == Array(ServedStore.vaultText.utf8))
        _ = try page.call("vault.list", args: ["vault": "notes"])

        try s.lock()
        // The vault was open, its tree and blob cached: none of it is served after the lock.
        for op in ["vault.load", "vault.list", "vault.status"] {
            let failure = failure { try page.call(op, args: op == "vault.load" ? args : ["vault": "notes"]) }
            #expect(failure?.code == .locked, "\(op) after lock: \(String(describing: failure))")
            #expect(failure?.message.contains("served by the daemon") == false)
        }
        // A new connection fares no better.
        let other = try s.connect("https://promptugal.news")
        defer { other.close() }
        #expect(failureCode { try other.call("vault.load", args: args) } == .locked)

        try s.unlock()
        #expect(try page.call("vault.load", args: args)["content"]?.stringValue.flatMap { try? Base64.decode($0) } == Array(ServedStore.vaultText.utf8))
        #expect(s.prompts.isEmpty, "vault ops need no presence")
    }

    @Test func anApprovalServesOneSiteOpAndKeyAndLockForgetsIt() async throws {
        let s = try await ServedStore(withVault: false)
        defer { s.stop() }
        let a = try s.connect("https://web-summit.sgit.ai")
        defer { a.close() }
        func sign(_ c: BridgeClient, _ key: String) throws -> JSONValue {
            try c.call("key.sign", args: ["key": .string(key), "data": .string(Base64.encode(Array("commit".utf8)))])
        }
        // sealed.open is not configured in the daemon: refused, and nobody is asked.
        #expect(failureCode { try a.call("sealed.open", args: ["envelope": "sitekeep.sealed.v1.team.AAAA"]) } == .notConfigured)
        #expect(failureCode { try sign(a, "no-such-key") } == .notFound)
        #expect(s.prompts.isEmpty, "an op that cannot run never prompts")

        for _ in 0..<4 { _ = try sign(a, "summit") }
        #expect(s.prompts.count == 1, "one prompt for a burst with the same site, op and key")
        let b = try s.connect("https://web-summit.sgit.ai")
        defer { b.close() }
        _ = try sign(b, "other")
        #expect(s.prompts.count == 2, "an approval for key summit does not sign with key other")
        _ = try sign(b, "summit")
        #expect(s.prompts.count == 2)

        try s.lock()
        #expect(failureCode { try sign(a, "summit") } == .locked)
        #expect(s.prompts.count == 2, "locked: no prompt")
        try s.unlock()
        _ = try sign(a, "summit")
        #expect(s.prompts.count == 3, "lock and unlock forgot the approval")

        let prompts = s.prompts
        try #require(prompts.count == 3)
        #expect(prompts.map(\.op) == ["key.sign", "key.sign", "key.sign"] && prompts.map(\.key) == ["summit", "other", "summit"])
        #expect(Set(prompts.map(\.id)).count == 3 && prompts.allSatisfy { $0.id.utf8.count == 16 })
        // Each signature's audit line names the prompt that approved it.
        s.stop()
        let signed = s.auditEntries.filter { $0.op == "key.sign" && $0.result == "ok" }
        #expect(signed.map(\.prompt) == [prompts[0].id, prompts[0].id, prompts[0].id, prompts[0].id, prompts[1].id, prompts[0].id, prompts[2].id])
        #expect(signed.map(\.key) == ["summit@v1", "summit@v1", "summit@v1", "summit@v1", "other@v1", "summit@v1", "summit@v1"])
    }
}
