import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

struct CrashRigFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A private instance of the real vault server (SG/Send's app from tools/test's
/// `.venv-server`, disk storage) on its own loopback port, for a test that kills it: started and
/// stopped by pid, restarted on the same port over the same data folder.
final class PrivateVaultServer: @unchecked Sendable {
    // @unchecked: used from one test at a time (the suite is serialized).
    let dir: String
    let token: String
    let port: Int
    private let uvicorn: String
    private var pid: pid_t = 0
    var url: String { "http://127.0.0.1:\(port)" }

    init() throws {
        let venv = try #require(ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER_VENV"],
                                "SITEKEEP_TEST_VAULT_SERVER_VENV is not set: run the tests through tools/test")
        uvicorn = venv + "/bin/uvicorn"
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-private-server-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir + "/data", withIntermediateDirectories: true)
        token = "private-token-" + UUID().uuidString.prefix(12)
        port = try Self.freePort()
        try start()
    }

    deinit {
        kill9()
        try? FileManager.default.removeItem(atPath: dir)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound else { throw CrashRigFailure("no free loopback port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Starts the server (again) and waits until it answers a vault route.
    func start() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, dir + "/server.log", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Always the storage mode: with AWS credentials around the app would switch to S3.
        let env = ["SEND__STORAGE_MODE=disk", "SEND__DISK_PATH=\(dir)/data", "SGRAPH_SEND__ACCESS_TOKEN=\(token)",
                   "PATH=/usr/bin:/bin", "HOME=\(dir)"]
        let words = [uvicorn, "sgraph_ai_app_send__docker.app:create_app", "--factory", "--host", "127.0.0.1", "--port", String(port)]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        var child: pid_t = 0
        guard posix_spawn(&child, uvicorn, &actions, nil, argv, envp) == 0 else { throw CrashRigFailure("cannot start \(uvicorn)") }
        pid = child
        for _ in 0..<300 {
            if ChildProcess.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-m", "2", "-H", "x-sgraph-access-token: \(token)",
                                                  url + "/api/vault/list/healthcheck1"]) == 0 { return }
            usleep(200_000)
        }
        let log = (try? String(contentsOfFile: dir + "/server.log", encoding: .utf8)) ?? ""
        throw CrashRigFailure("the private vault server did not answer within 60 s: \(log.suffix(800))")
    }

    /// kill -9, reaped.
    func kill9() {
        guard pid > 0 else { return }
        kill(pid, SIGKILL)
        var st: Int32 = 0
        while waitpid(pid, &st, 0) < 0 && errno == EINTR {}
        pid = 0
    }
}

/// kill -9 during sync (issue 14's crash test): the `sitekeep` client killed at random points
/// of a push and of a pull, and the real vault server killed during a push and during a pull.
/// After each, the vault reads and verifies, every acknowledged write is committed and either
/// on the server or still in the push queue, and the next push or pull completes; sgit then
/// reads every byte and `sgit check fsck` passes.
@Suite(.serialized) struct VaultSyncCrashTests {
    static var binary: String? { BuiltProducts.sitekeep }

    /// A running `sitekeep` command (a real process), its output in a file.
    struct Child {
        let pid: pid_t
        let log: String
        static func spawn(_ path: String, _ args: [String], log: String) throws -> Child {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
            let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var pid: pid_t = 0
            guard posix_spawn(&pid, path, &actions, nil, argv, environ) == 0 else { throw CrashRigFailure("cannot run \(path)") }
            return Child(pid: pid, log: log)
        }
        /// Waits; the exit status, or 128 + signal.
        func wait() -> Int32 {
            var st: Int32 = 0
            while waitpid(pid, &st, 0) < 0 && errno == EINTR {}
            return st & 0x7f == 0 ? (st >> 8) & 0xff : 128 + (st & 0x7f)
        }
        /// Whether it has exited (without reaping it: its pid stays ours to kill).
        var hasExited: Bool {
            var info = siginfo_t()
            return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._sigchld.si_pid != 0
        }
        var output: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    }

