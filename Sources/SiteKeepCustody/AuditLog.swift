#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Synchronization
internal import CLinux
import SiteKeepCrypto

/// One key use, as the audit log records it. Holds no secret material: ids, names and
/// outcomes only.
public struct AuditEntry: Sendable, Equatable, Codable {
    /// Sequence number in the file, from 1.
    public let seq: Int
    /// Wall-clock time, ISO 8601 UTC with milliseconds.
    public let time: String
    /// The site that asked (`-` for the local CLI).
    public let site: String
    /// The operation: `unlock`, `lock`, `sign`, `rotate`, `import`, `slot.add`, ...
    public let op: String
    /// The key (or slot) used, `-` when none.
    public let key: String
    /// `ok`, or a short failure reason (`denied`, `locked`, `failed`, ...).
    public let result: String
    /// Age of the presence proof in milliseconds, when one was used.
    public let presenceAgeMs: Int?
    /// SHA-256 (hex) of the previous line, or the file's genesis value for the first line.
    public let prev: String

    enum CodingKeys: String, CodingKey {
        case seq, time, site, op, key, result, presenceAgeMs = "presence_age_ms", prev
    }
}

/// The outcome of ``AuditLog/verify()``.
public struct AuditVerification: Sendable, Equatable {
    /// How many lines were read.
    public let lineCount: Int
    /// The first line (1-based) that breaks the chain, or nil when the log is intact.
    public let firstBadLine: Int?
    /// Why that line is bad.
    public let reason: String?
    /// Whether every line chains to its predecessor.
    public var isIntact: Bool { firstBadLine == nil }
}

/// The hash-chained audit log of key uses: JSON lines in `audit.log` (0600) in the store home.
///
/// Each line carries the SHA-256 of the previous line's bytes (the first line: a genesis value
/// derived from the store id), so an edited, removed or reordered line breaks the chain at the
/// line after it. A line is written (`write(2)`) before the call that logged it returns; fsync
/// is grouped: at most ``syncInterval`` after a write, and at once when the last fsync is older.
///
/// - Note: a hash chain detects changes inside the log; it cannot detect the last lines being
///   cut off or the whole file being rewritten by someone with write access.
public final class AuditLog: Sendable {
    /// The log file's path.
    public let path: String
    /// The first line's `prev` value.
    public let genesis: String
    /// The longest time a written line waits for its fsync.
    public let syncInterval: Duration

    private struct State: Sendable {
        var fd: Int32
        var prev: String
        var seq: Int
        var lastSyncNs: Int64
        var syncScheduled: Bool
        /// The file size after our last write: another size means another process appended.
        var end: Int64
    }
    private let state: Mutex<State>

    static let maximumFieldLength = 200

    /// The genesis value of a store's log.
    public static func genesis(storeID: String) -> String {
        Hex.encode(SHA256.hash(Array("sitekeep.audit.v1\0\(storeID)".utf8)))
    }

