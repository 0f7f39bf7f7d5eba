import Foundation
import Glibc
import SiteKeepSystem

// How a registry knows whether `sites.json` changed since it read it, cheaply enough to ask on
// every bridge message, and how writers take turns.

/// What `sites.json` was when a registry read or wrote it: device, inode, size, and modification
/// and change times (to the nanosecond). Every writer replaces the file by `rename`, so a new
/// version is a new inode; the reader keeps the version it read open (``RegistryFileView``), so
/// that inode number cannot be handed to a later file, and a changed stamp is exact even where
/// the file system's clock is coarse. In-place edits (an editor) change size or times.
struct RegistryFileStamp: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: (Int, Int)
    var changed: (Int, Int)

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = (st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
        changed = (st.st_ctim.tv_sec, st.st_ctim.tv_nsec)
    }

    static func == (a: Self, b: Self) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size && a.modified == b.modified && a.changed == b.changed
    }

    /// The stamp of the file at `path` now; nil when there is none.
    static func current(_ path: String) -> RegistryFileStamp? {
        var st = stat()
        return stat(path, &st) == 0 ? RegistryFileStamp(st) : nil
    }
}

/// The version of `sites.json` a registry's view came from, held open (see ``RegistryFileStamp``).
final class RegistryFileView {
    let stamp: RegistryFileStamp?
    private let fd: Int32

    /// No file (an empty registry).
    init() { stamp = nil; fd = -1 }

    /// Takes ownership of `fd`, an open descriptor of the version read or written.
    init(fd: Int32) {
        var st = stat()
        stamp = fstat(fd, &st) == 0 ? RegistryFileStamp(st) : nil
        self.fd = fd
    }

    deinit { if fd >= 0 { close(fd) } }
}

/// The cross-process lock every read-modify-write of `sites.json` holds: an exclusive `flock` on
/// `sites.json.lock` beside it (as the file keyring locks `keyring.v1.lock`).
enum RegistryFileLock {
    /// Creates the lock file (0600) if absent.
    static func create(_ path: String) throws(PartitionError) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .storageFailure("\(SystemError.current("create the registry lock", path))") }
        close(fd)
    }

    /// Runs `body` holding the lock, waiting for it unless `wait` is false; nil, without running
    /// `body`, when not waiting and another process holds it.
    static func holding<R>(_ path: String, wait: Bool, _ body: () throws(PartitionError) -> R) throws(PartitionError) -> R? {
        let held: FileLock.Held?
        do { held = try FileLock.Held.acquire(path, wait: wait, name: "the registry lock") } catch {
            throw .storageFailure("\(error)")
        }
        guard let held else { return nil }
        defer { withExtendedLifetime(held) {} }   // dropping it releases the flock
        return try body()
    }
}
