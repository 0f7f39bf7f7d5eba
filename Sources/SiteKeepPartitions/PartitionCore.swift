import Foundation
import Glibc
import Synchronization
import SiteKeepCustody
import SiteKeepCrypto

/// The mutable state behind a partition's lock. Not Sendable: only reached inside `Mutex.withLock`.
final class PartitionBox {
    var connection: SQLiteConnection?
    var totals: [Int64: Int] = [:]
    var clock: Int64 = 0
    var removed = false
    init(connection: SQLiteConnection) { self.connection = connection }
}

/// Length-prefixed concatenation: each part as a 4-byte big-endian length and its bytes, so
/// the boundaries are unambiguous.
func lengthPrefixed(_ parts: [[UInt8]]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(parts.reduce(0) { $0 + 4 + $1.count })
    for p in parts {
        let n = UInt32(p.count)
        out += [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)]
        out += p
    }
    return out
}

/// Appends `bytes` with its 4-byte big-endian length in front.
func appendLengthPrefixed(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
    let n = UInt32(bytes.count)
    out.append(UInt8(n >> 24)); out.append(UInt8(n >> 16 & 0xFF)); out.append(UInt8(n >> 8 & 0xFF)); out.append(UInt8(n & 0xFF))
    out.append(contentsOf: bytes)
}

/// One site's database connection and keys: the single owner of the connection.
///
/// All work happens inside one `Mutex`; batches take the key scopes once.
final class PartitionCore: Sendable {
    let site: SiteID
    let limits: PartitionLimits
    let faults: AuditFaults
    let path: String
    /// The site id's bytes, bound into every value's associated data.
    let siteBytes: [UInt8]
    private let key: SymmetricKeyHandle
    private let rowKey: SymmetricKeyHandle
    private let state: Mutex<PartitionBox>

    static let schema = """
        CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, v BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE kv(ns INTEGER NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, size INTEGER NOT NULL,
                        used INTEGER NOT NULL DEFAULT 0, ref BLOB, PRIMARY KEY(ns, k)) WITHOUT ROWID;
        CREATE INDEX kv_used ON kv(ns, used);
        """
    static let headerText = "sitekeep-partition-v1"

    private init(site: SiteID, path: String, key: SymmetricKeyHandle, rowKey: SymmetricKeyHandle,
                 limits: PartitionLimits, faults: AuditFaults, connection: sending SQLiteConnection) {
        self.site = site; self.path = path; self.key = key; self.rowKey = rowKey
        self.siteBytes = Array(site.string.utf8)
        self.limits = limits; self.faults = faults
        self.state = Mutex(PartitionBox(connection: connection))
    }

    static func mapSQLite(_ f: SQLiteFailure, site: SiteID) -> PartitionError {
        if f.isCorruption { return .damaged(site: site.string, reason: .notADatabase(f.message)) }
        return .storageFailure("SQLite error \(f.code): \(f.message)")
    }

