#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A C error number as a value (the `errno` a failed system call left), in the shape of
/// swift-system's `Errno`: compare with the named constants, print with its meaning.
///
/// ```swift
/// let rc = unlink(path)
/// if rc != 0, Errno.current != .noSuchFileOrDirectory { ... }
/// ```
public struct Errno: Error, Sendable, Hashable, CustomStringConvertible {
    /// The C value (`EINTR`, `ENOENT`, ...).
    public let rawValue: Int32

    /// Wraps a C error number.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now.
    public static var current: Errno { Errno(rawValue: errno) }

    /// `strerror`'s text, e.g. "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    /// `EINTR`: the call was interrupted by a signal; retry it.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ENOENT`.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `EEXIST`.
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `EACCES`.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `ELOOP`: a symbolic link where `O_NOFOLLOW` refused one.
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    /// `ENOTDIR`.
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EAGAIN` / `EWOULDBLOCK`.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `ECONNREFUSED`.
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// `EPIPE`.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `EINVAL`.
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOSYS`: the kernel lacks the call.
    public static let notImplemented = Errno(rawValue: ENOSYS)

    /// Pattern matching: `case Errno.interrupted`.
    public static func ~= (lhs: Errno, rhs: any Error) -> Bool {
        (rhs as? Errno) == lhs || (rhs as? SystemError)?.errno == lhs
    }
}

/// A failed system call on a path: what was done, to what, and the error number. Its
/// description is one sentence a person can act on ("cannot rename /a/x.tmp to /a/x: No space
/// left on device"). It never carries file contents.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was attempted, as a verb phrase: "create", "rename", "fsync", "lock", ...
    public let operation: String
    /// The path (or paths) it was attempted on.
    public let path: String
    /// The error number, when a system call failed; nil for a refusal of SiteKeep's own (a
    /// file that is not regular, too large, owned by another user, ...).
    public let errno: Errno?
    /// SiteKeep's own reason, when there is no error number.
    public let reason: String?

    /// A failed call.
    public init(_ operation: String, _ path: String, errno: Errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
        self.reason = nil
    }

    /// A refusal with its reason.
    public init(_ operation: String, _ path: String, reason: String) {
        self.operation = operation
        self.path = path
        self.errno = nil
        self.reason = reason
    }

    /// The call that failed with the current `errno`.
    public static func current(_ operation: String, _ path: String) -> SystemError {
        SystemError(operation, path, errno: .current)
    }

    /// Why it failed, without the operation and path: SiteKeep's reason or the error number's
    /// text (for errors that name the path themselves).
    public var cause: String { reason ?? errno?.description ?? "unknown error" }

    public var description: String {
        "cannot \(operation) \(path): \(cause)"
    }
}

extension Errno {
    /// Runs `body` (a system call returning -1 and setting `errno` on failure) again while it
    /// fails with `EINTR`; returns its result or throws the error number.
    @inlinable
    public static func retryingOnInterrupt<T: FixedWidthInteger>(_ body: () -> T) throws(Errno) -> T {
        while true {
            let r = body()
            if r != -1 { return r }
            let e = Errno.current
            if e != .interrupted { throw e }
        }
    }
}
