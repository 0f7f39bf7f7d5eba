public import SiteKeepJSON
public import SiteKeepPartitions
public import SiteKeepCore
import Foundation
import SiteKeepVocabulary

/// A site's partition as a JSON document (`sitekeep_partition_v1`), the form SiteKeep keeps
/// in a vault so a lost or damaged partition can be rebuilt from it (`site export`, `site rebuild`):
///
/// ```json
/// {"schema": "sitekeep_partition_v1",
///  "storage": {"nr.schedule.v1": "{…}"},
///  "reading": {"article-1": "read", "article-2": {"partRead": 0.4}},
///  "tabs": {"tabs": [{"id": "t1", "url": "https://…", "title": "…", "scrollX": 0, "scrollY": 120}], "lastTabID": "t1"}}
/// ```
///
/// The offline cache is not part of it: a cache is rebuilt by browsing. The bytes are a stored
/// format (documents already in vaults): `Fixtures/stores/before-domain-move` pins them.
public struct PartitionDocument: Sendable, Equatable {
    public static let schema = "sitekeep_partition_v1"

    /// The key/value items, each key once by its UTF-8 bytes.
    public var storage: [StorageItem]
    public var session: SessionState?
    /// Reading state per article id, each id once by its UTF-8 bytes.
    public var reading: [ReadingEntry]

    public init(storage: [StorageItem] = [], session: SessionState? = nil, reading: [ReadingEntry] = []) {
        self.storage = storage; self.session = session; self.reading = reading
    }

    /// What `partition` holds (storage, tabs, reading state).
    public init(partition: Partition) throws(PartitionError) {
        self.init(storage: try partition.storage.items(), session: try partition.tabs.session(), reading: try partition.reading.entries())
    }

    /// The default vault path of a site's document: `sitekeep/sites/<host>.json`.
    public static func defaultPath(for site: Site) -> String {
        "sitekeep/sites/\(site.origins.first?.host ?? site.id.string).json"
    }

    /// The document, members sorted by UTF-8 bytes (keys that differ only in normal form stay two members).
    public var json: JSONValue {
        let storage = storage.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let reading = reading.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        var members: [JSONMember] = [
            JSONMember(key: "schema", value: .string(Self.schema)),
            JSONMember(key: "storage", value: .object(storage.map { JSONMember(key: $0.key, value: .string($0.value)) })),
            JSONMember(key: "reading", value: .object(reading.map { entry in
                let v: JSONValue
                switch entry.state {
                case .read: v = "read"
                case .unread: v = "unread"
                case .partRead(let p): v = ["partRead": .double(p)]
                }
                return JSONMember(key: entry.id, value: v)
            })),
        ]
        if let s = session {
            members.append(JSONMember(key: "tabs", value: .object([
                JSONMember(key: "tabs", value: .array(s.tabs.map { t in
                    ["id": .string(t.id), "url": .string(t.url), "title": .string(t.title), "scrollX": .double(t.scrollX), "scrollY": .double(t.scrollY)]
                })),
                JSONMember(key: "lastTabID", value: .string(s.lastTabID)),
            ])))
        }
        return .object(members)
    }

    /// Parses a document strictly: unknown fields, wrong types and what the rules of tabs and
    /// reading state refuse (an empty article id, a last tab that is not a tab, two tabs with
    /// one id) are refused, naming the field.
    /// - Throws: `JSONParseError`, `JSONShapeError` or ``CoreFieldError``.
    public init(bytes: [UInt8]) throws {
        let value = try JSONParser.parse(bytes, limits: .document)
        var root = try JSONObjectReader(value, path: "partition")
        guard try root.string("schema") == Self.schema else {
            throw JSONShapeError.invalidValue(path: "partition.schema", reason: "expected \(Self.schema)")
        }
        self.init()
        if let storage = root.optional("storage") {
            guard case .object(let members) = storage else { throw JSONShapeError.wrongType(path: "partition.storage", expected: "an object", found: storage.typeName) }
            for m in members {
                guard case .string(let s) = m.value else { throw JSONShapeError.wrongType(path: "partition.storage.\(m.key)", expected: "a string", found: m.value.typeName) }
                self.storage.append(StorageItem(key: m.key, value: s))   // keys are unique by bytes (the parser refuses duplicates)
            }
        }
        if let reading = root.optional("reading") {
            guard case .object(let members) = reading else { throw JSONShapeError.wrongType(path: "partition.reading", expected: "an object", found: reading.typeName) }
            for m in members {
                let entry: ReadingEntry
                switch m.value {
                case .string("read"): entry = ReadingEntry(id: m.key, state: .read)
                case .string("unread"): entry = ReadingEntry(id: m.key, state: .unread)
                case .object:
                    var r = try JSONObjectReader(m.value, path: "partition.reading.\(m.key)")
                    guard let p = try r.required("partRead").doubleValue, p >= 0, p <= 1 else {
                        throw JSONShapeError.invalidValue(path: "partition.reading.\(m.key).partRead", reason: "a number from 0 to 1")
                    }
                    try r.finish()
                    entry = ReadingEntry(id: m.key, state: .partRead(progress: p))
                default:
                    throw JSONShapeError.invalidValue(path: "partition.reading.\(m.key)", reason: "\"read\", \"unread\" or {\"partRead\": 0…1}")
                }
                if m.key.isEmpty { throw CoreFieldError("partition.reading", "has a member with an empty article id") }
                self.reading.append(entry)
            }
        }
        if root.optional("tabs") != nil {
            var tabs = try root.object("tabs")
            var session = SessionState()
            for (i, t) in try tabs.array("tabs").enumerated() {
                var r = try JSONObjectReader(t, path: "partition.tabs.tabs[\(i)]")
                session.tabs.append(TabState(id: try r.string("id"), url: try r.string("url"), title: try r.string("title"),
                                             scrollX: r.optional("scrollX")?.doubleValue ?? 0, scrollY: r.optional("scrollY")?.doubleValue ?? 0))
                try r.finish()
            }
            session.lastTabID = try tabs.optionalString("lastTabID")
            try tabs.finish()
            try session.check(path: "partition.tabs")
            self.session = session
        }
        try root.finish()
    }

    /// The rows a rebuild writes: the storage items, the session in `tabs`, every article not
    /// unread in `reading` (in the rows' stored form, as ``TabsStore`` and ``ReadingStore`` write them).
    public func contents() throws(PartitionError) -> PartitionContents {
        var namespaces: [NamespaceRows] = []
        if let session {
            namespaces.append(NamespaceRows(namespace: .tabs, rows: [SealedRow(name: TabsStore.row, value: try TabsStore.encoded(session, path: "partition.tabs"))]))
        }
        let (set, _) = try ReadingStore.rows(reading)
        namespaces.append(NamespaceRows(namespace: .reading, rows: set.map { SealedRow(name: $0.0, value: $0.1) }))
        return PartitionContents(storage: storage, namespaces: namespaces)
    }
}
