import Synchronization
internal import SiteKeepCrypto

/// A value that holds something a lock must wipe: key handles, decrypted bytes or presence
/// proofs.
///
/// ``wipeForLock()`` overwrites in place every secret byte the value owns and leaves it empty.
/// A key handle or a proof owns no bytes of its own to overwrite: dropping it is its wipe (the
/// last reference to a handle frees its guarded memory, which `sodium_free` zeroes).
public protocol LockWipeable {
    /// Zeroes in place what this value owns and leaves it holding nothing.
    mutating func wipeForLock()
}

extension Array: LockWipeable where Element == UInt8 {
    /// Zeroes the bytes in place (``SecureMemory/zero(_:)``), then empties the array.
    ///
    /// In place means in this array's own storage when no one else shares it; a copy an
    /// in-flight call still holds is that call's and is not touched (Swift's copy-on-write).
    public mutating func wipeForLock() {
        SecureMemory.zero(&self)
        removeAll()
    }
}

extension Optional: LockWipeable where Wrapped: LockWipeable {
    public mutating func wipeForLock() {
        guard case .some(var value) = self else { return }
        self = nil          // `value` is now the only owner, so its wipe works in place
        value.wipeForLock()
    }
}

extension Dictionary: LockWipeable where Value: LockWipeable {
    /// Wipes every value in place, then empties the dictionary.
    public mutating func wipeForLock() {
        var i = values.startIndex
        while i != values.endIndex {
            values[i].wipeForLock()
            values.formIndex(after: &i)
        }
        removeAll()
    }
}

extension SigningKeyHandle: LockWipeable {
    /// Nothing to overwrite: the handle's key is freed (and zeroed) with its last reference.
    public func wipeForLock() {}
}

extension SymmetricKeyHandle: LockWipeable {
    /// Nothing to overwrite: the handle's key is freed (and zeroed) with its last reference.
    public func wipeForLock() {}
}

extension SgitKeys: LockWipeable {
    /// Nothing to overwrite: the keys are freed (and zeroed) with their last reference.
    public func wipeForLock() {}
}

extension PresenceProof: LockWipeable {
    /// A proof holds no secret; dropping it is its wipe.
    public mutating func wipeForLock() {}
}

/// The one place that owns what `lock` clears.
///
/// Every holder of a key handle, a decrypted byte or a presence proof keeps it in a
/// ``LockBound`` made by the scope of the custodian those came from
/// (``Custodian/lockScope``): custody's own signing-key cache, the bridge's open partitions,
/// the vault library's open vaults, each vault's keys and object cache, and the presence
/// window's proofs. A ``LockBound`` can only be made by a scope, which registers it as it makes
/// it, so a cache added later cannot forget to be wiped.
///
/// ``clear()`` wipes every registered holder in place. The custodian calls it on `lock`, on the
/// idle auto-lock (timer or on use) and on unlock (so nothing taken while locked survives into
/// the unlocked session, and nothing from an earlier session into this one); `sitekeep serve`
/// locks on its way out. A holder also wipes itself when it is released, so an evicted or
/// dropped cache is zeroed, not just freed.
///
/// A scope made with ``init()`` is cleared by nobody but its holders' release: for vaults opened
/// with keys derived outside custody (tests, tools) and stores without custody.
public final class LockScope: Sendable {
    /// How many times the scope has been cleared. A holder records it before it fetches what it
    /// will keep, and keeps it only if the scope was not cleared in between
    /// (``LockBound/withLock(ifNotClearedSince:_:)``): a key unwrapped just before a lock, or
    /// a proof a prompt returned after one, is then used by its call at most and never cached.
    public struct Generation: Sendable, Hashable {
        let count: UInt64
    }

    private struct Registry {
        var next: UInt64 = 0
        var holders: [UInt64: WeakHolder] = [:]
        var pruneAt = 64
    }

    private struct WeakHolder {
        weak var holder: (any LockWiping)?
    }

    private let clears = Atomic<UInt64>(0)
    private let registry = Mutex(Registry())

    /// A scope of its own (see the type's discussion).
    public init() {}

    /// The current generation.
    public var generation: Generation { Generation(count: clears.load(ordering: .acquiring)) }

    /// Whether the scope was cleared since `generation`.
    public func wasCleared(since generation: Generation) -> Bool {
        clears.load(ordering: .acquiring) != generation.count
    }

    /// A holder of `initial`, registered with this scope: wiped in place by every ``clear()``
    /// and when released.
    public func bound<Value: LockWipeable & Sendable>(_ initial: Value) -> LockBound<Value> {
        let b = LockBound(initial, scope: self)
        registry.withLock { r in
            r.next += 1
            r.holders[r.next] = WeakHolder(holder: b)
            if r.holders.count >= r.pruneAt {
                r.holders = r.holders.filter { $0.value.holder != nil }
                r.pruneAt = max(64, r.holders.count * 2)
            }
        }
        return b
    }

    /// An empty dictionary cache registered with this scope (``bound(_:)`` of `[:]`).
    public func cache<Key: Hashable & Sendable, Value: LockWipeable & Sendable>(of: Value.Type = Value.self,
                                                                   keyedBy: Key.Type = Key.self) -> LockBound<[Key: Value]> {
        bound([:])
    }

    /// Wipes every registered holder in place. Only custody clears a custodian's scope (on lock,
    /// auto-lock and unlock); a standalone scope's owner may clear it.
    package func clear() {
        // The generation moves first: anything fetched before this point and not yet stored is
        // refused by its holder's `withLock(ifNotClearedSince:)`; anything stored already is
        // wiped below.
        clears.add(1, ordering: .acquiringAndReleasing)
        let live: [any LockWiping] = registry.withLock { r in
            r.holders = r.holders.filter { $0.value.holder != nil }
            return r.holders.values.compactMap(\.holder)
        }
        for holder in live { holder.wipe() }
    }
}

/// What a scope can wipe without knowing the holder's value type.
protocol LockWiping: AnyObject, Sendable {
    func wipe()
}

/// A value kept behind a lock and wiped in place when its ``LockScope`` is cleared or when it
/// is released. Made only by ``LockScope/bound(_:)`` and ``LockScope/cache(of:keyedBy:)``.
public final class LockBound<Value: LockWipeable & Sendable>: LockWiping, @unchecked Sendable {
    // @unchecked: `value` is only touched inside `state`'s lock; `Value` is Sendable.
    private let state: Mutex<Value>
    /// The scope that clears this holder.
    public let scope: LockScope

    fileprivate init(_ initial: Value, scope: LockScope) {
        state = Mutex(initial)
        self.scope = scope
    }

    deinit { wipe() }

    /// Runs `body` with the value, under the holder's lock.
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try state.withLock { (v: inout Value) throws(E) -> R in try body(&v) }
    }

    /// Runs `body` only if the scope was not cleared since `generation` (nil otherwise): the way
    /// to store something fetched while unlocked, so a lock in between is not undone.
    public func withLock<R, E: Error>(ifNotClearedSince generation: LockScope.Generation,
                                      _ body: (inout Value) throws(E) -> R) throws(E) -> R? {
        try state.withLock { (v: inout Value) throws(E) -> R? in
            // Checked under the holder's lock: `clear()` moves the generation before it takes
            // this lock to wipe, so a store that passes here is wiped by that clear.
            guard !scope.wasCleared(since: generation) else { return nil }
            return try body(&v)
        }
    }

    func wipe() {
        state.withLock { $0.wipeForLock() }
    }
}
