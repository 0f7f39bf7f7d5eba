#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// An advisory lock (`flock`) on a lock file, held for the duration of a closure: how SiteKeep
/// processes (a daemon and one-shot commands) take turns on one store's files.
///
/// The one place SiteKeep calls `flock` (`tools/check-plumbing` fails on a call elsewhere):
/// ``withLock(_:shared:_:)`` for a closure, ``Held`` for a lock kept while an object lives,
/// ``lock(fd:shared:wait:)`` / ``unlock(fd:)`` on a descriptor the caller already holds (the
/// audit log locks the log file itself). Every wait is retried on `EINTR`.
///
/// A lock file is created 0600 if missing and never removed (removing a lock file others may
/// hold open would let two holders in at once).
public enum FileLock {
    /// Runs `body` while holding an exclusive (or, with `shared`, a shared) lock on `path`.
    /// - Throws: ``SystemError`` when the lock file cannot be opened or locked, or `body`'s error.
    public static func withLock<R: ~Copyable, E: Error>(_ path: String, shared: Bool = false,
                                             _ body: () throws(E) -> R) throws(LockedError<E>) -> R {
        let fd: Int32
        do { fd = try openLockFile(path) } catch { throw .lock(error) }
        defer { close(fd) }
        do { _ = try lock(fd: fd, shared: shared) } catch { throw .lock(SystemError("lock", path, errno: error)) }
        do { return try body() } catch { throw .body(error) }
    }

    /// Opens (creating it 0600 if missing, never through a symbolic link) the lock file at
    /// `path`; the caller closes the descriptor, which releases any lock taken on it.
    /// - Parameter name: what the file is, for the error ("the registry lock").
    /// - Throws: ``SystemError`` "cannot open `name` `path`: …".
    public static func openLockFile(_ path: String, name: String = "the lock file") throws(SystemError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw .current("open \(name)", path) }
        return fd
    }

    /// Takes an exclusive (or, with `shared`, a shared) lock on the open file `fd`, waiting for
    /// other holders unless `wait` is false. Returns false, without the lock, only when not
    /// waiting and another holder has it.
    /// - Throws: the error number of a failed `flock` (never `EINTR`: that is retried).
    @discardableResult
    public static func lock(fd: Int32, shared: Bool = false, wait: Bool = true) throws(Errno) -> Bool {
        let operation = (shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB)
        do { _ = try Errno.retryingOnInterrupt { flock(fd, operation) } } catch {
            if !wait, error == .wouldBlock { return false }
            throw error
        }
        return true
    }

    /// Releases the lock this process holds on `fd` (closing `fd` releases it too).
    public static func unlock(fd: Int32) {
        _ = try? Errno.retryingOnInterrupt { flock(fd, LOCK_UN) }
    }

    /// A lock on a lock file held while this object lives: released when it is deinitialised (or
    /// the process dies, so a crash never leaves a stale lock that blocks the next holder).
    public final class Held: Sendable {
        /// The lock file's descriptor (closed at deinit, which releases the lock).
        private let fd: Int32

        /// Takes the lock on `path` (created 0600), waiting for another holder unless `wait` is
        /// false; nil when not waiting and another holder has it.
        /// - Parameter name: what the file is, for the error ("the registry lock").
        /// - Throws: ``SystemError`` "cannot open `name` …" or "cannot lock …".
        public static func acquire(_ path: String, shared: Bool = false, wait: Bool = true,
                                   name: String = "the lock file") throws(SystemError) -> Held? {
            let fd = try openLockFile(path, name: name)
            do {
                guard try lock(fd: fd, shared: shared, wait: wait) else { close(fd); return nil }
            } catch {
                close(fd)
                throw SystemError("lock", path, errno: error)
            }
            return Held(fd: fd)
        }

        /// Takes the lock on `path`, waiting for another holder.
        /// - Throws: ``SystemError`` when the lock file cannot be opened or locked.
        public convenience init(_ path: String, shared: Bool = false, name: String = "the lock file") throws(SystemError) {
            let fd = try openLockFile(path, name: name)
            do { try lock(fd: fd, shared: shared) } catch {
                close(fd)
                throw SystemError("lock", path, errno: error)
            }
            self.init(fd: fd)
        }

        private init(fd: Int32) { self.fd = fd }

        deinit { close(fd) }
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
