public import SiteKeepVault
import Synchronization

/// A ``VaultObserver`` that counts what it is told: pass it to a vault, a registry or a library
/// and read the counts after the calls under test.
public final class VaultCounter: VaultObserver {
    private let counts = Mutex(Counts())

    /// The counts so far.
    public struct Counts: Sendable, Equatable {
        /// HEAD resolved from its files.
        public var headResolutions = 0
        /// The kept HEAD's files stamped.
        public var keptHeadStamps = 0
        /// Kept HEADs wiped (by a lock, or with their vault).
        public var keptHeadDrops = 0
        /// Objects served from the object cache.
        public var cacheHits = 0
        /// Objects not in the object cache.
        public var cacheMisses = 0
        /// Registry file parses.
        public var registryParses = 0
    }

    public init() {}

    /// The counts so far.
    public var now: Counts { counts.withLock { $0 } }

    public func headResolvedFromFiles() { counts.withLock { $0.headResolutions += 1 } }
    public func keptHeadFilesStamped() { counts.withLock { $0.keptHeadStamps += 1 } }
    public func keptHeadDropped() { counts.withLock { $0.keptHeadDrops += 1 } }
    public func objectCacheHit() { counts.withLock { $0.cacheHits += 1 } }
    public func objectCacheMissed() { counts.withLock { $0.cacheMisses += 1 } }
    public func registryParsed() { counts.withLock { $0.registryParses += 1 } }
}
