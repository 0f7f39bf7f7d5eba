import Synchronization

/// Verified, decrypted objects by id. Objects are immutable (content-addressed), so an entry
/// never goes stale; the cache is bounded by an approximate byte budget and evicts the least
/// recently used entries.
final class ObjectCache: Sendable {
    enum Item: Sendable {
        case tree(Tree)
        case commit(Commit)
        case blob([UInt8])
        case publicKey([UInt8])

        var cost: Int {
            switch self {
            case .tree(let t): t.cost
            case .commit(let c): 512 + (c.message?.utf8.count ?? 0)
            case .blob(let b): 64 + b.count
            case .publicKey(let k): 64 + k.count
            }
        }
    }

    private struct State {
        var items: [String: (item: Item, tick: UInt64)] = [:]
        var bytes = 0
        var tick: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let state = Mutex(State())
    let budget: Int

    init(budget: Int) { self.budget = max(0, budget) }

    func get(_ key: String) -> Item? {
        state.withLock { s in
            s.tick += 1
            guard let entry = s.items[key] else { s.misses += 1; return nil }
            s.hits += 1
            s.items[key] = (entry.item, s.tick)
            return entry.item
        }
    }

    func put(_ key: String, _ item: Item) {
        let cost = item.cost
        guard cost <= budget / 4 else { return }
        state.withLock { s in
            s.tick += 1
            if let old = s.items[key] { s.bytes -= old.item.cost }
            s.items[key] = (item, s.tick)
            s.bytes += cost
            if s.bytes > budget {
                // Evict the oldest until at most 3/4 of the budget is used (amortised).
                let ordered = s.items.sorted { $0.value.tick < $1.value.tick }
                for (k, v) in ordered where s.bytes > budget * 3 / 4 {
                    s.items[k] = nil
                    s.bytes -= v.item.cost
                }
            }
        }
    }

    /// (entries, bytes, hits, misses), for tests and benchmarks.
    var statistics: (entries: Int, bytes: Int, hits: Int, misses: Int) {
        state.withLock { s in (s.items.count, s.bytes, s.hits, s.misses) }
    }
}
