import Foundation
import Glibc
import Synchronization
package import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepSystem
import SiteKeepVocabulary

/// The mutable state behind a partition's lock. Not Sendable: only reached inside `Mutex.withLock`.
final class PartitionBox {
    var connection: SQLiteConnection?
    var totals: [Int64: Int] = [:]
    var clock: Int64 = 0
    var removed = false
    init(connection: SQLiteConnection) { self.connection = connection }
}

/// Appends `bytes` with its 4-byte big-endian length in front.
func appendLengthPrefixed(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
    let n = UInt32(bytes.count)
    out.append(UInt8(n >> 24)); out.append(UInt8(n >> 16 & 0xFF)); out.append(UInt8(n >> 8 & 0xFF)); out.append(UInt8(n & 0xFF))
    out.append(contentsOf: bytes)
}

/// Writes `bytes` at `offset` of `buffer` with its 4-byte big-endian length in front (the same
/// form as ``appendLengthPrefixed(_:to:)``) and returns the offset after it.
@discardableResult
func putLengthPrefixed(_ bytes: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
    buffer.storeBytes(of: UInt32(bytes.count).bigEndian, toByteOffset: offset, as: UInt32.self)
    UnsafeMutableRawBufferPointer(rebasing: buffer[(offset + 4)..<(offset + 4 + bytes.count)]).copyMemory(from: bytes)
    return offset + 4 + bytes.count
}

/// Bytes a row's name or value is made of, reached without a copy where they are contiguous
/// (a native `String`'s UTF-8, an array).
protocol RowBytes {
    /// The number of bytes.
    var rowByteCount: Int { get }
    /// Runs `body` over the bytes.
    func withRowBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R
}

extension String: RowBytes {
    var rowByteCount: Int { utf8.count }
    func withRowBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var s = self   // `withUTF8` is mutating only to make a bridged string contiguous first
        return try s.withUTF8 { b in Result { () throws(E) -> R in try body(UnsafeRawBufferPointer(b)) } }.get()
    }
}

extension Array: RowBytes where Element == UInt8 {
    var rowByteCount: Int { count }
    func withRowBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withBytes(body)
    }

    /// `withUnsafeBytes` with a typed error (the standard one rethrows `any Error`).
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeBytes { b in Result { () throws(E) -> R in try body(b) } }.get()
    }

    /// `withUnsafeMutableBytes` with a typed error.
    mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withUnsafeMutableBytes { b in Result { () throws(E) -> R in try body(b) } }.get()
    }
}

/// A row's stored key: the 32-byte HMAC-SHA256 of its namespace and name, held inline so that
/// computing one allocates nothing.
struct StoredKey {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// All zero bytes, until a key is computed.
    init() {}

    /// The key `fill` writes (32 bytes).
    init(_ fill: (UnsafeMutableRawBufferPointer) -> Void) {
        withUnsafeMutableBytes(of: &words) { fill($0) }
    }

    /// Runs `body` over the 32 bytes.
    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        var w = words
        return try Swift.withUnsafeBytes(of: &w, body)
    }

    /// The bytes as an array (the form of ``RawRow`` and of the offline cache's references).
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// The first 8 bytes as a big-endian number: comparing these compares the keys' starts.
    var lead: UInt64 { UInt64(bigEndian: words.0) }

    /// -1, 0 or 1 as `a` sorts before, equal to or after `b` compared byte by byte, which is
    /// how SQLite orders the `k` blobs. (Keys are uniformly random: the first word decides.)
    static func compare(_ a: StoredKey, _ b: StoredKey) -> Int {
        var x = UInt64(bigEndian: a.words.0), y = UInt64(bigEndian: b.words.0)
        if x == y {
            x = UInt64(bigEndian: a.words.1); y = UInt64(bigEndian: b.words.1)
            if x == y {
                x = UInt64(bigEndian: a.words.2); y = UInt64(bigEndian: b.words.2)
                if x == y { x = UInt64(bigEndian: a.words.3); y = UInt64(bigEndian: b.words.3) }
            }
        }
        return x == y ? 0 : x < y ? -1 : 1
    }
}


