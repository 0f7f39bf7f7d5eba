import Foundation

/// The namespaces of a partition.
public enum PartitionNamespace: String, Sendable, CaseIterable, Codable {
    /// `localStorage`-like string keys and values.
    case storage
    /// Session state: open tabs, the last tab, scroll positions.
    case tabs
    /// Reading state per article.
    case reading
    /// Offline cache entries (URL → status, headers, body hash).
    case cache
    /// Offline cache bodies, content-addressed by SHA-256.
    case cacheBody = "cache-body"

    var code: Int64 {
        switch self {
        case .storage: 1
        case .tabs: 2
        case .reading: 3
        case .cache: 4
        case .cacheBody: 5
        }
    }
}

/// One open tab of a site's session.
public struct TabState: Sendable, Hashable, Codable {
    /// The tab's identifier (stable across launches).
    public var id: String
    /// The page shown.
    public var url: String
    /// The page title.
    public var title: String
    /// Horizontal scroll position in CSS pixels.
    public var scrollX: Double
    /// Vertical scroll position in CSS pixels.
    public var scrollY: Double

    public init(id: String, url: String, title: String, scrollX: Double = 0, scrollY: Double = 0) {
        self.id = id; self.url = url; self.title = title; self.scrollX = scrollX; self.scrollY = scrollY
    }
}

/// The session state an app restores at launch.
public struct SessionState: Sendable, Hashable, Codable {
    /// Open tabs, in order.
    public var tabs: [TabState]
    /// The identifier of the tab that was last in front, if any.
    public var lastTabID: String?

    public init(tabs: [TabState] = [], lastTabID: String? = nil) {
        self.tabs = tabs; self.lastTabID = lastTabID
    }
}

/// How far an article has been read.
public enum ReadingState: Sendable, Hashable, Codable {
    case unread
    /// Part read; progress from 0 to 1.
    case partRead(progress: Double)
    case read
}

/// A cached page or resource with its headers and body.
public struct CachedResource: Sendable, Hashable, Codable {
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
public struct HeaderField: Sendable, Hashable, Codable {
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
    /// Bytes of one session or reading value. Default 1 MiB.
    public var maximumRecordBytes: Int

    public init(storageQuota: Int = 5 << 20, maximumKeyBytes: Int = 1024, cacheBudget: Int = 50 << 20, maximumRecordBytes: Int = 1 << 20) {
        self.storageQuota = storageQuota; self.maximumKeyBytes = maximumKeyBytes
        self.cacheBudget = cacheBudget; self.maximumRecordBytes = maximumRecordBytes
    }
}

/// What a partition holds, as a rebuild source supplies it.
public struct PartitionContents: Sendable, Equatable {
    /// The key/value items, each key once by its UTF-8 bytes (see ``StorageItem``).
    public var storage: [StorageItem]
    public var session: SessionState?
    /// Reading state per article id, each id once by its UTF-8 bytes.
    public var reading: [ReadingEntry]
    public var cache: [CachedResource]

    public init(storage: [StorageItem] = [], session: SessionState? = nil, reading: [ReadingEntry] = [], cache: [CachedResource] = []) {
        self.storage = storage; self.session = session; self.reading = reading; self.cache = cache
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

/// One article's reading state; ids are told apart by their UTF-8 bytes (see ``StorageItem``).
public struct ReadingEntry: Sendable, Equatable {
    public var id: String
    public var state: ReadingState
    public init(id: String, state: ReadingState) { self.id = id; self.state = state }

    public static func == (a: ReadingEntry, b: ReadingEntry) -> Bool {
        a.id.utf8.elementsEqual(b.id.utf8) && a.state == b.state
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
