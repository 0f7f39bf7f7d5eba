import SiteKeepJSON

/// The merge of the inbox's read marks (`sitekeep/inbox-read.json`, `sitekeep.inbox-read.v1`:
/// `{"format": …, "read": [{"path", "version", "readAt"}, …]}`) when two devices both changed
/// them: the union of both sides' marks, per path the later `readAt` (then the greater version,
/// so both sides agree), so neither device loses a mark. The rule of SiteKeepCore's
/// `InboxReadMarks.merged(with:)`, on the file's JSON (the vault layer does not know the core).
public enum InboxReadMarksMerge {
    /// The vault path whose content merges this way.
    public static let path = "sitekeep/inbox-read.json"
    static let format = "sitekeep.inbox-read.v1"

    /// Merges two documents; nil when either is not a read-marks document (then the ordinary
    /// rule applies: a conflict).
    public static func merge(ours: [UInt8], theirs: [UInt8]) -> [UInt8]? {
        guard let o = marks(ours), let t = marks(theirs) else { return nil }
        var best = o
        for (p, m) in t {
            guard let mine = best[p] else { best[p] = m; continue }
            if m.at > mine.at || (m.at == mine.at && mine.version.utf8.lexicographicallyPrecedes(m.version.utf8)) { best[p] = m }
        }
        let sorted = best.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        let doc = JSONValue.object([JSONMember(key: "format", value: .string(format)),
                                    JSONMember(key: "read", value: .array(sorted.map { p, m in
                                        .object([JSONMember(key: "path", value: .string(p)), JSONMember(key: "version", value: .string(m.version)),
                                                 JSONMember(key: "readAt", value: .int(m.at))])
                                    }))])
        return JSONSerializer.bytes(doc, style: .pretty) + [0x0a]
    }

    static func marks(_ bytes: [UInt8]) -> [String: (version: String, at: Int64)]? {
        guard let doc = try? JSONParser.parse(bytes, limits: .document), doc["format"]?.stringValue == format,
              let list = doc["read"]?.arrayValue else { return nil }
        var out: [String: (version: String, at: Int64)] = [:]
        for m in list {
            guard let p = m["path"]?.stringValue, !p.isEmpty, let v = m["version"]?.stringValue, !v.isEmpty,
                  let at = m["readAt"]?.intValue else { return nil }
            if let cur = out[p], cur.at >= at { continue }
            out[p] = (v, at)
        }
        return out
    }
}
