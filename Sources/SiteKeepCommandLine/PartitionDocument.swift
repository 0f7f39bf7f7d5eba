import Foundation
internal import SiteKeepJSON
internal import SiteKeepPartitions
internal import SiteKeepVault

/// A site's partition as a JSON document (`sitekeep_partition_v1`), the form SiteKeep keeps
/// in a vault so a lost or damaged partition can be rebuilt from it:
///
/// ```json
/// {"schema": "sitekeep_partition_v1",
///  "storage": {"nr.schedule.v1": "{…}"},
///  "reading": {"article-1": "read", "article-2": {"partRead": 0.4}},
///  "tabs": {"tabs": [{"id": "t1", "url": "https://…", "title": "…", "scrollX": 0, "scrollY": 120}], "lastTabID": "t1"}}
/// ```
///
/// The offline cache is not part of it: a cache is rebuilt by browsing.
enum PartitionDocument {
    static let schema = "sitekeep_partition_v1"

    /// The default vault path of a site's document: `sitekeep/sites/<host>.json`.
    static func defaultPath(for site: Site) -> String {
        "sitekeep/sites/\(site.origins.first?.host ?? site.id.string).json"
    }

    static func encode(_ c: PartitionContents) -> JSONValue {
        // Sorted by UTF-8 bytes; keys that differ only in normal form stay two members.
        let storage = c.storage.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let reading = c.reading.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) }
        var members: [JSONMember] = [
            JSONMember(key: "schema", value: .string(schema)),
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
        if let s = c.session {
            members.append(JSONMember(key: "tabs", value: .object([
                JSONMember(key: "tabs", value: .array(s.tabs.map { t in
                    ["id": .string(t.id), "url": .string(t.url), "title": .string(t.title), "scrollX": .double(t.scrollX), "scrollY": .double(t.scrollY)]
                })),
                JSONMember(key: "lastTabID", value: .string(s.lastTabID)),
            ])))
        }
        return .object(members)
    }

    /// Parses a document strictly: unknown fields and wrong types are refused, naming the field.
    static func decode(_ bytes: [UInt8]) throws -> PartitionContents {
        let value = try JSONParser.parse(bytes, limits: .document)
        var root = try JSONObjectReader(value, path: "partition")
        guard try root.string("schema") == schema else {
            throw JSONShapeError.invalidValue(path: "partition.schema", reason: "expected \(schema)")
        }
        var contents = PartitionContents()
        if let storage = root.optional("storage") {
            guard case .object(let members) = storage else { throw JSONShapeError.wrongType(path: "partition.storage", expected: "an object", found: storage.typeName) }
            for m in members {
                guard case .string(let s) = m.value else { throw JSONShapeError.wrongType(path: "partition.storage.\(m.key)", expected: "a string", found: m.value.typeName) }
                contents.storage.append(StorageItem(key: m.key, value: s))   // keys are unique by bytes (the parser refuses duplicates)
            }
        }
        if let reading = root.optional("reading") {
            guard case .object(let members) = reading else { throw JSONShapeError.wrongType(path: "partition.reading", expected: "an object", found: reading.typeName) }
            for m in members {
                switch m.value {
                case .string("read"): contents.reading.append(ReadingEntry(id: m.key, state: .read))
                case .string("unread"): contents.reading.append(ReadingEntry(id: m.key, state: .unread))
                case .object:
                    var r = try JSONObjectReader(m.value, path: "partition.reading.\(m.key)")
                    guard let p = try r.required("partRead").doubleValue, p >= 0, p <= 1 else {
                        throw JSONShapeError.invalidValue(path: "partition.reading.\(m.key).partRead", reason: "a number from 0 to 1")
                    }
                    try r.finish()
                    contents.reading.append(ReadingEntry(id: m.key, state: .partRead(progress: p)))
                default:
                    throw JSONShapeError.invalidValue(path: "partition.reading.\(m.key)", reason: "\"read\", \"unread\" or {\"partRead\": 0…1}")
                }
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
            contents.session = session
        }
        try root.finish()
        return contents
    }
}

/// A rebuild source reading a site's document from a vault's HEAD.
struct VaultPartitionSource: PartitionRebuildSource {
    let vault: Vault
    let path: String
    func contents(forSite site: SiteID) throws -> PartitionContents {
        try PartitionDocument.decode(try vault.read(path: path))
    }
}
