import SiteKeepSystem

/// Runs a ``ReminderDeliverer`` on its own thread: a round, then a sleep until the next reminder
/// is due, or at most ``maxNap`` (so a wake from suspend, or a change of the system clock, is
/// noticed within that), or until ``replan()`` says the picks or the agenda changed.
///
/// The sleep waits on the wall clock (``BackgroundLoop/Clock/wall``, `CLOCK_REALTIME`), which
/// counts the time a laptop spends suspended.
public final class DeliveryLoop: Sendable {
    public let deliverer: ReminderDeliverer
    public let maxNap: Duration
    private let inputs: @Sendable () -> [ReminderInput]
    private let onRound: @Sendable (Result<DeliveryRound, CoreFileError>) -> Void
    private let thread = BackgroundLoop(name: "sitekeep-remind", clock: .wall)

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
        thread.start { [self] loop in run(loop) }
    }

    /// Runs a round now (the picks or the agenda changed).
    public func replan() { thread.wake() }

    /// Stops the thread and waits for its round in progress to end.
    public func stop() { thread.stop() }

    private func run(_ loop: BackgroundLoop) {
        while !loop.isStopped {
            let result = Result { () throws(CoreFileError) in try deliverer.deliverDue(inputs()) }
            onRound(result)
            let now = deliverer.clock.now()
            var nap = maxNap
            if case .success(let round) = result, let next = round.nextFireAt {
                nap = min(nap, .milliseconds(max(0, next.milliseconds - now.milliseconds)))
            }
            if loop.isStopped { break }
            _ = loop.nap(nap)
        }
    }
}
