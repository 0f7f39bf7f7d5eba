import Foundation
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCore
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepSystem

/// The native core: planning the next 64 reminders for 1,000 picks against a 10,000-item agenda
/// (the planner alone, and with the agenda's JSON parsed first), and `schedule.set` through the
/// daemon's own stack (BridgeServer on a Unix socket, the dispatcher, strict nr.schedule.v1
/// validation, a sealed write to a real SQLite partition), p50 and p99, without the vault mirror
/// and with it (``mirroredScheduleSetLatencies(_:connections:)``).
func coreGroup(_ settings: Settings) throws -> [Row] {
    let zone = ZoneRules(identifier: "Europe/Lisbon")!
    let base = Int64(1_793_000_000_000)
    var items: [JSONValue] = []
    for i in 0..<10_000 {
        let start = base + Int64(i / 8) * 1_800_000 + Int64(i % 8) * 60_000
        items.append(["id": .string("item-\(i)"), "title": .string("Session \(i) on agents and vaults"), "stage": .string("Stage \(i % 8)"),
                      "start": .string(zone.local(Instant(milliseconds: start)!).description), "end": .string(zone.local(Instant(milliseconds: start + 1_500_000)!).description),
                      "kind": .string(i % 50 == 0 ? "standup" : "session")])
    }
    let agendaBytes = JSONSerializer.bytes(["timezone": "Europe/Lisbon", "items": .array(items)])
    let agenda = try Agenda(text: agendaBytes)
    var schedule = ScheduleDocument()
    for i in stride(from: 0, to: 10_000, by: 10) { try schedule.add(id: "item-\(i)", at: Instant(milliseconds: base)!) }
    let now = Instant(milliseconds: base + 3 * 86_400_000)!
    if !settings.quiet { FileHandle.standardError.write(Data("  core: plan 1,000 picks x 10,000 items; schedule.set through the daemon\n".utf8)) }

    func timeEach(_ n: Int, _ body: () throws -> Void) rethrows -> [Double] {
        var out: [Double] = []
        for _ in 0..<n {
            let t = Clocks.monotonicNanoseconds()
            try body()
            out.append(Double(Clocks.monotonicNanoseconds() - t) / 1e9)
        }
        return out
    }
    var planned = 0
    let plan = timeEach(200) { planned = ReminderPlanner.plan(schedule: schedule, agenda: agenda, now: now).count }
    guard planned == 64 else { throw BenchFailure("the planner gave \(planned) reminders, not 64") }
    let parse = timeEach(9) { _ = try? Agenda(text: agendaBytes) }

    // schedule.set through the daemon's stack.
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-bench-core-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: dir) }
    let registry = try SiteRegistry(home: dir.appendingPathComponent("home"), keys: EphemeralKeyProvider())
    _ = try registry.add(displayName: "Promptugal", origins: ["https://promptugal.news"], appBound: true)
    let access = PartitionAccess(registry: registry, lockScope: LockScope())
    defer { access.closeAll() }
    let dispatcher = try BridgeDispatcher(catalogue: try OpCatalogue.bundled(), sites: RegistrySiteResolver(registry: registry),
                                          modules: [ScheduleModule(PartitionScheduleService(access: access))])
    let path = dir.appendingPathComponent("bridge.sock").path
    let server = try BridgeServer(dispatcher: dispatcher, path: path, hosts: SiteHostAuthority.thisProgram())
    server.start()
    defer { server.shutdown() }
    let picks: JSONValue = .array((0..<20).map { ["id": .string("item-\($0 * 10)"), "at": .int(base + Int64($0))] })
    let args: JSONValue = ["v": 1, "picks": picks]
    var latencies: [Double] = []
    // schedule.set allows 20 at once per connection (the catalogue's rate limit, left as shipped):
    // each connection says hello and makes 20 calls; only the calls are timed.
    for _ in 0..<100 {
        let client = try BridgeClient.connect(path: path)
        defer { client.close() }
        _ = try client.hello(origin: "https://promptugal.news")
        latencies += try timeEach(20) { _ = try client.call("schedule.set", args: args) }
    }
    func pct(_ p: Double, _ samples: [Double]) -> Double {
        let sorted = samples.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
    func pct(_ p: Double) -> Double { pct(p, latencies) }
    // The same with the vault mirror on (each call commits to a real vault).
    let mirrored = try mirroredScheduleSetLatencies(settings, connections: 25)
    coreTable = [
        ("plan the next 64 reminders: 1,000 picks × 10,000 agenda items (median of 200)", String(format: "%.0f µs", median(plan) * 1e6)),
        ("… p99 of the same", String(format: "%.0f µs", plan.sorted()[min(plan.count - 1, Int(Double(plan.count) * 0.99))] * 1e6)),
        ("parse and validate the 10,000-item agenda JSON (\(agendaBytes.count / 1024) KiB, median of 9)", String(format: "%.1f ms", median(parse) * 1e3)),
        ("schedule.set (20 picks) through the daemon's socket, p50 of \(latencies.count)", String(format: "%.0f µs", pct(0.5) * 1e6)),
        ("schedule.set p99", String(format: "%.0f µs", pct(0.99) * 1e6)),
    ]
    if let m = mirrored {
        coreTable += [
            ("schedule.set (20 picks) with the vault mirror (each call merges agenda/picks.json and commits to a real vault, signed), p50 of \(m.count)",
             String(format: "%.0f µs", pct(0.5, m) * 1e6)),
            ("schedule.set with the vault mirror p99", String(format: "%.0f µs", pct(0.99, m) * 1e6)),
        ]
    } else {
        coreTable.append(("schedule.set with the vault mirror", "skipped: needs sgit and sitekeep (run through tools/bench)"))
    }
    return []
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// The last core run, printed by the driver.
nonisolated(unsafe) var coreTable: [(String, String)] = []
