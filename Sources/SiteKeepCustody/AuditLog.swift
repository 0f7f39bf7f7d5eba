#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
internal import CLinux
import SiteKeepCrypto
import SiteKeepSystem
internal import SiteKeepJSON
public import SiteKeepNames

/// One key use, as the audit log records it. Holds no secret material: ids, names and
/// outcomes only.
///
/// This is the read side: an entry holds what a line on disk says, as strings, because a log
/// holds lines older versions wrote (and ``AuditLog/verify()`` must read every one of them as
/// written). The write side, ``AuditLog/append(client:op:key:result:presenceAgeMs:prompt:detail:now:)``,
/// takes the client and the op typed.
public struct AuditEntry: Sendable, Equatable {
    /// Sequence number in the file, from 1.
    public let seq: Int
    /// Wall-clock time, ISO 8601 UTC with milliseconds.
    public let time: String
    /// The client that asked, as written (``KeyUseClient/auditName``: a site id, `command-line`,
    /// `ssh-agent`, `-` for SiteKeep itself).
    public let site: String
    /// The operation, as written: `unlock`, `lock`, `sign`, `team.rotate`, `slot.add`, ...
    /// (an ``OpName``'s spelling).
    public let op: String
    /// The key (or slot) used, `-` when none.
    public let key: String
    /// `ok`, or a short failure reason (`denied`, `locked`, `failed`, ...).
    public let result: String
    /// Age of the presence proof in milliseconds, when one was used.
    public let presenceAgeMs: Int?
    /// The id of the presence prompt whose approval this use rests on, when one was used
    /// (absent in lines written before prompts had ids).
    public let prompt: String?
    /// What was signed or changed, in a few words, when the caller said (for the SSH agent:
    /// the kind of data, an SSHSIG namespace, the bound destination host). Absent in older lines.
    public let detail: String?
    /// SHA-256 (hex) of the previous line, or the file's genesis value for the first line.
    public let prev: String

    /// An entry.
    public init(seq: Int, time: String, site: String, op: String, key: String, result: String,
                presenceAgeMs: Int? = nil, prompt: String? = nil, detail: String? = nil, prev: String) {
        self.seq = seq
        self.time = time
        self.site = site
        self.op = op
        self.key = key
        self.result = result
        self.presenceAgeMs = presenceAgeMs
        self.prompt = prompt
        self.detail = detail
        self.prev = prev
    }

