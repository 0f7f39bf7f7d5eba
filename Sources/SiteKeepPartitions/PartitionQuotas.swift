// What a namespace holds, for quotas: the running totals per namespace and the stored sum they
// are checked against (moved out of PartitionCore.swift unchanged).
extension PartitionCore {
    func total(_ box: PartitionBox, _ ns: PartitionNamespace) -> Int { box.totals[ns.code] ?? 0 }

    func namespaceSize(_ db: SQLiteConnection, _ ns: PartitionNamespace) throws(PartitionError) -> Int {
        try sqlite { () throws(SQLiteFailure) -> Int in
            let st = try statement(db, .namespaceSize)
            try st.bind(1, ns.code)
            defer { st.reset() }
            return try st.step() ? Int(st.int64(0)) : 0
        }
    }

    func usage(_ ns: PartitionNamespace) throws(PartitionError) -> Int {
        try withBox { (box, _) throws(PartitionError) -> Int in total(box, ns) }
    }
}
