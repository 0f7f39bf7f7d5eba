import Foundation
import Synchronization
import SiteKeepCrypto
import SiteKeepJSON
public import SiteKeepVocabulary

/// An open handle on one site's partition: the analogue of `WKWebsiteDataStore(forIdentifier:)`.
///
/// A handle reaches only its own site's data; there is no parameter that names another site.
/// Handles are counted by the ``SiteRegistry``: while any is open the site cannot be removed
/// without `force`. Close a handle with ``close()`` (dropping it closes it too).
///
/// ```swift
/// let partition = try registry.openPartition(forIdentifier: site.id)
/// defer { partition.close() }
/// try partition.storage.setItem("theme", "dark")
/// ```
public final class Partition: Sendable {
    /// The site this partition belongs to.
    public let site: SiteID
    package let core: PartitionCore
    private let closed = Mutex(false)
    private let release: @Sendable () -> Void

    init(core: PartitionCore, release: @escaping @Sendable () -> Void) {
        self.site = core.site
        self.core = core
        self.release = release
    }

    deinit { close() }

    /// Closes this handle. Idempotent; later calls on it throw ``PartitionError/partitionClosed``.
    public func close() {
        let wasOpen = closed.withLock { c in
            defer { c = true }
            return !c
        }
        if wasOpen { release() }
    }

    /// Whether this handle can still be used: not closed, and its partition not closed by the
    /// registry (the site was removed or changed, here or in another process).
    public var isOpen: Bool { !closed.withLock { $0 } && core.isOpen }

    func openCore() throws(PartitionError) -> PartitionCore {
        if closed.withLock({ $0 }) { throw .partitionClosed }
        return core
    }

    /// The `localStorage`-like key/value namespace.
    public var storage: StorageArea { StorageArea(partition: self) }
    /// The offline cache.
    public var cache: OfflineCache { OfflineCache(partition: self) }

    /// The rows of a namespace a caller names (SiteKeepCore keeps tabs and reading state so):
    /// opaque byte values under string names, sealed as every row is. The partition's own
    /// namespaces (``PartitionNamespace/builtIn``) are not reachable this way.
    public func rows(_ namespace: PartitionNamespace) -> SealedRows { SealedRows(partition: self, namespace: namespace) }

    /// Runs `PRAGMA integrity_check` and opens every sealed value of the partition's own
    /// namespaces, of `namespaces` and of every namespace this handle's partition used so far.
    /// - Throws: ``PartitionError/damaged(site:reason:)`` when anything fails.
    public func verify(namespaces: [PartitionNamespace] = []) throws(PartitionError) {
        let core = try openCore()
        for ns in namespaces { try core.declareCallers(ns) }
        try core.verify([])
    }

    /// The stored form of a row (for the isolation audit).
    package func rawRow(namespace: PartitionNamespace, name: String) throws(PartitionError) -> RawRow? {
        let core = try openCore()
        try core.declare(namespace)
        return try core.rawRow(namespace, name)
    }

    /// Overwrites a row's sealed bytes (for the isolation audit: moved and swapped rows).
    package func writeRawRow(namespace: PartitionNamespace, name: String, sealedValue: [UInt8]) throws(PartitionError) {
        let core = try openCore()
        try core.declare(namespace)
        try core.writeRaw(namespace, name, sealedValue: sealedValue)
    }
}

/// The rows of one caller's namespace: byte values under string names, each sealed and bound
/// to the site, the namespace and its name. A value has at most
/// ``PartitionLimits/maximumRecordBytes``; a name at most ``PartitionLimits/maximumKeyBytes``.
/// The first use of a namespace on a partition checks it (``PartitionNamespace``).
public struct SealedRows: Sendable {
    let partition: Partition
    /// The namespace these rows are in.
    public let namespace: PartitionNamespace

    private func core() throws(PartitionError) -> PartitionCore {
        let core = try partition.openCore()
        try core.declareCallers(namespace)
        return core
    }

    /// The opened value of `name`, or nil.
    public func value(_ name: String) throws(PartitionError) -> [UInt8]? {
        try core().get(namespace, name)
    }

