public import SiteKeepCore
public import SiteKeepPartitions
import SiteKeepJSON

// Reading state per article in a site's partition: the core's ``ReadingState`` in the `reading`
// namespace, a row per article not unread, in the stored form the partition has always held.
// Here, on the partitions, rather than in SiteKeepCore (see TabsStore.swift).

extension PartitionNamespace {
    /// Reading state per article. A stored format: the name and code are those of the rows
    /// written before the core owned them.
    public static let reading = PartitionNamespace("reading", code: 3)

    /// The namespaces the core keeps in a site's partition (what `site check` opens besides the
    /// partition's own).
    public static let core: [PartitionNamespace] = [.tabs, .reading]
}

/// Reading state per article in a site's partition (a row per article not unread).
public struct ReadingStore: Sendable {
    /// The rows behind it.
    public let rows: SealedRows

    public init(rows: SealedRows) { self.rows = rows }

    /// The state of `articleID` (``ReadingState/unread`` when never set).
    public func state(for articleID: String) throws(PartitionError) -> ReadingState {
        guard let bytes = try rows.value(articleID) else { return .unread }
        return try decode(bytes)
    }

    private func decode(_ bytes: [UInt8]) throws(PartitionError) -> ReadingState {
        guard let s = Self.decoded(bytes) else { throw rows.damage }
        return s
    }

    /// The stored form of a state: `{"partRead":{"progress":0.5}}`, `{"read":{}}`,
    /// `{"unread":{}}`, the members Foundation's `Codable` gave this enum, through SiteKeepJSON's
    /// canonical writer.
    static func stored(_ state: ReadingState) -> [UInt8] {
        let value: JSONValue = switch state {
        case .unread: .object(["unread": .object([JSONMember]())])
        case .partRead(let progress): .object(["partRead": .object(["progress": .double(progress)])])
        case .read: .object(["read": .object([JSONMember]())])
        }
        return JSONSerializer.bytes(value, style: .canonical)
    }

    /// A stored state, in this form or the one `JSONEncoder` wrote (a whole progress without a
    /// fraction, unknown members inside the case ignored, as `JSONDecoder` did); nil when it is
    /// not one (not exactly one case, or a part-read state without a numeric progress).
    static func decoded(_ bytes: [UInt8]) -> ReadingState? {
        guard let value = try? JSONParser.parse(bytes), let members = value.objectValue, members.count == 1,
              let inner = members[0].value.objectValue else { return nil }
        switch members[0].key {
        case "unread": return .unread
        case "read": return .read
        case "partRead":
            guard let progress = inner.first(where: { $0.key == "progress" })?.value.doubleValue else { return nil }
            return .partRead(progress: progress)
        default: return nil
        }
    }

    /// Sets the state of `articleID`; ``ReadingState/unread`` removes the row.
    public func setState(_ state: ReadingState, for articleID: String) throws(PartitionError) {
        try setStates([articleID: state])
    }

    /// Sets several states in one transaction (the unread ones are removed after it).
    /// - Throws: ``PartitionError/invalidValue(_:)`` naming the entry a rule refuses, before anything is written.
    public func setStates(_ states: [String: ReadingState]) throws(PartitionError) {
        let entries = states.sorted { $0.key < $1.key }.map { ReadingEntry(id: $0.key, state: $0.value) }
        let (set, removing) = try Self.rows(entries)
        try rows.update(set, removing: removing)
    }

    /// The rows of checked entries (the unread ones as names to remove).
    static func rows(_ entries: [ReadingEntry]) throws(PartitionError) -> (set: [(String, [UInt8])], removing: [String]) {
        var set: [(String, [UInt8])] = []
        var removing: [String] = []
        for entry in entries {
            do throws(CoreFieldError) { try entry.check(path: "reading[\(printable(entry.id))]") } catch { throw .invalidValue(error.description) }
            if entry.state == .unread { removing.append(entry.id); continue }
            set.append((entry.id, stored(entry.state)))
        }
        return (set, removing)
    }

    /// Every article with a state other than unread. Ids that differ only in Unicode normal form
    /// are one key of this dictionary; ``entries()`` lists every stored id exactly.
    public func all() throws(PartitionError) -> [String: ReadingState] {
        var out: [String: ReadingState] = [:]
        for row in try rows.all() { out[row.name] = try decode(row.value) }
        return out
    }

    /// Every article with a state other than unread, sorted by id, each id once by its bytes.
    public func entries() throws(PartitionError) -> [ReadingEntry] {
        var out: [ReadingEntry] = []
        for row in try rows.all() { out.append(ReadingEntry(id: row.name, state: try decode(row.value))) }
        return out
    }

    /// Forgets all reading state.
    public func clear() throws(PartitionError) { try rows.clear() }
}

extension Partition {
    /// Reading state per article, kept by the core in the `reading` namespace.
    public var reading: ReadingStore { ReadingStore(rows: rows(.reading)) }
}
