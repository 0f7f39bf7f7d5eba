#if canImport(Glibc)
import Glibc
#endif
import SiteKeepSystem
import Foundation

/// Why a core state file could not be read or written.
public struct CoreFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public init(path: String, reason: String) { self.path = path; self.reason = reason }
    public var description: String { "\(path): \(reason)" }
}

/// The core's small state files (delivered reminders, calendar sequences, the "what is next"
/// snapshot): bounded reads of regular files (``FileIO/readRegularFile(_:limit:followLinks:)``:
/// a FIFO or a device in a file's place is refused, never waited on), and atomic replacement
/// (``AtomicFile``: a temporary file made with `O_EXCL`, written, `fsync`ed, renamed over the
/// old one, then the folder `fsync`ed), so a reader never sees half a file and a crash leaves
/// the old or the new one.
public enum CoreFiles {
    /// The bytes of `path`, or nil when it does not exist. - Throws: when it is larger than
    /// `limit`, not a regular file (or a symbolic link), or unreadable.
    public static func read(_ path: String, limit: Int) throws(CoreFileError) -> [UInt8]? {
        do {
            switch try FileIO.readRegularFile(path, limit: limit) {
            case .bytes(let bytes): return bytes
            case .missing: return nil
            }
        } catch {
            throw CoreFileError(path: path, reason: error.cause)
        }
    }

    /// Replaces `path` with `bytes` atomically, with `mode` (0600 by default).
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600) throws(CoreFileError) {
        do { try AtomicFile.replace(path, with: bytes, mode: mode) } catch {
            throw CoreFileError(path: path, reason: "cannot write: \(error)")
        }
    }

    /// Deletes the folder `path` and everything in it (a symbolic link inside is removed, never
    /// followed); nothing when it does not exist.
    public static func removeFolder(_ path: String) throws(CoreFileError) {
        var st = stat()
        guard lstat(path, &st) == 0 else {
            if Errno.current == .noSuchFileOrDirectory { return }
            throw CoreFileError(path: path, reason: "cannot be examined: \(Errno.current)")
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw CoreFileError(path: path, reason: "is not a folder") }
        do { try FileManager.default.removeItem(atPath: path) } catch {
            guard lstat(path, &st) == 0 else { return }
            throw CoreFileError(path: path, reason: "cannot be deleted; delete it by hand")
        }
    }

    /// Creates `path` (and missing parents) as folders of mode 0700.
    public static func ensureDirectory(_ path: String) throws(CoreFileError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw CoreFileError(path: path, reason: "is not a folder") }
            return
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex { try ensureDirectory(String(path[..<slash])) }
        do { try PrivateFolder.make(path) } catch {
            throw CoreFileError(path: path, reason: "cannot create the folder: \(error.cause)")
        }
    }
}
