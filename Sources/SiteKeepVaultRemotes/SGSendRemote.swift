public import SiteKeepVault
import SiteKeepCrypto
import SiteKeepHTTP
import SiteKeepJSON
import SiteKeepSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a remote presents to the vault server: the access token and the vault's write key.
/// Both stay in custody; a remote asks for them per request and drops them after.
public protocol RemoteCredentials: Sendable {
    /// The access token (`x-sgraph-access-token`), nil when the server needs none.
    func accessToken() throws(VaultError) -> String?
    /// The write key as 64 hex (`x-sgraph-vault-write-key`), nil for a read-only vault.
    func writeKeyHex() throws(VaultError) -> String?
    /// The access token's bytes, in an array the caller wipes once they are in the request's
    /// guarded header block: no `String` of the token outlives the call. nil when the server
    /// needs none. By default the UTF-8 of ``accessToken()``.
    func accessTokenBytes() throws(VaultError) -> [UInt8]?
}

extension RemoteCredentials {
    /// The UTF-8 of ``accessToken()`` (conformers that hold the token in guarded memory do better).
    public func accessTokenBytes() throws(VaultError) -> [UInt8]? {
        try accessToken().map { Array($0.utf8) }
    }
}

/// How a remote retries transient failures (network, 429, 502, 503, 504): until a time budget
/// per request is spent, not a count of attempts. A server that answers 429 with
/// `Retry-After: 1` to its first requests is waited for, as the sgit CLI waits.
public struct RetryPolicy: Sendable {
    /// The most wall time one request may take with its retries, the waits and the earlier
    /// attempts included, in milliseconds. No wait starts that would end past it: the request
    /// then fails at once, naming the status and when to try again. (Each attempt has its own
    /// time-outs; a retry starts only while the budget lasts.)
    public var budgetMs = 60_000
    /// The budget when the server gives no answer at all (refused connection, reset, time-out):
    /// it is likely down, or the network is, and a push left queued is retried later, so a
    /// command says so sooner.
    public var noAnswerBudgetMs = 10_000
    /// Waits between attempts without a `Retry-After`, in milliseconds; the last repeats
    /// (sgit: 2, 4, 8 s).
    public var backoffMs = [2_000, 4_000, 8_000]
    public init() {}

    /// The wait before attempt `attempt + 1` without a `Retry-After`.
    func backoff(after attempt: Int) -> Int {
        backoffMs.isEmpty ? 0 : backoffMs[min(max(attempt - 1, 0), backoffMs.count - 1)]
    }
}

/// The batches of one ``SGSendRemote/read(_:)``, gathered from their threads.
private final class GatheredFiles: Sendable {
    let files = Mutex<[String: [UInt8]]>([:])
}

/// Set by the first batch of a read that fails, so the batches not yet sent are not.
private final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

/// The SG/Send vault server's HTTP API (SGIT-FORMAT.md §7.1) as a ``VaultObjectStore``.
///
/// Reads go through `batch` (≤ 100 operations per request, several requests in flight), writes
/// too (≤ 50 operations and ~4 MiB of base64 per request);
/// blobs whose ciphertext is over 4 MiB use presigned multipart uploads when the server offers
/// them (S3 storage), else the plain `write` route. Every answer is checked: a batch must
/// answer every operation, each `ok`; object bytes are verified by the caller against their id.
public struct SGSendRemote: VaultObjectStore {
    /// The server's base URL (`https://host` or `http://127.0.0.1:port` for tests).
    public let baseURL: String
    public let vaultID: String
    let credentials: any RemoteCredentials
    let retry: RetryPolicy
    /// Certificate authorities to trust instead of the system's (a PEM file): tests, and a
    /// vault server under a private CA. nil for the system's store.
    package var caFile: String?
    /// Most operations and base64 bytes per write batch (sgit's client limits).
    static let maxOperations = 50
    /// Most reads per batch: the server's limit (`BATCH_MAX_OPERATIONS`, 100 in 0.34.0).
    static let maxReadOperations = 100
    /// Read batches in flight at once.
    static let parallelReads = 4
    static let maxBatchBytes = 4 << 20
    /// Ciphertext above this goes through presigned multipart when available.
    static let largeBytes = 4 << 20
    static let partBytes = 10 << 20
    /// The largest answer read of a batch read (its JSON parse's own limit), of a list, and of
    /// anything else (write answers are a few bytes per operation). Reading stops there.
    static let maxReadAnswerBytes = 128 << 20
    static let maxListAnswerBytes = 64 << 20

