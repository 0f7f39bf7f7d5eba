internal import CSQLite
import Foundation

/// An SQLite failure, translated once at the boundary.
/// (`package`: the partitions benchmark in sitekeep-bench drives plain SQLite through it.)
package struct SQLiteFailure: Error, Sendable {
    let code: Int32
    let message: String
    var isCorruption: Bool {
        let primary = code & 0xFF
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }
}

/// One SQLite connection. Not Sendable: exactly one ``PartitionCore`` (behind its Mutex) owns it.
package final class SQLiteConnection {
    private let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]
    /// Statements found by a small slot number rather than by hashing their SQL text (the row
    /// primitives run one per row; hashing a 50-byte string each time was measurable).
    private var slots: [SQLiteStatement?] = []

    /// Opens `path` (read-write, created when `create`), applies SiteKeep's pragmas.
    ///
    /// `synchronous=FULL` in WAL mode: every commit syncs the WAL before returning, so an
    /// acknowledged write survives kill -9 *and* power loss (NORMAL would survive kill -9 too, but
    /// may lose the last commits on power loss; the issue asks that every acknowledged write
    /// survive, so we pay the fsync).
    package init(path: String, create: Bool) throws(SQLiteFailure) {
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteFailure(code: rc, message: message)
        }
        handle = db
        sitekeep_sqlite_set_defensive(db, 1)
        sitekeep_sqlite_set_trusted_schema(db, 0)
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, 5000)
        do {
            try exec("PRAGMA journal_mode=WAL")
            try exec("PRAGMA synchronous=FULL")
            try exec("PRAGMA secure_delete=ON")
            try exec("PRAGMA cell_size_check=ON")
            try exec("PRAGMA cache_size=-1024")
            try exec("PRAGMA mmap_size=0")
        } catch {
            sqlite3_close_v2(db)
            throw error
        }
    }

    deinit {
        statements.removeAll()
        slots.removeAll()
        sqlite3_close_v2(handle)
    }

    var lastError: SQLiteFailure {
        SQLiteFailure(code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)))
    }

    /// Runs SQL that returns no rows we need; `sql` may hold several statements separated by `;`.
    package func exec(_ sql: String) throws(SQLiteFailure) {
        for part in sql.split(separator: ";") where !part.allSatisfy(\.isWhitespace) {
            let st = try SQLiteStatement(connection: handle, sql: String(part), persistent: false)
            while try st.step() {}
        }
    }

    /// A cached prepared statement, reset and unbound.
    package func statement(_ sql: String) throws(SQLiteFailure) -> SQLiteStatement {
        if let st = statements[sql] {
            st.reset()
            return st
        }
        let st = try SQLiteStatement(connection: handle, sql: sql, persistent: true)
        statements[sql] = st
        return st
    }

    /// A cached prepared statement, reset and unbound, found by `slot`: each slot must always
    /// be asked for with the same `sql` (the callers name their slots with an enum).
    func statement(slot: Int, _ sql: StaticString) throws(SQLiteFailure) -> SQLiteStatement {
        if slot < slots.count, let st = slots[slot] {
            st.reset()
            return st
        }
        let st = try SQLiteStatement(connection: handle, sql: sql.description, persistent: true)
        if slot >= slots.count { slots += Array(repeating: nil, count: slot + 1 - slots.count) }
        slots[slot] = st
        return st
    }

    /// The single text column of each row `sql` returns (for pragmas such as quick_check).
    func textRows(_ sql: String) throws(SQLiteFailure) -> [String] {
        let st = try SQLiteStatement(connection: handle, sql: sql, persistent: false)
        var out: [String] = []
        while try st.step() { out.append(st.text(0) ?? "") }
        return out
    }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction; rolls back when it throws.
    package func transaction<R, E: Error>(_ body: () throws(E) -> R) throws(TransactionFailure<E>) -> R {
        do { try exec("BEGIN IMMEDIATE") } catch { throw .sqlite(error) }
        let result: R
        do {
            result = try body()
        } catch {
            try? exec("ROLLBACK")
            throw .body(error)
        }
        do { try exec("COMMIT") } catch {
            try? exec("ROLLBACK")
            throw .sqlite(error)
        }
        return result
    }
}

package enum TransactionFailure<E: Error>: Error {
    case sqlite(SQLiteFailure)
    case body(E)
}

/// A prepared statement; finalized in `deinit`.
package final class SQLiteStatement {
    private let handle: OpaquePointer
    private let db: OpaquePointer

    init(connection db: OpaquePointer, sql: String, persistent: Bool) throws(SQLiteFailure) {
        var st: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &st, nil)
        guard rc == SQLITE_OK, let st else {
            sqlite3_finalize(st)
            throw SQLiteFailure(code: rc, message: String(cString: sqlite3_errmsg(db)))
        }
        handle = st
        self.db = db
    }

    deinit { sqlite3_finalize(handle) }

    package func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    package func bind(_ index: Int32, _ bytes: [UInt8]) throws(SQLiteFailure) {
        let rc = bytes.withUnsafeBytes { raw in
            sqlite3_bind_blob(handle, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(raw.count), sitekeep_sqlite_transient())
        }
        guard rc == SQLITE_OK else { throw SQLiteFailure(code: rc, message: String(cString: sqlite3_errmsg(db))) }
    }

    /// Binds `bytes` without copying them (`SQLITE_STATIC`): SQLite reads them during `step`.
    /// The caller must `reset()` the statement (which clears its bindings) before `bytes` goes
    /// out of scope; the row primitives do so in a `defer` inside the buffer's scope.
    func bindNoCopy(_ index: Int32, _ bytes: UnsafeRawBufferPointer) throws(SQLiteFailure) {
        let rc = sqlite3_bind_blob(handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), nil)
        guard rc == SQLITE_OK else { throw SQLiteFailure(code: rc, message: String(cString: sqlite3_errmsg(db))) }
    }

    package func bind(_ index: Int32, _ value: Int64) throws(SQLiteFailure) {
        let rc = sqlite3_bind_int64(handle, index, value)
        guard rc == SQLITE_OK else { throw SQLiteFailure(code: rc, message: String(cString: sqlite3_errmsg(db))) }
    }

    func bindNull(_ index: Int32) {
        sqlite3_bind_null(handle, index)
    }

    /// Steps once: true when a row is available, false when done.
    package func step() throws(SQLiteFailure) -> Bool {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let failure = SQLiteFailure(code: sqlite3_extended_errcode(db), message: String(cString: sqlite3_errmsg(db)))
        sqlite3_reset(handle)
        throw failure
    }

    /// Steps to completion (for writes).
    package func run() throws(SQLiteFailure) {
        while try step() {}
        sqlite3_reset(handle)
    }

    package func blob(_ column: Int32) -> [UInt8]? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let p = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    /// Runs `body` on a blob column in place, without copying it: nil for NULL. The bytes are
    /// SQLite's and are valid only inside `body` (until the next step or reset).
    func withBlob<R, E: Error>(_ column: Int32, _ body: (UnsafeRawBufferPointer?) throws(E) -> R) throws(E) -> R {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL else { return try body(nil) }
        // The pointer first, then the size (SQLite's recommended order).
        let p = sqlite3_column_blob(handle, column)
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let p else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeRawBufferPointer(start: p, count: count))
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: p)
    }
}
