#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// SiteKeep's one clock module: every reading of a clock outside SiteKeepSystem goes through it
/// (`tools/check-plumbing` fails on a `clock_gettime`, `Date()`, `ContinuousClock.now`,
/// `DispatchTime.now` or `time(nil)` elsewhere). Formatting a given date is not a reading.
///
/// Which clock for what:
/// - ``wallMilliseconds()`` / ``wallSeconds()``: `CLOCK_REALTIME`, the calendar time a person
///   reads (audit lines, stored timestamps); it jumps when the system clock is set.
/// - ``monotonicNanoseconds()`` / ``monotonicMilliseconds()`` / ``monotonicNow()``:
///   `CLOCK_MONOTONIC`, for deadlines and measured durations; it does not count suspend.
/// - ``bootNanoseconds()``: `CLOCK_BOOTTIME`, monotonic and counting suspend (how old a
///   presence proof is, whatever the laptop did meanwhile).
/// - ``processCPUNanoseconds()``: the CPU time of this process (user and system).
///
/// A type that needs a fake clock in tests takes a reader (as `BootClock` does) whose
/// production value calls these.
public enum Clocks {
    /// Nanoseconds since the Unix epoch (`CLOCK_REALTIME`): what a file's times are compared with.
    public static func wallNanoseconds() -> Int64 {
        let ts = read(CLOCK_REALTIME)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Milliseconds since the Unix epoch (`CLOCK_REALTIME`).
    public static func wallMilliseconds() -> Int64 {
        let ts = read(CLOCK_REALTIME)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Seconds since the Unix epoch, with the fraction (`CLOCK_REALTIME`): what
    /// `Date(timeIntervalSince1970:)` takes.
    public static func wallSeconds() -> Double {
        let ts = read(CLOCK_REALTIME)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Nanoseconds of `CLOCK_MONOTONIC` (from an unspecified start; for differences only).
    public static func monotonicNanoseconds() -> UInt64 {
        let ts = read(CLOCK_MONOTONIC)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Milliseconds of `CLOCK_MONOTONIC` (for differences only).
    public static func monotonicMilliseconds() -> Int {
        let ts = read(CLOCK_MONOTONIC)
        return Int(ts.tv_sec) * 1000 + Int(ts.tv_nsec) / 1_000_000
    }

    /// The monotonic clock's instant now, for deadlines in `Duration`s
    /// (`Clocks.monotonicNow() + .seconds(30)`).
    public static func monotonicNow() -> ContinuousClock.Instant {
        ContinuousClock.now
    }

    /// Nanoseconds of `CLOCK_BOOTTIME` (monotonic, counting time spent in suspend).
    public static func bootNanoseconds() -> UInt64 {
        UInt64(max(0, sitekeep_boottime_ns()))
    }

    /// The CPU time this process has used, user and system, in nanoseconds.
    public static func processCPUNanoseconds() -> UInt64 {
        let ts = read(CLOCK_PROCESS_CPUTIME_ID)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    private static func read(_ clock: clockid_t) -> timespec {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return ts
    }
}