    /// Parts uploaded through presigned URLs by this process (for `vault status` and tests).
    public static var presignedPartsUploaded: Int { presignedParts.withLock { $0 } }
    static let presignedParts = Mutex(0)

    public init(baseURL: String, vaultID: String, credentials: any RemoteCredentials, retry: RetryPolicy = RetryPolicy()) throws(VaultError) {
        var url = baseURL
        while url.hasSuffix("/") { url.removeLast() }
        guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
            throw .invalidRemote("\(baseURL) is not an http(s) URL")
        }
        // The host as the URL's authority gives it: `http://localhost:1@host` is host's, not
        // loopback's (user information is refused outright). Every request is checked again,
        // by libcurl's own parser, before anything is sent (HTTPClient).
        guard HTTPClient.isAllowedURL(url) else {
            throw .invalidRemote("\(String(baseURL.prefix(200))) is refused: plain http only to loopback (127.0.0.1, localhost, [::1]), and no user@ in the URL; use https://host")
        }
        self.baseURL = url
        self.vaultID = vaultID
        self.credentials = credentials
        self.retry = retry
    }

    public var label: String { baseURL }
    public var isWritable: Bool { true }

    // MARK: requests

    /// The request's credential headers, in guarded memory that is wiped when the request is
    /// done: the access token (`x-sgraph-access-token` and `X-API-Key`) and, for a write, the
    /// write key (`x-sgraph-vault-write-key`). Nothing is sent when there are none.
    func credentialHeaders(write: Bool) throws(VaultError) -> SecretHeaderBlock {
        var values: [[UInt8]] = []
        var names: [String] = []
        defer { for i in values.indices { SecureMemory.zero(&values[i]) } }
        if var t = try credentials.accessTokenBytes() {
            // Two copies of their own (each wiped below), then the original wiped.
            if !t.isEmpty {
                values += [t.map { $0 }, t.map { $0 }]
                names += ["x-sgraph-access-token", "X-API-Key"]
            }
            SecureMemory.zero(&t)
        }
        if write {
            guard let w = try credentials.writeKeyHex() else { throw .readOnly(reason: "only the read key of vault \(vaultID) is known, so nothing can be pushed") }
            values.append(Array(w.utf8))   // the write key's hex String is SgitKeys' (custody); its bytes are wiped here
            names.append("x-sgraph-vault-write-key")
        }
        let lines = names.indices.map { (name: names[$0], valueCount: values[$0].count) }
        do {
            return try SecretHeaderBlock(lines: lines) { (i: Int, buffer: UnsafeMutableRawBufferPointer) throws(HTTPTransportError) in
                values[i].withUnsafeBytes { buffer.copyMemory(from: $0) }
            }
        } catch {
            throw .remote(remote: baseURL, reason: "the credentials cannot be sent: \(error.description)", transient: false, retryAfterMs: nil)
        }
    }

    /// One request with retries on transient failures; answers any HTTP status it got last.
    /// The answer's body may be at most `maxBytes`: reading stops there (issue 32), and the
    /// request fails without a retry.
    func send(_ method: String, _ path: String, body: [UInt8] = [], json: Bool = false, write: Bool, maxBytes: Int = 4 << 20) throws(VaultError) -> HTTPResponse {
        try exchange(method, path, body: body, json: json, write: write, maxBytes: maxBytes).response
    }

    /// ``send(_:_:body:json:write:maxBytes:)``, also answering whether an attempt before the
    /// last may have been carried out by the server though its answer was lost: no answer
    /// after the request went out, or a gateway's 502 or 504 (the server behind it may have
    /// done it). A 429 or 503 is a refusal: nothing was done. A compare-and-swap uses this to
    /// tell its own earlier write from another writer's (``writeIfMatch(fileID:bytes:expected:)``).
    ///
    /// Transient answers (no answer, 429, 502, 503, 504) are retried until the policy's time
    /// budget is spent: after the server's `Retry-After` (seconds or an HTTP-date) when it
    /// gives one, else after the back-off. A wait that would end past the budget is not
    /// started (a `Retry-After` of days fails at once): the request fails with the status,
    /// the route and when to try again.
    func exchange(_ method: String, _ path: String, body: [UInt8] = [], json: Bool = false, write: Bool, maxBytes: Int = 4 << 20) throws(VaultError) -> (response: HTTPResponse, uncertain: Bool) {
        let secret = try credentialHeaders(write: write)
        var h: [(String, String)] = []
        if json { h.append(("Content-Type", "application/json")) } else if !body.isEmpty || method == "PUT" { h.append(("Content-Type", "application/octet-stream")) }
        var request = HTTPRequest(method: method, url: baseURL + path, headers: h, body: body,
                                  totalTimeoutMs: Self.totalTimeoutMs(sending: body.count), maxResponseBytes: maxBytes)
        request.caFile = caFile
        let start = Clocks.monotonicMilliseconds()
        var attempt = 0, uncertain = false
        while true {
            attempt += 1
            let response: HTTPResponse
            do { response = try HTTPClient.send(request, secretHeaders: secret) } catch {
                switch error.kind {
                case .tooLarge(let limit):
                    throw .remote(remote: baseURL, reason: "the answer to \(method) \(Self.route(path)) is larger than \(Self.size(limit)), the most SiteKeep reads of it; it stopped reading there (is this a vault server?)", transient: false, retryAfterMs: nil)
                case .headersTooLarge, .refused, .unavailable:
                    throw .remote(remote: baseURL, reason: error.description, transient: false, retryAfterMs: nil)
                case .timeout, .network:
                    uncertain = true
                    let wait = retry.backoff(after: attempt)
                    if wait <= retry.noAnswerBudgetMs - (Clocks.monotonicMilliseconds() - start) { pause(wait); continue }
                    throw .remote(remote: baseURL, reason: "no answer (\(error.description)) to \(method) \(Self.route(path)) after \(attempt) \(attempt == 1 ? "try" : "tries") in \(Self.duration(Clocks.monotonicMilliseconds() - start)); check the network and the remote's URL", transient: true, retryAfterMs: nil)
                }
            }
            guard [429, 502, 503, 504].contains(response.status) else { return (response, uncertain) }
            let header = response.header("retry-after")
            let after = Self.retryAfterMs(parsing: header, nowMs: Int(Clocks.wallMilliseconds()))
            // `Retry-After: 0` (or a date gone by) again and again would be a loop as fast as
            // the server answers: a quarter of a second between tries at least.
            let wait = after.map { max($0, Self.minimumWaitMs) } ?? retry.backoff(after: attempt)
            let elapsed = Clocks.monotonicMilliseconds() - start
            if wait <= retry.budgetMs - elapsed {
                if response.status == 502 || response.status == 504 { uncertain = true }
                pause(wait)
                continue
            }
            throw giveUp(response, method: method, path: path, attempts: attempt, elapsedMs: elapsed, waitMs: wait, serverSaid: after != nil)
        }
    }

    /// The error of a request whose next wait would end past the retry budget.
    func giveUp(_ r: HTTPResponse, method: String, path: String, attempts: Int, elapsedMs: Int, waitMs: Int, serverSaid: Bool) -> VaultError {
        let what: String
        switch r.status {
        case 429: what = "429 (too many requests)"
        case 502: what = "502 (bad gateway)"
        case 503: what = "503 (service unavailable)"
        default: what = "504 (gateway time-out)"
        }
        let tries = attempts == 1 ? "once" : "\(attempts) times"
        let advice = r.status == 429 ? "the server is rate limiting" : "the server is unavailable"
        let when = serverSaid ? "try again in \(Self.duration(waitMs)) (its Retry-After)" : "try again later"
        let budget = serverSaid && waitMs > retry.budgetMs ? ", longer than SiteKeep waits in one request (\(Self.duration(retry.budgetMs)))" : ""
        return .remote(remote: baseURL, reason: "\(method) \(Self.route(path)) was answered \(what) \(tries) in \(Self.duration(elapsedMs))\(Self.detail(r.body)); \(advice): \(when)\(budget)",
                       transient: true, retryAfterMs: Self.retryAfterMs(r.header("retry-after")))
    }

    /// The shortest wait between two tries of a request, whatever `Retry-After` says.
    static let minimumWaitMs = 250

    /// The longest a request may take in all: 10 minutes, and a minute more for every 3 MB it
    /// sends (50 KB/s), so a large blob on a slow uplink is not cut off. A stalled exchange is
    /// ended sooner, by the stall time-out (under 1 KiB/s for 30 s).
    static func totalTimeoutMs(sending bytes: Int) -> Int { 600_000 + bytes / 50 }

    /// A request path without its vault id and query, for messages: `/api/vault/list`.
    static func route(_ path: String) -> String {
        let parts = path.prefix { $0 != "?" }.split(separator: "/")
        return "/" + parts.prefix(3).joined(separator: "/")
    }

    /// `64 MiB`, `512 KiB`.
    static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : bytes >= 1 << 10 ? "\(bytes >> 10) KiB" : "\(bytes) bytes"
    }

    /// Sleeps `ms` (never more than a day, whatever the caller asks).
    func pause(_ ms: Int) {
        var left = max(0, min(ms, 86_400_000))
        while left > 0 {
            let step = min(left, 1_000)
            usleep(UInt32(step) * 1000)
            left -= step
        }
    }

    /// `3 s`, `2 min`, `278 h`: a wait or an elapsed time for a message (seconds to the
    /// nearest, minutes and hours rounded up).
    static func duration(_ ms: Int) -> String {
        let s = (max(0, ms) + 500) / 1000
        return s < 120 ? "\(s) s" : s < 7_200 ? "\((s + 59) / 60) min" : "\((s + 3_599) / 3_600) h"
    }

    /// `Retry-After` for the queue and for messages: seconds or an HTTP-date, nil when absent,
    /// unreadable or a day or more away (a server's say is not taken for longer).
    static func retryAfterMs(_ value: String?) -> Int? {
        guard let ms = retryAfterMs(parsing: value, nowMs: Int(Clocks.wallMilliseconds())), ms < 86_400_000 else { return nil }
        return ms
    }

    /// `Retry-After` as the server gave it, in milliseconds from `nowMs`: delay-seconds (digits;
    /// a fraction is taken too) or an HTTP-date (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`;
    /// one in the past is 0). nil when absent or unreadable (a negative number, garbage).
    /// Bounded at ten years, so no arithmetic overflows on a hostile value; the retry budget
    /// decides what is waited for.
    static func retryAfterMs(parsing value: String?, nowMs: Int) -> Int? {
        guard let v = value?.trimmingSpaces(), !v.isEmpty, v.utf8.count <= 64 else { return nil }
        let cap = 10 * 365 * 86_400_000
        if v.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e }) {
            guard let s = Double(v), s.isFinite, s >= 0 else { return nil }
            return s * 1000 >= Double(cap) ? cap : Int(s * 1000)
        }
        guard let at = httpDateMs(v) else { return nil }
        return min(max(0, at - nowMs), cap)
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7) as milliseconds since the epoch; nil for any other form.
    static func httpDateMs(_ text: String) -> Int? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              ["Mon,", "Tue,", "Wed,", "Thu,", "Fri,", "Sat,", "Sun,"].contains(String(parts[0])),
              parts[1].count == 2, let day = Int(parts[1]), (1...31).contains(day),
              let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"].firstIndex(of: String(parts[2])),
              parts[3].count == 4, let year = Int(parts[3]), (1970...9999).contains(year) else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hh = Int(clock[0]), let mm = Int(clock[1]), let ss = Int(clock[2]),
              (0...23).contains(hh), (0...59).contains(mm), (0...60).contains(ss) else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = month < 2 ? year - 1 : year, m = month + 1
        let era = y / 400, yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000
    }

    /// Turns a non-2xx status into the error that names it.
    func failure(_ r: HTTPResponse, doing what: String) -> VaultError {
        let detail = Self.detail(r.body)
        switch r.status {
        case 401: return .remote(remote: baseURL, reason: "\(what): the access token was refused (401\(detail)); set the right one with `sitekeep vault remote add … --token-file`", transient: false, retryAfterMs: nil)
        case 403: return .remote(remote: baseURL, reason: "\(what): the server refused this vault's write key (403\(detail)): the vault id is taken by another vault, or the key is not this vault's", transient: false, retryAfterMs: nil)
        case 429: return .remote(remote: baseURL, reason: "\(what): rate limited (429)", transient: true, retryAfterMs: Self.retryAfterMs(r.header("retry-after")))
        case 300...399:
            // Never followed (issue 32): a redirect would take the token and write key to
            // wherever it points, perhaps another origin or plain http.
            let to = r.header("location").map { " to " + String($0.prefix(120).unicodeScalars.filter { $0.value > 0x20 && $0.value != 0x7f }.map(Character.init)) } ?? ""
            return .remote(remote: baseURL, reason: "\(what): the server answered \(r.status), a redirect\(to); the vault API has no redirects, so SiteKeep did not follow it and sent nothing there: check the remote's URL (`sitekeep vault remote add`)", transient: false, retryAfterMs: nil)
        case 500...599: return .remote(remote: baseURL, reason: "\(what): server error \(r.status)\(detail)", transient: true, retryAfterMs: Self.retryAfterMs(r.header("retry-after")))
        default: return .remote(remote: baseURL, reason: "\(what): unexpected status \(r.status)\(detail)", transient: false, retryAfterMs: nil)
        }
    }

    static func detail(_ body: [UInt8]) -> String {
        guard let v = try? JSONParser.parse(Array(body.prefix(4096))), let d = v["detail"]?.stringValue ?? v["message"]?.stringValue else { return "" }
        return ": " + String(d.prefix(200).unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.map(Character.init))
    }

    func malformed(_ what: String) -> VaultError {
        .remote(remote: baseURL, reason: "\(what): the answer is not what the vault API sends (garbage or a truncated body); nothing was stored", transient: true, retryAfterMs: nil)
    }

    var vaultPath: String { HTTPClient.percentEncode(vaultID) }

    // MARK: VaultObjectStore

    /// A fetch sends each full batch of blob ids while it still decodes trees: the server
    /// answers one request at a time, so the sooner the first is queued, the sooner it is done.
    public var readPipelining: ReadPipelining? { ReadPipelining(batch: Self.maxReadOperations, inFlight: Self.parallelReads) }

    /// Reads in batches of at most ``maxReadOperations`` (the server's own limit), up to
    /// ``parallelReads`` of them in flight at once: the server answers one while SiteKeep parses
    /// the last, instead of each waiting for the one before.
    public func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        let out = GatheredFiles()
        try read(fileIDs) { part in out.files.withLock { $0.merge(part) { a, _ in a } } }
        return out.files.withLock { $0 }
    }

    /// The same batches, each handed to `deliver` on the thread that read it as soon as it is
    /// parsed. After a failure no further batch is sent.
    public func read(_ fileIDs: [String], delivering deliver: @escaping @Sendable ([String: [UInt8]]) throws(VaultError) -> Void) throws(VaultError) {
        let chunks = stride(from: 0, to: fileIDs.count, by: Self.maxReadOperations).map {
            Array(fileIDs[$0..<min($0 + Self.maxReadOperations, fileIDs.count)])
        }
        let failed = StopFlag()
        let answers = SystemThread.map(chunks.count, width: Self.parallelReads) { i in
            Result { () throws(VaultError) in
                guard !failed.isSet else { return }
                do throws(VaultError) { try deliver(try readBatch(chunks[i])) } catch {
                    failed.set()
                    throw error
                }
            }
        }
        for answer in answers { try answer.get() }
    }

    /// One `batch` request of reads (at most ``maxReadOperations``).
    func readBatch(_ chunk: [String]) throws(VaultError) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        let body = JSONSerializer.bytes(.object([JSONMember(key: "operations", value: .array(chunk.map {
            .object([JSONMember(key: "op", value: "read"), JSONMember(key: "file_id", value: .string($0))])
        }))]))
        let r = try send("POST", "/api/vault/batch/\(vaultPath)", body: body, json: true, write: false, maxBytes: Self.maxReadAnswerBytes)
        guard r.status == 200 else { throw failure(r, doing: "batch read") }
        guard let doc = try? JSONParser.parse(r.body, limits: JSONLimits(maxBytes: 128 << 20, maxDepth: 8, maxStringBytes: 48 << 20, maxElements: 10_000)),
              let results = doc["results"]?.arrayValue, results.count == chunk.count else {
            throw malformed("batch read")
        }
        for (want, res) in zip(chunk, results) {
            guard res["file_id"]?.stringValue == want, let status = res["status"]?.stringValue else { throw malformed("batch read") }
            switch status {
            case "ok":
                guard let b64 = res["data"]?.stringValue, let bytes = try? Base64.decode(b64) else { throw malformed("batch read of \(want)") }
                out[want] = bytes
            case "not_found": continue
            default: throw malformed("batch read of \(want) (status \(status))")
            }
        }
        return out
    }

    public func list(prefix: String) throws(VaultError) -> [String] {
        let r = try send("GET", "/api/vault/list/\(vaultPath)?prefix=\(HTTPClient.percentEncode(prefix))", write: false, maxBytes: Self.maxListAnswerBytes)
        guard r.status == 200 else { throw failure(r, doing: "list") }
        guard let doc = try? JSONParser.parse(r.body, limits: JSONLimits(maxBytes: 64 << 20, maxDepth: 8, maxStringBytes: 4096, maxElements: 5_000_000)) else {
            throw malformed("list")
        }
        let files = doc["files"]?.arrayValue ?? doc.arrayValue
        guard let files else { throw malformed("list") }
        // Store files, and a pack vault's packs (§7.3), which only the fetch of a pull reads.
        return files.compactMap { $0.stringValue.flatMap { FileIDs.validate($0) ?? PackFile.parse($0)?.fileID } }
    }

    public func write(_ files: [StoredFile]) throws(VaultError) {
        var batch: [StoredFile] = [], bytes = 0
        func flush() throws(VaultError) {
            guard !batch.isEmpty else { return }
            try writeBatch(batch)
            batch = []; bytes = 0
        }
        for f in files {
            if f.bytes.count > Self.largeBytes {
                try flush()
                try writeLarge(f)
                continue
            }
            let cost = (f.bytes.count + 2) / 3 * 4 + 200
            if batch.count == Self.maxOperations || bytes + cost > Self.maxBatchBytes { try flush() }
            batch.append(f); bytes += cost
        }
        try flush()
    }

    func writeBatch(_ files: [StoredFile]) throws(VaultError) {
        let body = JSONSerializer.bytes(.object([JSONMember(key: "operations", value: .array(files.map {
            .object([JSONMember(key: "op", value: "write"), JSONMember(key: "file_id", value: .string($0.fileID)),
                     JSONMember(key: "data", value: .string(Base64.encode($0.bytes)))])
        }))]))
        let r = try send("POST", "/api/vault/batch/\(vaultPath)", body: body, json: true, write: true)
        guard r.status == 200 else { throw failure(r, doing: "batch write") }
        guard let doc = try? JSONParser.parse(r.body), let results = doc["results"]?.arrayValue, results.count == files.count,
              results.allSatisfy({ $0["status"]?.stringValue == "ok" }) else {
            throw malformed("batch write")
        }
    }

    /// A large blob: presigned multipart (S3-backed servers), else the plain write route.
    func writeLarge(_ f: StoredFile) throws(VaultError) {
        if try writePresigned(f) { return }
        let r = try send("PUT", "/api/vault/write/\(vaultPath)/\(HTTPClient.percentEncode(f.fileID))", body: f.bytes, write: true)
        guard (200...299).contains(r.status) else { throw failure(r, doing: "write \(f.fileID)") }
    }

    /// Uploads through presigned multipart; false when the server does not offer it.
    func writePresigned(_ f: StoredFile) throws(VaultError) -> Bool {
        let parts = (f.bytes.count + Self.partBytes - 1) / Self.partBytes
        let initiate = JSONSerializer.bytes(.object([
            JSONMember(key: "file_id", value: .string(f.fileID)), JSONMember(key: "file_size_bytes", value: .integer(f.bytes.count)),
            JSONMember(key: "num_parts", value: .integer(parts)),
        ]))
        let r = try send("POST", "/api/vault/presigned/initiate/\(vaultPath)", body: initiate, json: true, write: true)
        if [400, 404, 405, 501].contains(r.status) { return false }
        guard r.status == 200 else { throw failure(r, doing: "presigned initiate") }
        guard let doc = try? JSONParser.parse(r.body), let upload = doc["upload_id"]?.stringValue,
              let urls = doc["part_urls"]?.arrayValue, urls.count == parts else { throw malformed("presigned initiate") }
        let partSize = Int(doc["part_size"]?.intValue ?? Int64(Self.partBytes))
        var done: [JSONValue] = []
        for (i, p) in urls.enumerated() {
            guard let url = p["upload_url"]?.stringValue, let n = p["part_number"]?.intValue else { throw malformed("presigned initiate") }
            let lo = i * partSize, hi = min(f.bytes.count, lo + partSize)
            guard lo < hi else { throw malformed("presigned initiate (parts)") }
            let put = try putPart(url: url, body: Array(f.bytes[lo..<hi]))
            guard (200...299).contains(put.status), let etag = put.header("etag") else {
                _ = try? send("POST", "/api/vault/presigned/cancel/\(vaultPath)", body: JSONSerializer.bytes(.object([
                    JSONMember(key: "file_id", value: .string(f.fileID)), JSONMember(key: "upload_id", value: .string(upload))])), json: true, write: true)
                throw .remote(remote: baseURL, reason: "presigned upload of part \(n) answered \(put.status)", transient: true, retryAfterMs: nil)
            }
            done.append(.object([JSONMember(key: "part_number", value: .int(n)), JSONMember(key: "etag", value: .string(etag))]))
            Self.presignedParts.withLock { $0 += 1 }
        }
        let complete = JSONSerializer.bytes(.object([
            JSONMember(key: "file_id", value: .string(f.fileID)), JSONMember(key: "upload_id", value: .string(upload)),
            JSONMember(key: "parts", value: .array(done)),
        ]))
        let c = try send("POST", "/api/vault/presigned/complete/\(vaultPath)", body: complete, json: true, write: true)
        guard c.status == 200 else { throw failure(c, doing: "presigned complete") }
        return true
    }

    /// One part to the storage URL the server handed out (no SiteKeep credential goes there).
    func putPart(url: String, body: [UInt8]) throws(VaultError) -> HTTPResponse {
        guard HTTPClient.isAllowedURL(url) else {
            throw .remote(remote: baseURL, reason: "the presigned upload URL is neither https nor loopback; refused", transient: false, retryAfterMs: nil)
        }
        do {
            var request = HTTPRequest(method: "PUT", url: url, body: body, timeoutMs: 300_000,
                                      totalTimeoutMs: Self.totalTimeoutMs(sending: body.count), maxResponseBytes: 1 << 20)
            request.caFile = caFile
            return try HTTPClient.send(request)
        } catch {
            throw .remote(remote: baseURL, reason: "presigned upload: no answer (\(error.description))", transient: true, retryAfterMs: nil)
        }
    }

    public func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool {
        var op: [JSONMember] = [JSONMember(key: "op", value: "write-if-match"), JSONMember(key: "file_id", value: .string(fileID)),
                                JSONMember(key: "data", value: .string(Base64.encode(bytes)))]
        op.append(JSONMember(key: "match", value: expected.map { .string(Base64.encode($0)) } ?? .null))
        let body = JSONSerializer.bytes(.object([JSONMember(key: "operations", value: .array([.object(op)]))]))
        let (r, uncertain) = try exchange("POST", "/api/vault/batch/\(vaultPath)", body: body, json: true, write: true)
        guard r.status == 200 else { throw failure(r, doing: "write-if-match \(fileID)") }
        guard let doc = try? JSONParser.parse(r.body), let res = doc["results"]?.arrayValue?.first, let status = res["status"]?.stringValue else {
            throw malformed("write-if-match")
        }
        switch status {
        case "ok": return true
        case "conflict":
            // A retried compare-and-swap whose first try may have been done (its answer lost,
            // or a gateway's 502/504) finds the file no longer `expected`: perhaps because it
            // holds these very bytes. Sealed with a fresh nonce, nobody else writes them.
            guard uncertain else { return false }
            return try readBatch([fileID])[fileID] == bytes
        default: throw malformed("write-if-match (status \(status))")
        }
    }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
