/// Told what a vault and its registry do behind the caller's back: HEAD resolved from its files
/// or served from the kept one, the kept HEAD dropped, the object cache hit or missed, the
/// registry file parsed.
///
/// Nothing in production passes one (each site costs one check of an optional); tests pass one
/// to count what their calls cost, and a profiler could. Every method does nothing unless the
/// observer implements it, and each may be called from any thread.
public protocol VaultObserver: Sendable {
    /// HEAD was resolved from its files (the clone's config and mode, the branch index, the
    /// ref), not served from the kept HEAD.
    func headResolvedFromFiles()
    /// The kept HEAD's files were stamped to see whether it still holds (no watch vouched for it).
    func keptHeadFilesStamped()
    /// The kept HEAD (the decrypted branch index and head ref) was wiped: by a lock of the keys'
    /// scope, or with the vault when it was released.
    func keptHeadDropped()
    /// An object was served from the object cache.
    func objectCacheHit()
    /// An object was not in the object cache (it is then read from disk and decrypted).
    func objectCacheMissed()
    /// The registry file was read and parsed (not served from the kept records).
    func registryParsed()
}

extension VaultObserver {
    /// Does nothing.
    public func headResolvedFromFiles() {}
    /// Does nothing.
    public func keptHeadFilesStamped() {}
    /// Does nothing.
    public func keptHeadDropped() {}
    /// Does nothing.
    public func objectCacheHit() {}
    /// Does nothing.
    public func objectCacheMissed() {}
    /// Does nothing.
    public func registryParsed() {}
}
