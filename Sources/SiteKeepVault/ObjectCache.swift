import SiteKeepCrypto
import SiteKeepCustody

/// Verified, decrypted objects by id. Objects are immutable (content-addressed), so an entry
/// never goes stale; the cache is bounded by an approximate byte budget and evicts the least
/// recently used entries.
///
/// Its entries live in a ``LockBound`` of the vault keys' ``LockScope``: lock zeroes every
/// decrypted byte in place (blob contents; tree names, sizes, content hashes and types; commit
/// messages) and empties the cache. An evicted or replaced entry is zeroed the same way, and so
/// is the whole cache when its vault is released. Bytes a call is using at that moment are that
/// call's copy (Swift's copy-on-write) and go with it.
final class ObjectCache: Sendable {
    enum Item: Sendable, LockWipeable {
        case tree(Tree)
        /// A commit kept without its decrypted message, which is kept as bytes beside it.
        case commit(Commit, message: [UInt8]?)
        /// A blob's plaintext and the SHA-256 of it.
        case blob([UInt8], digest: [UInt8])
        case publicKey([UInt8])

        var cost: Int {
            switch self {
            case .tree(let t): t.cost
            case .commit(_, let m): 512 + (m?.count ?? 0)
            case .blob(let b, _): 96 + b.count
            case .publicKey(let k): 64 + k.count
            }
        }

        /// A commit as cached: its message moved out of the `String` into bytes that can be zeroed.
        static func commit(_ c: Commit) -> Item {
            var bare = c
            bare.message = nil
            return .commit(bare, message: c.message.map { Array($0.utf8) })
        }

        /// Zeroes the decrypted bytes in their own storage, keeping the entry (so a test can see it).
        mutating func zeroInPlace() {
            switch self {
            case .blob(var b, var digest):
                self = .publicKey([])          // `b` becomes the only owner of its storage
                SecureMemory.zero(&b)
                SecureMemory.zero(&digest)
                self = .blob(b, digest: digest)
            case .tree(var t):
                self = .publicKey([])
                t.zeroInPlace()
                self = .tree(t)
            case .commit(let c, var m):
                self = .publicKey([])
                if var bytes = m {
                    m = nil
                    SecureMemory.zero(&bytes)
                    m = bytes
                }
                self = .commit(c, message: m)
            case .publicKey:
                break                          // public: nothing to zero
            }
        }

        mutating func wipeForLock() {
            zeroInPlace()
            self = .publicKey([])
        }
    }

    struct State: LockWipeable {
        var items: [String: (item: Item, tick: UInt64)] = [:]
        var bytes = 0
        var tick: UInt64 = 0

        /// Zeroes every entry in place (``wipeForLock()`` then empties the cache).
        mutating func zeroInPlace() {
            var i = items.values.startIndex
            while i != items.values.endIndex {
                items.values[i].item.zeroInPlace()
                items.values.formIndex(after: &i)
            }
        }

        mutating func remove(_ key: String) {
            guard var old = items.removeValue(forKey: key) else { return }
            bytes -= old.item.cost
            old.item.wipeForLock()
        }

        mutating func wipeForLock() {
            zeroInPlace()
            items.removeAll()
            bytes = 0
        }
    }

    private let state: LockBound<State>
    /// The scope's generation when the vault's keys were obtained: nothing is cached after a
    /// clear since then (the vault is dead by then, but an in-flight read could still decrypt).
    private let since: LockScope.Generation
    let budget: Int
    /// Told of each hit and miss; none in production.
    private let observer: (any VaultObserver)?

    init(budget: Int, lockScope: LockScope, since: LockScope.Generation, observer: (any VaultObserver)? = nil) {
        self.budget = max(0, budget)
        self.since = since
        self.observer = observer
        state = lockScope.bound(State())
    }

    func get(_ key: String) -> Item? {
        let item: Item? = state.withLock { s in
            s.tick += 1
            guard let entry = s.items[key] else { return nil }
            s.items[key] = (entry.item, s.tick)
            return entry.item
        }
        if let observer {
            if item == nil { observer.objectCacheMissed() } else { observer.objectCacheHit() }
        }
        return item
    }

    func put(_ key: String, _ item: Item) {
        let cost = item.cost
        guard cost <= budget / 4 else { return }
        _ = state.withLock(ifNotClearedSince: since) { s in
            s.tick += 1
            s.remove(key)
            s.items[key] = (item, s.tick)
            s.bytes += cost
            if s.bytes > budget {
                // Evict the oldest until at most 3/4 of the budget is used (amortised).
                let ordered = s.items.sorted { $0.value.tick < $1.value.tick }.map(\.key)
                for k in ordered where s.bytes > budget * 3 / 4 { s.remove(k) }
            }
        }
    }

    /// (entries, bytes): what the cache holds.
    var statistics: (entries: Int, bytes: Int) {
        state.withLock { s in (s.items.count, s.bytes) }
    }
}
