public import SiteKeepSocket
import Synchronization

/// A ``SocketListenerObserver`` that counts the threads a listener starts and ends: pass it to
/// a ``SocketListener`` and read ``live`` (the threads running now) as the test goes.
public final class ThreadCounter: SocketListenerObserver {
    private let counts = Mutex((started: 0, ended: 0))

    public init() {}

    /// Threads started so far.
    public var started: Int { counts.withLock { $0.started } }
    /// Threads started and not yet ended: the accepting one and one per connection served.
    public var live: Int { counts.withLock { $0.started - $0.ended } }

    public func threadStarted() { counts.withLock { $0.started += 1 } }
    public func threadEnded() { counts.withLock { $0.ended += 1 } }
}
