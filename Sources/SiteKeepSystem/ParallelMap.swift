#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Synchronization

extension SystemThread {
    /// `body(i)` for every `i` in `0..<count`, on up to `width` threads (the calling thread is
    /// one of them), the results in index order; returns when all are done. For work that
    /// waits (a vault remote's requests, several in flight): each thread takes the next index
    /// until none is left, so a thread that cannot be created only means fewer in flight.
    public static func map<T: Sendable>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        guard count > 1, width > 1 else { return (0..<max(0, count)).map(body) }
        let shared = MapState<T>(count: count)
        let helpers = min(width, count) - 1
        var started = 0
        for _ in 0..<helpers {
            if detach({ shared.work(body); shared.helperDone() }) { started += 1 }
        }
        shared.work(body)
        shared.waitForHelpers(started)
        return shared.results()
    }
}

/// The state ``SystemThread/map(_:width:_:)`` shares with its helper threads.
private final class MapState<T: Sendable>: @unchecked Sendable {
    // @unchecked: `done` is a POSIX semaphore (thread-safe by contract), allocated once and
    // freed in deinit; everything else is behind the Mutex.
    private let state: Mutex<(next: Int, results: [T?])>
    private let count: Int
    private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(count: Int) {
        self.count = count
        state = Mutex((0, [T?](repeating: nil, count: count)))
        sem_init(done, 0, 0)
    }

    deinit {
        sem_destroy(done)
        done.deallocate()
    }

    func work(_ body: @Sendable (Int) -> T) {
        while true {
            let i = state.withLock { s -> Int? in
                guard s.next < count else { return nil }
                defer { s.next += 1 }
                return s.next
            }
            guard let i else { return }
            let r = body(i)
            state.withLock { $0.results[i] = r }
        }
    }

    func helperDone() { sem_post(done) }

    /// Waits until `n` helpers have finished.
    func waitForHelpers(_ n: Int) {
        var left = n
        while left > 0 {
            if sem_wait(done) == 0 { left -= 1 } else if errno != EINTR { return }
        }
    }

    func results() -> [T] { state.withLock { $0.results.map { $0! } } }
}
