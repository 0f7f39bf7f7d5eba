import SiteKeepSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Reads a fetch sends while it is still learning what to read: ids are ``add(_:)``ed a few at
/// a time (each decoded tree's blobs), and every time a batch is full it is read on a helper
/// thread (at most ``ReadPipelining/inFlight`` at once), each answer handed to `deliver` on
/// that thread. ``finish()`` sends what is left and waits; ``cancel()`` sends nothing more and
/// waits for the reads in flight, so nothing is delivered after either returns.
///
/// A store without pipelining (``VaultObjectStore/readPipelining`` nil) gets one read of every
/// id at ``finish()``, as before.
final class PipelinedReads: @unchecked Sendable {
    // @unchecked: every mutable field is behind `state`; `done` is a POSIX semaphore
    // (thread-safe by contract), allocated once and freed in deinit.
    private struct State {
        var pending: [String] = []
        var running = 0
        var started = 0
        var waited = 0
        var finishing = false
        var stopped = false
        var failure: VaultError?
    }
    private let state = Mutex(State())
    private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    private let remote: any VaultObjectStore
    private let shape: ReadPipelining?
    private let deliver: @Sendable ([String: [UInt8]]) throws(VaultError) -> Void

    init(from remote: any VaultObjectStore, deliver: @escaping @Sendable ([String: [UInt8]]) throws(VaultError) -> Void) {
        self.remote = remote
        shape = remote.readPipelining
        self.deliver = deliver
        sem_init(done, 0, 0)
    }

    deinit {
        sem_destroy(done)
        done.deallocate()
    }

    /// Queues ids to read; sends every batch that is full (when the store pipelines).
    func add(_ fileIDs: [String]) {
        guard !fileIDs.isEmpty else { return }
        let spawn = state.withLock { s -> Int in
            s.pending.append(contentsOf: fileIDs)
            return helpersWanted(&s)
        }
        startHelpers(spawn)
    }

    /// Sends what is queued, waits for every read, and rethrows the first failure.
    func finish() throws(VaultError) {
        guard shape != nil else {
            let all = state.withLock { s -> [String] in defer { s.pending = [] }; return s.pending }
            if !all.isEmpty { try remote.read(all, delivering: deliver) }
            return
        }
        let spawn = state.withLock { s -> Int in
            s.finishing = true
            return helpersWanted(&s)
        }
        startHelpers(spawn)
        waitForHelpers()
        if let failure = state.withLock({ $0.failure }) { throw failure }
    }

    /// Sends nothing more and waits for the reads in flight (their answers are still
    /// delivered); for a fetch that failed elsewhere.
    func cancel() {
        state.withLock { $0.stopped = true }
        waitForHelpers()
    }

    /// How many helpers to start for the batches queued now (counted as running).
    private func helpersWanted(_ s: inout State) -> Int {
        guard let shape, !s.stopped, s.failure == nil else { return 0 }
        let batches = s.finishing ? (s.pending.count + shape.batch - 1) / shape.batch : s.pending.count / shape.batch
        let n = max(0, min(shape.inFlight - s.running, batches - s.running))
        s.running += n
        s.started += n
        return n
    }

    private func startHelpers(_ n: Int) {
        for _ in 0..<n {
            if !SystemThread.detach({ self.work(); sem_post(self.done) }) {
                state.withLock { $0.started -= 1 }
                work()
            }
        }
    }

    /// A helper: takes the next batch (a full one, or the rest once finishing) and reads it,
    /// until none is left, a read failed, or the fetch cancelled.
    private func work() {
        guard let shape else { return }
        while true {
            let chunk = state.withLock { s -> [String]? in
                guard !s.stopped, s.failure == nil,
                      s.pending.count >= shape.batch || (s.finishing && !s.pending.isEmpty) else {
                    s.running -= 1
                    return nil
                }
                let n = min(shape.batch, s.pending.count)
                defer { s.pending.removeFirst(n) }
                return Array(s.pending.prefix(n))
            }
            guard let chunk else { return }
            do { try remote.read(chunk, delivering: deliver) } catch {
                state.withLock { if $0.failure == nil { $0.failure = error } }
            }
        }
    }

    private func waitForHelpers() {
        while true {
            let pending = state.withLock { $0.started - $0.waited }
            guard pending > 0 else { return }
            if sem_wait(done) == 0 { state.withLock { $0.waited += 1 } } else if errno != EINTR { return }
        }
    }
}
