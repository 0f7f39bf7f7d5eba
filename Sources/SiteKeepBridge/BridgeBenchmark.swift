import Glibc
import Foundation
import Synchronization
public import SiteKeepJSON
public import SiteKeepCustody
import SiteKeepCrypto

/// `key.sign` over the daemon's socket against `ssh-agent` signing over its socket, with the same
/// algorithm, driven by the same client harness (one timing loop; only the transport differs).
///
/// The bridge side runs the real path: `BridgeServer`, NDJSON framing, the dispatcher with every
/// check, a 60 s presence window (one approval, then reuse) and a ``GroupSyncAuditLog`` whose line
/// is written before each signature is returned. Only `key.sign`'s rate limit is raised (the
/// catalogue's 5/s per connection would otherwise be what is measured). The ssh-agent side runs
/// `ssh-agent -D -a`, `ssh-keygen`, `ssh-add`, then SSH2_AGENTC_SIGN_REQUEST frames.
public enum BridgeBenchmark {
    /// One measured series.
    public struct Row: Sendable, Equatable {
        /// "bridge key.sign" or "ssh-agent".
        public var subject: String
        public var algorithm: SigningAlgorithm
        public var connections: Int
        public var requests: Int
        public var perSecond: Double
        public var p50Micros: Double
        public var p99Micros: Double
    }

    /// All rows and the ratios the targets name.
    public struct Report: Sendable {
        public var rows: [Row]

        /// bridge ÷ ssh-agent throughput for `algorithm` at `connections`.
        public func ratio(_ algorithm: SigningAlgorithm, connections: Int) -> Double? {
            guard let b = rows.first(where: { $0.subject == "bridge key.sign" && $0.algorithm == algorithm && $0.connections == connections }),
                  let s = rows.first(where: { $0.subject == "ssh-agent" && $0.algorithm == algorithm && $0.connections == connections }),
                  s.perSecond > 0 else { return nil }
            return b.perSecond / s.perSecond
        }

        /// A Markdown table for BENCHMARKS.md.
        public var markdown: String {
            var md = "| subject | algorithm | connections | requests | req/s | p50 µs | p99 µs |\n|---|---|---|---|---|---|---|\n"
            for r in rows {
                md += "| \(r.subject) | \(r.algorithm.rawValue) | \(r.connections) | \(r.requests) | \(Int(r.perSecond)) | "
                md += "\(String(format: "%.0f", r.p50Micros)) | \(String(format: "%.0f", r.p99Micros)) |\n"
            }
            for a in Set(rows.map(\.algorithm)).sorted(by: { $0.rawValue < $1.rawValue }) {
                for c in Set(rows.map(\.connections)).sorted() {
                    if let x = ratio(a, connections: c) { md += "\nbridge ÷ ssh-agent, \(a.rawValue), \(c) connection(s): \(String(format: "%.1f", x))×" }
                }
            }
            return md + "\n"
        }
    }

    /// Runs both subjects for each algorithm: `requests` signs sequentially on one connection,
    /// then `requests` spread over `connections` connections.
    /// - Parameter workDir: an empty private folder for sockets, keys and the audit log.
    public static func run(algorithms: [SigningAlgorithm] = [.ed25519, .p256], requests: Int = 4000,
                           connections: Int = 4, workDir: String) throws -> Report {
        var rows: [Row] = []
        for algorithm in algorithms {
            rows += try bridgeRows(algorithm, requests: requests, connections: connections, workDir: workDir)
            rows += try agentRows(algorithm, requests: requests, connections: connections, workDir: workDir)
        }
        return Report(rows: rows)
    }

    // MARK: The shared harness

    /// Runs `perConnection` (one `sign` closure per connection) `requests` times in total and
    /// measures each call.
    static func measure(subject: String, algorithm: SigningAlgorithm, connections: Int, requests: Int,
                        makeSigner: @escaping @Sendable () throws -> (@Sendable () throws -> Void)) throws -> Row {
        let signers = try (0..<connections).map { _ in try makeSigner() }
        for s in signers { for _ in 0..<20 { try s() } }   // warm-up
        let latencies = Mutex<[UInt64]>([])
        let failures = Atomic<Int>(0)
        let group = DispatchGroup()
        let each = requests / connections
        let start = DispatchTime.now().uptimeNanoseconds
        for s in signers {
            group.enter()
            Thread.detachNewThread {
                var mine: [UInt64] = []
                mine.reserveCapacity(each)
                for _ in 0..<each {
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    do { try s() } catch { failures.add(1, ordering: .relaxed) }
                    mine.append(DispatchTime.now().uptimeNanoseconds - t0)
                }
                latencies.withLock { $0 += mine }
                group.leave()
            }
        }
        group.wait()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard failures.load(ordering: .relaxed) == 0 else { throw BridgeError.protocolViolation("\(subject): some signs failed") }
        let sorted = latencies.withLock { $0 }.sorted()
        func pct(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000 }
        return Row(subject: subject, algorithm: algorithm, connections: connections, requests: sorted.count,
                   perSecond: Double(sorted.count) / seconds, p50Micros: pct(0.5), p99Micros: pct(0.99))
    }

