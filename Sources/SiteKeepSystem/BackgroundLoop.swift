#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A named background thread running one loop until it is stopped: what the daemon's periodic
/// services (background vault sync, reminder delivery) share.
///
/// The loop's body naps between rounds with ``nap(_:)``; ``wake()`` ends a nap early (several
/// wakes before the body looks count as one), and ``stop()`` ends the nap, lets the round in
/// progress finish and waits for the body to return. A nap measures its timeout on the clock
/// chosen at creation: ``Clock/monotonic`` for intervals, ``Clock/wall`` for a time of day,
/// since the wall clock also counts the time a laptop spends suspended.
///
/// Glibc only (a mutex and a condition variable), so every layer can use it.
public final class BackgroundLoop: @unchecked Sendable {
    /// The clock a nap's timeout is measured on.
    public enum Clock: Sendable {
        /// `CLOCK_MONOTONIC`: intervals, unaffected by clock changes; stops during suspend.
        case monotonic
        /// `CLOCK_REALTIME`: counts suspended time, follows changes of the system clock.
        case wall
    }

    /// The thread's name (at most 15 bytes reach the kernel).
    public let name: String
    public let clock: Clock

    // All state below is read and written under `mutex` only; that is what makes the class
    // safe to share (hence `@unchecked Sendable`).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var started = false
    private var stopped = false
    private var finished = false
    private var woken = false

    public init(name: String, clock: Clock = .monotonic) {
        self.name = name
        self.clock = clock
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, clock == .wall ? CLOCK_REALTIME : CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    private func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Starts the thread running `body` (once; a loop stopped before it started never starts).
    /// The body should return soon after ``isStopped`` turns true.
    /// - Returns: false when it was started before, was stopped, or no thread could be created.
    @discardableResult
    public func start(_ body: @escaping @Sendable (BackgroundLoop) -> Void) -> Bool {
        let go = locked { () -> Bool in
            guard !started, !stopped else { return false }
            started = true
            return true
        }
        guard go else { return false }
        let threadName = String(decoding: Array(name.utf8.prefix(15)), as: UTF8.self)
        let created = SystemThread.detach { [self] in
            Self.nameThisThread(threadName)
            body(self)
            locked {
                finished = true
                pthread_cond_broadcast(condition)
            }
        }
        if !created { locked { finished = true } }
        return created
    }

    /// Whether ``stop()`` was called.
    public var isStopped: Bool { locked { stopped } }

    /// Ends the body's nap now (or its next one, if it is not napping).
    public func wake() {
        locked {
            woken = true
            pthread_cond_broadcast(condition)
        }
    }

    /// Whether a wake came since the body last looked; clears it.
    public func takeWake() -> Bool {
        locked {
            defer { woken = false }
            return woken
        }
    }

    /// Sleeps for `duration` on the loop's clock, or until ``wake()`` or ``stop()``.
    /// - Returns: true when a wake ended it (the wake is then taken), false on the timeout or a stop.
    public func nap(_ duration: Duration) -> Bool {
        let deadline = Self.deadline(after: duration, clock: clock)
        return locked { () -> Bool in
            var deadline = deadline
            while !woken && !stopped {
                if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
            }
            defer { woken = false }
            return woken
        }
    }

    /// Stops the loop: ends its nap and waits for the body to return (the round in progress
    /// finishes first). Safe to call more than once, or before ``start(_:)``. Never call it from
    /// the body itself.
    public func stop() {
        locked {
            stopped = true
            pthread_cond_broadcast(condition)
            guard started else { return }
            while !finished { pthread_cond_wait(condition, mutex) }
        }
    }

    /// Names the calling thread (what `top -H` and a core dump show), through
    /// `/proc/thread-self/comm`: Glibc's `pthread_setname_np` is not visible to Swift here.
    private static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        _ = try? FileIO.writeAll(fd, Array(name.utf8))
    }

    private static func deadline(after duration: Duration, clock: Clock) -> timespec {
        var now = timespec()
        clock_gettime(clock == .wall ? CLOCK_REALTIME : CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = duration.components
        let clampedSeconds = max(0, min(seconds, Int64(Int32.max)))
        let nanoseconds = seconds < 0 || attoseconds < 0 ? 0 : attoseconds / 1_000_000_000
        var sec = Int64(now.tv_sec) + clampedSeconds
        var nsec = Int64(now.tv_nsec) + nanoseconds
        if nsec >= 1_000_000_000 {
            sec += 1
            nsec -= 1_000_000_000
        }
        return timespec(tv_sec: Int(sec), tv_nsec: Int(nsec))
    }
}
