import Synchronization
package import SiteKeepCustody

/// Storage keys that live only in this process's memory (random, never persisted): for the
/// isolation audit's scratch store and for benchmarks. Destroying a key forgets it.
package final class EphemeralKeyProvider: SiteStorageKeyProvider {
    private let keys = Mutex<[String: SymmetricKeyHandle]>([:])

    package init() {}

    package func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        try keys.withLock { k in
            if let h = k[siteID] { return h }
            let h = try SymmetricKeyHandle.random()
            k[siteID] = h
            return h
        }
    }

    package func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        keys.withLock { _ = $0.removeValue(forKey: siteID) }
    }
}
