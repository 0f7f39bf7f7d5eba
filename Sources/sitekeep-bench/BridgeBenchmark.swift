import Glibc
import Foundation
import SiteKeepSocket
import Synchronization
internal import SiteKeepJSON
public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepTestSupport
import SiteKeepSystem

/// `key.sign` over the daemon's socket against `ssh-agent` signing over its socket, with the same
/// algorithm, driven by the same client harness (one timing loop; only the transport differs).
///
/// The bridge side runs what `sitekeep serve` runs: `BridgeServer`, NDJSON framing, the
/// dispatcher with every check, custody's presence window over an askpass program (`/bin/true`:
/// one approval, then reuse for 60 s), and ``Custodian/signature(keyID:version:message:context:)``
/// on a team key in a file keyring, whose hash-chained audit line is written before each
/// signature is returned (fsync grouped). Only `key.sign`'s rate limit is raised (the catalogue's
/// 5/s per connection would otherwise be what is measured). The ssh-agent side runs
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
        /// One row per subject, algorithm and connection count: medians over the rounds.
        public var rows: [Row]
        /// Per algorithm and connection count: bridge ÷ ssh-agent throughput in each round (the
        /// bridge's client looks for its reply for 100 µs before sleeping).
        public var roundRatios: [String: [Double]] = [:]
        /// The same with a bridge client that sleeps at once (ssh-agent's client always does).
        public var blockingRoundRatios: [String: [Double]] = [:]
        /// How many interleaved rounds each figure is the median of.
        public var rounds: Int = 1

        static func key(_ a: SigningAlgorithm, _ c: Int) -> String { "\(a.rawValue)/\(c)" }

        /// bridge ÷ ssh-agent throughput for `algorithm` at `connections`: the median of the
        /// per-round ratios (each round runs both subjects back to back).
        public func ratio(_ algorithm: SigningAlgorithm, connections: Int) -> Double? {
            guard let r = roundRatios[Self.key(algorithm, connections)], !r.isEmpty else { return nil }
            return BridgeBenchmark.median(r)
        }

        /// A Markdown table for BENCHMARKS.md.
        public var markdown: String {
            var md = "Medians of \(rounds) interleaved rounds (each round runs the three subjects on the same keys, the order rotating). "
            md += "`bridge key.sign`: a `BridgeClient` that looks for its reply for 100 µs before it sleeps; "
            md += "`client blocks at once`: the same client sleeping in `poll` at once, as the ssh-agent client does.\n\n"
            md += "| subject | algorithm | connections | requests per round | req/s | p50 µs | p99 µs |\n|---|---|---|---|---|---|---|\n"
            for r in rows {
                md += "| \(r.subject) | \(r.algorithm.rawValue) | \(r.connections) | \(r.requests) | \(Int(r.perSecond)) | "
                md += "\(String(format: "%.0f", r.p50Micros)) | \(String(format: "%.0f", r.p99Micros)) |\n"
            }
            for a in Set(rows.map(\.algorithm)).sorted(by: { $0.rawValue < $1.rawValue }) {
                for c in Set(rows.map(\.connections)).sorted() {
                    guard let x = ratio(a, connections: c), let all = roundRatios[Self.key(a, c)] else { continue }
                    let spread = all.sorted().map { String(format: "%.1f", $0) }.joined(separator: ", ")
                    md += "\nbridge ÷ ssh-agent, \(a.rawValue), \(c) connection(s): \(String(format: "%.1f", x))× (rounds: \(spread))"
                    if let blocked = blockingRoundRatios[Self.key(a, c)], !blocked.isEmpty {
                        let spreadB = blocked.sorted().map { String(format: "%.1f", $0) }.joined(separator: ", ")
                        md += "; client blocking at once: \(String(format: "%.1f", BridgeBenchmark.median(blocked)))× (rounds: \(spreadB))"
                    }
                }
            }
            return md + "\n"
        }
    }

    /// Runs both subjects for each algorithm in `rounds` interleaved rounds: `requests` signs
    /// sequentially on one connection, then `requests` spread over `connections` connections.
    /// The machine is small and shared, and where the scheduler puts a client and its server
    /// thread moves a sequential round trip by tens of microseconds, so one series is luck;
    /// medians of rounds are not.
    /// - Parameter workDir: an empty private folder for sockets, keys and the audit log.
    public static func run(algorithms: [SigningAlgorithm] = [.ed25519, .p256], requests: Int = 4000,
                           connections: Int = 4, rounds: Int = 5, workDir: String) throws -> Report {
        var report = Report(rows: [], rounds: max(1, rounds))
        for algorithm in algorithms {
            try withBridge(algorithm, workDir: workDir) { bridge in
                try withAgent(algorithm, workDir: workDir) { agent in
                    for c in [1, connections] {
                        var b: [Row] = [], blocking: [Row] = [], s: [Row] = []
                        let subjects: [(String, SignerFactory)] = [
                            (spinningSubject, bridge(clientSpinNanoseconds)), (blockingSubject, bridge(0)), (agentSubject, agent),
                        ]
                        for round in 0..<report.rounds {
                            // Rotate which subject goes first.
                            for k in 0..<subjects.count {
                                let (name, factory) = subjects[(k + round) % subjects.count]
                                let row = try measure(subject: name, algorithm: algorithm, connections: c, requests: requests, makeSigner: factory)
                                switch name {
                                case spinningSubject: b.append(row)
                                case blockingSubject: blocking.append(row)
                                default: s.append(row)
                                }
                            }
                        }
                        report.rows += [medianRow(b), medianRow(blocking), medianRow(s)]
                        report.roundRatios[Report.key(algorithm, c)] = zip(b, s).map { $0.perSecond / max($1.perSecond, 1e-9) }
                        report.blockingRoundRatios[Report.key(algorithm, c)] = zip(blocking, s).map { $0.perSecond / max($1.perSecond, 1e-9) }
                    }
                }
            }
        }
        return report
    }

    static let spinningSubject = "bridge key.sign"
    static let blockingSubject = "bridge key.sign, client blocks at once"
    static let agentSubject = "ssh-agent"

    static func median(_ values: [Double]) -> Double {
        let v = values.sorted()
        return v.isEmpty ? 0 : v.count % 2 == 1 ? v[v.count / 2] : (v[v.count / 2 - 1] + v[v.count / 2]) / 2
    }

    static func medianRow(_ rows: [Row]) -> Row {
        var r = rows[0]
        r.perSecond = median(rows.map(\.perSecond))
        r.p50Micros = median(rows.map(\.p50Micros))
        r.p99Micros = median(rows.map(\.p99Micros))
        return r
    }

    typealias SignerFactory = @Sendable () throws -> (@Sendable () throws -> Void)

    /// How long the bridge's client looks for its reply before sleeping. ssh-agent's client sleeps
    /// at once (spinning beside a single-threaded agent on two cores would only slow the agent);
    /// the bridge is also measured with a client that sleeps at once.
    static let clientSpinNanoseconds: UInt64 = 100_000

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
        let start = Clocks.monotonicNanoseconds()
        for s in signers {
            group.enter()
            Thread.detachNewThread {
                var mine: [UInt64] = []
                mine.reserveCapacity(each)
                for _ in 0..<each {
                    let t0 = Clocks.monotonicNanoseconds()
                    do { try s() } catch { failures.add(1, ordering: .relaxed) }
                    mine.append(Clocks.monotonicNanoseconds() - t0)
                }
                latencies.withLock { $0 += mine }
                group.leave()
            }
        }
        group.wait()
        let seconds = Double(Clocks.monotonicNanoseconds() - start) / 1e9
        guard failures.load(ordering: .relaxed) == 0 else { throw BridgeError.protocolViolation("\(subject): some signs failed") }
        let sorted = latencies.withLock { $0 }.sorted()
        func pct(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000 }
        return Row(subject: subject, algorithm: algorithm, connections: connections, requests: sorted.count,
                   perSecond: Double(sorted.count) / seconds, p50Micros: pct(0.5), p99Micros: pct(0.99))
    }

    // MARK: The bridge

    /// Sets up what `sitekeep serve` runs for `algorithm` and hands `body` a signer factory.
    static func withBridge(_ algorithm: SigningAlgorithm, workDir: String,
                           _ body: (@escaping @Sendable (_ clientSpinNanoseconds: UInt64) -> SignerFactory) throws -> Void) throws {
        // A store as `sitekeep init` makes it (cheapest Argon2id: unlocking is not measured),
        // unlocked, with one team key of `algorithm`.
        let home = StoreHome(path: "\(workDir)/store-\(algorithm.rawValue)")
        let custodian: Custodian
        do {
            custodian = try Custodian(home: home, keyring: FileKeyring(home: home))
            _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("bench pass phrase".utf8)),
                                         parameters: Argon2id.Parameters(iterations: Argon2id.Parameters.minimumIterations,
                                                                         memoryKiB: Argon2id.Parameters.minimumMemoryKiB),
                                         withRecoveryCode: false)
            _ = try custodian.generateTeamKey(id: "bench", name: "Bench", algorithm: algorithm)
        } catch { throw BridgeError.protocolViolation("custody set-up failed: \(error)") }
        defer { custodian.lock() }
        let approve: any PresenceVerifier
        do { approve = try AskpassPresenceVerifier(program: "/bin/true") } catch { throw BridgeError.protocolViolation("\(error)") }
        var catalogue = try OpCatalogue.bundled()
        if let i = catalogue.ops.firstIndex(where: { $0.name == "key.sign" }) {
            catalogue.ops[i].rateLimit = RateLimit(burst: 1_000_000, perSecond: 1_000_000)
        }
        let window = PresenceWindow(verifier: approve, lockScope: custodian.lockScope)
        let dispatcher = try BridgeDispatcher(catalogue: catalogue, sites: InMemoryBridge.resolver,
                                              modules: InMemoryBridge.modules(signing: CustodySigningService(custodian: custodian, presence: window)))
        let path = "\(workDir)/bridge-\(algorithm.rawValue).sock"
        let server = try BridgeServer(dispatcher: dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
        server.start()
        defer { server.shutdown() }
        let data = Array(repeating: UInt8(0x5a), count: 32)
        let args: JSONValue = ["key": "bench", "data": .string(Base64.encode(data, variant: .standard))]
        // Sanity: the signature verifies, and custody logged it.
        let probe = try BridgeClient.connect(path: path)
        _ = try probe.hello(origin: InMemoryBridge.webSummit.origins[0])
        let sig = try Base64.decode(try probe.call("key.sign", args: args)["signature"]?.stringValue ?? "", variant: .standard)
        guard (try? custodian.verify(keyID: "bench", signature: sig, message: data)) == true else {
            throw BridgeError.protocolViolation("bridge signature does not verify")
        }
        probe.close()
        try body { spin in
            {
                let c = try BridgeClient.connect(path: path, spin: .nanoseconds(Int64(spin)))
                _ = try c.hello(origin: InMemoryBridge.webSummit.origins[0])
                return { _ = try c.call("key.sign", args: args) }
            }
        }
    }

    // MARK: ssh-agent

    /// Starts `ssh-agent` with one key of `algorithm` and hands `body` a signer factory.
    static func withAgent(_ algorithm: SigningAlgorithm, workDir: String, _ body: (@escaping SignerFactory) throws -> Void) throws {
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
        try body {
            let a = try SSHAgentConnection(path: sock)
            guard let blob = try a.identities().first else { throw BridgeError.protocolViolation("ssh-agent holds no key") }
            return { _ = try a.sign(blob: blob, data: data) }
        }
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
        do {
            return try ChildProcess.spawn(path, arguments: args, environment: env.map { "\($0.key)=\($0.value)" },
                                          stdin: .null, stdout: .null, stderr: .inherit, ownProcessGroup: false).pid
        } catch {
            throw BridgeError.socket(call: "posix_spawn(\(path))", errno: error.errno?.rawValue ?? EIO)
        }
    }
}

/// The SSH agent protocol (draft-miller-ssh-agent): uint32 length-prefixed messages.
final class SSHAgentConnection: @unchecked Sendable {
    // @unchecked: used by one benchmark thread at a time.
    private let fd: Int32

    init(path: String) throws(BridgeError) {
        do { fd = try UnixSocket.connectUnchecked(path: path) } catch { throw BridgeError(error) }
    }
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
