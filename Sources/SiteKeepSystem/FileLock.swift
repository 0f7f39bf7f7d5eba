#if canImport(Glibc)
import Glibc
#endif

/// An advisory lock (`flock`) on a lock file, held for the duration of a closure: how SiteKeep
/// processes (a daemon and one-shot commands) take turns on one store's files.
///
/// The lock file is created 0600 if missing and never removed (removing a lock file others may
/// hold open would let two holders in at once).
public enum FileLock {
    /// Runs `body` while holding an exclusive (or, with `shared`, a shared) lock on `path`.
    /// - Throws: ``SystemError`` when the lock file cannot be opened or locked, or `body`'s error.
    public static func withLock<R: ~Copyable, E: Error>(_ path: String, shared: Bool = false,
                                             _ body: () throws(E) -> R) throws(LockedError<E>) -> R {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .lock(.current("open the lock file", path)) }
        defer { close(fd) }
        do { _ = try Errno.retryingOnInterrupt { flock(fd, shared ? LOCK_SH : LOCK_EX) } }
        catch { throw .lock(SystemError("lock", path, errno: error)) }
        do { return try body() } catch { throw .body(error) }
    }
}

/// The error of ``FileLock/withLock(_:shared:_:)``: the lock could not be taken, or the body threw.
public enum LockedError<E: Error>: Error {
    /// Taking the lock failed.
    case lock(SystemError)
    /// The body failed.
    case body(E)
}

extension LockedError: Sendable where E: Sendable {}
