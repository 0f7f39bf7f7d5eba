// `tools/bench agent`: sign requests per second over SiteKeep's ssh-agent socket against
// OpenSSH's ssh-agent holding a key of the same algorithm, driven by the same client
// (`AgentClient`) in the same run, sequentially and over 4 connections; then `ssh-keygen -Y sign`
// end to end with each agent as SSH_AUTH_SOCK (issue 16, "Must show").
@preconcurrency import Glibc
import Foundation
import Synchronization
import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepSystem

/// The last agent run, printed by the driver.
nonisolated(unsafe) var agentMarkdown = ""

func agentGroup(_ settings: Settings) throws -> [Row] {
    let dir = try makeTempDir("agent")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let rounds = 5, requests = 2000, connections = 4
    // ssh-keygen runs per agent per round: one run is ~10 ms and spreads by ±10 %, so enough of
    // them that a round's median moves less than the agent's share (~0.5 ms).
    let keygenRuns = Int(ProcessInfo.processInfo.environment["SITEKEEP_BENCH_KEYGEN_RUNS"] ?? "") ?? 50
    var md = "Medians of \(rounds) interleaved rounds; each round runs both agents on the same algorithm, the order rotating. "
    md += "Client: SiteKeep's `AgentClient` for both (length-prefixed request, blocking `recv` for the reply), signing SSHSIG "
    md += "signed data in namespace `file`. SiteKeep: `AgentSocketServer` over `CustodyAgentKeys` with presence through "
    md += "`SITEKEEP_ASKPASS=/bin/true` reused within its 60 s window and custody's hash-chained audit line per signature "
    md += "(written before the reply, fsynced off the reply path within 50 ms, as `sitekeep serve` runs it). "
    md += "`ssh-keygen -Y sign`: the whole process, \(keygenRuns) runs per agent per round, alternating.\n\n"
    md += "| subject | algorithm | connections | requests per round | req/s | p50 µs | p99 µs |\n|---|---|---|---|---|---|---|\n"
    var ratios: [String] = []
    var keygenLines: [String] = []
    for algorithm in [SigningAlgorithm.ed25519, .p256] {
        if !settings.quiet { FileHandle.standardError.write(Data("  agent: \(algorithm.rawValue): SiteKeep vs ssh-agent\n".utf8)) }
        let sitekeep = try SiteKeepAgentUnderTest(algorithm: algorithm, dir: dir)
        defer { sitekeep.stop() }
        let openssh = try OpenSSHAgentUnderTest(algorithm: algorithm, dir: dir)
        defer { openssh.stop() }
        let data = SSHSIG.signedData(namespace: "file", hash: .sha512, messageDigest: SSHSIG.Hash.sha512.digest(Array(repeating: 0x5a, count: 32)))
        for c in [1, connections] {
            var mine: [AgentRun] = [], theirs: [AgentRun] = []
            for round in 0..<rounds {
                let order: [(Bool, String)] = round % 2 == 0 ? [(true, sitekeep.socket), (false, openssh.socket)] : [(false, openssh.socket), (true, sitekeep.socket)]
                for (isMine, socket) in order {
                    let run = try measureAgent(socket: socket, data: data, connections: c, requests: requests)
                    if isMine { mine.append(run) } else { theirs.append(run) }
                }
            }
            for (name, runs) in [("SiteKeep agent", mine), ("ssh-agent", theirs)] {
                let m = AgentRun.middle(runs)
                md += "| \(name) | \(algorithm.rawValue) | \(c) | \(requests) | \(Int(m.perSecond)) | \(String(format: "%.0f", m.p50)) | \(String(format: "%.0f", m.p99)) |\n"
            }
            let per = zip(mine, theirs).map { $0.perSecond / max($1.perSecond, 1e-9) }
            let target = c == 1 ? 5.0 : 8.0
            let x = median(per)
            ratios.append("SiteKeep ÷ ssh-agent, \(algorithm.rawValue), \(c) connection(s): \(String(format: "%.1f", x))× (rounds: \(per.sorted().map { String(format: "%.1f", $0) }.joined(separator: ", "))); target ≥ \(Int(target))× \(x >= target ? "met" : "MISSED")")
        }
        // A connection per signature, as ssh-keygen and ssh make them: connect, list, sign, close.
        do {
            var mine: [AgentRun] = [], theirs: [AgentRun] = []
            for round in 0..<rounds {
                let order: [(Bool, String)] = round % 2 == 0 ? [(true, sitekeep.socket), (false, openssh.socket)] : [(false, openssh.socket), (true, sitekeep.socket)]
                for (isMine, socket) in order {
                    let run = try measureAgentConnections(socket: socket, data: data, count: requests / 4)
                    if isMine { mine.append(run) } else { theirs.append(run) }
                }
            }
            for (name, runs) in [("SiteKeep agent", mine), ("ssh-agent", theirs)] {
                let m = AgentRun.middle(runs)
                md += "| \(name), a connection per signature (connect, list, sign, close) | \(algorithm.rawValue) | \(requests / 4) | 1 each | \(Int(m.perSecond)) | \(String(format: "%.0f", m.p50)) | \(String(format: "%.0f", m.p99)) |\n"
            }
            let per = zip(mine, theirs).map { $0.perSecond / max($1.perSecond, 1e-9) }
            ratios.append("SiteKeep ÷ ssh-agent, \(algorithm.rawValue), a connection per signature: \(String(format: "%.2f", median(per)))× (rounds: \(per.sorted().map { String(format: "%.2f", $0) }.joined(separator: ", "))); no target of its own: it is the agent's share of `ssh-keygen -Y sign`")
        }
        // ssh-keygen -Y sign, end to end.
        let message = dir + "/message-\(algorithm.rawValue).txt"
        try Data("signed end to end\n".utf8).write(to: URL(fileURLWithPath: message))
        var mineMs: [Double] = [], theirsMs: [Double] = []
        for round in 0..<rounds {
            var a: [Double] = [], b: [Double] = []
            for i in 0..<(2 * keygenRuns) {
                let isMine = (i + round) % 2 == 0
                let t = try timeKeygen(pub: isMine ? sitekeep.publicKeyFile : openssh.publicKeyFile, socket: isMine ? sitekeep.socket : openssh.socket, message: message, dir: dir)
                if isMine { a.append(t) } else { b.append(t) }
            }
            mineMs.append(median(a)); theirsMs.append(median(b))
        }
        let per = zip(mineMs, theirsMs).map { $0 / $1 }
        keygenLines.append("| `ssh-keygen -Y sign` via the agent | \(algorithm.rawValue) | \(String(format: "%.2f", median(mineMs))) ms | \(String(format: "%.2f", median(theirsMs))) ms | \(String(format: "%.3f", median(per))) (rounds: \(per.sorted().map { String(format: "%.2f", $0) }.joined(separator: ", "))) | ≤ 1.0 \(median(per) <= 1.0 ? "met" : "MISSED") |")
    }
    md += "\n" + ratios.joined(separator: "\n") + "\n\n"
    md += "| end to end | algorithm | SiteKeep agent | ssh-agent | SiteKeep ÷ ssh-agent (time) | target |\n|---|---|---|---|---|---|\n"
    md += keygenLines.joined(separator: "\n") + "\n"
    agentMarkdown = md
    return []
}

