import Dispatch
import SiteKeepJSON
import Synchronization

/// A task executor that runs jobs on the thread that calls ``run(_:)``.
///
/// The socket server gives each connection thread one, so the async dispatcher runs on that thread
/// with no hop to the global pool (lower latency, and a blocked pool cannot stall the daemon).
final class ConnectionExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` is guarded by its Mutex; `wake` is a thread-safe semaphore.
    private let jobs = Mutex<(queue: [UnownedJob], finished: Bool)>(([], false))
    private let wake = DispatchSemaphore(value: 0)

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.queue.append(unowned) }
        wake.signal()
    }

    /// Runs `body` to completion on the calling thread and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T? {
        let result = Mutex<T?>(nil)
        jobs.withLock { $0.finished = false }
        Task(executorPreference: self) {
            let r = await body()
            result.withLock { $0 = r }
            self.jobs.withLock { $0.finished = true }
            self.wake.signal()
        }
        while true {
            wake.wait()
            while let job = jobs.withLock({ s -> UnownedJob? in s.queue.isEmpty ? nil : s.queue.removeFirst() }) {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
            if jobs.withLock({ $0.finished && $0.queue.isEmpty }) { break }
        }
        return result.withLock { $0 }
    }
}

extension BridgeDispatcher {
    /// ``handle(_:connection:)`` run to completion on the calling thread (no hop to the global
    /// pool): for threads outside Swift concurrency (the socket server's connection threads, the
    /// fuzzer, benchmark drivers). Do not call it from async code.
    public func handleSynchronously(_ frame: [UInt8], connection: BridgeConnection) -> [UInt8] {
        ConnectionExecutor().run { await self.handle(frame, connection: connection) }
            ?? BridgeMessage.failure(id: .null, BridgeFailure(.internal, "the request did not complete")).bytes
    }
}

extension BridgeProbes {
    /// ``run(dispatcher:sites:policy:)`` for synchronous callers (the isolation audit's probes),
    /// on the calling thread: it never waits on the shared cooperative pool, which a blocked
    /// caller could be starving.
    public static func runSynchronously(dispatcher: BridgeDispatcher, sites: [BridgeSite], policy: BridgeDispatcher? = nil,
                                        grants: [String: Set<String>] = [:]) -> [BridgeProbeResult] {
        ConnectionExecutor().run { await run(dispatcher: dispatcher, sites: sites, policy: policy, grants: grants) } ?? []
    }
}
