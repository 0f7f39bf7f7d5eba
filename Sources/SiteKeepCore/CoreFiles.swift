#if canImport(Glibc)
import Glibc
#endif

/// Why a core state file could not be read or written.
public struct CoreFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(path: String, reason: String) { self.path = path; self.reason = reason }
    public var description: String { "\(path): \(reason)" }
}

/// The core's small state files (delivered reminders, calendar sequences, the "what is next"
/// snapshot): bounded reads, and atomic replacement (a temporary file made with `O_EXCL`,
/// written, `fsync`ed, renamed over the old one, then the folder `fsync`ed), so a reader never
/// sees half a file and a crash leaves the old or the new one.
///
/// (The structure issue folds this into the project's one `AtomicFile`.)
public enum CoreFiles {
    /// The bytes of `path`, or nil when it does not exist. - Throws: when it is larger than `limit` or unreadable.
    public static func read(_ path: String, limit: Int) throws(CoreFileError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw CoreFileError(path: path, reason: "cannot open: \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; throw CoreFileError(path: path, reason: "cannot read: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            guard out.count <= limit else { throw CoreFileError(path: path, reason: "is larger than \(limit) bytes") }
        }
        return out
    }

    /// Replaces `path` with `bytes` atomically, with `mode` (0600 by default).
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600) throws(CoreFileError) {
        let tmp = path + ".tmp-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode_t(mode))
        guard fd >= 0 else { throw CoreFileError(path: path, reason: "cannot create \(tmp): \(String(cString: strerror(errno)))") }
        var done = 0, ok = true
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 { if errno == EINTR { continue }; ok = false; break }
            done += n
        }
        if ok { ok = fchmod(fd, mode_t(mode)) == 0 && fsync(fd) == 0 }
        let err = String(cString: strerror(errno))
        close(fd)
        if ok { ok = rename(tmp, path) == 0 }
        guard ok else {
            unlink(tmp)
            throw CoreFileError(path: path, reason: "cannot write: \(err)")
        }
        let dir = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let dfd = open(dir.isEmpty ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); close(dfd) }
    }

    /// Creates `path` (and missing parents) as folders of mode 0700.
    public static func ensureDirectory(_ path: String) throws(CoreFileError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw CoreFileError(path: path, reason: "is not a folder") }
            return
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { try ensureDirectory(String(path[..<slash])) }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw CoreFileError(path: path, reason: "cannot create the folder: \(String(cString: strerror(errno)))")
        }
    }
}
