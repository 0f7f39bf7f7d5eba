import Synchronization

/// Counts the calls of a `@Sendable () -> Void` observer a production type takes at
/// construction (an ``AtomicFile/Batch``'s `onHelperStarted`, say): pass ``observer`` and read
/// ``value`` after the calls under test.
public final class EventCounter: Sendable {
    private let count = Atomic<Int>(0)

    public init() {}

    /// The calls so far.
    public var value: Int { count.load(ordering: .relaxed) }
    /// The observer to pass.
    public var observer: @Sendable () -> Void { { [self] in count.add(1, ordering: .relaxed) } }
}