    /// Writes `rows` in one transaction (all or nothing), then removes the rows named in
    /// `removing` (no error for an absent one). Every name is checked before anything is written.
    public func update(_ rows: [(String, [UInt8])], removing: [String] = []) throws(PartitionError) {
        let core = try core()
        for name in removing { try core.checkKey(name) }
        try core.put(namespace, rows, quota: nil, maxValue: core.limits.maximumRecordBytes)
        for name in removing { try core.remove(namespace, name) }
    }

    /// Every row, sorted by name, each name once by its UTF-8 bytes; any damaged row fails the call.
    public func all() throws(PartitionError) -> [SealedRow] {
        try core().all(namespace).map { SealedRow(name: $0.name, value: $0.value) }
    }

    /// Removes every row of the namespace.
    public func clear() throws(PartitionError) { try core().clear(namespace) }

    /// The damage error for this namespace (for a caller whose value does not decode).
    public var damage: PartitionError {
        .damaged(site: partition.site.string, reason: .authenticationFailed(namespace: namespace.rawValue))
    }
}

/// A site's key/value store with `localStorage` semantics: string keys, string values, a quota.
///
/// Sizes count the UTF-8 bytes of keys and values. A write that would exceed the quota throws
/// ``PartitionError/quotaExceeded(namespace:limit:wouldUse:)`` and changes nothing.
public struct StorageArea: Sendable {
    let partition: Partition

    /// The value for `key`, or nil.
    public func getItem(_ key: String) throws(PartitionError) -> String? {
        let core = try partition.openCore()
        return try core.get(.storage, key) { (bytes) throws(PartitionError) -> String in try Self.string(bytes, core) }
    }

    /// The values of several keys at once (the keys are unlocked once for the batch); absent
    /// keys are left out of the result. Keys that differ only in Unicode normal form are one key
    /// of the returned dictionary; ``items()`` lists every stored key exactly.
    public func getItems(_ keys: [String]) throws(PartitionError) -> [String: String] {
        let core = try partition.openCore()
        return try core.getMany(.storage, keys) { (bytes) throws(PartitionError) -> String in try Self.string(bytes, core) }
    }

    /// An opened value as a string; bytes that are not UTF-8 are damage.
    private static func string(_ bytes: UnsafeRawBufferPointer, _ core: PartitionCore) throws(PartitionError) -> String {
        guard let s = validUTF8String(bytes) else { throw core.damage(.storage) }
        return s
    }

    /// Sets `key` to `value`.
    public func setItem(_ key: String, _ value: String) throws(PartitionError) {
        try setItems([(key, value)])
    }

    /// Sets several items in one transaction (all or nothing).
    public func setItems(_ items: [(String, String)]) throws(PartitionError) {
        let core = try partition.openCore()
        try core.put(.storage, items, quota: core.limits.storageQuota, maxValue: core.limits.storageQuota)
    }

    /// Removes `key` (no error when absent).
    public func removeItem(_ key: String) throws(PartitionError) {
        try partition.openCore().remove(.storage, key)
    }

    /// All keys, sorted.
    public func keys() throws(PartitionError) -> [String] {
        try partition.openCore().all(.storage).map(\.name)
    }

    /// Every item, sorted by key, each key once by its UTF-8 bytes (what an export writes).
    public func items() throws(PartitionError) -> [StorageItem] {
        let core = try partition.openCore()
        var out: [StorageItem] = []
        for row in try core.all(.storage) {
            guard let value = row.value.withUnsafeBytes({ validUTF8String($0) }) else { throw core.damage(.storage) }
            out.append(StorageItem(key: row.name, value: value))
        }
        return out
    }

    /// Removes every item.
    public func clear() throws(PartitionError) { try partition.openCore().clear(.storage) }

    /// Bytes used (UTF-8 of keys and values).
    public func usage() throws(PartitionError) -> Int { try partition.openCore().usage(.storage) }
}

/// The offline cache: entries (URL → status, headers, body hash) and bodies stored once per
/// SHA-256, within a size budget; beyond it the least recently used entries are evicted.
public struct OfflineCache: Sendable {
    let partition: Partition

