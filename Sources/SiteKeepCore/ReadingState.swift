public import SiteKeepJSON
import Foundation

// Reading state per article: its rules, and the form the bridge's `reading.get` and
// `reading.set` carry. Its stored form, in the partition's `reading` namespace, is SiteKeepWiring's
// `ReadingStore`.

/// How far an article has been read. Stored by SiteKeepWiring's `ReadingStore` through SiteKeepJSON with the
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

/// One article's reading state; ids are told apart by their UTF-8 bytes (as the partitions' `StorageItem` keys are).
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
