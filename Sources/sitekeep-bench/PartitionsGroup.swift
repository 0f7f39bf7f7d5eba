import Foundation
import SiteKeepPartitions

/// Sealed partitions against plain SQLite with the same schema, in the same run
/// (`PartitionBenchmark`): bulk writes, point reads, single-commit writes, opening 100
/// partitions and memory per open partition. Prints its own table; the harness's
/// wrapper-vs-raw rows do not fit measurements of whole workloads.
func partitionsGroup(_ settings: Settings) throws -> [Row] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-bench-partitions-\(getpid())")
    defer { try? FileManager.default.removeItem(at: dir) }
    var runs: [[PartitionBenchmark.Result]] = []
    for round in 0..<3 {
        if !settings.quiet { FileHandle.standardError.write(Data("  partitions round \(round + 1)/3\n".utf8)) }
        runs.append(try PartitionBenchmark.run(in: dir))
    }
    // The median of each figure over the rounds.
    var lines: [(String, String)] = []
    for (i, first) in runs[0].enumerated() {
        let values = runs.compactMap { $0.count > i ? $0[i].value : nil }
        lines.append((first.name, String(format: first.unit == "x" ? "%.2f" : "%.1f", median(values)) + " " + first.unit))
    }
    partitionsTable = lines
    return []
}

/// The last partitions run, printed by the driver.
nonisolated(unsafe) var partitionsTable: [(String, String)] = []
