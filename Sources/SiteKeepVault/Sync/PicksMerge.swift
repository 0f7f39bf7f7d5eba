import SiteKeepJSON

/// The merge of a site's schedule picks (`agenda/picks.json`, `nr.schedule.v1`:
/// `{"v": 1, "picks": [{"id", "at"}, …], "removed": [{"id", "at"}, …]}`) by id: the union of
/// both sides, where for each id the entry with the later `at` wins — a pick or a removal.
/// Removals stay as tombstones with their `at`, so a later add or remove wins on either side.
/// Ties keep the pick. Other members of the document are kept from ours.
public enum PicksMerge {
    /// The vault paths whose content merges this way.
    public static let paths: Set<String> = ["agenda/picks.json", "agenda/picks"]

    struct Entry {
        var id: String
        var at: Int64
        var raw: JSONValue
        var removed: Bool
    }

    /// Merges two documents; nil when either is not an nr.schedule.v1 document (then the
    /// ordinary rule applies: a conflict).
    public static func merge(ours: [UInt8], theirs: [UInt8]) -> [UInt8]? {
        guard let o = try? JSONParser.parse(ours, limits: .document), let t = try? JSONParser.parse(theirs, limits: .document),
              let oe = entries(o), let te = entries(t) else { return nil }
        var best: [String: Entry] = [:]
        var order: [String] = []
        for e in oe + te {
            if let cur = best[e.id] {
                if e.at > cur.at || (e.at == cur.at && cur.removed && !e.removed) { best[e.id] = e }
            } else {
                best[e.id] = e
                order.append(e.id)
            }
        }
        let sorted = order.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.compactMap { best[$0] }
        var members = o.objectValue ?? []
        members.removeAll { $0.key == "picks" || $0.key == "removed" }
        if !members.contains(where: { $0.key == "v" }) { members.insert(JSONMember(key: "v", value: 1), at: 0) }
        members.append(JSONMember(key: "picks", value: .array(sorted.filter { !$0.removed }.map(\.raw))))
        members.append(JSONMember(key: "removed", value: .array(sorted.filter(\.removed).map(\.raw))))
        return JSONSerializer.bytes(.object(members))
    }

    static func entries(_ doc: JSONValue) -> [Entry]? {
        guard doc.objectValue != nil else { return nil }
        var out: [Entry] = []
        for (key, removed) in [("picks", false), ("removed", true)] {
            guard let list = doc[key] else { continue }
            guard let arr = list.arrayValue else { return nil }
            for item in arr {
                // A pick may be a bare id (older documents) or {id, at}.
                if let id = item.stringValue { out.append(Entry(id: id, at: 0, raw: ["id": .string(id), "at": 0], removed: removed)); continue }
                guard let id = item["id"]?.stringValue else { return nil }
                out.append(Entry(id: id, at: time(item["at"]), raw: item, removed: removed))
            }
        }
        return out
    }

    /// `at` in ms: a number, or ISO 8601 UTC (`2026-12-01T10:00:00.123Z`); anything else 0.
    static func time(_ v: JSONValue?) -> Int64 {
        if let i = v?.intValue { return i }
        if let d = v?.doubleValue, d.isFinite { return Int64(d) }
        guard let s = v?.stringValue else { return 0 }
        let u = Array(s.utf8)
        func num(_ a: Int, _ n: Int) -> Int64? {
            guard a + n <= u.count else { return nil }
            var x: Int64 = 0
            for b in u[a..<(a + n)] { guard (0x30...0x39).contains(b) else { return nil }; x = x * 10 + Int64(b - 0x30) }
            return x
        }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2), let se = num(17, 2) else { return 0 }
        var ms: Int64 = 0
        if u.count > 20, u[19] == UInt8(ascii: ".") {
            var i = 20, scale: Int64 = 100
            while i < u.count, (0x30...0x39).contains(u[i]) { ms += Int64(u[i] - 0x30) * scale; scale /= 10; i += 1 }
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = yy / 400, yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return ((days * 24 + h) * 60 + mi) * 60_000 + se * 1000 + ms
    }
}