/// One measured series.
struct AgentRun {
    var perSecond: Double
    var p50: Double
    var p99: Double
    static func middle(_ runs: [AgentRun]) -> AgentRun {
        AgentRun(perSecond: median(runs.map(\.perSecond)), p50: median(runs.map(\.p50)), p99: median(runs.map(\.p99)))
    }
}


/// `requests` sign requests spread over `connections` connections (one thread each), after 20
/// warm-up requests per connection; every signature is checked to be a sign response.
func measureAgent(socket: String, data: [UInt8], connections: Int, requests: Int) throws -> AgentRun {
    let clients = try (0..<connections).map { _ in try AgentClient(path: socket) }
    guard let blob = try clients[0].identities().first?.blob else { throw BenchError.setupFailed("\(socket) lists no key") }
    for c in clients { for _ in 0..<20 { _ = try c.sign(blob: blob, data: data) } }
    let latencies = Mutex<[UInt64]>([])
    let failures = Atomic<Int>(0)
    let group = DispatchGroup()
    let each = requests / connections
    let box = UncheckedClients(clients)
    let start = now()
    for i in 0..<connections {
        group.enter()
        Thread.detachNewThread {
            let c = box.clients[i]
            var mine: [UInt64] = []
            mine.reserveCapacity(each)
            for _ in 0..<each {
                let t0 = now()
                do { _ = try c.sign(blob: blob, data: data) } catch { failures.add(1, ordering: .relaxed) }
                mine.append(now() - t0)
            }
            latencies.withLock { $0 += mine }
            group.leave()
        }
    }
    group.wait()
    let seconds = Double(now() - start) / 1e9
    guard failures.load(ordering: .relaxed) == 0 else { throw BenchError.setupFailed("\(socket): some signatures failed") }
    let sorted = latencies.withLock { $0 }.sorted()
    func pct(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000 }
    return AgentRun(perSecond: Double(sorted.count) / seconds, p50: pct(0.5), p99: pct(0.99))
}

