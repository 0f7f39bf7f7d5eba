/// Told when a ``SocketListener`` counts a thread in and out: the accepting thread and one per
/// connection.
///
/// Nothing in production passes one (each thread start and end costs one check of an
/// optional); tests pass one to see that a thread ends with its connection and that a stop
/// ends them all. Every method does nothing unless the observer implements it, and each may be
/// called from any thread.
public protocol SocketListenerObserver: Sendable {
    /// A thread is about to run for the listener (told before it starts, so a count of
    /// started minus ended threads never misses one that is already serving).
    func threadStarted()
    /// A thread of the listener ended (or was never started: no thread was to be had).
    func threadEnded()
}

extension SocketListenerObserver {
    /// Does nothing.
    public func threadStarted() {}
    /// Does nothing.
    public func threadEnded() {}
}
