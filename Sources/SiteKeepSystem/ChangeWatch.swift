#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

/// An inotify watch on a few folders that tells a long-running process whether anything in them
/// changed since it last asked, for one non-blocking `read` and no path lookup: the look a cache
/// of a file's contents makes before it serves them, instead of a `stat` of every file.
///
/// inotify reports only what this machine's kernel did, and an instance is a per-user resource
/// (128 by default): only a long-running process (the daemon) makes one, and ``init(folders:mask:)``
/// refuses folders on a file system where another machine may write (NFS, SMB, FUSE, 9p, ...),
/// whose changes would never be reported. A caller without a watch keeps comparing
/// ``FileStamp``s, which is always correct.
///
/// Events are queued by the kernel before the call that caused them returns, so a change
/// finished before ``drain()`` or ``generation()`` is seen by it.
public final class ChangeWatch: Sendable {
    /// What a ``drain()`` found.
    public enum News: Sendable, Equatable {
        /// Nothing changed.
        case none
        /// Something changed in a watched folder.
        case something
        /// The watch can no longer be trusted (the queue overflowed, or a watched folder was
        /// moved or deleted): compare stamps from now on.
        case lost
    }

    /// What changes a watch reports by default: names created, removed or moved in or out, a
    /// file closed after writing, and a watched folder itself moved or deleted.
    public static let namesAndCloses = UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)
    /// ``namesAndCloses`` and every write and attribute change (for files that may be written in
    /// place through a descriptor kept open).
    public static let everyChange = namesAndCloses | UInt32(IN_MODIFY | IN_ATTRIB)

    /// The inotify descriptor (non-blocking, close-on-exec).
    private let fd: Int32
    private let mask: UInt32
    /// The generation and whether the watch was lost; the lock also keeps two drains apart.
    private let state = Mutex<(generation: UInt64, lost: Bool)>((0, false))

    /// Watches `folders` (each must exist), or nil when inotify is unavailable, a folder cannot
    /// be watched, or one is on a file system that does not report every change (see the type).
    public init?(folders: [String], mask: UInt32 = ChangeWatch.namesAndCloses) {
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.mask = mask
        for folder in folders where !add(folder) {
            return nil
        }
    }

    deinit { close(fd) }

    /// Watches one more folder for `mask` (the watch's own by default); false (and nothing
    /// changes) when it cannot be watched or is on a file system that does not report every change.
    @discardableResult
    public func add(_ folder: String, mask: UInt32? = nil) -> Bool {
        guard Self.reportsEveryChange(folder) else { return false }
        return inotify_add_watch(fd, folder, (mask ?? self.mask) | UInt32(IN_ONLYDIR)) >= 0
    }

    /// Reads every queued event and says what they amount to. Once ``News/lost``, always lost.
    public func drain() -> News {
        state.withLock { s in
            let news = readQueued()
            if news == .lost { s.lost = true }
            if news != .none { s.generation &+= 1 }
            return s.lost ? .lost : news
        }
    }

    /// A number that stays the same exactly while nothing changed in the watched folders (it
    /// drains first): a cache may serve what it read after taking a generation for as long as
    /// the generation is the same. Once the watch is lost it differs on every call.
    public func generation() -> UInt64 {
        state.withLock { s in
            let news = readQueued()
            if news == .lost { s.lost = true }
            if news != .none || s.lost { s.generation &+= 1 }
            return s.generation
        }
    }

    /// Waits up to `milliseconds` for an event; true when one is queued (not read: ``drain()`` does).
    public func waitForNews(milliseconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, milliseconds) > 0 && p.revents & Int16(POLLIN) != 0
    }

    /// Reads the queue empty (called under the lock).
    private func readQueued() -> News {
        var news = News.none
        withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 8) { buffer in
            while true {
                let n = read(fd, buffer.baseAddress, buffer.count)
                if n < 0 && Errno.current == .interrupted { continue }
                guard n > 0 else { return }
                if news == .none { news = .something }
                var offset = 0
                while offset + 16 <= n {
                    let mask = buffer.load(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(buffer.load(fromByteOffset: offset + 12, as: UInt32.self))
                    if mask & UInt32(IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { news = .lost }
                    offset += 16 + length
                }
            }
        }
        return news
    }

    /// Whether the file system holding `path` reports every change to inotify: local disks and
    /// memory file systems do; network and user-space ones (where another machine or a daemon
    /// changes files behind the kernel's back) do not, and unknown ones are not trusted.
    static func reportsEveryChange(_ path: String) -> Bool {
        var type: UInt64 = 0
        guard sitekeep_fs_type(path, &type) == 0 else { return false }
        return localFileSystems.contains(type & 0xffff_ffff)
    }

    /// `statfs` magic numbers of file systems whose every change passes through this kernel.
    static let localFileSystems: Set<UInt64> = [
        0xEF53,        // ext2, ext3, ext4
        0x5846_5342,   // xfs
        0x9123_683E,   // btrfs
        0x0102_1994,   // tmpfs
        0x8584_58F6,   // ramfs
        0xF2F5_2010,   // f2fs
        0x2FC1_2FC1,   // zfs
        0x794C_7630,   // overlayfs
        0x5265_4973,   // reiserfs
        0x3153_464A,   // jfs
        0x4D44,        // vfat
        0x2011_BAB0,   // exfat
        0x5346_544E,   // ntfs (ntfs3)
    ]
}
