#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// SIGTERM and SIGINT, blocked so that a serving process can wait for them with `sigwait` and
/// stop cleanly, instead of dying mid-request.
///
/// A signal mask is per thread and inherited by the threads a thread creates, so ``block()``
/// must run on the main thread before any other thread exists: a thread started earlier keeps
/// an unblocked mask and the kernel may deliver the signal there, with its default action.
public struct TerminationSignals: Sendable {
    private let set: sigset_t

    private init(set: sigset_t) { self.set = set }

    /// Blocks SIGTERM and SIGINT in the calling thread (and every thread it starts afterwards).
    /// - Parameter ignoringBrokenPipes: also ignore SIGPIPE (a client that hangs up mid-reply
    ///   then costs an `EPIPE`, not the process).
    @discardableResult
    public static func block(ignoringBrokenPipes: Bool = false) -> TerminationSignals {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        if ignoringBrokenPipes { signal(SIGPIPE, SIG_IGN) }
        return TerminationSignals(set: set)
    }

    /// Waits for SIGTERM or SIGINT and returns which one came.
    public func wait() -> Int32 {
        var set = self.set
        var signal: Int32 = 0
        while sigwait(&set, &signal) != 0 {}
        return signal
    }
}