    /// Stores `resource`, replacing any entry for its URL, then evicts least recently used
    /// entries until the cache fits its budget.
    /// - Throws: ``PartitionError/valueTooLarge(limit:actual:)`` when the resource alone exceeds the budget.
    public func store(_ resource: CachedResource) throws(PartitionError) {
        try partition.openCore().cacheStore(resource)
    }

    /// The cached resource for `url` (marks it recently used), or nil.
    public func resource(for url: String) throws(PartitionError) -> CachedResource? {
        try partition.openCore().cacheLookup(url)
    }

    /// Removes the entry for `url` (and its body when no other entry uses it).
    public func remove(_ url: String) throws(PartitionError) {
        try partition.openCore().cacheRemove(url)
    }

    /// The cached URLs, sorted.
    public func urls() throws(PartitionError) -> [String] {
        try partition.openCore().all(.cache).map(\.name)
    }

    /// Bytes used by entries and bodies.
    public func usage() throws(PartitionError) -> Int {
        let core = try partition.openCore()
        return try core.usage(.cache) + core.usage(.cacheBody)
    }

    /// Empties the cache.
    public func clear() throws(PartitionError) {
        let core = try partition.openCore()
        try core.clear(.cache)
        try core.clear(.cacheBody)
    }
}

/// A cache entry's row in the `cache` namespace: status, headers and the body's SHA-256 (the
/// body is its own row in `cache-body`, named `sha256:<hex>`).
struct CacheEntryRecord: Equatable {
    var status: Int
    var headers: [HeaderField]
    var sha256: String

    /// The row value: `{"status":200,"headers":[{"name":…,"value":…}],"sha256":"…"}`, compact,
    /// through SiteKeepJSON. Foundation's `JSONEncoder` wrote these rows before with the same
    /// members in whatever order its dictionary gave (and `/` as `\/`); no reader compares the
    /// bytes, and either reader reads either form.
    func encoded() -> [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "status", value: .integer(status)),
            JSONMember(key: "headers", value: .array(headers.map { .object(["name": .string($0.name), "value": .string($0.value)]) })),
            JSONMember(key: "sha256", value: .string(sha256)),
        ]))
    }

    /// A row in this form or the one `JSONEncoder` wrote, read as `JSONDecoder` read it (members
    /// in any order, unknown ones ignored, `\/` escapes, a status written `200.0`); nil when the
    /// bytes are not such a row.
    static func decoded(_ bytes: some Collection<UInt8>) -> CacheEntryRecord? {
        guard let value = try? JSONParser.parse(bytes, limits: .document), case .object = value,
              let sha256 = value["sha256"]?.stringValue, let items = value["headers"]?.arrayValue else { return nil }
        let status: Int
        switch value["status"] {
        case .int(let i)?: guard let s = Int(exactly: i) else { return nil }; status = s
        case .double(let d)?: guard let s = Int(exactly: d) else { return nil }; status = s
        default: return nil
        }
        var headers: [HeaderField] = []
        for item in items {
            guard case .object = item, let name = item["name"]?.stringValue, let v = item["value"]?.stringValue else { return nil }
            headers.append(HeaderField(name: name, value: v))
        }
        return CacheEntryRecord(status: status, headers: headers, sha256: sha256)
    }
}

extension PartitionCore {
    static func bodyName(_ sha: [UInt8]) -> String { "sha256:" + Hex.encode(sha) }

