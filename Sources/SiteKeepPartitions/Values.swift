import Foundation
public import SiteKeepVocabulary

/// A namespace of a partition, named by whoever stores rows in it: its name is bound into every
/// row's stored key and associated data, and its rows are filed under its code in the file.
///
/// The partition itself owns ``storage``, ``cache`` and ``cacheBody`` (codes 1, 4 and 5); a
/// layer above declares its own (SiteKeepCore: `tabs` 2, `reading` 3) and reaches them through
/// ``Partition/rows(_:)``. A partition refuses a namespace whose code it already knows under
/// another name (or whose name it knows under another code), so two callers cannot share rows
/// by accident. Both name and code are stored formats: never change a declared one.
public struct PartitionNamespace: Sendable, Hashable, CustomStringConvertible {
    /// The name bound into the row keys and associated data (e.g. `"tabs"`).
    public let rawValue: String
    /// The number the rows are filed under in the file's `kv.ns` column.
    public let code: Int64
    /// `len(name) ‖ name`: the start of a row key's MAC input and the end of the associated
    /// data before the row key.
    let lengthPrefixedName: [UInt8]

    /// A namespace named `name` filed under `code`. It is checked when first used
    /// (``PartitionError/invalidValue(_:)`` for an empty or overlong name, the reserved `meta`,
    /// or a code outside 1…2³¹−1).
    public init(_ name: String, code: Int64) {
        rawValue = name
        self.code = code
        var prefix: [UInt8] = []
        appendLengthPrefixed(name.utf8, to: &prefix)
        lengthPrefixedName = prefix
    }

    /// `localStorage`-like string keys and values (the partition's own).
    public static let storage = PartitionNamespace("storage", code: 1)
    /// Offline cache entries (URL → status, headers, body hash) (the partition's own).
    public static let cache = PartitionNamespace("cache", code: 4)
    /// Offline cache bodies, content-addressed by SHA-256 (the partition's own).
    public static let cacheBody = PartitionNamespace("cache-body", code: 5)

    /// The namespaces the partition's own stores use: never reachable through ``Partition/rows(_:)``.
    public static let builtIn: [PartitionNamespace] = [.storage, .cache, .cacheBody]

    /// Why this namespace cannot be used, or nil.
    var problem: String? {
        let n = rawValue.utf8.count
        if n == 0 || n > 64 { return "a namespace name has 1 to 64 bytes (got \(n))" }
        if rawValue == "meta" { return "the namespace name \"meta\" is the partition header's" }
        if rawValue.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) { return "a namespace name has no control characters" }
        if code < 1 || code > Int64(Int32.max) { return "namespace \(rawValue)'s code \(code) is outside 1…2147483647" }
        return nil
    }

    public static func == (a: PartitionNamespace, b: PartitionNamespace) -> Bool { a.code == b.code && a.rawValue == b.rawValue }
    public func hash(into h: inout Hasher) { h.combine(code); h.combine(rawValue) }
    public var description: String { rawValue }
}

/// One row of a caller's namespace: its name and its (opened) value. Names are told apart by
/// their UTF-8 bytes (see ``StorageItem``).
public struct SealedRow: Sendable, Equatable {
    public var name: String
    public var value: [UInt8]
    public init(name: String, value: [UInt8]) { self.name = name; self.value = value }

    public static func == (a: SealedRow, b: SealedRow) -> Bool {
        a.name.utf8.elementsEqual(b.name.utf8) && a.value == b.value
    }
}

/// The rows a rebuild writes into one caller's namespace (in one transaction).
public struct NamespaceRows: Sendable, Equatable {
    public var namespace: PartitionNamespace
    public var rows: [SealedRow]
    public init(namespace: PartitionNamespace, rows: [SealedRow]) { self.namespace = namespace; self.rows = rows }
}

/// A cached page or resource with its headers and body.
public struct CachedResource: Sendable, Hashable {
    /// The URL it was fetched from (the cache key).
    public var url: String
    /// The HTTP status.
    public var status: Int
    /// Response headers in order, as (name, value) pairs.
    public var headers: [HeaderField]
    /// The body.
    public var body: [UInt8]

    public init(url: String, status: Int = 200, headers: [HeaderField] = [], body: [UInt8]) {
        self.url = url; self.status = status; self.headers = headers; self.body = body
    }
}

/// One HTTP header field.
public struct HeaderField: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(name: String, value: String) { self.name = name; self.value = value }
}

/// Limits a partition enforces.
public struct PartitionLimits: Sendable, Equatable {
    /// Total bytes (UTF-8 of keys plus values) of the `storage` namespace. Default 5 MiB.
    public var storageQuota: Int
    /// Bytes of one key (row name) in any namespace. Default 1 KiB.
    public var maximumKeyBytes: Int
    /// Total bytes of cached entries and bodies; least recently used entries are evicted beyond it. Default 50 MiB.
    public var cacheBudget: Int
    /// Bytes of one value in a caller's namespace (a session, a reading state). Default 1 MiB.
    public var maximumRecordBytes: Int

    public init(storageQuota: Int = 5 << 20, maximumKeyBytes: Int = 1024, cacheBudget: Int = 50 << 20, maximumRecordBytes: Int = 1 << 20) {
        self.storageQuota = storageQuota; self.maximumKeyBytes = maximumKeyBytes
        self.cacheBudget = cacheBudget; self.maximumRecordBytes = maximumRecordBytes
    }
}

/// What a partition holds, as a rebuild source supplies it: the partition's own storage and
/// cache, and the rows of the namespaces callers named (SiteKeepCore's tabs and reading state).
public struct PartitionContents: Sendable, Equatable {
    /// The key/value items, each key once by its UTF-8 bytes (see ``StorageItem``).
    public var storage: [StorageItem]
    /// Rows of callers' namespaces, written after the storage, one namespace per transaction.
    public var namespaces: [NamespaceRows]
    public var cache: [CachedResource]

    public init(storage: [StorageItem] = [], namespaces: [NamespaceRows] = [], cache: [CachedResource] = []) {
        self.storage = storage; self.namespaces = namespaces; self.cache = cache
    }
}

/// One key/value item of a site's storage. Keys are told apart by their UTF-8 bytes, as a
/// browser's `localStorage` tells them apart by code units: a composed `é` and `e` + U+0301 are
/// two keys. (A Swift `Dictionary<String, _>` would merge them: `String` equality is canonical
/// equivalence.) Equality here is by bytes too.
public struct StorageItem: Sendable, Equatable {
    public var key: String
    public var value: String
    public init(key: String, value: String) { self.key = key; self.value = value }

    public static func == (a: StorageItem, b: StorageItem) -> Bool {
        a.key.utf8.elementsEqual(b.key.utf8) && a.value.utf8.elementsEqual(b.value.utf8)
    }
}

/// Where a lost or damaged partition is rebuilt from (the vault layer implements it).
public protocol PartitionRebuildSource: Sendable {
    /// The contents the site's partition should hold.
    func contents(forSite site: SiteID) throws -> PartitionContents
}

/// A row as stored (for the isolation audit: moving raw bytes between rows, files and sites).
package struct RawRow: Sendable, Equatable {
    package var storedKey: [UInt8]
    package var sealedValue: [UInt8]
}
