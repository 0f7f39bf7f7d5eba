public import SiteKeepCrypto
import SiteKeepSecureMemory
import Synchronization

/// What every SiteKeep executable calls first (the `sitekeep` front end, which links no
/// OpenSSL, calls ``MemoryHardening/apply()`` alone).
///
/// - ``MemoryHardening/apply()``: not dumpable, no core dumps (`RLIMIT_CORE` 0), libsodium
///   initialised.
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
        try MemoryHardening.apply()
        let secureHeap = OpenSSLSecureHeap.initialize()
        let report = current(secureHeap: secureHeap)
        applied.withLock { $0 = report }
        return report
    }

    /// Reads the process's current state without changing it.
    public static func current(secureHeap: Bool? = nil) -> Report {
        Report(
            dumpable: MemoryHardening.dumpable,
            coreDumpsDisabled: MemoryHardening.coreDumpsDisabled,
            sodiumReady: (try? Sodium.ensureInitialized()) != nil,
            secureHeap: secureHeap ?? OpenSSLSecureHeap.isInitialized)
    }
}
