/// The SQL of a partition file: its schema (`package`: the partitions benchmark builds a plain
/// SQLite file with the same one to compare against).
package enum PartitionSQL {
    /// The tables of a partition: `meta` (the sealed header) and `kv` (sealed rows by namespace
    /// code and keyed row hash, with size, last use and a reference for cache bodies).
    package static let schema = """
        CREATE TABLE meta(name TEXT PRIMARY KEY NOT NULL, v BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE kv(ns INTEGER NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, size INTEGER NOT NULL,
                        used INTEGER NOT NULL DEFAULT 0, ref BLOB, PRIMARY KEY(ns, k)) WITHOUT ROWID;
        CREATE INDEX kv_used ON kv(ns, used);
        """
}

extension PartitionCore {
    /// The statements of the row primitives, each prepared once per connection and found by
    /// its slot.
    enum RowSQL: Int {
        case size, value, valueAndRef, upsert, delete, deleteAll, allRows, namespaceSize

        var text: StaticString {
            switch self {
            case .size: "SELECT size FROM kv WHERE ns=? AND k=?"
            case .value: "SELECT v FROM kv WHERE ns=? AND k=?"
            case .valueAndRef: "SELECT v, ref FROM kv WHERE ns=? AND k=?"
            case .upsert: "INSERT OR REPLACE INTO kv(ns, k, v, size, used, ref) VALUES(?, ?, ?, ?, ?, ?)"
            case .delete: "DELETE FROM kv WHERE ns=? AND k=?"
            case .deleteAll: "DELETE FROM kv WHERE ns=?"
            case .allRows: "SELECT k, v FROM kv WHERE ns=? ORDER BY k"
            case .namespaceSize: "SELECT COALESCE(SUM(size), 0) FROM kv WHERE ns=?"
            }
        }
    }

    func statement(_ db: SQLiteConnection, _ sql: RowSQL) throws(SQLiteFailure) -> SQLiteStatement {
        try db.statement(slot: sql.rawValue, sql.text)
    }
}
