// The measuring harness of sitekeep-bench: interleaved rounds, medians, paired ratios, tables.
@preconcurrency import Glibc
import Foundation
import SiteKeepSystem

/// A wall-clock reading in nanoseconds (CLOCK_MONOTONIC).
func now() -> UInt64 { Clocks.monotonicNanoseconds() }

/// Keeps results alive so the optimiser cannot drop the work that produced them.
final class Sink {
    var value: UInt8 = 0
    func consume(_ bytes: [UInt8]) { value &+= bytes.last ?? 0 }
    func consume(_ byte: UInt8) { value &+= byte }
}

/// One contender in a benchmark: runs `n` operations and returns seconds per operation.
struct Contender {
    let label: String
    let run: (Int) throws -> Double

    /// A contender whose one operation is `op`, timed here.
    static func op(_ label: String, _ op: @escaping () throws -> Void) -> Contender {
        Contender(label: label) { n in
            let start = now()
            for _ in 0..<n { try op() }
            return Double(now() - start) / 1e9 / Double(n)
        }
    }
}

/// How a row's figures are shown.
enum Unit {
    /// Throughput for messages of this many bytes, shown in MB/s (10^6 bytes).
    case megabytesPerSecond(bytes: Int)
    /// Operations per second.
    case perSecond
    /// Milliseconds per operation.
    case milliseconds

    func format(secondsPerOp s: Double) -> String {
        switch self {
        case .megabytesPerSecond(let bytes): return String(format: "%.0f MB/s", Double(bytes) / s / 1e6)
        case .perSecond: return String(format: "%.0f /s", 1 / s)
        case .milliseconds: return String(format: "%.1f ms", s * 1e3)
        }
    }
}

/// One line of the results table.
struct Row {
    let name: String
    let unit: Unit
    let wrapper: Double          // median seconds per op
    let raw: Double
    let rawLabel: String
    let peer: Double?
    let peerLabel: String?
    let ratio: Double            // median of per-round wrapper/raw
    let peerRatio: Double?       // median of per-round wrapper/peer
    let target: Double           // the ratio the wrapper must stay under
    let targetAgainstPeer: Bool  // whether the target applies to wrapper/peer rather than wrapper/raw

    var meetsTarget: Bool { (targetAgainstPeer ? (peerRatio ?? ratio) : ratio) <= target }
}

func median(_ xs: [Double]) -> Double {
    let s = xs.sorted()
    guard !s.isEmpty else { return .nan }
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

struct Settings {
    var rounds = 9
    var slowRounds = 7
    var batchSeconds = 0.04
    var quiet = false
}

/// Measures `wrapper` against `raw` (and an optional peer) in interleaved rounds.
///
/// Every round runs each contender once with the same operation count, in an order that rotates
/// from round to round, so a burst of load from elsewhere on the machine lands on all of them.
/// The ratio is the median of the per-round ratios (paired), the figures the per-contender medians.
func compare(
    _ name: String, unit: Unit, wrapper: Contender, raw: Contender, peer: Contender? = nil,
    target: Double = 1.05, targetAgainstPeer: Bool = false, slow: Bool = false,
    settings: Settings
) throws -> Row {
    let contenders = [wrapper, raw] + (peer.map { [$0] } ?? [])
    // Warm up and size the batch from the raw call: the same count of operations for everyone.
    for c in contenders { _ = try c.run(1) }
    let one = try raw.run(1)
    let n = slow ? 1 : max(1, Int(settings.batchSeconds / max(one, 1e-9)))
    let rounds = slow ? settings.slowRounds : settings.rounds
    var times = Array(repeating: [Double](), count: contenders.count)
    for round in 0..<rounds {
        for k in 0..<contenders.count {
            let i = (k + round) % contenders.count
            times[i].append(try contenders[i].run(n))
        }
    }
    let ratios = zip(times[0], times[1]).map { $0 / $1 }
    let peerRatios = peer == nil ? nil : zip(times[0], times[2]).map { $0 / $1 }
    let row = Row(name: name, unit: unit, wrapper: median(times[0]), raw: median(times[1]), rawLabel: raw.label,
                  peer: peer == nil ? nil : median(times[2]), peerLabel: peer?.label,
                  ratio: median(ratios), peerRatio: peerRatios.map(median),
                  target: target, targetAgainstPeer: targetAgainstPeer)
    if !settings.quiet {
        FileHandle.standardError.write(Data("  measured \(name): ratio \(String(format: "%.3f", row.ratio)) (\(rounds) rounds × \(n) ops)\n".utf8))
    }
    return row
}

/// Prints rows as an aligned text table or as Markdown.
func printTable(_ title: String, _ rows: [Row], markdown: Bool) {
    let header = ["benchmark", "wrapper", "raw call", "wrapper/raw", "peer", "wrapper/peer", "target", ""]
    var lines: [[String]] = []
    for r in rows {
        let peer = r.peer.map { "\(r.unit.format(secondsPerOp: $0)) (\(r.peerLabel ?? ""))" } ?? "–"
        let peerRatio = r.peerRatio.map { String(format: "%.3f", $0) } ?? "–"
        let target = String(format: "≤ %.2f %@", r.target, r.targetAgainstPeer ? "vs peer" : "vs raw")
        lines.append([r.name, r.unit.format(secondsPerOp: r.wrapper),
                      "\(r.unit.format(secondsPerOp: r.raw)) (\(r.rawLabel))",
                      String(format: "%.3f", r.ratio), peer, peerRatio, target, r.meetsTarget ? "ok" : "MISSED"])
    }
    if markdown {
        print("### \(title)\n")
        print("| " + header.joined(separator: " | ") + " |")
        print("|" + header.map { _ in "---" }.joined(separator: "|") + "|")
        for l in lines { print("| " + l.joined(separator: " | ") + " |") }
        print("")
    } else {
        print("== \(title) ==")
        let widths = header.indices.map { i in ([header[i]] + lines.map { $0[i] }).map(\.count).max() ?? 0 }
        func pad(_ cells: [String]) -> String {
            cells.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ")
        }
        print(pad(header))
        print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        for l in lines { print(pad(l)) }
        print("")
    }
}

/// Runs a Python snippet that prints one number (seconds per operation), for peer timings.
/// The interpreter comes from SITEKEEP_BENCH_PYTHON (tools/bench sets the project's .venv).
func python(_ script: String) throws -> String {
    let py = ProcessInfo.processInfo.environment["SITEKEEP_BENCH_PYTHON"] ?? "/usr/bin/python3"
    let (ended, data) = try ChildProcess.capture(py, arguments: ["-c", script], streams: .output, ownProcessGroup: false)
    guard ended == .exited(0) else { throw BenchError.peerFailed("\(py) \(ended)") }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// A peer contender timed inside a Python process (interpreter start-up is not counted).
func pythonContender(_ label: String, setup: String, statement: String) -> Contender {
    Contender(label: label) { n in
        let script = """
        import time
        \(setup)
        t = time.perf_counter()
        for _ in range(\(n)):
            \(statement)
        print((time.perf_counter() - t) / \(n))
        """
        guard let s = Double(try python(script)) else { throw BenchError.peerFailed("no timing from python") }
        return s
    }
}

enum BenchError: Error, CustomStringConvertible {
    case peerFailed(String)
    case setupFailed(String)
    var description: String {
        switch self {
        case .peerFailed(let m): "peer benchmark failed: \(m) (run tools/setup to create .venv)"
        case .setupFailed(let m): "benchmark set-up failed: \(m)"
        }
    }
}
