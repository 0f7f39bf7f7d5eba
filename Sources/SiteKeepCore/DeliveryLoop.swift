import Dispatch
import Foundation
import Synchronization

/// Runs a ``ReminderDeliverer`` on its own thread: a round, then a sleep until the next reminder
/// is due, or at most ``maxNap`` (so a wake from suspend, or a change of the system clock, is
/// noticed within that), or until ``replan()`` says the picks or the agenda changed.
///
/// The sleep waits on the wall clock (`DispatchWallTime`, `CLOCK_REALTIME`), which counts the
/// time a laptop spends suspended.
public final class DeliveryLoop: Sendable {
    public let deliverer: ReminderDeliverer
    public let maxNap: Duration
    private let inputs: @Sendable () -> [ReminderInput]
    private let onRound: @Sendable (Result<DeliveryRound, CoreFileError>) -> Void
    private let wake = DispatchSemaphore(value: 0)
    private let state = Mutex<(running: Bool, stopped: Bool)>((false, false))
    private let finished = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - inputs: each site's schedule and agenda, read afresh every round.
    ///   - onRound: told what each round did (the daemon logs and writes the "what is next" snapshot).
    public init(deliverer: ReminderDeliverer, maxNap: Duration = .seconds(30),
                inputs: @escaping @Sendable () -> [ReminderInput],
                onRound: @escaping @Sendable (Result<DeliveryRound, CoreFileError>) -> Void = { _ in }) {
        self.deliverer = deliverer
        self.maxNap = maxNap
        self.inputs = inputs
        self.onRound = onRound
    }

    /// Starts the thread (once).
    public func start() {
        let go = state.withLock { s -> Bool in
            guard !s.running, !s.stopped else { return false }
            s.running = true
            return true
        }
        guard go else { return }
        let thread = Thread { [self] in self.loop() }
        thread.name = "sitekeep-reminders"
        thread.start()
    }

    /// Runs a round now (the picks or the agenda changed).
    public func replan() { wake.signal() }

    /// Stops the thread and waits for its round in progress to end.
    public func stop() {
        let wasRunning = state.withLock { s -> Bool in
            defer { s.stopped = true }
            return s.running && !s.stopped
        }
        guard wasRunning else { return }
        wake.signal()
        finished.wait()
    }

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func loop() {
        defer { finished.signal() }
        while !isStopped {
            let result = Result { () throws(CoreFileError) in try deliverer.deliverDue(inputs()) }
            onRound(result)
            let now = deliverer.clock.now()
            var napMs = maxNap.components.seconds * 1000 + maxNap.components.attoseconds / 1_000_000_000_000_000
            if case .success(let round) = result, let next = round.nextFireAt {
                napMs = min(napMs, max(0, next.milliseconds - now.milliseconds))
            }
            if isStopped { break }
            _ = wake.wait(wallTimeout: .now() + .milliseconds(Int(min(napMs, Int64(Int32.max)))))
        }
    }
}
