#if canImport(Glibc)
import Glibc
#endif
import SiteKeepSystem

/// The vault folder's own `.sg_vault/` as a ``VaultObjectStore``: what pulls write into and
/// pushes read from. Every write is durable (temp file, fsync, rename, folder fsync); an object
/// is stored only when its bytes hash to its id, and an object already present is never
/// replaced (identical bytes: nothing to do; different bytes: a truncated-hash collision,
/// refused as sgit refuses it).
public struct LocalObjectStore: VaultObjectStore {
    /// The `.sg_vault` folder.
    public let folder: String
    let limit: Int

    public init(vaultRoot: String, limit: Int = VaultLimits().maxBlobBytes + 64) {
        folder = vaultRoot + "/.sg_vault"
        self.limit = limit
    }

    public var label: String { "the vault folder \(folder)" }
    /// Where durable writes stage their temp files.
    var tempFolder: String { folder + "/local/tmp" }
    public var isWritable: Bool { true }

    public func read(_ fileIDs: [String]) throws(VaultError) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for id in fileIDs {
            guard let valid = FileIDs.validate(id) else { throw .invalidID(kind: "file id", value: id, in: label) }
            if case .bytes(let b) = try FileAccess.read(folder + "/" + valid, limit: limit, object: valid) { out[valid] = b }
        }
        return out
    }

    /// Removes what processes that no longer run left in `local/tmp`: a fetch, commit or push
    /// killed before it put its files in place leaves their temporary files behind (a clone of
    /// 1,000 files, up to a thousand), which nothing else would ever remove. A file's maker is
    /// the process id its name starts with (``AtomicFile``'s `PID-N-NS.tmp`); the files of a
    /// running process (this one too) and names of any other form are left alone, and a `local/tmp`
    /// that is a symbolic link is not followed. Answers how many were removed.
    @discardableResult
    func sweepTemporaryFiles() -> Int {
        // Through the folder's own descriptor: a `local/tmp` that is a symbolic link is not followed.
        FileAccess.removeNames(in: tempFolder) { name in
            guard let pid = Self.temporaryFileMaker(name) else { return false }
            return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH
        }
    }

    /// The process id that made a temporary file named `name` (`PID-N-NS.tmp`), nil for any
    /// other name.
    static func temporaryFileMaker(_ name: String) -> pid_t? {
        guard name.hasSuffix(".tmp") else { return nil }
        let parts = name.dropLast(4).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
              let pid = pid_t(parts[0]), pid > 0 else { return nil }
        return pid
    }

    /// Whether `bare/data/<id>` is present (not checked; readers check on use).
    public func hasObject(_ id: ObjectID) -> Bool { FileAccess.exists(folder + "/bare/data/" + id.rawValue) }

    public func list(prefix: String) throws(VaultError) -> [String] {
        var out: [String] = []
        for sub in ["bare/data", "bare/refs", "bare/indexes", "bare/keys", "bare/branches", "bare/pending", "bare/cache/value", "bare/cache/pointer"] {
            let dirPrefix = sub + "/"
            guard dirPrefix.hasPrefix(prefix) || prefix.hasPrefix(dirPrefix) else { continue }
            for name in FileAccess.names(in: folder + "/" + sub) {
                let id = dirPrefix + name
                if id.hasPrefix(prefix), FileIDs.validate(id) == id { out.append(id) }
            }
        }
        return out.sorted()
    }

    /// Stores `files` as one durable batch (``FileAccess/writeAllDurably(_:tempFolder:)``): every
    /// temp file written, one sync of their bytes, then the renames in the order given (objects
    /// before what refers to them, so a crash leaves only objects whose closure is present),
    /// then one `fsync` per folder.
    public func write(_ files: [StoredFile]) throws(VaultError) {
        var batch: [(path: String, bytes: [UInt8])] = []
        var planned: [String: Int] = [:]
        for f in files {
            guard let id = FileIDs.validate(f.fileID) else { throw .invalidID(kind: "file id", value: f.fileID, in: label) }
            let path = folder + "/" + id
            try FileAccess.makeFolders(AtomicFile.folder(of: path))
            if let oid = FileIDs.objectID(of: id) {
                guard FileIDs.matches(id, f.bytes) else {
                    throw .idMismatch(object: id, actual: ObjectIDs.of(f.bytes, width: oid.width).rawValue)
                }
                let earlier = planned[id].map { batch[$0].bytes }
                let existing: [UInt8]?
                if let earlier { existing = earlier } else if case .bytes(let b) = try FileAccess.read(path, limit: limit, object: id) { existing = b } else { existing = nil }
                if let existing {
                    guard existing == f.bytes else {
                        throw .malformed(object: id, reason: "a different object with this id is already stored (a truncated-hash collision); refused")
                    }
                    continue
                }
                planned[id] = batch.count
            }
            batch.append((path, f.bytes))
        }
        try FileAccess.writeAllDurably(batch, tempFolder: tempFolder)
    }

    public func writeIfMatch(fileID: String, bytes: [UInt8], expected: [UInt8]?) throws(VaultError) -> Bool {
        guard let id = FileIDs.validate(fileID) else { throw .invalidID(kind: "file id", value: fileID, in: label) }
        let lock = try FileAccess.lock(folder + "/local/sitekeep.lock")
        defer { withExtendedLifetime(lock) {} }
        let current: [UInt8]?
        switch try FileAccess.read(folder + "/" + id, limit: limit, object: id) {
        case .bytes(let b): current = b
        case .missing: current = nil
        }
        guard current == expected else { return false }
        try write([StoredFile(fileID: id, bytes: bytes)])
        return true
    }

    /// Stores one encrypted object under its id (width 12 or 32) and returns the id. Without
    /// `syncFolder`, the caller fsyncs `bare/data` once after a batch.
    func putObject(_ stored: [UInt8], width: Int) throws(VaultError) -> ObjectID {
        let id = ObjectIDs.of(stored, width: width)
        let path = folder + "/bare/data/" + id.rawValue
        if case .bytes(let existing) = try FileAccess.read(path, limit: limit, object: id.fileID) {
            guard existing == stored else {
                throw .malformed(object: id.fileID, reason: "a different object with this id is already stored (a truncated-hash collision); refused")
            }
            return id
        }
        try FileAccess.makeFolders(folder + "/bare/data")
        try FileAccess.writeDurably(stored, to: path, syncFolder: false, tempFolder: tempFolder)
        return id
    }
}
