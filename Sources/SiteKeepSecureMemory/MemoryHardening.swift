#if canImport(Glibc)
internal import Glibc
#endif
internal import CLinux
import Synchronization

/// The hardening guarded memory relies on, for a process that links no OpenSSL (the `sitekeep`
/// front end); every other executable calls `ProcessHardening.apply()`, which starts with this.
///
/// - `prctl(PR_SET_DUMPABLE, 0)`: no core dump, and other processes of the same user cannot
///   `ptrace` this one or read its `/proc/<pid>/mem`.
/// - `RLIMIT_CORE` set to 0 (soft and hard), so even a later `PR_SET_DUMPABLE` cannot bring
///   core dumps back.
/// - libsodium initialised once (its guarded allocations and CSPRNG are ready).
public enum MemoryHardening: Sendable {
    private static let applied = Mutex<Bool>(false)

    /// Applies the steps above once per process. Idempotent.
    /// - Throws: ``CryptoError/libraryUnavailable(_:)`` if libsodium cannot start; the
    ///   executable must then exit rather than handle secrets.
    public static func apply() throws(CryptoError) {
        if applied.withLock({ $0 }) { return }
        _ = sitekeep_set_dumpable(0)
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        try Sodium.ensureInitialized()
        applied.withLock { $0 = true }
    }

    /// Whether this process is dumpable (`PR_GET_DUMPABLE`).
    public static var dumpable: Bool { sitekeep_get_dumpable() != 0 }

    /// Whether the soft and hard core-size limits are both 0.
    public static var coreDumpsDisabled: Bool {
        var limit = rlimit()
        _ = getrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        return limit.rlim_cur == 0 && limit.rlim_max == 0
    }
}