    /// Random text of `count` bytes (hex, so sgit's output compares as text).
    static func payload(_ count: Int) -> String {
        var g = SystemRandomNumberGenerator()
        return String((0..<count / 16).map { _ in String(format: "%016llx", g.next() as UInt64) }.joined().prefix(count)) + "\n"
    }

    struct Rig {
        let store: CLIStore
        let server: PrivateVaultServer
        let sitekeep: String
        let sgit: String
        let a: String
        let root: String

        /// Whether the clone's push queue file names `head` (the push got past its enqueue).
        func queueNames(_ head: JSONValue?) -> Bool {
            guard case .string(let h)? = head,
                  let text = try? String(contentsOfFile: root + "/.sg_vault/local/sitekeep-push-queue.json", encoding: .utf8) else { return false }
            return text.contains(h)
        }

        func sgitRun(_ args: [String]) -> (status: Int32, out: String, err: String) {
            // sgit works on the clone in its current folder.
            ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", a, sgit] + args,
                                 environment: ["HOME": store.dir.path, "NO_COLOR": "1"])
        }
        func sgitPull() -> (status: Int32, out: String, err: String) {
            sgitRun(["pull", "--base-url", server.url, "--token", server.token])
        }

        func unlockArgs() -> [String] { ["--passphrase-file", store.passFile, "--home", store.home, "--keyring", "file"] }

        func start(_ args: [String], round: String) throws -> Child {
            try Child.spawn(sitekeep, args + unlockArgs(), log: store.dir.appendingPathComponent("\(round).log").path)
        }

        func status() async throws -> JSONValue {
            let r = await store.run(["vault", "status", "mine", "--passphrase-file", store.passFile, "--json"])
            #expect(r.status == 0, "vault status after the crash: \(r.err)")
            return try JSONParser.parse(r.out)
        }

        func cat(_ path: String) async throws -> String {
            let r = await store.run(["vault", "cat", "mine", path, "--passphrase-file", store.passFile, "--json"])
            let b64 = try #require(try JSONParser.parse(r.out)["dataBase64"]?.stringValue, "vault cat \(path): \(r.err)")
            return String(decoding: Data(base64Encoded: b64) ?? Data(), as: UTF8.self)
        }

        func verifyClean(_ round: String) async throws {
            let v = await store.run(["vault", "verify", "mine", "--passphrase-file", store.passFile, "--json"])
            let clean = (try? JSONParser.parse(v.out))?["clean"]
            #expect(v.status == 0 && clean == .bool(true), "\(round): vault verify: \(v.out) \(v.err)")
        }

