public import SiteKeepCore
public import SiteKeepPartitions
import SiteKeepJSON

// A site's saved session in its partition: the core's ``SessionState`` in the `tabs` namespace,
// one row, in the stored form the partition has always held. Here, on the partitions, rather
// than in SiteKeepCore, so the core (and the bridge, which carries its types) links no custody
// or SQLite.

extension PartitionNamespace {
    /// Session state: open tabs, the last tab, scroll positions. A stored format: the name and
    /// code are those of the rows written before the core owned them.
    public static let tabs = PartitionNamespace("tabs", code: 2)
}

/// A site's saved session in its partition (one row, `session`, of the `tabs` namespace).
public struct TabsStore: Sendable {
    /// The rows behind it.
    public let rows: SealedRows
    static let row = "session"

    public init(rows: SealedRows) { self.rows = rows }

    /// The saved session, or nil when none was saved.
    public func session() throws(PartitionError) -> SessionState? {
        guard let bytes = try rows.value(Self.row) else { return nil }
        guard let s = Self.decoded(bytes) else { throw rows.damage }
        return s
    }

    /// Replaces the saved session.
    /// - Throws: ``PartitionError/invalidValue(_:)`` naming the field a rule refuses (``SessionState/check(path:)``).
    public func setSession(_ session: SessionState) throws(PartitionError) {
        try rows.update([(Self.row, try Self.encoded(session, path: "session"))])
    }

    /// Forgets the saved session.
    public func clear() throws(PartitionError) { try rows.clear() }

    /// The row value of a checked session.
    static func encoded(_ session: SessionState, path: String) throws(PartitionError) -> [UInt8] {
        do throws(CoreFieldError) { try session.check(path: path) } catch { throw .invalidValue(error.description) }
        return JSONSerializer.bytes(stored(session), style: .canonical)
    }

    /// The stored form: `{"lastTabID":…,"tabs":[{"id":…,"scrollX":…,"scrollY":…,"title":…,"url":…}]}`
    /// through SiteKeepJSON's canonical writer (keys sorted), `lastTabID` left out when there is
    /// none, as Foundation's `JSONEncoder` wrote it before (the same members, so either reader
    /// reads either form).
    static func stored(_ session: SessionState) -> JSONValue {
        var members: [JSONMember] = []
        if let last = session.lastTabID { members.append(JSONMember(key: "lastTabID", value: .string(last))) }
        members.append(JSONMember(key: "tabs", value: .array(session.tabs.map { t in
            .object(["id": .string(t.id), "url": .string(t.url), "title": .string(t.title),
                     "scrollX": .double(t.scrollX), "scrollY": .double(t.scrollY)])
        })))
        return .object(members)
    }

    /// A stored session, in this form or the one `JSONEncoder` wrote (any key order, `\/`
    /// escapes, whole numbers without a fraction, `lastTabID` absent or null, unknown members
    /// ignored, as `JSONDecoder` did); nil when it is not one.
    static func decoded(_ bytes: [UInt8]) -> SessionState? {
        do {
            var r = try JSONObjectReader(JSONParser.parse(bytes), path: "session")
            var tabs: [TabState] = []
            for (i, element) in try r.array("tabs").enumerated() {
                var t = try JSONObjectReader(element, path: "session.tabs[\(i)]")
                guard let x = try t.required("scrollX").doubleValue, let y = try t.required("scrollY").doubleValue else { return nil }
                tabs.append(TabState(id: try t.string("id"), url: try t.string("url"), title: try t.string("title"), scrollX: x, scrollY: y))
            }
            let last = r.optional("lastTabID")
            guard last == nil || last!.isNull || last!.stringValue != nil else { return nil }
            return SessionState(tabs: tabs, lastTabID: last?.stringValue)
        } catch {
            return nil
        }
    }
}

extension Partition {
    /// The session state (tabs), kept by the core in the `tabs` namespace.
    public var tabs: TabsStore { TabsStore(rows: rows(.tabs)) }
}
