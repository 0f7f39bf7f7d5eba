#if canImport(Glibc)
internal import Glibc
#endif
public import SiteKeepCrypto
internal import CLinux
import Synchronization

/// What every SiteKeep executable calls first.
///
/// - `prctl(PR_SET_DUMPABLE, 0)`: no core dump, and other processes of the same user cannot
///   `ptrace` this one or read its `/proc/<pid>/mem`.
/// - `RLIMIT_CORE` set to 0 (soft and hard), so even a later `PR_SET_DUMPABLE` cannot bring
///   core dumps back.
/// - libsodium initialised once (its guarded allocations and CSPRNG are ready).
/// - OpenSSL's secure heap, so P-256 private scalars live in locked, guard-paged memory.
public enum ProcessHardening: Sendable {
    /// What ``apply()`` achieved; reported by `sitekeep doctor`.
    public struct Report: Sendable, Equatable {
        /// `PR_GET_DUMPABLE` returned 0.
        public var dumpable: Bool
        /// The soft and hard core-size limits are both 0.
        public var coreDumpsDisabled: Bool
        /// libsodium initialised.
        public var sodiumReady: Bool
        /// OpenSSL's secure heap initialised.
        public var secureHeap: Bool
    }

    private static let applied = Mutex<Report?>(nil)

    /// Applies the hardening once per process and returns what it achieved. Idempotent.
    /// - Throws: ``CryptoError/libraryUnavailable(_:)`` if libsodium cannot start; the
    ///   executable must then exit rather than handle secrets.
    @discardableResult
    public static func apply() throws(CryptoError) -> Report {
        if let done = applied.withLock({ $0 }) { return done }
        _ = sitekeep_set_dumpable(0)
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        try Sodium.ensureInitialized()
        let secureHeap = OpenSSLSecureHeap.initialize()
        let report = current(secureHeap: secureHeap)
        applied.withLock { $0 = report }
        return report
    }

    /// Reads the process's current state without changing it.
    public static func current(secureHeap: Bool? = nil) -> Report {
        var limit = rlimit()
        _ = getrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        return Report(
            dumpable: sitekeep_get_dumpable() != 0,
            coreDumpsDisabled: limit.rlim_cur == 0 && limit.rlim_max == 0,
            sodiumReady: (try? Sodium.ensureInitialized()) != nil,
            secureHeap: secureHeap ?? OpenSSLSecureHeap.isInitialized)
    }
}