    func cacheStore(_ r: CachedResource) throws(PartitionError) {
        try checkKey(r.url)
        if r.url.isEmpty { throw .invalidValue("cache URL is empty") }
        let sha = SHA256.hash(r.body)
        let record = CacheEntryRecord(status: r.status, headers: r.headers, sha256: Hex.encode(sha))
        let entry = record.encoded()
        let bodyName = Self.bodyName(sha)
        let needed = r.url.utf8.count + entry.count + bodyName.utf8.count + r.body.count
        if needed > limits.cacheBudget { throw .valueTooLarge(limit: limits.cacheBudget, actual: needed) }
        try withBox { (box, db) throws(PartitionError) in
            try withKeys { (ks, rs) throws(PartitionError) in
                try transaction(box, db) { () throws(PartitionError) in
                    let bk = storedKey(.cacheBody, bodyName, scope: rs)
                    if try rowSize(db, .cacheBody, bk) == nil {
                        let sealed = try seal(.cacheBody, name: bodyName, storedKey: bk, value: r.body, scope: ks)
                        try upsert(box, db, .cacheBody, bk, sealed, size: bodyName.utf8.count + r.body.count, oldSize: nil)
                    }
                    let ek = storedKey(.cache, r.url, scope: rs)
                    let old = try rowSize(db, .cache, ek)
                    let sealed = try seal(.cache, name: r.url, storedKey: ek, value: Array(entry), scope: ks)
                    try upsert(box, db, .cache, ek, sealed, size: r.url.utf8.count + entry.count, oldSize: old, ref: bk)
                    try collectBodies(box, db)
                    while total(box, .cache) + total(box, .cacheBody) > limits.cacheBudget {
                        let victim = try sqlite { () throws(SQLiteFailure) -> [UInt8]? in
                            let st = try db.statement("SELECT k FROM kv WHERE ns=? AND k<>? ORDER BY used LIMIT 1")
                            try st.bind(1, PartitionNamespace.cache.code); try st.bind(2, ek)
                            defer { st.reset() }
                            return try st.step() ? st.blob(0) : nil
                        }
                        guard let victim else { break }
                        try deleteRow(box, db, .cache, victim)
                        try collectBodies(box, db)
                    }
                }
            }
        }
    }

    /// Deletes bodies no entry refers to.
    func collectBodies(_ box: PartitionBox, _ db: SQLiteConnection) throws(PartitionError) {
        try sqlite { () throws(SQLiteFailure) in
            let del = try db.statement("DELETE FROM kv WHERE ns=? AND k NOT IN (SELECT ref FROM kv WHERE ns=? AND ref IS NOT NULL)")
            try del.bind(1, PartitionNamespace.cacheBody.code); try del.bind(2, PartitionNamespace.cache.code)
            try del.run()
            let sum = try db.statement("SELECT COALESCE(SUM(size), 0) FROM kv WHERE ns=?")
            try sum.bind(1, PartitionNamespace.cacheBody.code)
            defer { sum.reset() }
            box.totals[PartitionNamespace.cacheBody.code] = try sum.step() ? Int(sum.int64(0)) : 0
        }
    }

    func cacheLookup(_ url: String) throws(PartitionError) -> CachedResource? {
        try checkKey(url)
        return try withBox { (box, db) throws(PartitionError) -> CachedResource? in
            try withKeys { (ks, rs) throws(PartitionError) -> CachedResource? in
                let damage = PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: "cache"))
                let ek = storedKey(.cache, url, scope: rs)
                guard let row = try fetch(db, .cache, ek) else { return nil }
                let entryBytes = try open(.cache, storedKey: ek, sealed: row.v, expectedName: url, scope: ks).value
                guard let record = CacheEntryRecord.decoded(entryBytes) else { throw damage }
                let bodyName = "sha256:" + record.sha256
                let bk = storedKey(.cacheBody, bodyName, scope: rs)
                if !faults.skipsValueBinding, row.ref != bk { throw damage }
                guard let bodyRow = try fetch(db, .cacheBody, bk) else { throw damage }
                let body = try open(.cacheBody, storedKey: bk, sealed: bodyRow.v, expectedName: bodyName, scope: ks).value
                guard Hex.encode(SHA256.hash(body)) == record.sha256 else { throw damage }
                box.clock += 1
                let clock = box.clock
                try sqlite { () throws(SQLiteFailure) in
                    let st = try db.statement("UPDATE kv SET used=? WHERE ns=? AND k=?")
                    try st.bind(1, clock); try st.bind(2, PartitionNamespace.cache.code); try st.bind(3, ek)
                    try st.run()
                }
                return CachedResource(url: url, status: record.status, headers: record.headers, body: body)
            }
        }
    }

    func cacheRemove(_ url: String) throws(PartitionError) {
        try checkKey(url)
        try withBox { (box, db) throws(PartitionError) in
            let ek = withRowScope { rs in storedKey(.cache, url, scope: rs) }
            try transaction(box, db) { () throws(PartitionError) in
                try deleteRow(box, db, .cache, ek)
                try collectBodies(box, db)
            }
        }
    }
}
