internal import SiteKeepJSON
import SiteKeepCore
import SiteKeepEncoding

/// The state of a site's vault.
public struct BridgeVaultStatus: Sendable, Equatable {
    public enum State: String, Sendable, Equatable { case clean, pending, locked }
    public var vault: String
    public var state: State
    public var head: String?
    public var files: Int
    /// Pushes waiting in the vault's durable queue.
    public var queued: Int
    /// Paths in conflict since the last merge (resolve them with `sitekeep vault resolve`).
    public var conflicts: [String]
    /// When the daemon last synced the vault (ms since the epoch), and that round's error.
    public var lastSyncMs: Int64?
    public var lastSyncError: String?
    public init(vault: String, state: State, head: String?, files: Int, queued: Int = 0, conflicts: [String] = [],
                lastSyncMs: Int64? = nil, lastSyncError: String? = nil) {
        self.vault = vault
        self.state = state
        self.head = head
        self.files = files
        self.queued = queued
        self.conflicts = conflicts
        self.lastSyncMs = lastSyncMs
        self.lastSyncError = lastSyncError
    }
}

/// What the daemon's sync knows of one vault (its push queue, its last round).
public struct BridgeVaultSync: Sendable, Equatable {
    public var queued: Int
    public var lastSyncMs: Int64?
    public var lastSyncError: String?
    public init(queued: Int, lastSyncMs: Int64?, lastSyncError: String?) {
        self.queued = queued
        self.lastSyncMs = lastSyncMs
        self.lastSyncError = lastSyncError
    }
}

/// One entry of a vault folder.
public struct BridgeVaultEntry: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable { case file, folder }
    public var path: String
    public var kind: Kind
    public var size: Int?
    public init(path: String, kind: Kind, size: Int? = nil) {
        self.path = path
        self.kind = kind
        self.size = size
    }
}

/// The site's vault (the vault layer): results and plaintext of files, never keys.
/// `vault` nil means the site's default vault. Paths reach the service already checked
/// (relative, no `..`, no empty component, no NUL).
public protocol VaultService: Sendable {
    func status(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultStatus
    func list(vault: String?, path: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeVaultEntry]
    func load(vault: String?, path: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8]
    /// Writes one file as a new commit: which vault it went to, and its head after (the same
    /// head, `changed` false, when the content was already there).
    func save(vault: String?, path: String, content: [UInt8], site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultSaved
}

/// What a ``VaultService/save(vault:path:content:site:)`` did.
public struct BridgeVaultSaved: Sendable, Equatable {
    /// The vault written (the site's default when none was named).
    public let vault: String
    /// Its head after the save.
    public let commit: String
    /// Whether the save made a commit (false: the content was already there).
    public let changed: Bool
    public init(vault: String, commit: String, changed: Bool) {
        self.vault = vault
        self.commit = commit
        self.changed = changed
    }
}

enum VaultOps {
    static let names: Set<String> = ["vault.status", "vault.list", "vault.load", "vault.save", "capture.save"]

    static func handlers(_ s: any VaultService) -> [String: BridgeHandler] {
        [
            "vault.status": { c throws(BridgeFailure) in
                let st = try await s.status(vault: c.optionalString("vault"), site: c.site)
                return ["vault": .string(st.vault), "state": .string(st.state.rawValue), "head": .string(st.head),
                        "files": .integer(st.files), "queued": .integer(st.queued), "conflicts": .array(st.conflicts.map { .string($0) }),
                        "last_sync_ms": st.lastSyncMs.map { .int($0) } ?? .null, "last_sync_error": .string(st.lastSyncError)]
            },
            "vault.list": { c throws(BridgeFailure) in
                let path = try c.optionalString("path").map { p throws(BridgeFailure) in try checkedPath(p, allowRoot: true) }
                let entries = try await s.list(vault: c.optionalString("vault"), path: path, site: c.site)
                return ["entries": .array(entries.map { e in
                    var m = [JSONMember(key: "path", value: .string(e.path)), JSONMember(key: "kind", value: .string(e.kind.rawValue))]
                    if let size = e.size { m.append(JSONMember(key: "size", value: .integer(size))) }
                    return .object(m)
                })]
            },
            "vault.load": { c throws(BridgeFailure) in
                let path = try checkedPath(try c.string("path"), allowRoot: false)
                let content = try await s.load(vault: c.optionalString("vault"), path: path, site: c.site)
                return ["path": .string(path), "content": .string(Base64.encode(content, variant: .standard))]
            },
            "vault.save": { c throws(BridgeFailure) in
                let path = try checkedPath(try c.string("path"), allowRoot: false)
                let saved = try await s.save(vault: c.optionalString("vault"), path: path, content: try c.bytes("content"), site: c.site)
                announce(saved, to: c)
                return ["path": .string(path), "commit": .string(saved.commit)]
            },
            "capture.save": { c throws(BridgeFailure) in
                let (title, text, url) = (try c.string("title"), try c.string("text"), c.optionalString("url"))
                let note: CaptureNote
                do throws(CoreFieldError) { note = try CaptureNote(title: title, text: text, url: url, path: "args") } catch { throw BridgeFailure(core: error) }
                let path = note.path()
                let saved = try await s.save(vault: nil, path: path, content: Array(note.markdown.utf8), site: c.site)
                announce(saved, to: c)
                return ["path": .string(path), "commit": .string(saved.commit)]
            },
        ]
    }

    /// A save that made a commit is `vault.changed` (`merge: saved`) to the site's other
    /// connections (its other tabs), as a pull's is: the caller has the new head in its reply.
    static func announce(_ saved: BridgeVaultSaved, to c: BridgeCall) {
        guard saved.changed else { return }
        c.emit("vault.changed", data: ["vault": .string(saved.vault), "head": .string(saved.commit), "merge": "saved",
                                       "fetched": 0, "conflicts": []])
    }

    /// A vault path as the vault layer accepts it, or `bad_request` naming the rule it breaks.
    static func checkedPath(_ path: String, allowRoot: Bool) throws(BridgeFailure) -> String {
        if path.isEmpty && allowRoot { return path }
        guard !path.isEmpty else { throw BridgeFailure(.badRequest, "args.path is empty") }
        guard !path.utf8.contains(0) else { throw BridgeFailure(.badRequest, "args.path contains NUL") }
        guard !path.hasPrefix("/") else { throw BridgeFailure(.badRequest, "args.path must be relative (no leading /)") }
        for part in path.split(separator: "/", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part != ".", part != ".." else {
                throw BridgeFailure(.badRequest, "args.path must not contain empty, '.' or '..' components")
            }
        }
        return path
    }
}

/// The bridge module of the `vault.*` ops and `capture.save`: the site's vault.
public struct VaultModule: BridgeModule {
    public static let ops = VaultOps.names
    private let service: any VaultService
    public init(_ service: any VaultService) { self.service = service }
    public var handlers: [String: BridgeHandler] { VaultOps.handlers(service) }
}
