public import SiteKeepJSON

/// One file of a vault listing, as the inbox needs it: its path and the id of its content (a
/// new version of a file has a new id).
public struct VaultListingEntry: Sendable, Hashable {
    public let path: String
    public let version: String
    public let size: Int
    public init(path: String, version: String, size: Int) { self.path = path; self.version = version; self.size = size }
}

/// What the agents wrote: a file under one of the inbox folders of the vault.
public struct InboxItem: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case brief, review, answer, workflow, note
    }
    public let path: String
    public let version: String
    public let kind: Kind
    public let size: Int
    /// Not read in this version (no read mark, or a mark for an older version).
    public let unread: Bool
    /// New or changed since the listing the reader last looked at.
    public let isNewSinceLastLook: Bool
}

/// The reader's read marks: per path, the version read and when. Kept in the vault (as
/// ``path``) so they travel between devices; two devices' marks merge per path, the later
/// `readAt` winning.
public struct InboxReadMarks: Sendable, Equatable {
    public struct Mark: Sendable, Equatable {
        public let version: String
        public let readAt: Instant
    }
    public static let format = "sitekeep.inbox-read.v1"
    /// The file's path in the vault.
    public static let path = "sitekeep/inbox-read.json"
    public static let maxMarks = 10_000

    public private(set) var marks: [String: Mark]

    public init() { marks = [:] }

    public init(json: JSONValue, path: String = InboxReadMarks.path) throws(CoreFieldError) {
        guard json["format"]?.stringValue == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format)") }
        guard case .array(let list)? = json["read"] else { throw CoreFieldError("\(path).read", "must be an array") }
        guard list.count <= Self.maxMarks else { throw CoreFieldError("\(path).read", "has \(list.count) marks; at most \(Self.maxMarks)") }
        var marks: [String: Mark] = [:]
        for (i, m) in list.enumerated() {
            let p = "\(path).read[\(i)]"
            guard let file = m["path"]?.stringValue, !file.isEmpty, file.utf8.count <= 1024 else { throw CoreFieldError("\(p).path", "must be a vault path") }
            guard let version = m["version"]?.stringValue, !version.isEmpty, version.utf8.count <= 128 else { throw CoreFieldError("\(p).version", "must be a content id") }
            guard let at = m["readAt"]?.intValue.flatMap(Instant.init(milliseconds:)) else { throw CoreFieldError("\(p).readAt", "must be milliseconds since the epoch") }
            marks[file] = Mark(version: version, readAt: at)
        }
        self.marks = marks
    }

    public var json: JSONValue {
        let sorted = marks.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return .object([JSONMember(key: "format", value: .string(Self.format)),
                        JSONMember(key: "read", value: .array(sorted.map { p, m in
                            .object([JSONMember(key: "path", value: .string(p)), JSONMember(key: "version", value: .string(m.version)),
                                     JSONMember(key: "readAt", value: .int(m.readAt.milliseconds))])
                        }))])
    }

    /// Marks `version` of `path` read at `at`.
    public mutating func markRead(path: String, version: String, at: Instant) {
        marks[path] = Mark(version: version, readAt: at)
    }

    /// Marks the inbox items of `listing` that `paths` names read at `at`, each in its version
    /// there (paths that are not items are left out). - Returns: how many items were marked.
    @discardableResult
    public mutating func markRead(_ paths: [String], in listing: [VaultListingEntry], at: Instant) -> Int {
        let wanted = Set(paths)
        var marked = 0
        for e in listing where wanted.contains(e.path) && Inbox.kind(of: e.path) != nil && e.path != Self.path {
            markRead(path: e.path, version: e.version, at: at)
            marked += 1
        }
        return marked
    }

    /// Drops marks of files no longer in `listing` (the oldest first when over the limit).
    public mutating func prune(keeping listing: [VaultListingEntry]) {
        let present = Set(listing.map(\.path))
        marks = marks.filter { present.contains($0.key) }
        if marks.count > Self.maxMarks {
            let keep = marks.sorted { $0.value.readAt > $1.value.readAt }.prefix(Self.maxMarks)
            marks = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }

    /// The marks of two devices merged: per path, the later `readAt` (then the greater version id, so both sides agree).
    public func merged(with other: InboxReadMarks) -> InboxReadMarks {
        var out = self
        for (p, m) in other.marks {
            guard let mine = out.marks[p] else { out.marks[p] = m; continue }
            if m.readAt > mine.readAt || (m.readAt == mine.readAt && mine.version.utf8.lexicographicallyPrecedes(m.version.utf8)) {
                out.marks[p] = m
            }
        }
        return out
    }
}

