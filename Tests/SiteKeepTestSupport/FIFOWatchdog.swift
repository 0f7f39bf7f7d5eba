#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// For tests that a reader never waits on a FIFO nobody writes to: after `after`, and then every
/// 50 ms until stopped, the FIFO is opened for writing and closed again, which releases a reader
/// blocked in `open` (it then reads the end). A regression then fails the test's time check
/// instead of hanging the suite.
public final class FIFOWatchdog: Sendable {
    private let stopped = Atomic<Bool>(false)

    public init(_ fifo: String, after: Duration = .seconds(10)) {
        let start = ContinuousClock.now
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                if ContinuousClock.now - start >= after {
                    let fd = open(fifo, O_WRONLY | O_NONBLOCK)
                    if fd >= 0 { close(fd) }
                }
                usleep(50_000)
            }
        }
    }

    /// Stops it (call when the test is done).
    public func stop() { stopped.store(true, ordering: .relaxed) }
}