/// `bytes` as a `String` when they are valid UTF-8, else nil. Decoding repairs invalid input
/// (U+FFFD), so the decoded bytes equal the input exactly when it was valid; this costs one
/// compare instead of the generic validating initialiser's metadata lookups.
func validUTF8String(_ bytes: UnsafeRawBufferPointer) -> String? {
    let s = String(decoding: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self)
    guard s.utf8.count == bytes.count else { return nil }
    guard bytes.count > 0 else { return s }
    var t = s
    let same = t.withUTF8 { u in memcmp(u.baseAddress!, bytes.baseAddress!, bytes.count) == 0 }
    return same ? s : nil
}

/// One site's database connection and keys: the single owner of the connection.
///
/// All work happens inside one `Mutex`; batches take the key scopes once.
package final class PartitionCore: Sendable {
    let site: SiteID
    let limits: PartitionLimits
    let faults: AuditFaults
    let path: String
    /// The site id's bytes, bound into every value's associated data.
    let siteBytes: [UInt8]
    /// Whether values are bound to their namespace and row key (always, except under the
    /// audit's `skipValueBinding` fault).
    let bindsRows: Bool
    /// The associated data before the namespace: `"SKP1" ‖ len(site) ‖ site` (then
    /// `len(ns) ‖ ns`, the namespace's ``PartitionNamespace/lengthPrefixedName``, unless under the fault).
    private let sitePrefix: [UInt8]
    /// The namespaces used on this partition so far, by code (the built-in ones from the start):
    /// a second name for a code, or a second code for a name, is refused.
    private let namespaces: Mutex<[Int64: String]>
    private let key: SymmetricKeyHandle
    private let rowKey: SymmetricKeyHandle
    private let state: Mutex<PartitionBox>

    static var schema: String { PartitionSQL.schema }
    static let headerText = "sitekeep-partition-v1"

    private init(site: SiteID, path: String, key: SymmetricKeyHandle, rowKey: SymmetricKeyHandle,
                 limits: PartitionLimits, faults: AuditFaults, connection: sending SQLiteConnection) {
        self.site = site; self.path = path; self.key = key; self.rowKey = rowKey
        self.siteBytes = Array(site.string.utf8)
        self.limits = limits; self.faults = faults
        let binds = !faults.skipsValueBinding
        self.bindsRows = binds
        self.sitePrefix = PartitionRowFormat.associatedDataPrefix(site: siteBytes, namespace: "", bound: false)
        self.namespaces = Mutex(Dictionary(uniqueKeysWithValues: PartitionNamespace.builtIn.map { ($0.code, $0.rawValue) }))
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
            guard fd >= 0 else { throw .storageFailure("\(SystemError.current("create", path))") }
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

    /// Whether the connection is open (not shut down by the registry or a removal).
    var isOpen: Bool { state.withLock { $0.connection != nil && !$0.removed } }

    /// Closes the connection (checkpointing the WAL). With `removed`, later use reports removal.
    func shutdown(removed: Bool) {
        state.withLock { box in
            box.connection = nil
            if removed { box.removed = true }
        }
    }

    func associatedData(namespace: String, storedKey: [UInt8]) -> [UInt8] {
        PartitionRowFormat.associatedData(site: siteBytes, namespace: namespace, storedKey: storedKey, bound: bindsRows)
    }

    /// The keyed hash a row's name is stored as (as an array; the row paths use
    /// ``storedKey(_:name:scope:)``).
    package func storedKey(_ ns: PartitionNamespace, _ name: String, scope: borrowing KeyScope) -> [UInt8] {
        name.withRowBytes { n in storedKey(ns, name: n, scope: scope).bytes }
    }

    /// The keyed hash a row's name is stored as: HMAC-SHA256 under the row key of
    /// `len(ns) ‖ ns ‖ len(name) ‖ name`, the message built in scratch memory.
    func storedKey(_ ns: PartitionNamespace, name: UnsafeRawBufferPointer, scope: borrowing KeyScope) -> StoredKey {
        ns.lengthPrefixedName.withUnsafeBytes { prefix in
            withUnsafeTemporaryAllocation(byteCount: prefix.count + 4 + name.count, alignment: 1) { message in
                UnsafeMutableRawBufferPointer(rebasing: message[..<prefix.count]).copyMemory(from: prefix)
                putLengthPrefixed(name, into: message, at: prefix.count)
                return StoredKey { out in scope.authenticationCode(for: UnsafeRawBufferPointer(message), into: out) }
            }
        }
    }

    /// Runs `body` with a value's associated data for row `key` of `ns`:
    /// `"SKP1" ‖ len(site) ‖ site ‖ len(ns) ‖ ns ‖ len(key) ‖ key`, built in scratch memory (the
    /// same bytes as ``associatedData(namespace:storedKey:)``).
    func withAssociatedData<R, E: Error>(_ ns: PartitionNamespace, key: UnsafeRawBufferPointer,
                                         _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try sitePrefix.withBytes { (site) throws(E) -> R in
            guard bindsRows else { return try body(site) }
            return try ns.lengthPrefixedName.withBytes { (name) throws(E) -> R in
                let prefix = site.count + name.count
                return try withUnsafeTemporaryAllocation(byteCount: prefix + 4 + key.count, alignment: 1) { (ad) throws(E) -> R in
                    UnsafeMutableRawBufferPointer(rebasing: ad[..<site.count]).copyMemory(from: site)
                    UnsafeMutableRawBufferPointer(rebasing: ad[site.count..<prefix]).copyMemory(from: name)
                    putLengthPrefixed(key, into: ad, at: prefix)
                    return try body(UnsafeRawBufferPointer(ad))
                }
            }
        }
    }

    /// Runs `body` with the key scopes open once: `ks` seals and opens under the storage key,
    /// `rs` hashes names under the row key. (One custody scope serves as both, taking just the
    /// storage key's lock and the row key's HMAC state's.)
    package func withKeys<R>(_ body: (borrowing KeyScope, borrowing KeyScope) throws(PartitionError) -> R) throws(PartitionError) -> R {
        try key.withScope(macKey: rowKey) { (scope: borrowing KeyScope) throws(PartitionError) -> R in
            try body(scope, scope)
        }
    }

    /// The size of a sealed row: `nonce ‖ ciphertext ‖ tag` of `len(name) ‖ name ‖ value`.
    static func sealedCount(name: Int, value: Int) -> Int { XChaCha20Poly1305.overheadByteCount + 4 + name + value }

    /// Seals `len(name) ‖ name ‖ value` for row `key` of `ns` into `out`, which must be exactly
    /// ``sealedCount(name:value:)`` bytes. The plaintext is assembled in scratch memory and
    /// wiped once sealed.
    func sealRow(_ ns: PartitionNamespace, key: UnsafeRawBufferPointer, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer,
                 scope: borrowing KeyScope, into out: UnsafeMutableRawBufferPointer) throws(PartitionError) {
        try withUnsafeTemporaryAllocation(byteCount: 4 + name.count + value.count, alignment: 1) { (plain) throws(PartitionError) in
            defer { SecureMemory.zero(plain) }
            let end = putLengthPrefixed(name, into: plain, at: 0)
            UnsafeMutableRawBufferPointer(rebasing: plain[end...]).copyMemory(from: value)
            do throws(CryptoError) {
                try withAssociatedData(ns, key: key) { (ad) throws(CryptoError) in
                    try scope.seal(UnsafeRawBufferPointer(plain), authenticating: ad, into: out)
                }
            } catch { throw .keyUnavailable(error.description) }
        }
    }

    /// Seals a row as an array (the offline cache's and the benchmark breakdown's form).
    package func seal(_ ns: PartitionNamespace, name: String, storedKey: [UInt8], value: [UInt8], scope: borrowing KeyScope) throws(PartitionError) -> [UInt8] {
        try name.withRowBytes { (n) throws(PartitionError) -> [UInt8] in
            try storedKey.withBytes { (k) throws(PartitionError) -> [UInt8] in
                try value.withBytes { (v) throws(PartitionError) -> [UInt8] in
                    var out = [UInt8](repeating: 0, count: Self.sealedCount(name: n.count, value: v.count))
                    try out.withMutableBytes { (o) throws(PartitionError) in
                        try sealRow(ns, key: k, name: n, value: v, scope: scope, into: o)
                    }
                    return out
                }
            }
        }
    }

    func damage(_ ns: PartitionNamespace) -> PartitionError {
        .damaged(site: site.string, reason: .authenticationFailed(namespace: ns.rawValue))
    }

    /// Opens a sealed row into scratch memory (wiped afterwards) and runs `body` on the name
    /// and value inside. With `expectedName`, the name inside must be exactly those bytes (the
    /// bytes whose keyed hash found the row). Any failure is damage, never a value.
    func openRow<R>(_ ns: PartitionNamespace, key: UnsafeRawBufferPointer, sealed: UnsafeRawBufferPointer, expectedName: UnsafeRawBufferPointer?,
                    scope: borrowing KeyScope,
                    _ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws(PartitionError) -> R) throws(PartitionError) -> R {
        guard sealed.count >= XChaCha20Poly1305.overheadByteCount + 4 else { throw damage(ns) }
        return try withUnsafeTemporaryAllocation(byteCount: sealed.count - XChaCha20Poly1305.overheadByteCount, alignment: 1) { (plain) throws(PartitionError) -> R in
            defer { SecureMemory.zero(plain) }
            do {
                try withAssociatedData(ns, key: key) { (ad) throws(CryptoError) in
                    try scope.open(sealed, authenticating: ad, into: plain)
                }
            } catch { throw damage(ns) }
            let n = Int(UInt32(bigEndian: plain.loadUnaligned(as: UInt32.self)))
            guard plain.count - 4 >= n else { throw damage(ns) }
            let name = UnsafeRawBufferPointer(rebasing: plain[4..<(4 + n)])
            if bindsRows, let expectedName {
                guard n == expectedName.count, n == 0 || memcmp(name.baseAddress!, expectedName.baseAddress!, n) == 0 else { throw damage(ns) }
            } else if validUTF8String(name) == nil {
                throw damage(ns)
            }
            return try body(name, UnsafeRawBufferPointer(rebasing: plain[(4 + n)...]))
        }
    }

    /// Opens a sealed row as (name, value); any failure is damage, never a value.
    func open(_ ns: PartitionNamespace, storedKey: [UInt8], sealed: [UInt8], expectedName: String?, scope: borrowing KeyScope) throws(PartitionError) -> (name: String, value: [UInt8]) {
        try storedKey.withBytes { (k) throws(PartitionError) -> (name: String, value: [UInt8]) in
            try sealed.withBytes { (s) throws(PartitionError) -> (name: String, value: [UInt8]) in
                let body = { (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws(PartitionError) -> (name: String, value: [UInt8]) in
                    guard let text = validUTF8String(name) else { throw self.damage(ns) }
                    return (text, Array(value))
                }
                if let expectedName {
                    return try expectedName.withRowBytes { (e) throws(PartitionError) -> (name: String, value: [UInt8]) in
                        try openRow(ns, key: k, sealed: s, expectedName: e, scope: scope, body)
                    }
                }
                return try openRow(ns, key: k, sealed: s, expectedName: nil, scope: scope, body)
            }
        }
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
        try k.withBytes { (k) throws(PartitionError) -> Int? in try rowSize(db, ns, key: k) }
    }

    func rowSize(_ db: SQLiteConnection, _ ns: PartitionNamespace, key k: UnsafeRawBufferPointer) throws(PartitionError) -> Int? {
        try sqlite { () throws(SQLiteFailure) -> Int? in
            let st = try statement(db, .size)
            defer { st.reset() }
            try st.bind(1, ns.code); try st.bindNoCopy(2, k)
            return try st.step() ? Int(st.int64(0)) : nil
        }
    }

    func fetch(_ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8]) throws(PartitionError) -> (v: [UInt8], ref: [UInt8]?)? {
        try sqlite { () throws(SQLiteFailure) -> (v: [UInt8], ref: [UInt8]?)? in
            let st = try statement(db, .valueAndRef)
            try st.bind(1, ns.code); try st.bind(2, k)
            defer { st.reset() }
            guard try st.step() else { return nil }
            return (st.blob(0) ?? [], st.blob(1))
        }
    }

    /// Runs `body` on the sealed value of row `k` where SQLite holds it (no copy); nil when
    /// there is no such row.
    func withSealedValue<R>(_ db: SQLiteConnection, _ ns: PartitionNamespace, key k: UnsafeRawBufferPointer,
                            _ body: (UnsafeRawBufferPointer) throws(PartitionError) -> R) throws(PartitionError) -> R? {
        let st: SQLiteStatement
        do { st = try statement(db, .value) } catch { throw Self.mapSQLite(error, site: site) }
        defer { st.reset() }
        let found: Bool
        do {
            try st.bind(1, ns.code); try st.bindNoCopy(2, k)
            found = try st.step()
        } catch { throw Self.mapSQLite(error, site: site) }
        guard found else { return nil }
        return try st.withBlob(0) { (v) throws(PartitionError) -> R in
            try body(v ?? UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    func upsert(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8], _ v: [UInt8], size: Int, oldSize: Int?, ref: [UInt8]? = nil) throws(PartitionError) {
        try k.withBytes { (k) throws(PartitionError) in
            try v.withBytes { (v) throws(PartitionError) in
                try upsert(box, db, ns, key: k, value: v, size: size, oldSize: oldSize, ref: ref)
            }
        }
    }

    func upsert(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, key k: UnsafeRawBufferPointer, value v: UnsafeRawBufferPointer,
                size: Int, oldSize: Int?, ref: [UInt8]? = nil) throws(PartitionError) {
        box.clock += 1
        try writeRow(db, ns, key: k, value: v, size: size, used: box.clock, ref: ref)
        box.totals[ns.code, default: 0] += size - (oldSize ?? 0)
    }

    /// `INSERT OR REPLACE` of one row; the caller keeps the clock and the running totals.
    func writeRow(_ db: SQLiteConnection, _ ns: PartitionNamespace, key k: UnsafeRawBufferPointer, value v: UnsafeRawBufferPointer,
                  size: Int, used: Int64, ref: [UInt8]? = nil) throws(PartitionError) {
        try sqlite { () throws(SQLiteFailure) in
            let st = try statement(db, .upsert)
            defer { st.reset() }
            try st.bind(1, ns.code); try st.bindNoCopy(2, k); try st.bindNoCopy(3, v); try st.bind(4, Int64(size)); try st.bind(5, used)
            if let ref { try st.bind(6, ref) } else { st.bindNull(6) }
            try st.run()
        }
    }

    func deleteRow(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, _ k: [UInt8]) throws(PartitionError) {
        guard let old = try rowSize(db, ns, k) else { return }
        try sqlite { () throws(SQLiteFailure) in
            let st = try statement(db, .delete)
            try st.bind(1, ns.code); try st.bind(2, k)
            try st.run()
        }
        box.totals[ns.code, default: 0] -= old
    }

    func deleteAll(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) {
        try sqlite { () throws(SQLiteFailure) in
            let st = try statement(db, .deleteAll)
            try st.bind(1, ns.code)
            try st.run()
        }
        box.totals[ns.code] = 0
    }

    func allRows(_ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) -> [(k: [UInt8], v: [UInt8])] {
        try sqlite { () throws(SQLiteFailure) -> [(k: [UInt8], v: [UInt8])] in
            let st = try statement(db, .allRows)
            try st.bind(1, ns.code)
            defer { st.reset() }
            var out: [(k: [UInt8], v: [UInt8])] = []
            while try st.step() { out.append((st.blob(0) ?? [], st.blob(1) ?? [])) }
            return out
        }
    }



    // MARK: - Generic sealed get/put used by the namespaces

    /// The value of `name`, or nil.
    func get(_ ns: PartitionNamespace, _ name: String) throws(PartitionError) -> [UInt8]? {
        try get(ns, name) { (value) throws(PartitionError) -> [UInt8] in Array(value) }
    }

    /// The value of `name` as `decode` makes it from the opened bytes (which live in scratch
    /// memory wiped afterwards), or nil. The sealed value is opened where SQLite holds it.
    func get<R: Sendable>(_ ns: PartitionNamespace, _ name: String, _ decode: (UnsafeRawBufferPointer) throws(PartitionError) -> R) throws(PartitionError) -> R? {
        try checkKey(name)
        return try withBox { (_, db) throws(PartitionError) -> R? in
            try withKeys { (ks, rs) throws(PartitionError) -> R? in
                try name.withRowBytes { (n) throws(PartitionError) -> R? in
                    try getRow(db, ns, name: n, ks: ks, rs: rs, decode)
                }
            }
        }
    }

    /// One read inside the lock and key scopes: row key, lookup, open in place, decode.
    private func getRow<R>(_ db: SQLiteConnection, _ ns: PartitionNamespace, name: UnsafeRawBufferPointer, ks: borrowing KeyScope, rs: borrowing KeyScope,
                           _ decode: (UnsafeRawBufferPointer) throws(PartitionError) -> R) throws(PartitionError) -> R? {
        try storedKey(ns, name: name, scope: rs).withUnsafeBytes { (k) throws(PartitionError) -> R? in
            try withSealedValue(db, ns, key: k) { (sealed) throws(PartitionError) -> R in
                try openRow(ns, key: k, sealed: sealed, expectedName: name, scope: ks) { (_, value) throws(PartitionError) -> R in
                    try decode(value)
                }
            }
        }
    }

    /// Reads several names with the key scopes opened once; absent names are left out.
    func getMany(_ ns: PartitionNamespace, _ names: [String]) throws(PartitionError) -> [String: [UInt8]] {
        try getMany(ns, names) { (value) throws(PartitionError) -> [UInt8] in Array(value) }
    }

    /// As ``getMany(_:_:)``, each value made by `decode`.
    func getMany<R: Sendable>(_ ns: PartitionNamespace, _ names: [String], _ decode: (UnsafeRawBufferPointer) throws(PartitionError) -> R) throws(PartitionError) -> [String: R] {
        for name in names { try checkKey(name) }
        return try withBox { (_, db) throws(PartitionError) -> [String: R] in
            try withKeys { (ks, rs) throws(PartitionError) -> [String: R] in
                var out: [String: R] = [:]
                for name in names {
                    let value = try name.withRowBytes { (n) throws(PartitionError) -> R? in
                        try getRow(db, ns, name: n, ks: ks, rs: rs, decode)
                    }
                    if let value { out[name] = value }
                }
                return out
            }
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
                    if !faults.skipsValueBinding, storedKey(ns, opened.name, scope: rs) != row.k {
                        throw PartitionError.damaged(site: site.string, reason: .authenticationFailed(namespace: ns.rawValue))
                    }
                    out.append(opened)
                }
                return out.sorted { $0.name < $1.name }
            }
        }
    }

    /// `PRAGMA integrity_check` plus opening every sealed row of the built-in namespaces, of
    /// `extra` and of every namespace used on this partition so far.
    func verify(_ extra: [PartitionNamespace]) throws(PartitionError) {
        for ns in extra { try declare(ns) }
        try withBox { (_, db) throws(PartitionError) in
            let check = try sqlite { () throws(SQLiteFailure) -> [String] in try db.textRows("PRAGMA integrity_check") }
            guard check == ["ok"] else { throw PartitionError.damaged(site: site.string, reason: .integrityCheckFailed(check.prefix(3).joined(separator: "; "))) }
        }
        let known = namespaces.withLock { $0 }.sorted { $0.key < $1.key }
        for (code, name) in known { _ = try all(PartitionNamespace(name, code: code)) }
    }

    // MARK: - Callers' namespaces

    /// Admits `ns` on this partition: a valid name and code, not one the partition already
    /// knows under another code or name.
    func declare(_ ns: PartitionNamespace) throws(PartitionError) {
        if let problem = ns.problem { throw .invalidValue(problem) }
        let clash = namespaces.withLock { (known: inout [Int64: String]) -> String? in
            if let name = known[ns.code] { return name == ns.rawValue ? nil : "namespace code \(ns.code) is already \(name)'s" }
            if let other = known.first(where: { $0.value == ns.rawValue }) { return "namespace \(ns.rawValue) already has code \(other.key)" }
            known[ns.code] = ns.rawValue
            return nil
        }
        if let clash { throw .invalidValue(clash) }
    }

    /// Admits a caller's namespace (``declare(_:)``), refusing the partition's own.
    func declareCallers(_ ns: PartitionNamespace) throws(PartitionError) {
        if PartitionNamespace.builtIn.contains(where: { $0.code == ns.code || $0.rawValue == ns.rawValue }) {
            throw .invalidValue("namespace \(ns.rawValue) (code \(ns.code)) is the partition's own; use its storage or cache")
        }
        try declare(ns)
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
