/// A place that holds a vault's shared files by file id — the path relative to `.sg_vault/`,
/// e.g. `bare/data/obj-cas-imm-…`, `bare/refs/ref-pid-muw-…` (SGIT-FORMAT.md §7). The local
/// folder (``LocalObjectStore``) implements it, and so does every remote (the vault server's
/// HTTP API, another vault's folder, a static web host).
///
/// Stores only move ciphertext: nothing here holds a key. Whoever reads from a store checks
/// what it gets (object ids against their bytes, everything else by decryption).
public protocol VaultObjectStore: Sendable {
    /// A short name for messages (`the folder /srv/v`, `https://host`).
    var label: String { get }
    /// False for read-only stores (folder and static remotes).
    var isWritable: Bool { get }
    /// Reads files by id; ids that are absent are left out of the answer.
    func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]]
    /// Reads files by id as ``read(_:)`` does, handing the answer to `deliver` in parts as they
    /// arrive (a store that reads in batches: once per batch, from several threads at once), so
    /// a caller checks and stores one part while the next is on its way. An error `deliver`
    /// throws ends the read (parts already asked for may still be delivered) and is rethrown.
    func read(_ fileIDs: [String], delivering deliver: @escaping @Sendable ([String: [UInt8]]) throws(VaultError) -> Void) throws(VaultError)
    /// How a fetch should ask this store for many objects it learns of a few at a time (a
    /// tree's blobs, as each tree is decoded): reads of at most `batch` ids, up to `inFlight`
    /// at once, each sent as soon as it is full. nil (the default): one read of everything at
    /// the end, for stores where a read costs no round trip (a folder, packs already read).
    var readPipelining: ReadPipelining? { get }
    /// The file ids that start with `prefix` (e.g. `bare/refs/`).
    func list(prefix: String) throws(VaultError) -> [String]
    /// Writes files; objects before whatever refers to them.
    func write(_ files: [StoredFile]) throws(VaultError)
    /// Replaces `fileID` by `bytes` only when its current bytes equal `expected` (nil: only when
    /// absent). Answers false when they differ (the ref moved: pull first).
    func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool
}

/// Batch size and concurrency for reads a fetch sends while it is still walking trees.
public struct ReadPipelining: Sendable, Equatable {
    /// Most ids per read.
    public let batch: Int
    /// Reads in flight at once.
    public let inFlight: Int
    public init(batch: Int, inFlight: Int) {
        self.batch = max(1, batch)
        self.inFlight = max(1, inFlight)
    }
}

extension VaultObjectStore {
    public var readPipelining: ReadPipelining? { nil }

    /// The whole answer of ``read(_:)`` as one part.
    public func read(_ fileIDs: [String], delivering deliver: @escaping @Sendable ([String: [UInt8]]) throws(VaultError) -> Void) throws(VaultError) {
        try deliver(try read(fileIDs))
    }
}

/// One file for ``VaultObjectStore/write(_:)``.
public struct StoredFile: Sendable, Equatable {
    /// `bare/…` file id.
    public let fileID: String
    /// The stored (encrypted) bytes.
    public let bytes: [UInt8]
    public init(fileID: String, bytes: [UInt8]) {
        self.fileID = fileID
        self.bytes = bytes
    }
}

/// Validation of file ids arriving from a remote (§7): only `bare/(data|refs|indexes|keys|branches|pending)/NAME`
/// and `bare/cache/(value|pointer)/NAME` with a name that is a valid id of its kind, so nothing a
/// server names can escape `bare/` or land in `local/`.
public enum FileIDs {
    /// The normalised id, or nil when it is not acceptable.
    public static func validate(_ text: String) -> String? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.first == "bare", parts.count == 3 || parts.count == 4 else { return nil }
        if parts.count == 4 {
            guard parts[1] == "cache", parts[2] == "value" || parts[2] == "pointer",
                  let name = Identifiers.normalise(parts[3], prefix: "cch-pid-snw-", hexCounts: [12])
                    ?? Identifiers.normalise(parts[3], prefix: "cch-pid-muw-", hexCounts: [12]) else { return nil }
            return "bare/cache/\(parts[2])/\(name)"
        }
        let name: String?
        switch parts[1] {
        case "data": name = ObjectID(parts[2])?.rawValue
        case "refs": name = Identifiers.refID(parts[2])
        case "indexes": name = Identifiers.indexID(parts[2])
        case "keys": name = Identifiers.keyID(parts[2])
        case "branches", "pending": name = isPlainName(parts[2]) ? parts[2] : nil
        default: name = nil
        }
        return name.map { "bare/\(parts[1])/\($0)" }
    }

    /// `[a-z0-9_.-]{1,128}` not starting with `.`.
    static func isPlainName(_ s: String) -> Bool {
        let u = s.utf8
        return (1...128).contains(u.count) && u.first != UInt8(ascii: ".") && u.allSatisfy {
            (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x5f || $0 == 0x2d || $0 == 0x2e
        }
    }

    /// The object id of `bare/data/<id>`, nil for other files.
    public static func objectID(of fileID: String) -> ObjectID? {
        guard fileID.hasPrefix("bare/data/") else { return nil }
        return ObjectID(String(fileID.dropFirst("bare/data/".count)))
    }

    /// Whether `bytes` hash to the object id in `fileID` (true for files that are not objects).
    public static func matches(_ fileID: String, _ bytes: [UInt8]) -> Bool {
        guard let id = objectID(of: fileID) else { return true }
        return ObjectIDs.of(bytes, width: id.width) == id
    }
}
