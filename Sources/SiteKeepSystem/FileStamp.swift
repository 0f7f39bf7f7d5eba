#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// What `lstat` says of a file that changes when its contents do: device, inode, size and the
/// modification and change times to the nanosecond. A file replaced atomically (rename) gets a
/// new inode; one written in place a new size or times. For caches that must see another
/// process's change at once without reading the file again.
public struct FileStamp: Sendable, Equatable {
    private let device: UInt64
    private let inode: UInt64
    private let size: Int64
    private let modified: (Int, Int)
    private let changed: (Int, Int)

    /// The stamp of `path` (not following a final symbolic link), nil when nothing is there or
    /// it cannot be examined.
    public static func of(_ path: String) -> FileStamp? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return FileStamp(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                         modified: (st.st_mtim.tv_sec, st.st_mtim.tv_nsec), changed: (st.st_ctim.tv_sec, st.st_ctim.tv_nsec))
    }

    /// Whether the file was last changed at least `margin` nanoseconds ago. File times come from
    /// the kernel's coarse clock (a few milliseconds), so a second write inside the same tick
    /// with the same size leaves an equal stamp: a cache must not trust a stamp that is not
    /// settled yet ("racy git"), and should read the file again instead.
    public func isSettled(margin: Int = 50_000_000) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        func ns(_ t: (Int, Int)) -> Int { t.0 &* 1_000_000_000 &+ t.1 }
        let current = ns((now.tv_sec, now.tv_nsec))
        return current - ns(modified) >= margin && current - ns(changed) >= margin
    }

    public static func == (a: FileStamp, b: FileStamp) -> Bool {
        a.device == b.device && a.inode == b.inode && a.size == b.size && a.modified == b.modified && a.changed == b.changed
    }
}
