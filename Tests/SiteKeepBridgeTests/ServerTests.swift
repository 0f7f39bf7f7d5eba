import Testing
import Foundation
import Glibc
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepBridge
import SiteKeepWiring
import SiteKeepSocket
import SiteKeepTestSupport

/// A server on a fresh temp socket; stopped by `stop()`.
struct LiveServer {
    let dir: String
    let path: String
    let server: BridgeServer
    let bed: Bed

    init() throws {
        dir = try tempDir()
        path = dir + "/run/bridge.sock"
        bed = try Bed()
        server = try BridgeServer(dispatcher: bed.dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
        server.start()
    }

    func client(_ site: BridgeSite? = nil) throws -> BridgeClient {
        let c = try BridgeClient.connect(path: path, timeout: .seconds(10))
        if let site { _ = try c.hello(origin: site.origins[0]) }
        return c
    }

    func stop() {
        server.shutdown()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// Calls `op` and scans the reply for key material.
func scanned(_ c: BridgeClient, _ op: String, args: JSONValue = .object([]), origin: String? = nil) throws -> BridgeMessage {
    let m = try c.send(BridgeRequest(id: "s", op: op, args: args, origin: origin))
    ReplyScan.check(m.bytes)
    return m
}

let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// Tests that block on sockets, pipes and child processes. Serialized as one group so that at most
/// one of them holds a thread of the (two-thread) cooperative pool at a time.
@Suite(.serialized) struct BlockingTests {}

extension BlockingTests {
@Suite struct ServerTests {
    @Test func servesOverThePrivateSocket() throws {
        let s = try LiveServer()
        defer { s.stop() }
        var st = stat()
        #expect(stat(s.dir + "/run", &st) == 0 && st.st_mode & 0o777 == 0o700)
        #expect(stat(s.path, &st) == 0 && st.st_mode & 0o777 == 0o600 && (st.st_mode & S_IFMT) == S_IFSOCK)
        let c = try s.client()
        let hello = try c.hello(origin: "https://promptugal.news")
        #expect(hello.version == 1 && hello.ops.contains("vault.load"))
        #expect(result(try scanned(c, "storage.set", args: ["key": "k", "value": "v"])) != nil)
        #expect(result(try scanned(c, "storage.get", args: ["key": "k"]))?["value"] == "v")
        #expect(code(try scanned(c, "key.sign", args: ["key": "team-ed", "data": "AA=="])) == .notAllowed)
    }

    @Test func malformedFramesGetErrorsAndTheConnectionGoesOn() throws {
        let s = try LiveServer()
        defer { s.stop() }
        let c = try s.client(InMemoryBridge.reader)
        try c.sendRaw(Array("this is not json".utf8))
        #expect(code(try c.nextReply()) == .badRequest)
        try c.sendRaw([0xff, 0xfe, 0x00, 0x7b])
        #expect(code(try c.nextReply()) == .badRequest)
        try c.sendRaw([UInt8](repeating: UInt8(ascii: "a"), count: (1 << 20) + 10))
        #expect(code(try c.nextReply()) == .tooLarge)
        try c.sendRaw(Array(#"{"v":1,"id":7,"op":"storage.keys"}"#.utf8) + [0x0a] + Array(#"{"v":9,"id":8,"op":"storage.keys"}"#.utf8))
        #expect(result(try c.nextReply()) != nil)
        #expect(code(try c.nextReply()) == .unsupportedVersion)
        try c.sendRaw(Array(#"{"v":1,"id":1,"op":"nope"}"#.utf8))
        #expect(code(try c.nextReply()) == .unknownOp)
        #expect(result(try scanned(c, "storage.keys")) != nil)
        // And the daemon serves new connections too.
        #expect(result(try scanned(try s.client(InMemoryBridge.reader), "storage.keys")) != nil)
    }

    @Test func originClaimsAreCheckedOnTheSocket() throws {
        let s = try LiveServer()
        defer { s.stop() }
        let c = try s.client(InMemoryBridge.promptugal)
        #expect(code(try scanned(c, "storage.keys", origin: "https://web-summit.sgit.ai")) == .forbiddenOrigin)
        #expect(result(try scanned(c, "storage.keys", origin: "https://promptugal.news")) != nil)
    }

    @Test func staleSocketIsReplacedAndOthersAreRefused() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/bridge.sock"
        // A stale socket: bound, then its owner went away without removing it.
        let fd = try UnixSocket.listen(path: path)
        close(fd)
        let bed = try Bed()
        let server = try BridgeServer(dispatcher: bed.dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
        server.start()
        #expect(throws: BridgeError.self) { try BridgeServer(dispatcher: bed.dispatcher, path: path, hosts: SiteHostAuthority.thisProgram()) }
        let c = try BridgeClient.connect(path: path)
        _ = try c.hello(origin: "https://reader.example")
        server.shutdown()
        #expect(!FileManager.default.fileExists(atPath: path), "shutdown removes the socket")
        _ = FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8))
        #expect(throws: BridgeError.self) { try BridgeServer(dispatcher: bed.dispatcher, path: path, hosts: SiteHostAuthority.thisProgram()) }
        #expect(FileManager.default.contents(atPath: path) == Data("keep me".utf8))
    }

    @Test func eventsFanOutToTheSameSiteOnly() throws {
        let s = try LiveServer()
        defer { s.stop() }
        let a1 = try s.client(InMemoryBridge.promptugal)
        let a2 = try s.client(InMemoryBridge.promptugal)
        let w = try s.client(InMemoryBridge.webSummit)
        let schedule: JSONValue = ["v": 1, "picks": [["id": "p9", "at": "2026-11-29T12:00:00Z"]]]
        #expect(result(try scanned(a1, "schedule.set", args: schedule)) == schedule)
        let e = try a2.nextEvent(timeout: .seconds(5))
        #expect(e.name == "schedule.changed" && e.data == schedule)
        #expect(throws: BridgeError.timeout) { try w.nextEvent(timeout: .milliseconds(300)) }
        #expect(throws: BridgeError.timeout) { try a1.nextEvent(timeout: .milliseconds(100)) }
    }

    @Test func manyConcurrentClients() async throws {
        let s = try LiveServer()
        defer { s.stop() }
        let failures = Atomic<Int>(0)
        let done = DispatchGroup()
        for t in 0..<8 {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                do {
                    let c = try s.client(t % 2 == 0 ? InMemoryBridge.reader : InMemoryBridge.newsroom)
                    for i in 0..<50 {
                        let r = try c.call("storage.set", args: ["key": .string("k\(t)-\(i)"), "value": "v"])
                        if r != .object([]) { failures.add(1, ordering: .relaxed) }
                    }
                } catch { failures.add(1, ordering: .relaxed) }
            }
        }
        await withCheckedContinuation { k in done.notify(queue: .global()) { k.resume() } }
        #expect(failures.load(ordering: .relaxed) == 0)
        let keys = try s.client(InMemoryBridge.reader).call("storage.keys")["keys"]?.arrayValue?.count
        #expect(keys == 200)
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func refusesAPeerOfAnotherUser() throws {
        let s = try LiveServer()
        defer { s.stop() }
        // Open the path so the other user reaches the socket; SO_PEERCRED must still refuse it.
        chmod(s.dir, 0o755)
        chmod(s.dir + "/run", 0o755)
        chmod(s.path, 0o666)
        let script = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        try:
            s.sendall(b'{"v":1,"id":1,"op":"hello","args":{"origin":"https://promptugal.news"}}\\n')
        except BrokenPipeError:
            pass  # the daemon may refuse before the hello is sent
        data = b''
        while not data.endswith(b'\\n'):
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        sys.stdout.write(data.decode())
        """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        p.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, s.path]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(text.contains("\"forbidden_peer\""), "got: \(text) \(errors)")
        // The daemon goes on serving its own user (whose client, like every client, connects
        // only through a private folder: close it again first).
        chmod(s.dir + "/run", 0o700)
        #expect(result(try scanned(try s.client(InMemoryBridge.reader), "storage.keys")) != nil)
    }
}

}

/// The test daemon in its own process.
struct DaemonProcess {
    static let binary = packageRoot + "/.build/debug/sitekeep-bridge-testd"
    let process = Process()
    let output = Pipe()

    init(executable: String, arguments: [String], environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = output
        try process.run()
        // Foundation keeps the parent's copy of the write end open; close it so reads see EOF.
        try? output.fileHandleForWriting.close()
    }

    /// Waits for the "ready" line.
    func waitReady() throws -> String {
        var line = Data()
        let h = output.fileHandleForReading
        while !line.contains(0x0a) {
            let d = h.availableData
            if d.isEmpty { break }
            line.append(d)
        }
        return String(decoding: line, as: UTF8.self)
    }
}

extension BlockingTests {
@Suite struct DaemonProcessTests {
    static var available: Bool { FileManager.default.isExecutableFile(atPath: DaemonProcess.binary) }

    @Test(.enabled(if: available))
    func sigtermFinishesInFlightRequestsAndFlushesTheAuditLog() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sock = dir + "/s/bridge.sock", auditPath = dir + "/audit.log"
        let d = try DaemonProcess(executable: DaemonProcess.binary, arguments: [],
                                  environment: ["SITEKEEP_SOCK": sock, "SITEKEEP_TEST_AUDIT": auditPath, "PATH": "/usr/bin:/bin"])
        #expect(try d.waitReady().hasPrefix("ready \(sock)"))
        let c = try BridgeClient.connect(path: sock)
        _ = try c.hello(origin: "https://web-summit.sgit.ai")
        // Pipeline requests without reading, then SIGTERM: every request already sent is answered.
        var frames: [UInt8] = []
        for i in 0..<100 {
            frames += JSONSerializer.bytes(BridgeRequest(id: .int(Int64(i)), op: "storage.set", args: ["key": .string("k\(i)"), "value": "v"]).json) + [0x0a]
        }
        for i in 100..<115 {
            frames += JSONSerializer.bytes(BridgeRequest(id: .int(Int64(i)), op: "key.sign", args: ["key": "team-ed", "data": "AAEC"]).json) + [0x0a]
        }
        frames.removeLast()
        try c.sendRaw(frames)
        usleep(20_000)
        kill(d.process.processIdentifier, SIGTERM)
        var ids: [Int64] = []
        var signatures = 0
        while true {
            guard let m = try? c.nextReply() else { break }
            ReplyScan.check(m.bytes)
            if case .success(let id, let r) = m {
                ids.append(id.intValue ?? -1)
                if r["signature"] != nil { signatures += 1 }
            }
        }
        #expect(ids == Array(0..<115))
        d.process.waitUntilExit()
        #expect(d.process.terminationStatus == 0)
        let lines = (try? String(contentsOfFile: auditPath, encoding: .utf8))?.split(separator: "\n") ?? []
        #expect(signatures == 15 && lines.count == 15, "one durable audit line per signature")
        #expect(!FileManager.default.fileExists(atPath: sock))
    }

    @Test(.enabled(if: available && FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func socketActivation() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sock = dir + "/activated.sock"
        let d = try DaemonProcess(executable: "/usr/bin/systemd-socket-activate", arguments: ["-l", sock, DaemonProcess.binary],
                                  environment: ["PATH": "/usr/bin:/bin"])
        defer { if d.process.isRunning { kill(d.process.processIdentifier, SIGKILL) } }
        // systemd-socket-activate execs the daemon only on the first connection.
        var client: BridgeClient?
        for _ in 0..<100 where client == nil {
            client = try? BridgeClient.connect(path: sock)
            if client == nil { usleep(20_000) }
        }
        let c = try #require(client)
        #expect(try c.hello(origin: "https://newsroom.sgit.ai").ops.contains("identity.get"))
        #expect(result(try scanned(c, "identity.get"))?["team"] == "team-nr")
        #expect(try d.waitReady().hasPrefix("ready activated"))
        kill(d.process.processIdentifier, SIGTERM)
        d.process.waitUntilExit()
        #expect(d.process.terminationStatus == 0)
    }
}

}

extension BlockingTests {
@Suite struct BenchmarkTests {
    /// The harness end to end, in the benchmark driver's process (`sitekeep-bench bridge-harness`:
    /// the harness lives in sitekeep-bench, never in a production target), so its threads and
    /// child processes never compete with the test runner's cooperative pool.
    static let bench = packageRoot + "/.build/debug/sitekeep-bench"
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: BenchmarkTests.bench) && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-agent")
                   && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-add")))
    func harnessDrivesBothSubjects() throws {
        let dir = try tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let d = try DaemonProcess(executable: Self.bench, arguments: ["bridge-harness", dir, "100"], environment: ["PATH": "/usr/bin:/bin"])
        let out = String(decoding: d.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        d.process.waitUntilExit()
        #expect(d.process.terminationStatus == 0)
        for subject in ["| bridge key.sign | ed25519 | 1 |", "| ssh-agent | ed25519 | 4 |", "| bridge key.sign | p256 | 4 |", "| ssh-agent | p256 | 1 |",
                        "| bridge key.sign, client blocks at once | p256 | 1 |", "client blocking at once:"] {
            #expect(out.contains(subject), "\(out)")
        }
        // Every bridge signature left a line in custody's audit log (the daemon's real path):
        // per round and bridge client (spinning, blocking) 100 + 100 measured and 20 + 80 warm-up,
        // 5 rounds, 1 check; the chain is intact.
        for algorithm in ["ed25519", "p256"] {
            let path = dir + "/store-\(algorithm)/audit.log"
            let lines = (try String(contentsOfFile: path, encoding: .utf8)).split(separator: "\n")
            #expect(lines.filter { $0.contains(#""op":"key.sign""#) && $0.contains(#""result":"ok""#) }.count == (100 + 100 + 20 + 80) * 2 * 5 + 1)
            let chain = try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: String(contentsOfFile: dir + "/store-\(algorithm)/store-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(chain.isIntact)
        }
    }
}
}

@Suite struct SocketFolderTests {
    /// A socket path in a folder open to others is refused; the folder's mode is never changed
    /// (a path like `/x.sock` once made `/` private).
    @Test func aSocketFolderOpenToOthersIsRefusedAndLeftAsItIs() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-sockdir-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: SocketError.self) { try UnixSocket.listen(path: dir + "/bridge.sock") }
        let mode = try #require(FileManager.default.attributesOfItem(atPath: dir)[.posixPermissions] as? Int)
        #expect(mode == 0o755)
        var st = stat()
        #expect(stat("/", &st) == 0 && st.st_mode & 0o005 == 0o005, "the root folder must stay open")
    }
}