    /// Reads one log line (without its newline): the required members with their types, the
    /// optional ones absent or null; members it does not know are ignored. Nil when the line
    /// is not an entry.
    public static func decode(_ line: some Collection<UInt8>) -> AuditEntry? {
        do {
            var r = try JSONObjectReader(JSONParser.parse(line), path: "")
            guard let seq = Int(exactly: try r.int("seq")) else { return nil }
            var age: Int? = nil
            if let v = r.optional("presence_age_ms"), !v.isNull {
                guard let i = v.intValue, let n = Int(exactly: i) else { return nil }
                age = n
            }
            return AuditEntry(seq: seq, time: try r.string("time"), site: try r.string("site"), op: try r.string("op"),
                              key: try r.string("key"), result: try r.string("result"), presenceAgeMs: age,
                              prompt: try r.optionalString("prompt"), detail: try r.optionalString("detail"), prev: try r.string("prev"))
        } catch {
            return nil
        }
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
    /// The last line the keyring's anchor vouches for (nil: the log has no anchor to check).
    public let anchoredThrough: Int?
    /// Whether every line chains to its predecessor and the log reaches its anchor.
    public var isIntact: Bool { firstBadLine == nil }

    /// A verification result.
    public init(lineCount: Int, firstBadLine: Int?, reason: String?, anchoredThrough: Int? = nil) {
        self.lineCount = lineCount
        self.firstBadLine = firstBadLine
        self.reason = reason
        self.anchoredThrough = anchoredThrough
    }
}

/// The hash-chained audit log of key uses: JSON lines in `audit.log` (0600) in the store home.
///
/// Each line carries the SHA-256 of the previous line's bytes (the first line: a genesis value
/// derived from the store id), so an edited, removed or reordered line breaks the chain at the
/// line after it. A line is written (`write(2)`) before the call that logged it returns; fsync
/// is grouped: at most ``syncInterval`` after a write, and at once when the last fsync is older
/// (on the caller's thread, or on another with ``syncInBackground()``).
///
/// A hash chain detects changes inside the log, not the last lines being cut off or the whole
/// file being rewritten. For that the custodian's log anchors its head in the keyring
/// (``AuditAnchor``): ``verify()`` then also checks that the log reaches the anchored line and
/// that this line is the one anchored. Lines written since the last anchor (about a second) can
/// still be cut unnoticed.
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
        /// Whether this process appended since its last anchor hand-over.
        var unanchored = false
        var timeCache = TimeCache()
    }

    /// The ISO 8601 text of the current second, recomputed only when the second changes.
    struct TimeCache: Sendable {
        var second: Int64 = .min
        var prefix: [UInt8] = []
        mutating func iso8601(ms: Int64) -> [UInt8] {
            let sec = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
            if sec != second {
                second = sec
                prefix = Array(AuditLog.iso8601(ms: sec * 1000).utf8.dropLast(5))   // "YYYY-MM-DDTHH:MM:SS"
            }
            let frac = Int(ms - sec * 1000)
            return prefix + [0x2e, UInt8(0x30 + frac / 100), UInt8(0x30 + frac / 10 % 10), UInt8(0x30 + frac % 10), 0x5a]
        }
    }

    static func put(_ s: String, _ out: inout [UInt8]) { out.append(contentsOf: s.utf8) }

    static func putDecimal(_ v: Int, _ out: inout [UInt8]) {
        if v < 0 { out.append(0x2d); putDecimal(v == .min ? .max : -v, &out); return }
        if v >= 10 { putDecimal(v / 10, &out) }
        out.append(UInt8(0x30 + v % 10))
    }

    /// Appends `s` as a JSON string literal (truncated like ``json(_:)``); plain ASCII is copied
    /// byte for byte, anything else goes through ``json(_:)``.
    static func putJSON(_ s: String, _ out: inout [UInt8]) {
        var plain = true
        var count = 0
        for b in s.utf8 {
            count += 1
            if b < 0x20 || b >= 0x7f || b == 0x22 || b == 0x5c || count > maximumFieldLength { plain = false; break }
        }
        if plain {
            out.append(0x22); out.append(contentsOf: s.utf8); out.append(0x22)
        } else {
            out.append(contentsOf: json(s).utf8)
        }
    }
    private let state: Mutex<State>
    /// Whether no append waits for an fsync (``syncInBackground()``).
    private let backgroundSync = Atomic<Bool>(false)
    /// Whether appends leave every fsync to ``flush()`` (``syncOnFlushOnly()``).
    private let syncOnFlush = Atomic<Bool>(false)
    /// Told of each fsync the log makes (a test counting them passes one; production none).
    private let onSync: (@Sendable () -> Void)?
    /// Where the head is anchored (nil: a bare log, checked by its chain only).
    let anchor: AuditAnchor?

    static let maximumFieldLength = 200

    /// The genesis value of a store's log.
    public static func genesis(storeID: String) -> String {
        Hex.encode(SHA256.hash(Array("sitekeep.audit.v1\0\(storeID)".utf8)))
    }

    /// Opens (creating if needed, mode 0600) the log at `path` and finds its chain head. A log
    /// opened this way has no anchor: ``verify()`` checks its chain only.
    /// - Throws: ``CustodyError/io(_:)``.
    public convenience init(path: String, genesis: String, syncInterval: Duration = .milliseconds(50)) throws(CustodyError) {
        try self.init(path: path, genesis: genesis, syncInterval: syncInterval, anchor: nil)
    }

    /// A bare log whose every fsync calls `onSync` (how a test sees when lines reach the disk).
    /// - Throws: ``CustodyError/io(_:)``.
    package convenience init(path: String, genesis: String, syncInterval: Duration = .milliseconds(50),
                             onSync: @escaping @Sendable () -> Void) throws(CustodyError) {
        try self.init(path: path, genesis: genesis, syncInterval: syncInterval, anchor: nil, onSync: onSync)
    }

    /// Opens the log with its head anchored by `anchor`.
    init(path: String, genesis: String, syncInterval: Duration = .milliseconds(50), anchor: AuditAnchor?,
         onSync: (@Sendable () -> Void)? = nil) throws(CustodyError) {
        self.path = path
        self.onSync = onSync
        self.genesis = genesis
        self.syncInterval = syncInterval
        self.anchor = anchor
        let fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io("\(SystemError.current("open the audit log", path))") }
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
        let seq = AuditEntry.decode(last)?.seq ?? 0
        return (Hex.encode(SHA256.hash(last)), seq)
    }

    deinit {
        finish()
        _ = state.withLock { s in close(s.fd) }
    }

    /// What a one-shot process does on its way out (and releasing the log does): fsyncs every
    /// line written and anchors the head, unless another writer anchored within the anchor's
    /// interval (then the next one anchors these lines too).
    public func finish() {
        let (fd, head) = state.withLock { s -> (Int32, AuditAnchor.Head?) in
            defer { s.unanchored = false }
            return (s.fd, s.unanchored ? AuditAnchor.Head(seq: s.seq, hash: s.prev) : nil)
        }
        try? FileIO.sync(fd)
        onSync?()
        anchor?.flush(with: head, unlessWrittenWithin: anchor?.interval)
    }

    /// Appends one entry and returns once its line is written (fsync grouped, see the type).
    ///
    /// The line's `site` is `client`'s ``KeyUseClient/auditName`` and its `op` the op's
    /// spelling, the bytes older versions wrote. `key` stays text: it names a key id, a key's
    /// version (`id@v3`), a slot or a keyring item (`vault-key/NAME`, `storage-key/SITE`), each
    /// spelled as the log has always spelled it (nil: `-`).
    /// - Throws: ``CustodyError/io(_:)`` when the line could not be written; the caller must
    ///   then not return the result it was logging.
    public func append(client: KeyUseClient, op: OpName, key: String?, result: String,
                       presenceAgeMs: Int? = nil, prompt: String? = nil, detail: String? = nil, now: Int64 = AuditLog.wallClockMs()) throws(CustodyError) {
        // What to do after the line is written, outside the lock: fsync now (the last fsync is
        // older than the interval), schedule one, or nothing. Other threads append meanwhile.
        enum After { case syncNow(Int32, AuditAnchor.Head), schedule(afterNs: Int64), nothing }
        let after: After = try state.withLock { (s: inout State) throws(CustodyError) -> After in
            // Several processes (the daemon, a one-shot CLI command) may append to one log:
            // take the file lock and re-read the head if someone else wrote since we did.
            _ = try? FileLock.lock(fd: s.fd)
            defer { FileLock.unlock(fd: s.fd) }
            let size = Int64(lseek(s.fd, 0, SEEK_END))
            if size != s.end { (s.prev, s.seq) = Self.head(fd: s.fd, size: size, genesis: genesis) }
            // Built as bytes with an ASCII fast path: this runs once per signature.
            var line = [UInt8]()
            line.reserveCapacity(320)
            Self.put("{\"seq\":", &line); Self.putDecimal(s.seq + 1, &line)
            Self.put(",\"time\":\"", &line); line += s.timeCache.iso8601(ms: now); line.append(0x22)
            Self.put(",\"site\":", &line); Self.putJSON(client.auditName, &line)
            Self.put(",\"op\":", &line); Self.putJSON(op.string, &line)
            Self.put(",\"key\":", &line); Self.putJSON(key ?? "-", &line)
            Self.put(",\"result\":", &line); Self.putJSON(result, &line)
            if let age = presenceAgeMs { Self.put(",\"presence_age_ms\":", &line); Self.putDecimal(age, &line) }
            if let prompt { Self.put(",\"prompt\":", &line); Self.putJSON(prompt, &line) }
            if let detail { Self.put(",\"detail\":", &line); Self.putJSON(detail, &line) }
            Self.put(",\"prev\":\"", &line); Self.put(s.prev, &line); Self.put("\"}", &line)
            let hash = SHA256.hash(line)
            line.append(0x0a)
            do throws(Errno) { try Files.writeAll(s.fd, line) } catch {
                throw .io("\(SystemError("append to the audit log", path, errno: error))")
            }
            s.prev = Hex.encode(hash)
            s.seq += 1
            s.end = size + Int64(line.count)
            s.unanchored = true
            if syncOnFlush.load(ordering: .relaxed) { return .nothing }
            let nowNs = Int64(BootClock.system.nanoseconds())
            let interval = syncInterval.components.seconds * 1_000_000_000 + syncInterval.components.attoseconds / 1_000_000_000
            let idle = nowNs - s.lastSyncNs >= interval
            if idle, !backgroundSync.load(ordering: .relaxed) {
                s.lastSyncNs = nowNs
                return .syncNow(s.fd, AuditAnchor.Head(seq: s.seq, hash: s.prev))
            }
            if s.syncScheduled { return .nothing }
            s.syncScheduled = true
            // After an idle spell at once (on another thread), else when the interval since the
            // last fsync ends: never more than the interval after this write.
            return .schedule(afterNs: idle ? 0 : s.lastSyncNs + interval - nowNs)
        }
        switch after {
        case .nothing:
            break
        case .syncNow(let fd, let head):
            // The fd stays open while `self` lives (only deinit closes it).
            try? FileIO.sync(fd)
            onSync?()
            // On disk now: the background writer may anchor it (never on this thread).
            anchor?.advance(to: head)
        case .schedule(let afterNs):
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(max(afterNs, 0)))) { [weak self] in
                self?.sync(anchorNow: false)
            }
        }
    }

    /// From now on no append waits for an fsync: the first line after an idle spell is synced at
    /// once on another thread instead of the caller's, the rest grouped as before, each on disk
    /// at most ``syncInterval`` after its write.
    ///
    /// For a long-running process that answers requests (the daemon: an `ssh-keygen -Y sign`
    /// or a login must not wait for the disk), which ``flush()``es on its way out. A one-shot
    /// command keeps the default, where a line written after an idle spell, usually its only
    /// one, is on disk before its call returns.
    public func syncInBackground() {
        backgroundSync.store(true, ordering: .relaxed)
    }

    /// From now on appends only write their lines: one ``finish()`` fsyncs them all and anchors
    /// the head. For a one-shot reader (`sitekeep-read`) whose whole run, a few milliseconds,
    /// is shorter than ``syncInterval``: its lines are on disk before it exits, as the daemon's
    /// are within the interval, for one fsync instead of one per idle spell and a timer thread.
    /// The caller must ``finish()`` before it exits (releasing the log does too).
    public func syncOnFlushOnly() {
        syncOnFlush.store(true, ordering: .relaxed)
    }

    /// fsyncs everything written so far and anchors the head at once. Appends go on while it
    /// syncs (the lock is not held across the fsync); a line written during it is covered by
    /// the next one.
    public func flush() {
        sync(anchorNow: true)
    }

    /// fsyncs, then hands the head to the anchor (stored now, or by the background writer).
    func sync(anchorNow: Bool) {
        let (fd, head) = state.withLock { s -> (Int32, AuditAnchor.Head?) in
            s.lastSyncNs = Int64(BootClock.system.nanoseconds())
            s.syncScheduled = false
            defer { s.unanchored = false }
            return (s.fd, s.unanchored ? AuditAnchor.Head(seq: s.seq, hash: s.prev) : nil)
        }
        try? FileIO.sync(fd)
        onSync?()
        guard let anchor else { return }
        if anchorNow {
            anchor.flush(with: head)
        } else if let head {
            anchor.advance(to: head)
        }
    }

    /// Anchors the log's current head (this process's or another's), on disk first: for a new
    /// store, and for a store whose log predates anchors.
    func anchorCurrentHead() throws(CustodyError) {
        guard let anchor else { return }
        let (fd, head) = state.withLock { s -> (Int32, AuditAnchor.Head) in
            _ = try? FileLock.lock(fd: s.fd)
            defer { FileLock.unlock(fd: s.fd) }
            let size = Int64(lseek(s.fd, 0, SEEK_END))
            if size != s.end { (s.prev, s.seq) = Self.head(fd: s.fd, size: size, genesis: genesis); s.end = size }
            s.unanchored = false
            return (s.fd, AuditAnchor.Head(seq: s.seq, hash: s.prev))
        }
        try? FileIO.sync(fd)
        try anchor.write(head)
    }

    /// Reads and checks the whole log: its chain, and, when it is anchored, that it reaches the
    /// anchored line and that this line is the one anchored (a cut tail or a rewritten file).
    public func verify() throws(CustodyError) -> AuditVerification {
        guard let anchor else { return try Self.verify(path: path, genesis: genesis) }
        // The anchor first: a line appended between the two reads only lengthens the log.
        let stored = try anchor.load()
        let anchoredSeq: Int? = if case .record(let r) = stored { r.head.seq } else { nil }
        let (chain, hashOfAnchored) = try Self.chain(path: path, genesis: genesis, hashOfLine: anchoredSeq)
        guard chain.isIntact else { return chain }
        let n = chain.lineCount
        switch stored {
        case .record(let record):
            let h = record.head
            guard n >= h.seq else {
                return AuditVerification(lineCount: n, firstBadLine: n + 1, reason: "the log ends at line \(n), but the keyring's anchor says line \(h.seq) was written: lines were cut from the end")
            }
            guard (h.seq == 0 ? genesis : hashOfAnchored) == h.hash else {
                return AuditVerification(lineCount: n, firstBadLine: max(h.seq, 1), reason: "line \(h.seq) is not the line the keyring's anchor recorded: the log was rewritten")
            }
            return AuditVerification(lineCount: n, firstBadLine: nil, reason: nil, anchoredThrough: h.seq)
        case .missing, .damaged:
            // A store from before anchors has none until it is first opened; any other store does.
            guard anchor.marker.isPresent else { return chain }
            let what = stored == .missing ? "holds no anchor for this log" : "holds a damaged anchor for this log"
            return AuditVerification(lineCount: n, firstBadLine: n + 1, reason: "the keyring \(what), though this store keeps one: it was removed or edited, so a cut tail or a rewrite cannot be ruled out")
        }
    }

    /// Reads and checks a log file: every line must be a valid entry whose `seq` follows the
    /// previous one and whose `prev` is the SHA-256 of the previous line (the genesis value
    /// for the first).
    public static func verify(path: String, genesis: String) throws(CustodyError) -> AuditVerification {
        try chain(path: path, genesis: genesis, hashOfLine: nil).0
    }

    /// The chain check of ``verify(path:genesis:)``, and the SHA-256 (hex) of line `hashOfLine`.
    static func chain(path: String, genesis: String, hashOfLine wanted: Int?) throws(CustodyError) -> (AuditVerification, String?) {
        var found: String? = nil
        let bytes = try Files.readIfExists(path, limit: 1 << 30) ?? []
        var expected = genesis
        var number = 0
        var start = 0
        while start < bytes.count {
            guard let end = bytes[start...].firstIndex(of: 0x0a) else {
                return (AuditVerification(lineCount: number + 1, firstBadLine: number + 1, reason: "the last line is incomplete"), nil)
            }
            number += 1
            let line = bytes[start..<end]
            start = end + 1
            guard let entry = AuditEntry.decode(line) else {
                return (AuditVerification(lineCount: number, firstBadLine: number, reason: "not a valid audit entry"), nil)
            }
            guard entry.seq == number else {
                return (AuditVerification(lineCount: number, firstBadLine: number, reason: "sequence number \(entry.seq) where \(number) was expected (a line was removed, added or moved)"), nil)
            }
            guard entry.prev == expected else {
                return (AuditVerification(lineCount: number, firstBadLine: number, reason: "does not chain to the line before it (that line was edited, removed or moved)"), nil)
            }
            expected = Hex.encode(SHA256.hash(line))
            if number == wanted { found = expected }
        }
        return (AuditVerification(lineCount: number, firstBadLine: nil, reason: nil), found)
    }

    /// This log's entries, for `sitekeep log show` (unverified: run ``verify()`` for that).
    public func entries() throws(CustodyError) -> [AuditEntry] { try Self.entries(path: path) }

    /// The entries of a log file, for `sitekeep log show` (unverified: run ``verify()`` for that).
    public static func entries(path: String) throws(CustodyError) -> [AuditEntry] {
        let bytes = try Files.readIfExists(path, limit: 1 << 30) ?? []
        return bytes.split(separator: 0x0a).compactMap { AuditEntry.decode($0) }
    }

    /// Milliseconds since the Unix epoch: SiteKeepSystem's ``Clocks/wallMilliseconds()``, the
    /// default `now` of ``append(client:op:key:result:presenceAgeMs:prompt:detail:now:)``.
    public static func wallClockMs() -> Int64 { Clocks.wallMilliseconds() }

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
