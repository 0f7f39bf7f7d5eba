#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import SiteKeepSystem

/// One accepted connection, as a listener hands it to its handler: the descriptor, the peer's
/// credentials, and a receive that knows about the listener's shutdown.
///
/// After the handler answered a request it calls ``answered()``: the next ``receive(into:)``
/// then looks for the following request for a few microseconds (yielding the CPU between
/// looks) before it sleeps in `poll`, because waking a sleeping thread on the other core costs
/// ~20 µs on a small VM. When the listener stops, receive switches to draining: it returns what
/// has already arrived without waiting, then end of stream, so in-flight requests are answered.
public final class SocketConnection: @unchecked Sendable {
    // @unchecked: `spinUntil` and `draining` are touched only by the one thread serving this
    // connection (receive/answered are called from the handler, on that thread).
    /// The connected socket. The listener closes it (through ``writer``) after the handler
    /// returns; the handler must not close it itself.
    public let fd: Int32
    /// Serialised, close-safe writes to this connection (events from other threads too).
    public let writer: SocketWriter
    /// The peer's credentials; nil when `SO_PEERCRED` failed (treat as a stranger).
    public let peer: PeerCredentials?
    private let wake: Int32
    private let stopping: @Sendable () -> Bool
    private let spinNanoseconds: UInt64
    private var spinUntil: UInt64 = 0
    private var draining = false

    init(fd: Int32, peer: PeerCredentials?, wake: Int32, spinNanoseconds: UInt64, stopping: @escaping @Sendable () -> Bool) {
        self.fd = fd
        self.writer = SocketWriter(fd: fd)
        self.peer = peer
        self.wake = wake
        self.spinNanoseconds = spinNanoseconds
        self.stopping = stopping
    }

    /// Whether the peer runs as this process's user.
    public var isSameUser: Bool { peer?.uid == getuid() }

    /// Whether the listener is draining (stopping).
    public var isDraining: Bool { draining }

    /// Starts the look-before-sleeping window (call after sending a reply).
    public func answered() {
        if !draining { spinUntil = UnixSocket.monotonicNanoseconds() + spinNanoseconds }
    }

    /// Reads what has arrived into `chunk`: the count (> 0), or 0 at the end (the peer closed,
    /// an error, or nothing left while draining).
    public func receive(into chunk: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            if spinUntil != 0, stopping() { spinUntil = 0 }   // poll then sees the wake pipe
            if !draining, spinUntil != 0 {
                let n = recv(fd, chunk.baseAddress, chunk.count, Int32(MSG_DONTWAIT))
                if n > 0 { spinUntil = 0; return n }
                if n == 0 { return 0 }
                if errno == EINTR { continue }
                guard errno == EAGAIN || errno == EWOULDBLOCK else { return 0 }
                if UnixSocket.monotonicNanoseconds() >= spinUntil { spinUntil = 0 } else { sched_yield() }
                continue
            }
            if !draining {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, -1)
                if n < 0 { if errno == EINTR { continue } else { return 0 } }
                if fds[1].revents != 0 {
                    // Stopping: answer what has already arrived, then end.
                    draining = true
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    continue
                }
            }
            let n = recv(fd, chunk.baseAddress, chunk.count, 0)
            if n < 0 && errno == EINTR { continue }
            return n > 0 ? n : 0
        }
    }
}