        /// sgit's clone pulls and reads `path`, and fsck passes.
        func sgitSees(_ path: String, _ text: String, _ round: String) {
            let p = sgitPull()
            #expect(p.status == 0, "\(round): sgit pull: \(p.err)")
            let same = sgitRun(["cat", path]).out == text
            #expect(same, "\(round): sgit reads \(path)")
            let fsck = sgitRun(["check", "fsck"])
            #expect(fsck.status == 0 && fsck.out.contains("Vault OK"), "\(round): sgit check fsck: \(fsck.out) \(fsck.err)")
        }
    }

    func makeRig() async throws -> Rig {
        let sitekeep = try #require(Self.binary, "build the sitekeep executable first (swift build)")
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let server = try PrivateVaultServer()
        let store = try CLIStore()
        _ = try await store.initialize()
        let id = "skcrash" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyText = "crash phrase \(UUID().uuidString.prefix(6)):\(id)"
        let a = store.dir.appendingPathComponent("a").path
        let early = Rig(store: store, server: server, sitekeep: sitekeep, sgit: sgit, a: a, root: "")
        #expect(ChildProcess.run(sgit, ["init", a, "--vault-key", keyText]) == 0)
        try Data("base\n".utf8).write(to: URL(fileURLWithPath: a + "/base.txt"))
        #expect(early.sgitRun(["commit", "-m", "base"]).status == 0)
        #expect(early.sgitRun(["push", "--base-url", server.url, "--token", server.token]).status == 0)
        let keyFile = try store.file("vault.key", Array(keyText.utf8))
        let tokenFile = try store.file("token.txt", Array((server.token + "\n").utf8))
        let clone = await store.run(["vault", "clone", server.url, "mine", "--key-file", keyFile, "--token-file", tokenFile,
                                     "--passphrase-file", store.passFile, "--json"])
        #expect(clone.status == 0, "\(clone.err)")
        let root = try #require(try JSONParser.parse(clone.out)["path"]?.stringValue, "\(clone.out)")
        return Rig(store: store, server: server, sitekeep: sitekeep, sgit: sgit, a: a, root: root)
    }

    func write(_ rig: Rig, _ path: String, _ text: String) async {
        let w = await rig.store.run(["vault", "write", "mine", path, "--passphrase-file", rig.store.passFile], stdin: Array(text.utf8))
        #expect(w.status == 0, "vault write \(path): \(w.err)")
    }

    func queue(_ status: JSONValue) -> [JSONValue] { status["pushQueue"]?.arrayValue ?? [] }

    @Test("kill -9 of the client during push and pull, of the server during push and pull: consistent, then completes")
    func killNineDuringSync() async throws {
        let rig = try await makeRig()
        let size = 3 << 20
        var g = SystemRandomNumberGenerator()
        var tally: [String] = []

        // A full push as its own process, timed: the kills land anywhere within that span.
        let first = Self.payload(size)
        await write(rig, "crash/calibrate.txt", first)
        let t0 = Date()
        let calibrate = try rig.start(["vault", "push", "mine"], round: "calibrate")
        #expect(calibrate.wait() == 0, "the calibrating push failed: \(calibrate.output)")
        let span = max(0.2, Date().timeIntervalSince(t0))
        let calibrated = queue(try await rig.status())
        #expect(calibrated.isEmpty)
        rig.sgitSees("crash/calibrate.txt", first, "calibrate")

        // The client killed during a push.
        for round in 0..<4 {
            let name = "client-push-\(round)", path = "crash/\(name).txt", text = Self.payload(size)
            await write(rig, path, text)
            let head = try await rig.status()["head"]
            let child = try rig.start(["vault", "push", "mine"], round: name)
            // The kill lands at a random point after the push queued its head (before that the
            // command has not started pushing: nothing to check but the local commit).
            for _ in 0..<2000 where !rig.queueNames(head) && !child.hasExited { usleep(10_000) }
            let delay = Double.random(in: 0...span, using: &g)
            usleep(UInt32(delay * 1_000_000))
            kill(child.pid, SIGKILL)
            let exit = child.wait()
            let st = try await rig.status()
            #expect(st["head"] == head, "\(name) (killed after \(delay) s, exit \(exit)): the head is the acknowledged commit")
            let readBack = try await rig.cat(path) == text
            #expect(readBack, "\(name): the acknowledged write reads back")
            try await rig.verifyClean(name)
            let q = queue(st)
            tally.append("\(name) at \(String(format: "%.2f", delay)) s: " + (q.isEmpty ? "finished" : "queued"))
            if q.isEmpty {
                // Done before the kill: the server must hold it already.
                #expect(exit == 0 || exit == 128 + SIGKILL, "\(name): \(child.output)")
                rig.sgitSees(path, text, name + " (finished before the kill)")
            } else {
                #expect(q.first?["remote"] == .string("origin") && q.first?["head"] == head, "\(name): queued for origin at the head: \(q)")
            }
            let again = await rig.store.run(["vault", "push", "mine", "--passphrase-file", rig.store.passFile, "--json"])
            #expect(again.status == 0, "\(name): the next push completes: \(again.err)")
            let left = queue(try await rig.status())
            #expect(left.isEmpty, "\(name): nothing left queued")
            rig.sgitSees(path, text, name)
        }

        // The server killed during a push: the push fails, stays queued, and goes once it is back.
        for round in 0..<2 {
            let name = "server-push-\(round)", path = "crash/\(name).txt", text = Self.payload(size)
            await write(rig, path, text)
            let head = try await rig.status()["head"]
            let child = try rig.start(["vault", "push", "mine"], round: name)
            let delay = Double.random(in: 0.05...span, using: &g)
            usleep(UInt32(delay * 1_000_000))
            rig.server.kill9()
            let exit = child.wait()
            let st = try await rig.status()
            let readBack = try await rig.cat(path) == text
            #expect(st["head"] == head && readBack, "\(name) (server killed after \(delay) s)")
            try await rig.verifyClean(name)
            tally.append("\(name) at \(String(format: "%.2f", delay)) s: " + (exit == 0 ? "finished" : "failed, queued"))
            if exit != 0 {
                #expect(child.output.contains("a temporary failure: try again"), "\(name): a clear, retryable error: \(child.output)")
                let q = queue(st)
                #expect(q.first?["head"] == head && (q.first?["attempts"]?.intValue ?? 0) >= 1, "\(name): queued with the attempt counted: \(q)")
            }
            try rig.server.start()
            let again = await rig.store.run(["vault", "push", "mine", "--passphrase-file", rig.store.passFile, "--json"])
            #expect(again.status == 0, "\(name): the push completes once the server is back: \(again.err)")
            let left = queue(try await rig.status())
            #expect(left.isEmpty)
            rig.sgitSees(path, text, name)
        }

        // The server killed during a pull, then the client killed during a pull: the vault stays
        // at its last good head (or the new one, whole), and the next pull completes.
        for (round, killServer) in [(0, true), (1, true), (2, false), (3, false)] {
            let name = killServer ? "server-pull-\(round)" : "client-pull-\(round)", path = "crash/\(name).txt", text = Self.payload(size)
            try Data(text.utf8).write(to: URL(fileURLWithPath: rig.a + "/" + path))
            #expect(rig.sgitRun(["commit", "-m", name]).status == 0)
            let pushed = rig.sgitRun(["push", "--base-url", rig.server.url, "--token", rig.server.token])
            #expect(pushed.status == 0, "\(name): sgit push: \(pushed.err)")
            let before = try await rig.status()["head"]
            let child = try rig.start(["vault", "pull", "mine"], round: name)
            // A pull moves fewer bytes than a push (no second read of the objects): a shorter span.
            let delay = Double.random(in: 0.05...max(0.1, span * 0.6), using: &g)
            usleep(UInt32(delay * 1_000_000))
            if killServer { rig.server.kill9() } else { kill(child.pid, SIGKILL) }
            let exit = child.wait()
            let st = try await rig.status()
            try await rig.verifyClean(name)
            let earlier = try await rig.cat("crash/calibrate.txt") == first
            #expect(earlier, "\(name): the earlier files read")
            tally.append("\(name) at \(String(format: "%.2f", delay)) s: " + (st["head"] == before ? "interrupted" : "finished"))
            if st["head"] == before {
                #expect(exit != 0, "\(name): a pull that succeeded moved the head: \(child.output)")
                let missing = await rig.store.run(["vault", "cat", "mine", path, "--passphrase-file", rig.store.passFile])
                #expect(missing.status != 0, "\(name): nothing of the interrupted pull is visible")
            } else {
                let pulled = try await rig.cat(path) == text
                #expect(pulled, "\(name): the pulled head is whole")
            }
            if killServer {
                if exit != 0 { #expect(child.output.contains("retry") || child.output.contains("server"), "\(name): a clear error: \(child.output)") }
                try rig.server.start()
            }
            let again = await rig.store.run(["vault", "pull", "mine", "--passphrase-file", rig.store.passFile, "--json"])
            #expect(again.status == 0, "\(name): the next pull completes: \(again.err)")
            let brought = try await rig.cat(path) == text
            #expect(brought, "\(name): and brings the file")
            try await rig.verifyClean(name + " after the pull")
            // Nothing of the killed pull's temporary files is left once the next one is done.
            let leftovers = (try? FileManager.default.contentsOfDirectory(atPath: rig.root + "/.sg_vault/local/tmp")) ?? []
            #expect(leftovers.isEmpty, "\(name): left in local/tmp: \(leftovers.prefix(5)) (\(leftovers.count))")
        }
        print("ATTACK vault sync kill -9 (push span \(String(format: "%.2f", span)) s): " + tally.joined(separator: "; "))
        withExtendedLifetime(rig) {}
    }
}
