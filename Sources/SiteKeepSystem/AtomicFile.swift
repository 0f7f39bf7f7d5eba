#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// Replaces a file atomically: a reader sees the old content or the new, never a mix, and a
/// crash at any point leaves one of the two.
///
/// The one implementation every SiteKeep writer uses: a new temporary file beside the target
/// (created with `O_EXCL | O_NOFOLLOW` and the final mode, so it is never readable by others
/// and never a link planted in advance), every byte written, `fsync`, `rename` over the target,
/// then `fsync` of the folder so the rename itself is durable. On failure the temporary file is
/// removed and the target is untouched.
///
/// ```swift
/// try AtomicFile.replace("/home/u/.local/share/sitekeep/sites.json", with: bytes)
/// ```
public enum AtomicFile {
    private static let counter = Atomic<UInt64>(0)

    /// The temporary name for `path`: a dot file in the same folder, unique per process and
    /// call; in `temporaryFolder` when given, `PID-N-NS.tmp` (so a cleaner can tell whose it is).
    static func temporaryPath(for path: String, in temporaryFolder: String? = nil) -> String {
        let slash = path.utf8.lastIndex(of: UInt8(ascii: "/"))
        let folder = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let n = counter.wrappingAdd(1, ordering: .relaxed).newValue
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        if let temporaryFolder { return "\(temporaryFolder)/\(getpid())-\(n)-\(ts.tv_nsec).tmp" }
        return "\(folder.isEmpty ? "" : folder)/.\(name).tmp-\(getpid())-\(n)-\(ts.tv_nsec)"
    }

    /// The CLOCK_REALTIME time `ns` nanoseconds from now (a deadline for `sem_timedwait`).
    static func realtimeDeadline(afterNs ns: Int) -> timespec {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME, &t)
        let total = Int(t.tv_nsec) + ns
        t.tv_sec += total / 1_000_000_000
        t.tv_nsec = total % 1_000_000_000
        return t
    }

    /// Replaces `path` with `bytes` (file mode `mode`, 0600 by default).
    ///
    /// - Parameters:
    ///   - temporaryFolder: where the temporary file is made instead of beside `path` (it must be
    ///     on the same file system; a vault keeps them out of the folders other tools list).
    ///   - syncFolder: false leaves the `fsync` of the folder to a caller that writes many files
    ///     into one folder and syncs it once at the end.
    /// - Throws: ``SystemError`` naming the step and the file that failed.
    public static func replace(_ path: String, with bytes: UnsafeRawBufferPointer, mode: UInt32 = 0o600,
                               temporaryFolder: String? = nil, syncFolder: Bool = true) throws(SystemError) {
        let tmp = try writeTemporary(bytes, for: path, mode: mode, temporaryFolder: temporaryFolder)
        var keep = false
        defer { if !keep { unlink(tmp) } }
        guard rename(tmp, path) == 0 else { throw .current("rename \(tmp) to", path) }
        keep = true
        if syncFolder { try FileIO.syncFolder(folder(of: path)) }
    }

    /// ``replace(_:with:mode:temporaryFolder:syncFolder:)`` for an array.
    public static func replace(_ path: String, with bytes: [UInt8], mode: UInt32 = 0o600,
                               temporaryFolder: String? = nil, syncFolder: Bool = true) throws(SystemError) {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in
                try replace(path, with: raw, mode: mode, temporaryFolder: temporaryFolder, syncFolder: syncFolder)
            }
        }
        try result.get()
    }

    /// Temporary files of one ``Batch`` (or ``replaceAll(_:mode:temporaryFolder:)``) written and
    /// fsynced at once.
    public static let syncWidth = 8

    /// Replaces every `(path, bytes)` of `files` durably, renaming in the order given (a caller
    /// storing objects passes what others refer to last): a ``Batch`` committed at once.
    ///
    /// Every temporary file is made first (`O_EXCL | O_NOFOLLOW`, the final mode), written and
    /// fsynced, up to ``syncWidth`` at once: the file system then commits their journal entries
    /// together, where one file after another paid a commit each (a pull of 1,000 objects spent
    /// most of its time there: on this machine's ext4, 1,000 files took 5.1–5.7 s one by one
    /// and 0.3–0.4 s eight at once, under load). Only when every file is durable is each renamed
    /// over its target, in order, and each folder touched fsynced once. So a crash before the
    /// renames leaves every target as it was; a crash during them leaves the first files
    /// replaced, each whole, and the rest as they were; after return everything is durable. On
    /// failure the temporary files not yet renamed are removed.
    /// - Throws: ``SystemError`` naming the step and the file that failed.
    public static func replaceAll(_ files: [(path: String, bytes: [UInt8])], mode: UInt32 = 0o600,
                                  temporaryFolder: String? = nil) throws(SystemError) {
        guard !files.isEmpty else { return }
        let batch = Batch(mode: mode, temporaryFolder: temporaryFolder)
        for f in files { batch.add(f.path, f.bytes) }
        try batch.commit(order: .asAdded)
    }

    /// A new temporary file for `path` holding `bytes`, fsynced and closed; removed on failure.
    static func writeTemporary(_ bytes: [UInt8], for path: String, mode: UInt32, temporaryFolder: String?) throws(SystemError) -> String {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) -> String in
                try writeTemporary(raw, for: path, mode: mode, temporaryFolder: temporaryFolder)
            }
        }
        return try result.get()
    }

    /// The same, for bytes in a buffer.
    static func writeTemporary(_ bytes: UnsafeRawBufferPointer, for path: String, mode: UInt32, temporaryFolder: String?) throws(SystemError) -> String {
        var tmp = temporaryPath(for: path, in: temporaryFolder)
        var fd: Int32 = -1
        for _ in 0..<8 {
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
            if fd >= 0 || Errno.current != .fileExists { break }
            tmp = temporaryPath(for: path, in: temporaryFolder)
        }
        guard fd >= 0 else { throw .current("create", tmp) }
        var keep = false
        defer { if !keep { unlink(tmp) } }
        defer { close(fd) }
        // The mode given to open is filtered by the umask; set it exactly.
        guard fchmod(fd, mode_t(mode)) == 0 else { throw SystemError.current("set the mode of", tmp) }
        do { try FileIO.writeAll(fd, bytes) } catch { throw SystemError("write", tmp, errno: error) }
        guard fsync(fd) == 0 else { throw SystemError.current("fsync", tmp) }
        keep = true
        return tmp
    }

    /// The folder part of `path` (`.` when it has none, `/` for a file in the root).
    public static func folder(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.utf8.startIndex ? "/" : String(path[..<slash])
    }
}