/// A Unix-socket server's accept loop, shared by the bridge, the control socket and the
/// ssh-agent socket: one thread per connection at a time, peers' credentials read at accept,
/// and a graceful stop.
///
/// **Threads (leader and followers).** One thread at a time waits in `poll` on the listening
/// socket. When a connection arrives, that same thread accepts it, hands the waiting role to a
/// parked thread (or starts one), and serves the connection itself; when the handler returns,
/// the thread parks until it is needed again (for `idleThreads`, 30 s by default, then it ends). So the
/// thread that `poll` woke reads the first request, no second wake-up sits between a client's
/// connect and its first answer, and a client that connects per request (`ssh-keygen -Y sign`,
/// a one-shot CLI) costs no thread creation once the listener is warm.
///
/// ``shutdown()`` stops accepting, lets every connection answer what it has already received
/// (see ``SocketConnection/receive(into:)``), waits for every handler to return, removes the
/// socket file it created, then runs `onStopped`.
public final class SocketListener: Sendable {
    /// The socket path, when this listener created the socket (nil for an inherited one).
    public let path: String?
    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let threads = Mutex(Threads())
    private let spinNanoseconds: UInt64
    private let idleMilliseconds: Int
    private let onStopped: @Sendable () -> Void

    /// A thread waiting for its turn to accept.
    private final class Parked: Sendable {
        let turn = DispatchSemaphore(value: 0)
        /// Set before `turn` is signalled when the thread is given the accepting turn (rather
        /// than woken because the listener stops).
        let hasTurn = Atomic<Bool>(false)
    }

    /// The serving threads, under `threads`' lock.
    private struct Threads {
        /// Threads that run (accepting, serving or parked).
        var live = 0
        /// Threads ever started.
        var started = 0
        /// Parked threads, the most recently parked last (it is woken first: its stack is warm).
        var parked: [Parked] = []
        /// Set by shutdown under the lock, so no thread parks after the parked ones were woken.
        var stopping = false
    }

    /// Listens at `path` (see ``UnixSocket/listen(path:what:)``).
    /// - Parameters:
    ///   - spin: how long a connection looks for the next request before it sleeps.
    ///   - idleThreads: how long a thread whose connection ended waits for another before it ends.
    public convenience init(path: String, what: String = "a SiteKeep daemon", spin: Duration = .microseconds(50),
                            idleThreads: Duration = .seconds(30),
                            onStopped: @escaping @Sendable () -> Void = {}) throws(SocketError) {
        let fd = try UnixSocket.listen(path: path, what: what)
        do { try self.init(listener: fd, path: path, spin: spin, idleThreads: idleThreads, onStopped: onStopped) } catch {
            close(fd)
            unlink(path)
            throw error
        }
    }

    /// Serves an already listening socket (systemd socket activation passes fd 3); `path`, when
    /// given, is removed at shutdown.
    public init(listener: Int32, path: String? = nil, spin: Duration = .microseconds(50),
                idleThreads: Duration = .seconds(30), onStopped: @escaping @Sendable () -> Void = {}) throws(SocketError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .call("pipe", errno: .current) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        self.listener = listener
        self.path = path
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let c = spin.components
        spinNanoseconds = UInt64(max(0, c.seconds)) * 1_000_000_000 + UInt64(max(0, c.attoseconds) / 1_000_000_000)
        let idle = idleThreads.components
        idleMilliseconds = Int(max(0, min(idle.seconds, 86_400))) * 1000 + Int(max(0, idle.attoseconds) / 1_000_000_000_000_000)
        self.onStopped = onStopped
    }

    /// Whether ``shutdown()`` has begun.
    public var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// The threads serving this listener now (accepting, serving or parked), for tests.
    package var liveThreads: Int { threads.withLock { $0.live } }

    /// The threads parked now, waiting for a connection, for tests.
    package var parkedThreads: Int { threads.withLock { $0.parked.count } }

    /// The threads this listener has started so far, for tests.
    package var startedThreads: Int { threads.withLock { $0.started } }

    /// Starts accepting; `handle` runs for each connection on a thread that serves only that
    /// connection until `handle` returns, and the connection is closed when it returns.
    public func start(_ handle: @escaping @Sendable (SocketConnection) -> Void) {
        threads.withLock { $0.live += 1; $0.started += 1 }
        if !SystemThread.detach({ [self] in serve(handle) }) {
            // No thread at all: stop at once, so shutdown() does not wait forever.
            threads.withLock { $0.live -= 1; $0.stopping = true }
            stopping.store(true, ordering: .releasing)
            close(listener)
            if let path { unlink(path) }
            onStopped()
            stopped.signal()
        }
    }

