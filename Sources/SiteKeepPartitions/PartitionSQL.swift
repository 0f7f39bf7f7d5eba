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

