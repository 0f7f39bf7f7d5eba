public import Foundation
import Glibc
import SiteKeepPartitions
import SiteKeepTestSupport
import SiteKeepVocabulary
import SiteKeepSystem

/// Measurements of the partitions layer against plain SQLite with the same schema, in the same
/// run, for `tools/bench` (`BENCHMARKS.md`). Build in release to get meaningful figures.
///
/// ```swift
/// for r in try PartitionBenchmark.run(in: scratch) { print(r) }
/// ```
public enum PartitionBenchmark {
    /// One figure.
    public struct Result: Sendable, CustomStringConvertible {
        /// What was measured, e.g. `sealed writes, one transaction`.
        public let name: String
        public let value: Double
        /// `ops/s`, `ms`, `KiB`, ...
        public let unit: String
        public var description: String { "\(name): \(String(format: "%.1f", value)) \(unit)" }
    }

    /// Runs every measurement in a fresh store under `directory` (which it creates and removes).
    /// - Parameters:
    ///   - rows: rows for the bulk write and read measurements (100,000 in BENCHMARKS.md).
    ///   - singleWrites: individually committed writes (each one fsyncs).
    ///   - partitions: partitions to open for the open-time and memory figures.
    public static func run(in directory: URL, rows: Int = 100_000, singleWrites: Int = 300, partitions: Int = 100) throws -> [Result] {
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var results: [Result] = []
        let pairs = (0..<rows).map { ("key-\($0)", "value-\($0)-" + String(repeating: "x", count: 40)) }
        var rng = SystemRandomNumberGenerator()
        let readOrder = (0..<rows).map { _ in Int.random(in: 0..<rows, using: &rng) }

        // Plain SQLite, same schema and pragmas, plaintext keys and values.
        let plainPath = directory.appendingPathComponent("plain.sqlite").path
        let plain = try SQLiteConnection(path: plainPath, create: true)
        try plain.exec(PartitionSQL.schema)
        var t = now()
        var c = cpu()
        _ = try? plain.transaction { () throws(SQLiteFailure) in
            let st = try plain.statement("INSERT OR REPLACE INTO kv(ns, k, v, size, used, ref) VALUES(1, ?, ?, ?, 0, NULL)")
            for (k, v) in pairs {
                try st.bind(1, Array(k.utf8)); try st.bind(2, Array(v.utf8)); try st.bind(3, Int64(k.utf8.count + v.utf8.count))
                try st.run()
            }
        }
        let plainWrite = now() - t
        let plainWriteCPU = cpu() - c
        results.append(Result(name: "plain SQLite: \(rows) writes in one transaction", value: plainWrite * 1000, unit: "ms"))
        results.append(Result(name: "plain SQLite: \(rows) writes in one transaction, process CPU", value: plainWriteCPU * 1000, unit: "ms"))
        results.append(Result(name: "plain SQLite writes (one transaction)", value: Double(rows) / plainWrite, unit: "ops/s"))
        t = now()
        c = cpu()
        var found = 0
        let sel = try plain.statement("SELECT v FROM kv WHERE ns=1 AND k=?")
        for i in readOrder {
            sel.reset()
            try sel.bind(1, Array(pairs[i].0.utf8))
            if try sel.step(), sel.blob(0) != nil { found += 1 }
        }
        sel.reset()
        let plainRead = now() - t
        let plainReadCPU = cpu() - c
        results.append(Result(name: "plain SQLite: \(rows) random point reads, process CPU", value: plainReadCPU * 1000, unit: "ms"))
        results.append(Result(name: "plain SQLite random point reads", value: Double(rows) / plainRead, unit: "ops/s"))
        t = now()
        for i in 0..<singleWrites {
            let st = try plain.statement("INSERT OR REPLACE INTO kv(ns, k, v, size, used, ref) VALUES(1, ?, ?, 1, 0, NULL)")
            try st.bind(1, Array("single-\(i)".utf8)); try st.bind(2, Array("v".utf8))
            try st.run()
        }
        results.append(Result(name: "plain SQLite single-commit writes (fsync each)", value: Double(singleWrites) / (now() - t), unit: "ops/s"))

        // Sealed partition.
        let registry = try SiteRegistry(home: directory.appendingPathComponent("store"), keys: EphemeralKeyProvider(),
                                        limits: PartitionLimits(storageQuota: 1 << 30), faults: [])
        let site = try registry.add(displayName: "bench", origins: ["https://bench.example"], appBound: false)
        let p = try registry.openPartition(forIdentifier: site.id)
        t = now()
        c = cpu()
        try p.storage.setItems(pairs)
        let sealedWrite = now() - t
        let sealedWriteCPU = cpu() - c
        results.append(Result(name: "sealed: \(rows) writes in one transaction", value: sealedWrite * 1000, unit: "ms"))
        results.append(Result(name: "sealed: \(rows) writes in one transaction, process CPU", value: sealedWriteCPU * 1000, unit: "ms"))
        results.append(Result(name: "sealed writes (one transaction)", value: Double(rows) / sealedWrite, unit: "ops/s"))
        t = now()
        c = cpu()
        for i in readOrder where try p.storage.getItem(pairs[i].0) == nil { found -= 1 }
        let sealedRead = now() - t
        results.append(Result(name: "sealed: \(rows) random point reads, process CPU", value: (cpu() - c) * 1000, unit: "ms"))
        results.append(Result(name: "sealed random point reads (getItem)", value: Double(rows) / sealedRead, unit: "ops/s"))
        t = now()
        var batch: [String] = []
        for i in readOrder {
            batch.append(pairs[i].0)
            if batch.count == 100 { found += try p.storage.getItems(batch).count; batch.removeAll(keepingCapacity: true) }
        }
        let sealedBatchRead = now() - t
        results.append(Result(name: "sealed random point reads in batches of 100 (getItems)", value: Double(rows) / sealedBatchRead, unit: "ops/s"))
        results.append(Result(name: "sealed (batched)/plain read ratio", value: plainRead / sealedBatchRead, unit: "x"))
        results.append(Result(name: "sealed/plain write ratio", value: plainWrite / sealedWrite, unit: "x"))
        results.append(Result(name: "sealed/plain read ratio", value: plainRead / sealedRead, unit: "x"))
        t = now()
        for i in 0..<singleWrites { try p.storage.setItem("single-\(i)", "v") }
        results.append(Result(name: "sealed single-commit writes (fsync each)", value: Double(singleWrites) / (now() - t), unit: "ops/s"))
        // Where the time goes: the per-row crypto alone.
        let core = p.core
        t = now()
        try core.withKeys { (ks, rs) throws(PartitionError) in
            for (k, v) in pairs { _ = try core.seal(.storage, name: k, storedKey: [1, 2, 3], value: Array(v.utf8), scope: ks) }
        }
        results.append(Result(name: "breakdown: XChaCha20-Poly1305 seal of one value (inside one key scope)", value: Double(rows) / (now() - t), unit: "ops/s"))
        t = now()
        try core.withKeys { (ks, rs) throws(PartitionError) in
            for (k, _) in pairs { _ = core.storedKey(.storage, k, scope: rs) }
        }
        results.append(Result(name: "breakdown: row-key HMAC of one name (inside one key scope)", value: Double(rows) / (now() - t), unit: "ops/s"))
        t = now()
        for _ in 0..<10000 { try core.withKeys { (ks, rs) throws(PartitionError) in } }
        results.append(Result(name: "breakdown: opening the key scopes (storage key and row key, pinned: no mprotect), per read", value: 10000 / (now() - t), unit: "ops/s"))
        p.close()

        // Opening partitions, and memory per open partition.
        var ids: [SiteID] = []
        for i in 0..<partitions {
            ids.append(try registry.add(displayName: "p\(i)", origins: ["https://p\(i).bench.example"], appBound: false).id)
        }
        let rssBefore = residentBytes()
        t = now()
        var open: [Partition] = []
        for id in ids { open.append(try registry.openPartition(forIdentifier: id)) }
        for q in open { _ = try q.storage.getItem("x") }  // touch each connection once
        let openTime = now() - t
        let rssAfter = residentBytes()
        results.append(Result(name: "open \(partitions) partitions (integrity check + header)", value: openTime * 1000, unit: "ms"))
        results.append(Result(name: "memory per open partition (RSS delta / \(partitions))", value: Double(rssAfter - rssBefore) / Double(partitions) / 1024, unit: "KiB"))
        for q in open { q.close() }
        _ = found
        return results
    }

    static func now() -> Double { Double(Clocks.monotonicNanoseconds()) / 1e9 }

    /// CPU time of the whole process (user + system), seconds.
    static func cpu() -> Double { Double(Clocks.processCPUNanoseconds()) / 1e9 }

    /// Resident set size from /proc/self/statm.
    static func residentBytes() -> Int {
        guard let s = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = s.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
