internal import SiteKeepCustody

// Writing batches of rows: `put` and its bulk path (stored-key order), moved out of
// PartitionCore.swift unchanged.
extension PartitionCore {
    /// Writes `pairs` in one transaction. `quota` (if any) applies to the namespace total.
    func put<V: RowBytes>(_ ns: PartitionNamespace, _ pairs: [(String, V)], quota: Int?, maxValue: Int) throws(PartitionError) {
        for (name, value) in pairs {
            try checkKey(name)
            if value.rowByteCount > maxValue { throw .valueTooLarge(limit: maxValue, actual: value.rowByteCount) }
        }
        try withBox { (box, db) throws(PartitionError) in
            try withKeys { (ks, rs) throws(PartitionError) in
                try transaction(box, db) { () throws(PartitionError) in
                    // Small batches look up each old size (the quota check stays O(1) per row);
                    // large ones write blind and sum the namespace once before committing.
                    if pairs.count > Self.bulkThreshold {
                        try putBulk(box, db, ns, pairs, ks: ks, rs: rs)
                        let sum = try namespaceSize(db, ns)
                        box.totals[ns.code] = sum
                        if let quota, sum > quota { throw PartitionError.quotaExceeded(namespace: ns.rawValue, limit: quota, wouldUse: sum) }
                        return
                    }
                    for (name, value) in pairs {
                        try name.withRowBytes { (n) throws(PartitionError) in
                            try value.withRowBytes { (v) throws(PartitionError) in
                                try storedKey(ns, name: n, scope: rs).withUnsafeBytes { (k) throws(PartitionError) in
                                    let size = n.count + v.count
                                    let old = try rowSize(db, ns, key: k)
                                    if let quota {
                                        let would = total(box, ns) - (old ?? 0) + size
                                        if would > quota { throw PartitionError.quotaExceeded(namespace: ns.rawValue, limit: quota, wouldUse: would) }
                                    }
                                    try withUnsafeTemporaryAllocation(byteCount: Self.sealedCount(name: n.count, value: v.count), alignment: 1) { (sealed) throws(PartitionError) in
                                        try sealRow(ns, key: k, name: n, value: v, scope: ks, into: sealed)
                                        try upsert(box, db, ns, key: k, value: UnsafeRawBufferPointer(sealed), size: size, oldSize: old)
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// A large batch, inserted in stored-key order: stored keys are keyed hashes, so a batch
    /// arrives in random key order, and inserting it sorted walks the B-tree once instead of
    /// jumping around it. The keys are computed and sorted first; each row is then sealed into
    /// scratch memory just before it is inserted.
    func putBulk<V: RowBytes>(_ box: PartitionBox, _ db: SQLiteConnection, _ ns: PartitionNamespace, _ pairs: [(String, V)],
                                      ks: borrowing KeyScope, rs: borrowing KeyScope) throws(PartitionError) {
        var keys: [StoredKey] = []
        keys.reserveCapacity(pairs.count)
        // What is sorted: each key's first 8 bytes as a number (keys are uniformly random, so
        // these almost always decide) and the row's place in the batch; small entries move fast.
        var order: [(lead: UInt64, index: Int)] = []
        order.reserveCapacity(pairs.count)
        for (i, (name, _)) in pairs.enumerated() {
            let key = name.withRowBytes { n in storedKey(ns, name: n, scope: rs) }
            keys.append(key)
            order.append((key.lead, i))
        }
        // Equal keys (a name given twice) keep their batch order, so the last one wins.
        order.sort { a, b in
            if a.lead != b.lead { return a.lead < b.lead }
            let c = StoredKey.compare(keys[a.index], keys[b.index])
            return c < 0 || (c == 0 && a.index < b.index)
        }
        // The clock in a local for the loop (the box's properties are checked for exclusive
        // access on every use); the caller sums the namespace afterwards instead of a running total.
        var clock = box.clock
        defer { box.clock = clock }
        for (_, i) in order {
            let (name, value) = pairs[i]
            try name.withRowBytes { (n) throws(PartitionError) in
                try value.withRowBytes { (v) throws(PartitionError) in
                    try keys[i].withUnsafeBytes { (k) throws(PartitionError) in
                        try withUnsafeTemporaryAllocation(byteCount: Self.sealedCount(name: n.count, value: v.count), alignment: 1) { (sealed) throws(PartitionError) in
                            try sealRow(ns, key: k, name: n, value: v, scope: ks, into: sealed)
                            clock += 1
                            try writeRow(db, ns, key: k, value: UnsafeRawBufferPointer(sealed), size: n.count + v.count, used: clock)
                        }
                    }
                }
            }
        }
    }

    /// Batches larger than this are written without per-row size lookups.
    static let bulkThreshold = 32
}