    // MARK: The bridge

    static func bridgeRows(_ algorithm: SigningAlgorithm, requests: Int, connections: Int, workDir: String) throws -> [Row] {
        let key: SigningKeyHandle
        do {
            key = switch algorithm {
            case .ed25519: SigningKeyHandle(ed25519: try Ed25519.PrivateKey())
            case .p256: SigningKeyHandle(p256: try P256.Signing.PrivateKey())
            }
        } catch { throw BridgeError.protocolViolation("key generation failed: \(error)") }
        let audit = try GroupSyncAuditLog(path: "\(workDir)/audit-\(algorithm.rawValue).log")
        var catalogue = try OpCatalogue.bundled()
        if let i = catalogue.ops.firstIndex(where: { $0.name == "key.sign" }) {
            catalogue.ops[i].rateLimit = RateLimit(burst: 1_000_000, perSecond: 1_000_000)
        }
        let services = InMemoryBridge.services(signing: HandleSigningService(keys: ["bench": key], audit: audit))
        let dispatcher = try BridgeDispatcher(catalogue: catalogue, services: services)
        let path = "\(workDir)/bridge-\(algorithm.rawValue).sock"
        let server = try BridgeServer(dispatcher: dispatcher, path: path)
        server.start()
        defer {
            server.shutdown()
            audit.close()
        }
        let data = Array(repeating: UInt8(0x5a), count: 32)
        let args: JSONValue = ["key": "bench", "data": .string(Base64.encode(data, variant: .standard))]
        // Sanity: the signature verifies.
        let probe = try BridgeClient.connect(path: path)
        _ = try probe.hello(origin: InMemoryBridge.webSummit.origins[0])
        let sig = try Base64.decode(try probe.call("key.sign", args: args)["signature"]?.stringValue ?? "", variant: .standard)
        guard key.isValidSignature(sig, for: data) else { throw BridgeError.protocolViolation("bridge signature does not verify") }
        probe.close()
        let makeSigner: @Sendable () throws -> (@Sendable () throws -> Void) = {
            let c = try BridgeClient.connect(path: path)
            _ = try c.hello(origin: InMemoryBridge.webSummit.origins[0])
            return { _ = try c.call("key.sign", args: args) }
        }
        return [
            try measure(subject: "bridge key.sign", algorithm: algorithm, connections: 1, requests: requests, makeSigner: makeSigner),
            try measure(subject: "bridge key.sign", algorithm: algorithm, connections: connections, requests: requests, makeSigner: makeSigner),
        ]
    }

    // MARK: ssh-agent

    static func agentRows(_ algorithm: SigningAlgorithm, requests: Int, connections: Int, workDir: String) throws -> [Row] {
        let sock = "\(workDir)/agent-\(algorithm.rawValue).sock"
        let keyPath = "\(workDir)/id_\(algorithm.rawValue)"
        let agent = try spawn("/usr/bin/ssh-agent", ["-D", "-a", sock])
        defer {
            kill(agent, SIGKILL)   // SIGTERM may be blocked in the mask it inherited
            var status: Int32 = 0
            _ = waitpid(agent, &status, 0)
        }
        var tries = 0
        while !FileManager.default.fileExists(atPath: sock) && tries < 200 { usleep(10_000); tries += 1 }
        let type = algorithm == .ed25519 ? ["-t", "ed25519"] : ["-t", "ecdsa", "-b", "256"]
        try runTool("/usr/bin/ssh-keygen", ["-q"] + type + ["-N", "", "-C", "sitekeep-bench", "-f", keyPath])
        try runTool("/usr/bin/ssh-add", ["-q", keyPath], environment: ["SSH_AUTH_SOCK": sock])
        let data = Array(repeating: UInt8(0x5a), count: 32)
        let makeSigner: @Sendable () throws -> (@Sendable () throws -> Void) = {
            let a = try SSHAgentConnection(path: sock)
            guard let blob = try a.identities().first else { throw BridgeError.protocolViolation("ssh-agent holds no key") }
            return { _ = try a.sign(blob: blob, data: data) }
        }
        return [
            try measure(subject: "ssh-agent", algorithm: algorithm, connections: 1, requests: requests, makeSigner: makeSigner),
            try measure(subject: "ssh-agent", algorithm: algorithm, connections: connections, requests: requests, makeSigner: makeSigner),
        ]
    }

