import SiteKeepCrypto
import SiteKeepSystem
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Durable writes of vault files, through SiteKeepSystem: AtomicFile.replace (O_EXCL temp file,
// write all, fsync, rename, fsync of the folder). A crash at any point leaves either the old file
// or the new one, never a torn one.

extension FileAccess {
    static func errnoText(_ e: Int32 = errno) -> String { Errno(rawValue: e).description }

    /// fsyncs a folder so a rename or create inside it survives a crash.
    static func syncFolder(_ path: String) throws(VaultError) {
        do { try FileIO.syncFolder(path) } catch { throw .io(path: path, reason: error.cause) }
    }

    /// Creates `path` (and missing parents) as folders of `mode`.
    static func makeFolders(_ path: String, mode: mode_t = 0o700) throws(VaultError) {
        if isDirectory(path) { return }
        let up = AtomicFile.folder(of: path)
        if up != path, up != ".", !isDirectory(up) { try makeFolders(up, mode: mode) }
        do { try PrivateFolder.make(path, mode: UInt32(mode)) } catch { throw .io(path: path, reason: error.cause) }
    }

    /// Durably replaces `path` with `bytes`: ``AtomicFile/replace(_:with:mode:temporaryFolder:syncFolder:)``
    /// (fsync of the folder only when `syncFolder`). Vault files take their temp file in
    /// `.sg_vault/local/tmp` (`tempFolder`), so a crash leaves no stray name where sgit looks.
    static func writeDurably(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600, syncFolder sync: Bool = true,
                             tempFolder: String? = nil) throws(VaultError) {
        if let tempFolder { try makeFolders(tempFolder) }
        do {
            try AtomicFile.replace(path, with: bytes, mode: UInt32(mode), temporaryFolder: tempFolder, syncFolder: sync)
        } catch {
            throw .io(path: path, reason: error.cause)
        }
    }

    /// Durably replaces each `(path, bytes)`, renamed in the order given, with one sync of all
    /// their bytes (``AtomicFile/replaceAll(_:mode:temporaryFolder:)``); temp files in `tempFolder`.
    static func writeAllDurably(_ files: [(path: String, bytes: [UInt8])], mode: mode_t = 0o600, tempFolder: String) throws(VaultError) {
        guard !files.isEmpty else { return }
        try makeFolders(tempFolder)
        do {
            try AtomicFile.replaceAll(files, mode: UInt32(mode), temporaryFolder: tempFolder)
        } catch {
            throw .io(path: error.path, reason: error.cause)
        }
    }

    /// Appends one line to `path` (created 0600), fsynced.
    static func appendLine(_ bytes: [UInt8], to path: String) throws(VaultError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .io(path: path, reason: errnoText()) }
        defer { close(fd) }
        do { try FileIO.writeAll(fd, bytes + [0x0a]) } catch { throw .io(path: path, reason: error.description) }
        do { try FileIO.sync(fd) } catch { throw .io(path: path, reason: error.description) }
    }

    /// Removes temp files in `folder` left by processes that are gone (killed mid-write).
    static func removeStaleTemps(in folder: String) {
        removeNames(in: folder) { name in
            guard name.hasSuffix(".tmp"), let dash = name.firstIndex(of: "-"), let pid = Int32(name[..<dash]) else { return false }
            return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH
        }
    }

    /// Removes the entries of `folder` that `shouldRemove` names, through a descriptor of the
    /// folder itself: a `folder` that is a symbolic link (a `local/tmp` pointing elsewhere) is
    /// not followed, and nothing outside it is removed, whatever is renamed meanwhile. Answers
    /// how many were removed.
    @discardableResult
    static func removeNames(in folder: String, where shouldRemove: (String) -> Bool) -> Int {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        guard let dir = fdopendir(fd) else { close(fd); return 0 }
        defer { closedir(dir) }
        var doomed: [String] = []
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != "..", !name.contains("/"), shouldRemove(name) { doomed.append(name) }
        }
        var removed = 0
        for name in doomed where unlinkat(dirfd(dir), name, 0) == 0 { removed += 1 }
        return removed
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Removes a file; absent is fine.
    static func remove(_ path: String) throws(VaultError) {
        if unlink(path) != 0, errno != ENOENT { throw .io(path: path, reason: errnoText()) }
    }

    /// The names in a folder (no `.`/`..`), empty when it is absent.
    static func names(in path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var out: [String] = []
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { out.append(name) }
        }
        return out
    }
}

extension FileAccess {
    /// Takes the exclusive lock on the lock file `path` (created 0600), waiting for another
    /// holder: SiteKeepSystem's ``FileLock/Held``, released when the value is dropped (or the
    /// process dies, so a stale lock never blocks the next writer).
    static func lock(_ path: String) throws(VaultError) -> FileLock.Held {
        do { return try FileLock.Held(path) } catch { throw .io(path: path, reason: error.cause) }
    }
}

/// Random lowercase hex for ids and temp names (not secret).
enum SecureRandomName {
    static func hex(_ count: Int) -> String {
        String(Hex.encode(SecureRandom.bytes(count: (count + 1) / 2)).prefix(count))
    }
}