/// `count` connections one after another, each listing the keys and signing once before it
/// closes (what `ssh-keygen -Y sign` and `ssh` do), after 20 warm-up connections.
func measureAgentConnections(socket: String, data: [UInt8], count: Int) throws -> AgentRun {
    func once() throws -> Void {
        let c = try AgentClient(path: socket)
        guard let blob = try c.identities().first?.blob else { throw BenchError.setupFailed("\(socket) lists no key") }
        _ = try c.sign(blob: blob, data: data)
    }
    for _ in 0..<20 { try once() }
    var latencies: [UInt64] = []
    latencies.reserveCapacity(count)
    let start = now()
    for _ in 0..<count {
        let t0 = now()
        try once()
        latencies.append(now() - t0)
    }
    let seconds = Double(now() - start) / 1e9
    let sorted = latencies.sorted()
    func pct(_ p: Double) -> Double { Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000 }
    return AgentRun(perSecond: Double(sorted.count) / seconds, p50: pct(0.5), p99: pct(0.99))
}

/// The clients, each used by exactly one thread.
final class UncheckedClients: @unchecked Sendable {
    let clients: [AgentClient]
    init(_ clients: [AgentClient]) { self.clients = clients }
}

/// One `ssh-keygen -Y sign` run with `socket` as the agent, in milliseconds.
func timeKeygen(pub: String, socket: String, message: String, dir: String) throws -> Double {
    try? FileManager.default.removeItem(atPath: message + ".sig")
    let t0 = now()
    let status = try spawnAndWait(["/usr/bin/ssh-keygen", "-Y", "sign", "-f", pub, "-n", "file", message], cwd: dir,
                                  environment: ["SSH_AUTH_SOCK": socket, "HOME": dir, "PATH": "/usr/bin:/bin"],
                                  stdout: dir + "/keygen.out", stderr: dir + "/keygen.err")
    let ms = Double(now() - t0) / 1e6
    guard status == 0, FileManager.default.fileExists(atPath: message + ".sig") else {
        throw BenchError.setupFailed("ssh-keygen -Y sign through \(socket) failed: \(String(decoding: FileManager.default.contents(atPath: dir + "/keygen.err") ?? Data(), as: UTF8.self))")
    }
    return ms
}

/// SiteKeep's agent socket over a real store: file keyring, one team key with SSH on, presence
/// approved by /bin/true (then reused within its window), the audit log on.
final class SiteKeepAgentUnderTest {
    let socket: String
    let publicKeyFile: String
    private let custodian: Custodian
    private let server: AgentSocketServer