    /// Stops gracefully (see the type's discussion) and returns when everything is closed.
    public func shutdown() {
        if !stopping.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt8 = 1
            _ = write(wakeWrite, &one, 1)
            let parked = threads.withLock { t -> [Parked] in
                t.stopping = true
                defer { t.parked = [] }
                return t.parked
            }
            for p in parked { p.turn.signal() }
        }
        stopped.wait()
        stopped.signal()   // let any other waiter through too
    }

    /// One serving thread: accept (it holds the accepting turn), pass the turn on, serve, park.
    private func serve(_ handle: @escaping @Sendable (SocketConnection) -> Void) {
        while let connection = acceptOne() {
            if passTheTurn(handle) {
                handle(connection)
            }
            // else: out of threads, and this one must go on accepting: refuse the connection.
            connection.writer.close()
            guard park() else { break }
        }
        let last = threads.withLock { t -> Bool in
            t.live -= 1
            return t.live == 0 && t.stopping
        }
        if last {
            onStopped()
            stopped.signal()
        }
    }

    /// Waits for and accepts the next connection; nil when the listener stops (the one thread
    /// holding the turn then closes the listening socket: no other thread polls it again).
    private func acceptOne() -> SocketConnection? {
        while !stopping.load(ordering: .acquiring) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue } else { break } }
            if fds[1].revents != 0 { break }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }   // EMFILE, ECONNABORTED…: go on serving
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            return SocketConnection(fd: fd, peer: UnixSocket.peerCredentials(fd), wake: wakeRead,
                                    spinNanoseconds: spinNanoseconds) { [self] in stopping.load(ordering: .relaxed) }
        }
        // This thread holds the turn, so it alone touches the listening socket.
        threads.withLock { $0.stopping = true }
        stopping.store(true, ordering: .releasing)
        close(listener)
        if let path { unlink(path) }
        // Wake the parked threads (shutdown did, unless poll failed on its own).
        let parked = threads.withLock { t -> [Parked] in
            defer { t.parked = [] }
            return t.parked
        }
        for p in parked { p.turn.signal() }
        return nil
    }

    /// Gives the accepting turn to a parked thread, or to a new one; false when neither exists
    /// (the caller keeps the turn).
    private func passTheTurn(_ handle: @escaping @Sendable (SocketConnection) -> Void) -> Bool {
        let next = threads.withLock { t -> Parked? in
            if let p = t.parked.popLast() { return p }
            t.live += 1
            t.started += 1
            return nil
        }
        if let next {
            next.hasTurn.store(true, ordering: .releasing)
            next.turn.signal()
            return true
        }
        if SystemThread.detach({ [self] in serve(handle) }) { return true }
        threads.withLock { $0.live -= 1 }
        return false
    }

    /// Parks this thread until it is given the accepting turn: true then; false when the
    /// listener stops or no turn came within `idleThreads` (the thread ends).
    private func park() -> Bool {
        let me = Parked()
        let parked = threads.withLock { t -> Bool in
            guard !t.stopping else { return false }
            t.parked.append(me)
            return true
        }
        guard parked else { return false }
        if me.turn.wait(timeout: .now() + .milliseconds(idleMilliseconds)) == .timedOut {
            let stillParked = threads.withLock { t -> Bool in
                guard let i = t.parked.firstIndex(where: { $0 === me }) else { return false }
                t.parked.remove(at: i)
                return true
            }
            if stillParked { return false }
            me.turn.wait()   // woken just as the wait ran out: take what it was
        }
        // Given the turn: accept (acceptOne sees a stop and closes the listener, since this
        // thread alone holds the turn). Woken by a stop: end.
        return me.hasTurn.load(ordering: .acquiring)
    }
}
