import Synchronization
public import SiteKeepCustody

/// Storage keys that live only in this process's memory (random, never persisted): for the
/// tests and benchmarks (test support only). Destroying a key forgets it.
public final class EphemeralKeyProvider: SiteStorageKeyProvider {
    private let keys = Mutex<[String: SymmetricKeyHandle]>([:])

    public init() {}

    public func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        try keys.withLock { k in
            if let h = k[siteID] { return h }
            let h = try SymmetricKeyHandle.random()
            k[siteID] = h
            return h
        }
    }

    public func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        keys.withLock { _ = $0.removeValue(forKey: siteID) }
    }
}