    /// Opens (creating if needed, mode 0600) the log at `path` and finds its chain head.
    /// - Throws: ``CustodyError/io(_:)``.
    public init(path: String, genesis: String, syncInterval: Duration = .milliseconds(50)) throws(CustodyError) {
        self.path = path
        self.genesis = genesis
        self.syncInterval = syncInterval
        let fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io("cannot open audit log \(path): \(Files.errno_())") }
        let size = Int64(lseek(fd, 0, SEEK_END))
        let (prev, seq) = Self.head(fd: fd, size: size, genesis: genesis)
        state = Mutex(State(fd: fd, prev: prev, seq: seq, lastSyncNs: 0, syncScheduled: false, end: size))
    }

    /// The chain head (hash of the last complete line, its sequence number) of a file of `size` bytes.
    static func head(fd: Int32, size: Int64, genesis: String) -> (String, Int) {
        guard size > 0 else { return (genesis, 0) }
        let window = Int(min(size, 16384))
        var buf = [UInt8](repeating: 0, count: window)
        let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, window, off_t(size - Int64(window))) }
        guard n == window else { return (genesis, 0) }
        var lines = buf.split(separator: 0x0a, omittingEmptySubsequences: true)
        if buf.last != 0x0a, !lines.isEmpty { lines.removeLast() }  // a torn last line is not extended
        guard let last = lines.last else { return (genesis, 0) }
        let seq = (try? JSONDecoder().decode(AuditEntry.self, from: Data(last)))?.seq ?? 0
        return (Hex.encode(SHA256.hash(last)), seq)
    }

    deinit {
        state.withLock { s in
            _ = fsync(s.fd)
            close(s.fd)
        }
    }

    /// Appends one entry and returns once its line is written (fsync grouped, see the type).
    /// - Throws: ``CustodyError/io(_:)`` when the line could not be written; the caller must
    ///   then not return the result it was logging.
    public func append(site: String?, op: String, key: String?, result: String,
                       presenceAgeMs: Int? = nil, now: Int64 = AuditLog.wallClockMs()) throws(CustodyError) {
        let needsSchedule: Bool = try state.withLock { (s: inout State) throws(CustodyError) -> Bool in
            // Several processes (the daemon, a one-shot CLI command) may append to one log:
            // take the file lock and re-read the head if someone else wrote since we did.
            _ = flock(s.fd, LOCK_EX)
            defer { _ = flock(s.fd, LOCK_UN) }
            let size = Int64(lseek(s.fd, 0, SEEK_END))
            if size != s.end { (s.prev, s.seq) = Self.head(fd: s.fd, size: size, genesis: genesis) }
            var line = "{\"seq\":\(s.seq + 1),\"time\":\"\(Self.iso8601(ms: now))\",\"site\":\(Self.json(site ?? "-"))"
            line += ",\"op\":\(Self.json(op)),\"key\":\(Self.json(key ?? "-")),\"result\":\(Self.json(result))"
            if let age = presenceAgeMs { line += ",\"presence_age_ms\":\(age)" }
            line += ",\"prev\":\"\(s.prev)\"}"
            let bytes = Array(line.utf8)
            guard Files.writeAll(s.fd, bytes + [0x0a]) else {
                throw .io("cannot append to the audit log \(path): \(Files.errno_())")
            }
            s.prev = Hex.encode(SHA256.hash(bytes))
            s.seq += 1
            s.end = size + Int64(bytes.count + 1)
            let nowNs = Int64(BootClock.system.nanoseconds())
            let interval = syncInterval.components.seconds * 1_000_000_000 + syncInterval.components.attoseconds / 1_000_000_000
            if nowNs - s.lastSyncNs >= interval {
                _ = fsync(s.fd)
                s.lastSyncNs = nowNs
                return false
            }
            if s.syncScheduled { return false }
            s.syncScheduled = true
            return true
        }
        if needsSchedule {
            let ms = Int(syncInterval.components.seconds * 1000 + syncInterval.components.attoseconds / 1_000_000_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(max(ms, 1))) { [weak self] in
                self?.flush()
            }
        }
    }

    /// fsyncs everything written so far.
    public func flush() {
        state.withLock { s in
            _ = fsync(s.fd)
            s.lastSyncNs = Int64(BootClock.system.nanoseconds())
            s.syncScheduled = false
        }
    }

    /// Reads and checks the whole log.
    public func verify() throws(CustodyError) -> AuditVerification {
        try Self.verify(path: path, genesis: genesis)
    }

    /// Reads and checks a log file: every line must be a valid entry whose `seq` follows the
    /// previous one and whose `prev` is the SHA-256 of the previous line (the genesis value
    /// for the first).
    public static func verify(path: String, genesis: String) throws(CustodyError) -> AuditVerification {
        let bytes = try Files.readIfExists(path, limit: 1 << 30) ?? []
        var expected = genesis
        var number = 0
        var start = 0
        let decoder = JSONDecoder()
        while start < bytes.count {
            guard let end = bytes[start...].firstIndex(of: 0x0a) else {
                return AuditVerification(lineCount: number + 1, firstBadLine: number + 1, reason: "the last line is incomplete")
            }
            number += 1
            let line = bytes[start..<end]
            start = end + 1
            guard let entry = try? decoder.decode(AuditEntry.self, from: Data(line)) else {
                return AuditVerification(lineCount: number, firstBadLine: number, reason: "not a valid audit entry")
            }
            guard entry.seq == number else {
                return AuditVerification(lineCount: number, firstBadLine: number, reason: "sequence number \(entry.seq) where \(number) was expected (a line was removed, added or moved)")
            }
            guard entry.prev == expected else {
                return AuditVerification(lineCount: number, firstBadLine: number, reason: "does not chain to the line before it (that line was edited, removed or moved)")
            }
            expected = Hex.encode(SHA256.hash(line))
        }
        return AuditVerification(lineCount: number, firstBadLine: nil, reason: nil)
    }

    /// This log's entries, for `sitekeep log show` (unverified: run ``verify()`` for that).
    public func entries() throws(CustodyError) -> [AuditEntry] { try Self.entries(path: path) }

    /// The entries of a log file, for `sitekeep log show` (unverified: run ``verify()`` for that).
    public static func entries(path: String) throws(CustodyError) -> [AuditEntry] {
        let bytes = try Files.readIfExists(path, limit: 1 << 30) ?? []
        let decoder = JSONDecoder()
        return bytes.split(separator: 0x0a).compactMap { try? decoder.decode(AuditEntry.self, from: Data($0)) }
    }

    /// Milliseconds since the Unix epoch.
    public static func wallClockMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    static func iso8601(ms: Int64) -> String {
        var t = time_t(ms / 1000)
        var tmv = tm()
        gmtime_r(&t, &tmv)
        func pad(_ v: Int32, _ n: Int) -> String { let s = String(v); return String(repeating: "0", count: max(0, n - s.count)) + s }
        return "\(pad(tmv.tm_year + 1900, 4))-\(pad(tmv.tm_mon + 1, 2))-\(pad(tmv.tm_mday, 2))T\(pad(tmv.tm_hour, 2)):\(pad(tmv.tm_min, 2)):\(pad(tmv.tm_sec, 2)).\(pad(Int32(ms % 1000), 3))Z"
    }

    /// A JSON string literal, truncated to ``maximumFieldLength`` characters.
    static func json(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars.prefix(maximumFieldLength) {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7f || (0x2028...0x2029).contains(scalar.value) {
                    let h = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