    static func runTool(_ path: String, _ args: [String], environment: [String: String]? = nil) throws {
        let pid = try spawn(path, args, environment: environment)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else {
            throw BridgeError.protocolViolation("\(path) \(args.joined(separator: " ")) failed (wait status \(status))")
        }
    }

    /// posix_spawn with stdin and stdout on /dev/null (Foundation's `Process` is avoided: its
    /// SIGCHLD-based wait hung inside the test runner).
    static func spawn(_ path: String, _ args: [String], environment: [String: String]? = nil) throws -> pid_t {
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment ?? [:] { env[k] = v }
        let argv = ([path] + args).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for a in argv { free(a) }
            for e in envp { free(e) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, nil, argv, envp)
        guard rc == 0 else { throw BridgeError.socket(call: "posix_spawn(\(path))", errno: rc) }
        return pid
    }
}

/// The SSH agent protocol (draft-miller-ssh-agent): uint32 length-prefixed messages.
final class SSHAgentConnection: @unchecked Sendable {
    // @unchecked: used by one benchmark thread at a time.
    private let fd: Int32

    init(path: String) throws(BridgeError) { fd = try UnixSocket.connect(path: path) }
    deinit { close(fd) }

    /// SSH2_AGENTC_REQUEST_IDENTITIES (11) → SSH2_AGENT_IDENTITIES_ANSWER (12): the key blobs.
    func identities() throws(BridgeError) -> [[UInt8]] {
        let reply = try roundTrip([11])
        var r = Reader(bytes: reply)
        guard try r.byte() == 12 else { throw .protocolViolation("ssh-agent refused the identities request") }
        let n = try r.uint32()
        var blobs: [[UInt8]] = []
        for _ in 0..<n {
            blobs.append(try r.string())
            _ = try r.string()
        }
        return blobs
    }

    /// SSH2_AGENTC_SIGN_REQUEST (13) → SSH2_AGENT_SIGN_RESPONSE (14): the signature blob.
    func sign(blob: [UInt8], data: [UInt8]) throws(BridgeError) -> [UInt8] {
        let reply = try roundTrip([13] + Self.string(blob) + Self.string(data) + Self.uint32(0))
        var r = Reader(bytes: reply)
        guard try r.byte() == 14 else { throw .protocolViolation("ssh-agent refused to sign") }
        return try r.string()
    }

    private func roundTrip(_ payload: [UInt8]) throws(BridgeError) -> [UInt8] {
        guard UnixSocket.writeAll(fd, Self.uint32(UInt32(payload.count)) + payload) else { throw .connectionClosed }
        var r = Reader(bytes: try readExactly(4))
        return try readExactly(Int(try r.uint32()))
    }

    private func readExactly(_ n: Int) throws(BridgeError) -> [UInt8] {
        guard n <= 1 << 20 else { throw .protocolViolation("ssh-agent reply too large") }
        var out = [UInt8](repeating: 0, count: n)
        var got = 0
        while got < n {
            let k = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, n - got, 0) }
            if k < 0 && errno == EINTR { continue }
            guard k > 0 else { throw .connectionClosed }
            got += k
        }
        return out
    }

    static func uint32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
    static func string(_ b: [UInt8]) -> [UInt8] { uint32(UInt32(b.count)) + b }

    struct Reader {
        let bytes: [UInt8]
        var at = 0
        mutating func byte() throws(BridgeError) -> UInt8 {
            guard at < bytes.count else { throw .protocolViolation("short ssh-agent reply") }
            defer { at += 1 }
            return bytes[at]
        }
        mutating func uint32() throws(BridgeError) -> UInt32 {
            var v: UInt32 = 0
            for _ in 0..<4 { v = v << 8 | UInt32(try byte()) }
            return v
        }
        mutating func string() throws(BridgeError) -> [UInt8] {
            let n = Int(try uint32())
            guard n <= bytes.count - at else { throw .protocolViolation("short ssh-agent string") }
            defer { at += n }
            return Array(bytes[at..<(at + n)])
        }
    }
}
