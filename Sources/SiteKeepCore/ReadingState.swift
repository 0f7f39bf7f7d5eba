public import SiteKeepJSON
public import SiteKeepPartitions
import Foundation

// Reading state per article: the stored form in the partition's `reading` namespace, its
// rules, and the form the bridge's `reading.get` and `reading.set` carry.

extension PartitionNamespace {
    /// Reading state per article. A stored format: the name and code are those of the rows
    /// written before the core owned them.
    public static let reading = PartitionNamespace("reading", code: 3)

    /// The namespaces the core keeps in a site's partition (what `site check` opens besides the
    /// partition's own).
    public static let core: [PartitionNamespace] = [.tabs, .reading]
}

/// How far an article has been read. Stored by ``ReadingStore`` through SiteKeepJSON with the
/// members Foundation's `Codable` JSON of this enum had (the form the partition has always held:
/// keep the cases and their labels; rows written by `JSONEncoder` are still read).
public enum ReadingState: Sendable, Hashable {
    case unread
    /// Part read; progress from 0 to 1.
    case partRead(progress: Double)
    case read

    /// The rule: a part-read progress is a number from 0 to 1.
    public func check(path: String) throws(CoreFieldError) {
        if case .partRead(let p) = self, !(p.isFinite && p >= 0 && p <= 1) {
            throw CoreFieldError("\(path).progress", "is \(p); part-read progress must be between 0 and 1")
        }
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

    /// The rules of one entry: a non-empty article id and a valid state.
    public func check(path: String) throws(CoreFieldError) {
        if id.isEmpty { throw CoreFieldError("\(path).id", "is empty; an article needs an identifier") }
        try state.check(path: path)
    }
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

/// How far an article has been read, as the bridge names it.
public enum ArticleState: String, Sendable, Equatable, CaseIterable {
    case unread, partial, read
}

/// The reading state of one article as the bridge carries it.
public struct ArticleReading: Sendable, Equatable {
    public var id: String
    public var state: ArticleState
    /// Part read, 0…1.
    public var progress: Double?
    public init(id: String, state: ArticleState, progress: Double? = nil) {
        self.id = id
        self.state = state
        self.progress = progress
    }

    /// Reads `reading.set`'s `articles`: each `{"id", "state", "progress"?}` with a non-empty id,
    /// a known state and (for `partial`) a progress from 0 to 1, naming the field it refuses.
    public static func list(json: JSONValue, path: String) throws(CoreFieldError) -> [ArticleReading] {
        guard case .array(let items) = json else { throw CoreFieldError(path, "must be an array, found \(json.typeName)") }
        var out: [ArticleReading] = []
        for (i, a) in items.enumerated() {
            let at = "\(path)[\(i)]"
            guard case .object = a else { throw CoreFieldError(at, "must be an object {\"id\", \"state\", \"progress\"}, found \(a.typeName)") }
            guard let id = a["id"]?.stringValue else { throw CoreFieldError("\(at).id", "must be a string; each article needs an id") }
            guard let text = a["state"]?.stringValue, let state = ArticleState(rawValue: text) else {
                throw CoreFieldError("\(at).state", "must be one of unread, partial, read")
            }
            var progress: Double?
            if let v = a["progress"], !v.isNull {
                guard let p = v.doubleValue else { throw CoreFieldError("\(at).progress", "must be a number, found \(v.typeName)") }
                progress = p
            }
            let article = ArticleReading(id: id, state: state, progress: progress)
            try ReadingEntry(id: id, state: article.readingState).check(path: at)
            out.append(article)
        }
        return out
    }

    /// `reading.get`'s form of one article.
    public var json: JSONValue {
        var m: [JSONMember] = [JSONMember(key: "id", value: .string(id)), JSONMember(key: "state", value: .string(state.rawValue))]
        if let progress { m.append(JSONMember(key: "progress", value: .double(progress))) }
        return .object(m)
    }

    /// The bridge's form of a stored state.
    public init(id: String, _ state: ReadingState) {
        switch state {
        case .read: self.init(id: id, state: .read)
        case .unread: self.init(id: id, state: .unread)
        case .partRead(let progress): self.init(id: id, state: .partial, progress: progress)
        }
    }

    /// The stored form (a partial article without a progress is at 0).
    public var readingState: ReadingState {
        switch state {
        case .read: .read
        case .unread: .unread
        case .partial: .partRead(progress: progress ?? 0)
        }
    }
}