    init(algorithm: SigningAlgorithm, dir: String) throws {
        let home = StoreHome(path: "\(dir)/store-\(algorithm.rawValue)")
        custodian = try Custodian(home: home, keyring: FileKeyring(home: home))
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("bench pass phrase".utf8)),
                                     parameters: Argon2id.Parameters(iterations: Argon2id.Parameters.minimumIterations,
                                                                     memoryKiB: Argon2id.Parameters.minimumMemoryKiB),
                                     withRecoveryCode: false)
        let info = try custodian.generateTeamKey(id: "bench", name: "Bench", algorithm: algorithm)
        let approval = PresenceProof(client: .commandLine, op: Custodian.sshPolicyOp, keyID: try KeyID(parsing: "bench"), method: .askpass,
                                     issuedAtNanoseconds: BootClock.system.nanoseconds())
        _ = try custodian.setSSHAgentPolicy(keyID: "bench", SSHAgentPolicy(),
                                            context: KeyUseContext(client: .commandLine, op: Custodian.sshPolicyOp, presence: approval))
        let key = try SSHPublicKey(algorithm: algorithm, publicKey: try Base64.decode(info.publicKey))
        publicKeyFile = "\(dir)/sitekeep-\(algorithm.rawValue).pub"
        try Data((key.authorizedKeysLine(comment: "sitekeep:bench") + "\n").utf8).write(to: URL(fileURLWithPath: publicKeyFile))
        // As `sitekeep serve` runs it: the audit log's fsync off the reply path.
        custodian.auditLog.syncInBackground()
        let keys = CustodyAgentKeys(custodian: custodian, presence: PresenceWindow(verifier: try AskpassPresenceVerifier(program: "/bin/true"), lockScope: custodian.lockScope))
        socket = "\(dir)/run/sitekeep-\(algorithm.rawValue).sock"
        try FileManager.default.createDirectory(atPath: "\(dir)/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        server = try AgentSocketServer(path: socket, keys: keys)
        server.start()
    }

    func stop() {
        server.shutdown()
        custodian.lock()
    }
}

/// OpenSSH's `ssh-agent -D -a SOCKET` holding one fresh key of the algorithm.
final class OpenSSHAgentUnderTest {
    let socket: String
    let publicKeyFile: String
    private let pid: pid_t

    init(algorithm: SigningAlgorithm, dir: String) throws {
        socket = "\(dir)/run/ssh-agent-\(algorithm.rawValue).sock"
        try FileManager.default.createDirectory(atPath: "\(dir)/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        do {
            pid = try ChildProcess.spawn("/usr/bin/ssh-agent", arguments: ["-D", "-a", socket],
                                         stdin: .null, stdout: .null, stderr: .inherit, ownProcessGroup: false).pid
        } catch {
            throw BenchError.setupFailed("cannot start ssh-agent")
        }
        var tries = 0
        while !AgentClient.isAnswering(path: socket), tries < 400 { usleep(10_000); tries += 1 }
        let key = "\(dir)/id_\(algorithm.rawValue)"
        let type = algorithm == .ed25519 ? ["-t", "ed25519"] : ["-t", "ecdsa", "-b", "256"]
        guard try spawnAndWait(["/usr/bin/ssh-keygen", "-q"] + type + ["-N", "", "-C", "bench", "-f", key], cwd: dir, environment: [:],
                               stdout: dir + "/kg.out", stderr: dir + "/kg.err") == 0,
              try spawnAndWait(["/usr/bin/ssh-add", "-q", key], cwd: dir, environment: ["SSH_AUTH_SOCK": socket],
                               stdout: dir + "/add.out", stderr: dir + "/add.err") == 0 else {
            kill(pid, SIGKILL)
            throw BenchError.setupFailed("ssh-keygen/ssh-add for ssh-agent failed")
        }
        publicKeyFile = key + ".pub"
    }

    func stop() {
        kill(pid, SIGKILL)   // SIGTERM may be blocked in the mask it inherited
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }
}
