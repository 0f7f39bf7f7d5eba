/// The row format of a partition: the associated data every sealed value is bound to. This is
/// its one encoder; the row paths build the same bytes in scratch memory from the site's part
/// (``associatedDataPrefix(site:namespace:bound:)`` unbound), the namespace's `len(ns) ‖ ns`
/// (``PartitionNamespace``, which holds it) and `len(key) ‖ key` (`PartitionCore.withAssociatedData`).
/// `SiteKeepPartitionsTests/RowFormatTests` pins the bytes, `StoredFormatTests` the rows built so.
enum PartitionRowFormat {
    /// The format label that starts every value's associated data.
    static let label: [UInt8] = Array("SKP1".utf8)

    /// `"SKP1" ‖ len(site) ‖ site ‖ len(ns) ‖ ns`, lengths 4-byte big-endian: the associated data
    /// before the row key (`"SKP1" ‖ len(site) ‖ site` when `bound` is false, which only the
    /// audit's debug-only fault asks for).
    static func associatedDataPrefix(site: [UInt8], namespace: String, bound: Bool) -> [UInt8] {
        var ad = label
        ad.reserveCapacity(label.count + 8 + site.count + namespace.utf8.count)
        appendLengthPrefixed(site, to: &ad)
        if bound { appendLengthPrefixed(namespace.utf8, to: &ad) }
        return ad
    }

    /// A value's whole associated data: `"SKP1" ‖ len(site) ‖ site ‖ len(ns) ‖ ns ‖ len(key) ‖ key`
    /// (the prefix alone when not `bound`).
    static func associatedData(site: [UInt8], namespace: String, storedKey: [UInt8], bound: Bool) -> [UInt8] {
        var ad = associatedDataPrefix(site: site, namespace: namespace, bound: bound)
        if bound { appendLengthPrefixed(storedKey, to: &ad) }
        return ad
    }
}