    /// Opens (or, with `create`, creates) the partition at `path`, checks its integrity and its
    /// sealed header.
    static func open(site: SiteID, path: String, key: SymmetricKeyHandle, create: Bool,
                     limits: PartitionLimits, faults: AuditFaults) throws(PartitionError) -> PartitionCore {
        if create {
            let fd = Glibc.open(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw .storageFailure("cannot create \(path): \(String(cString: strerror(errno)))") }
            close(fd)
        } else if !FileManager.default.fileExists(atPath: path) {
            throw .damaged(site: site.string, reason: .missing)
        }
        let rowKey: SymmetricKeyHandle
        do { rowKey = try key.deriveSubkey(info: Array("row-key".utf8)) } catch { throw .keyUnavailable(error.description) }
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, create: false)
        } catch {
            if error.isCorruption { throw .damaged(site: site.string, reason: .notADatabase(error.message)) }
            throw .storageFailure("cannot open the partition database: \(error.message)")
        }
        do {
            let check = try connection.textRows("PRAGMA quick_check")
            guard check == ["ok"] else {
                throw PartitionError.damaged(site: site.string, reason: .integrityCheckFailed(check.prefix(3).joined(separator: "; ")))
            }
        } catch let e as PartitionError { throw e } catch let f as SQLiteFailure {
            throw .damaged(site: site.string, reason: f.isCorruption ? .notADatabase(f.message) : .integrityCheckFailed(f.message))
        } catch { throw .storageFailure("\(error)") }

        let core = PartitionCore(site: site, path: path, key: key, rowKey: rowKey, limits: limits, faults: faults, connection: connection)
        try core.prepare(create: create)
        return core
    }

    private func prepare(create: Bool) throws(PartitionError) {
        try withBox { (box, db) throws(PartitionError) in
            let headerAD = self.associatedData(namespace: "meta", storedKey: Array("header".utf8))
            do {
                if create {
                    let sealed: [UInt8]
                    do { sealed = try key.seal(Array((Self.headerText + ":" + site.string).utf8), authenticating: headerAD) }
                    catch { throw PartitionError.keyUnavailable("\(error)") }
                    try db.transaction { () throws(SQLiteFailure) in
                        try db.exec(Self.schema)
                        let st = try db.statement("INSERT INTO meta(name, v) VALUES('header', ?)")
                        try st.bind(1, sealed)
                        try st.run()
                    }
                } else {
                    let tables = try db.textRows("SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name")
                    guard tables == ["kv", "meta"] else {
                        throw PartitionError.damaged(site: site.string, reason: .integrityCheckFailed("unexpected schema"))
                    }
                    let st = try db.statement("SELECT v FROM meta WHERE name='header'")
                    guard try st.step(), let sealed = st.blob(0) else {
                        throw PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: "header"))
                    }
                    st.reset()
                    guard let plain = try? key.open(sealed, authenticating: headerAD),
                          plain == Array((Self.headerText + ":" + site.string).utf8) else {
                        throw PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: "header"))
                    }
                }
                try refreshTotals(box: box, db: db)
            } catch let e as PartitionError { throw e }
            catch let f as SQLiteFailure { throw Self.mapSQLite(f, site: site) }
            catch let t as TransactionFailure<SQLiteFailure> {
                switch t { case .sqlite(let f), .body(let f): throw Self.mapSQLite(f, site: site) }
            } catch { throw .storageFailure("\(error)") }
        }
    }

    private func refreshTotals(box: PartitionBox, db: SQLiteConnection) throws(SQLiteFailure) {
        box.totals = [:]
        let st = try db.statement("SELECT ns, COALESCE(SUM(size), 0), COALESCE(MAX(used), 0) FROM kv GROUP BY ns")
        var clock: Int64 = 0
        while try st.step() {
            box.totals[st.int64(0)] = Int(st.int64(1))
            clock = max(clock, st.int64(2))
        }
        st.reset()
        box.clock = clock
    }

    // MARK: - Lock and crypto helpers

    /// Runs `body` with the connection, under the lock.
    func withBox<R: Sendable>(_ body: (PartitionBox, SQLiteConnection) throws(PartitionError) -> R) throws(PartitionError) -> R {
        try state.withLock { (box: inout PartitionBox) throws(PartitionError) -> R in
            if box.removed { throw PartitionError.siteRemoved(site.string) }
            guard let db = box.connection else { throw PartitionError.partitionClosed }
            return try body(box, db)
        }
    }

    /// Closes the connection (checkpointing the WAL). With `removed`, later use reports removal.
    func shutdown(removed: Bool) {
        state.withLock { box in
            box.connection = nil
            if removed { box.removed = true }
        }
    }

    func associatedData(namespace: String, storedKey: [UInt8]) -> [UInt8] {
        var ad: [UInt8] = Array("SKP1".utf8)
        if faults.contains(.skipValueBinding) {
            appendLengthPrefixed(siteBytes, to: &ad)
            return ad
        }
        ad.reserveCapacity(4 + 12 + siteBytes.count + namespace.utf8.count + storedKey.count)
        appendLengthPrefixed(siteBytes, to: &ad)
        appendLengthPrefixed(namespace.utf8, to: &ad)
        appendLengthPrefixed(storedKey, to: &ad)
        return ad
    }

    /// The keyed hash a row's name is stored as.
    func storedKey(_ ns: PartitionNamespace, _ name: String, scope: borrowing KeyScope) -> [UInt8] {
        var message: [UInt8] = []
        message.reserveCapacity(8 + ns.rawValue.utf8.count + name.utf8.count)
        appendLengthPrefixed(ns.rawValue.utf8, to: &message)
        appendLengthPrefixed(name.utf8, to: &message)
        return scope.authenticationCode(for: message)
    }

    /// Runs `body` with both key scopes open once.
    func withKeys<R>(_ body: (borrowing KeyScope, borrowing KeyScope) throws(PartitionError) -> R) throws(PartitionError) -> R {
        try key.withScope { (ks: borrowing KeyScope) throws(PartitionError) -> R in
            try rowKey.withScope { (rs: borrowing KeyScope) throws(PartitionError) -> R in
                try body(ks, rs)
            }
        }
    }

    func seal(_ ns: PartitionNamespace, name: String, storedKey: [UInt8], value: [UInt8], scope: borrowing KeyScope) throws(PartitionError) -> [UInt8] {
        var plain: [UInt8] = []
        plain.reserveCapacity(4 + name.utf8.count + value.count)
        appendLengthPrefixed(name.utf8, to: &plain)
        plain.append(contentsOf: value)
        do { return try scope.seal(plain, authenticating: associatedData(namespace: ns.rawValue, storedKey: storedKey)) }
        catch { throw .keyUnavailable(error.description) }
    }

    /// Opens a sealed row; any failure is damage, never a value.
    func open(_ ns: PartitionNamespace, storedKey: [UInt8], sealed: [UInt8], expectedName: String?, scope: borrowing KeyScope) throws(PartitionError) -> (name: String, value: [UInt8]) {
        let damage = PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: ns.rawValue))
        guard let plain = try? scope.open(sealed, authenticating: associatedData(namespace: ns.rawValue, storedKey: storedKey)),
              plain.count >= 4 else { throw damage }
        let n = Int(plain[0]) << 24 | Int(plain[1]) << 16 | Int(plain[2]) << 8 | Int(plain[3])
        guard plain.count >= 4 + n, let name = String(validating: plain[4..<(4 + n)], as: UTF8.self) else { throw damage }
        if !faults.contains(.skipValueBinding), let expectedName, name != expectedName { throw damage }
        return (name, Array(plain[(4 + n)...]))
    }

    func sqlite<R>(_ body: () throws(SQLiteFailure) -> R) throws(PartitionError) -> R {
        do { return try body() } catch { throw Self.mapSQLite(error, site: site) }
    }

    /// Runs `body` in one transaction; on failure rolls back and recomputes the running totals.
    func transaction<R>(_ box: PartitionBox, _ db: SQLiteConnection, _ body: () throws(PartitionError) -> R) throws(PartitionError) -> R {
        do {
            return try db.transaction(body)
        } catch {
            try? refreshTotals(box: box, db: db)
            switch error {
            case .sqlite(let f): throw Self.mapSQLite(f, site: site)
            case .body(let e): throw e
            }
        }
    }

    // MARK: - Row primitives (inside withBox)

    func checkKey(_ name: String) throws(PartitionError) {
        let n = name.utf8.count
        if n > limits.maximumKeyBytes { throw .keyTooLong(limit: limits.maximumKeyBytes, actual: n) }
    }

    func rowSize(_ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8]) throws(PartitionError) -> Int? {
        try sqlite { () throws(SQLiteFailure) -> Int? in
            let st = try db.statement("SELECT size FROM kv WHERE ns=? AND k=?")
            try st.bind(1, ns.code); try st.bind(2, k)
            defer { st.reset() }
            return try st.step() ? Int(st.int64(0)) : nil
        }
    }

    func fetch(_ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8]) throws(PartitionError) -> (v: [UInt8], ref: [UInt8]?)? {
        try sqlite { () throws(SQLiteFailure) -> (v: [UInt8], ref: [UInt8]?)? in
            let st = try db.statement("SELECT v, ref FROM kv WHERE ns=? AND k=?")
            try st.bind(1, ns.code); try st.bind(2, k)
            defer { st.reset() }
            guard try st.step() else { return nil }
            return (st.blob(0) ?? [], st.blob(1))
        }
    }

    func upsert(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8], _ v: [UInt8], size: Int, oldSize: Int?, ref: [UInt8]? = nil) throws(PartitionError) {
        box.clock += 1
        let clock = box.clock
        try sqlite { () throws(SQLiteFailure) in
            let st = try db.statement("INSERT OR REPLACE INTO kv(ns, k, v, size, used, ref) VALUES(?, ?, ?, ?, ?, ?)")
            try st.bind(1, ns.code); try st.bind(2, k); try st.bind(3, v); try st.bind(4, Int64(size)); try st.bind(5, clock)
            if let ref { try st.bind(6, ref) } else { st.bindNull(6) }
            try st.run()
        }
        box.totals[ns.code, default: 0] += size - (oldSize ?? 0)
    }

    func deleteRow(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8]) throws(PartitionError) {
        guard let old = try rowSize(db, ns, k) else { return }
        try sqlite { () throws(SQLiteFailure) in
            let st = try db.statement("DELETE FROM kv WHERE ns=? AND k=?")
            try st.bind(1, ns.code); try st.bind(2, k)
            try st.run()
        }
        box.totals[ns.code, default: 0] -= old
    }

    func deleteAll(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) {
        try sqlite { () throws(SQLiteFailure) in
            let st = try db.statement("DELETE FROM kv WHERE ns=?")
            try st.bind(1, ns.code)
            try st.run()
        }
        box.totals[ns.code] = 0
    }

    func allRows(_ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) -> [(k: [UInt8], v: [UInt8])] {
        try sqlite { () throws(SQLiteFailure) -> [(k: [UInt8], v: [UInt8])] in
            let st = try db.statement("SELECT k, v FROM kv WHERE ns=? ORDER BY k")
            try st.bind(1, ns.code)
            defer { st.reset() }
            var out: [(k: [UInt8], v: [UInt8])] = []
            while try st.step() { out.append((st.blob(0) ?? [], st.blob(1) ?? [])) }
            return out
        }
    }

    func total(_ box: PartitionBox, _ ns: PartitionNamespace) -> Int { box.totals[ns.code] ?? 0 }

    // MARK: - Generic sealed get/put used by the namespaces

    func get(_ ns: PartitionNamespace, _ name: String) throws(PartitionError) -> [UInt8]? {
        try checkKey(name)
        return try withBox { (_, db) throws(PartitionError) -> [UInt8]? in
            try withKeys { (ks, rs) throws(PartitionError) -> [UInt8]? in
                let k = storedKey(ns, name, scope: rs)
                guard let row = try fetch(db, ns, k) else { return nil }
                return try open(ns, storedKey: k, sealed: row.v, expectedName: name, scope: ks).value
            }
        }
    }

    /// Reads several names with the key scopes opened once; absent names are left out.
    func getMany(_ ns: PartitionNamespace, _ names: [String]) throws(PartitionError) -> [String: [UInt8]] {
        for name in names { try checkKey(name) }
        return try withBox { (_, db) throws(PartitionError) -> [String: [UInt8]] in
            try withKeys { (ks, rs) throws(PartitionError) -> [String: [UInt8]] in
                var out: [String: [UInt8]] = [:]
                for name in names {
                    let k = storedKey(ns, name, scope: rs)
                    guard let row = try fetch(db, ns, k) else { continue }
                    out[name] = try open(ns, storedKey: k, sealed: row.v, expectedName: name, scope: ks).value
                }
                return out
            }
        }
    }

    /// Writes `pairs` in one transaction. `quota` (if any) applies to the namespace total.
    func put(_ ns: PartitionNamespace, _ pairs: [(String, [UInt8])], quota: Int?, maxValue: Int) throws(PartitionError) {
        for (name, value) in pairs {
            try checkKey(name)
            if value.count > maxValue { throw .valueTooLarge(limit: maxValue, actual: value.count) }
        }
        try withBox { (box, db) throws(PartitionError) in
            try withKeys { (ks, rs) throws(PartitionError) in
                try transaction(box, db) { () throws(PartitionError) in
                    // Small batches look up each old size (the quota check stays O(1) per row);
                    // large ones write blind and sum the namespace once before committing.
                    let bulk = pairs.count > Self.bulkThreshold
                    if bulk {
                        // Stored keys are keyed hashes, so a batch arrives in random key order;
                        // inserting it sorted walks the B-tree once instead of jumping around it.
                        var rows: [(key: [UInt8], sealed: [UInt8], size: Int)] = []
                        rows.reserveCapacity(pairs.count)
                        for (name, value) in pairs {
                            let k = storedKey(ns, name, scope: rs)
                            rows.append((k, try seal(ns, name: name, storedKey: k, value: value, scope: ks), name.utf8.count + value.count))
                        }
                        rows.sort { $0.key.lexicographicallyPrecedes($1.key) }
                        for row in rows { try upsert(box, db, ns, row.key, row.sealed, size: row.size, oldSize: nil) }
                    }
                    for (name, value) in pairs where !bulk {
                        let k = storedKey(ns, name, scope: rs)
                        let size = name.utf8.count + value.count
                        let old = bulk ? nil : try rowSize(db, ns, k)
                        if let quota, !bulk {
                            let would = total(box, ns) - (old ?? 0) + size
                            if would > quota { throw PartitionError.quotaExceeded(namespace: ns.rawValue, limit: quota, wouldUse: would) }
                        }
                        let sealed = try seal(ns, name: name, storedKey: k, value: value, scope: ks)
                        try upsert(box, db, ns, k, sealed, size: size, oldSize: old)
                    }
                    if bulk {
                        let sum = try namespaceSize(db, ns)
                        box.totals[ns.code] = sum
                        if let quota, sum > quota { throw PartitionError.quotaExceeded(namespace: ns.rawValue, limit: quota, wouldUse: sum) }
                    }
                }
            }
        }
    }

    /// Batches larger than this are written without per-row size lookups.
    static let bulkThreshold = 32

    func namespaceSize(_ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) -> Int {
        try sqlite { () throws(SQLiteFailure) -> Int in
            let st = try db.statement("SELECT COALESCE(SUM(size), 0) FROM kv WHERE ns=?")
            try st.bind(1, ns.code)
            defer { st.reset() }
            return try st.step() ? Int(st.int64(0)) : 0
        }
    }

    func remove(_ ns: PartitionNamespace, _ name: String) throws(PartitionError) {
        try checkKey(name)
        try withBox { (box, db) throws(PartitionError) in
            let k = withRowScope { rs in storedKey(ns, name, scope: rs) }
            try deleteRow(box, db, ns, k)
        }
    }

    func withRowScope<R>(_ body: (borrowing KeyScope) -> R) -> R {
        rowKey.withScope { (rs: borrowing KeyScope) -> R in body(rs) }
    }

    func clear(_ ns: PartitionNamespace) throws(PartitionError) {
        try withBox { (box, db) throws(PartitionError) in try deleteAll(box, db, ns) }
    }

    /// Every (name, value) of a namespace, opened; any damaged row fails the whole call.
    func all(_ ns: PartitionNamespace) throws(PartitionError) -> [(name: String, value: [UInt8])] {
        try withBox { (_, db) throws(PartitionError) -> [(name: String, value: [UInt8])] in
            let rows = try allRows(db, ns)
            return try withKeys { (ks, rs) throws(PartitionError) -> [(name: String, value: [UInt8])] in
                var out: [(name: String, value: [UInt8])] = []
                for row in rows {
                    let opened = try open(ns, storedKey: row.k, sealed: row.v, expectedName: nil, scope: ks)
                    // The name inside must hash to the row's stored key (a row moved within the namespace fails).
                    if !faults.contains(.skipValueBinding), storedKey(ns, opened.name, scope: rs) != row.k {
                        throw PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: ns.rawValue))
                    }
                    out.append(opened)
                }
                return out.sorted { $0.name < $1.name }
            }
        }
    }

    func usage(_ ns: PartitionNamespace) throws(PartitionError) -> Int {
        try withBox { (box, _) throws(PartitionError) -> Int in total(box, ns) }
    }

    /// `PRAGMA integrity_check` plus opening every sealed row.
    func verify() throws(PartitionError) {
        try withBox { (_, db) throws(PartitionError) in
            let check = try sqlite { () throws(SQLiteFailure) -> [String] in try db.textRows("PRAGMA integrity_check") }
            guard check == ["ok"] else { throw PartitionError.damaged(site: site.string, reason: .integrityCheckFailed(check.prefix(3).joined(separator: "; "))) }
        }
        for ns in PartitionNamespace.allCases { _ = try all(ns) }
    }

    // MARK: - Raw rows (audit)

    func rawRow(_ ns: PartitionNamespace, _ name: String) throws(PartitionError) -> RawRow? {
        try withBox { (_, db) throws(PartitionError) -> RawRow? in
            let k = withRowScope { rs in storedKey(ns, name, scope: rs) }
            return try fetch(db, ns, k).map { RawRow(storedKey: k, sealedValue: $0.v) }
        }
    }

    func writeRaw(_ ns: PartitionNamespace, _ name: String, sealedValue: [UInt8]) throws(PartitionError) {
        try withBox { (box, db) throws(PartitionError) in
            let k = withRowScope { rs in storedKey(ns, name, scope: rs) }
            let old = try rowSize(db, ns, k)
            try upsert(box, db, ns, k, sealedValue, size: old ?? sealedValue.count, oldSize: old)
        }
    }
}