/// The inbox: what agents wrote into the vault, from the vault's listing (after a pull), the
/// listing the reader last looked at, and the read marks. Pure logic; the daemon supplies the
/// listings and keeps the marks.
public enum Inbox {
    /// The folders agents write into, and what their files are.
    public static let folders: [(prefix: String, kind: InboxItem.Kind)] = [
        ("inbox/briefs/", .brief), ("inbox/reviews/", .review), ("inbox/answers/", .answer),
        ("workflows/", .workflow), ("inbox/", .note),
    ]

    /// The kind of `path`, or nil when it is not in an inbox folder.
    public static func kind(of path: String) -> InboxItem.Kind? {
        folders.first { path.hasPrefix($0.prefix) && path.count > $0.prefix.count }?.kind
    }

    /// Whether `path` is an item of the inbox in `listing`: a file of `listing` in an inbox
    /// folder, other than the read marks themselves.
    public static func isItem(_ path: String, in listing: [VaultListingEntry]) -> Bool {
        kind(of: path) != nil && path != InboxReadMarks.path && listing.contains { $0.path == path }
    }

    /// The first of `paths` that is not an item of the inbox in `listing` (nil when all are).
    public static func firstNonItem(_ paths: [String], in listing: [VaultListingEntry]) -> String? {
        let items = Set(listing.lazy.map(\.path).filter { kind(of: $0) != nil && $0 != InboxReadMarks.path })
        return paths.first { !items.contains($0) }
    }

    /// The differences between two listings.
    public struct Changes: Sendable, Equatable {
        public var added: [String] = []
        public var changed: [String] = []
        public var removed: [String] = []
        public init(added: [String] = [], changed: [String] = [], removed: [String] = []) {
            self.added = added; self.changed = changed; self.removed = removed
        }
    }

    public static func diff(from previous: [VaultListingEntry], to current: [VaultListingEntry]) -> Changes {
        let before = Dictionary(previous.map { ($0.path, $0.version) }, uniquingKeysWith: { a, _ in a })
        let now = Set(current.map(\.path))
        var c = Changes()
        for e in current {
            if let v = before[e.path] { if v != e.version { c.changed.append(e.path) } } else { c.added.append(e.path) }
        }
        c.removed = previous.map(\.path).filter { !now.contains($0) }
        c.added.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        c.changed.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        c.removed.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        return c
    }

    /// The inbox items of `current`, newest-looking first (unread, then new since the last look, then by path).
    /// - Parameter lastLooked: the listing when the reader last looked (nil: never; everything is new).
    public static func items(current: [VaultListingEntry], lastLooked: [VaultListingEntry]?, marks: InboxReadMarks) -> [InboxItem] {
        let changes = lastLooked.map { diff(from: $0, to: current) }
        let fresh = Set((changes?.added ?? current.map(\.path)) + (changes?.changed ?? []))
        var out: [InboxItem] = []
        for e in current {
            guard let kind = kind(of: e.path), e.path != InboxReadMarks.path else { continue }
            let unread = marks.marks[e.path]?.version != e.version
            out.append(InboxItem(path: e.path, version: e.version, kind: kind, size: e.size, unread: unread, isNewSinceLastLook: fresh.contains(e.path)))
        }
        out.sort { a, b in
            if a.unread != b.unread { return a.unread }
            if a.isNewSinceLastLook != b.isNewSinceLastLook { return a.isNewSinceLastLook }
            return a.path.utf8.lexicographicallyPrecedes(b.path.utf8)
        }
        return out
    }
}

extension InboxItem {
    /// `inbox.list`'s form of an item: path, kind, size, whether unread and whether new since the last look.
    public var json: JSONValue {
        ["path": .string(path), "kind": .string(kind.rawValue), "size": .integer(size), "unread": .bool(unread), "new": .bool(isNewSinceLastLook)]
    }
}
