#if canImport(Glibc)
import Glibc
#endif
import CLinux
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
        if !draining { spinUntil = Clocks.monotonicNanoseconds() + spinNanoseconds }
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
                if Clocks.monotonicNanoseconds() >= spinUntil { spinUntil = 0 } else { sched_yield() }
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

/// How a protocol splits its byte stream into frames: the bridge's newline-delimited JSON
/// (`FrameReader`) and the ssh-agent's length-prefixed messages (`AgentFrameReader`). The
/// splitter bounds a frame's length and says what an oversized one is (a frame of its own kind,
/// which the protocol answers or closes on); the loop only carries bytes to it.
public protocol FrameSplitter {
    /// One unit the protocol answers: a whole frame, or the splitter's word for one it refused.
    associatedtype Frame
    /// Adds bytes and returns the frames they complete, in order.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Frame]
}

extension SocketConnection {
    /// Admits the peer and sets the connection's time-outs, the first step of every server's
    /// connection (bridge, control, ssh-agent): the send time-out (and the receive time-out,
    /// when given) in seconds, then the peer's credentials if it runs as this process's user.
    /// A stranger (or a peer whose credentials could not be read) gets `refuse`'s words, if the
    /// protocol has any, and nil: the handler then returns and the listener closes the connection.
    public func admit(sendTimeout: Int, receiveTimeout: Int? = nil,
                      refusingStrangers refuse: (SocketWriter) -> Void = { _ in }) -> PeerCredentials? {
        if let receiveTimeout { UnixSocket.setReceiveTimeout(fd, seconds: receiveTimeout) }
        UnixSocket.setSendTimeout(fd, seconds: sendTimeout)
        guard let peer, isSameUser else {
            refuse(writer)
            return nil
        }
        return peer
    }

    /// The one per-connection serve loop of the Unix-socket servers: receives up to `chunkBytes`
    /// at a time (``receive(into:)``: the look-before-sleeping window, the drain on shutdown),
    /// has `splitter` cut the bytes into frames, and calls `answer` for each frame in order;
    /// `answer` writes the reply and says whether the connection goes on. Returns at end of
    /// stream (bytes of an unfinished frame are dropped with it), when the listener has drained,
    /// or when `answer` returns false; the listener then closes the connection.
    /// - Parameter wipingReads: overwrite the receive buffer with zeros when the loop ends (what
    ///   a page sends may be a vault's plaintext), not only free it.
    public func serveFrames<Splitter: FrameSplitter>(splitting splitter: Splitter, chunkBytes: Int, wipingReads: Bool = false,
                                                     _ answer: (Splitter.Frame) -> Bool) {
        var splitter = splitter
        var chunk = [UInt8](repeating: 0, count: chunkBytes)
        defer {
            if wipingReads {
                chunk.withUnsafeMutableBytes { buffer in
                    if let p = buffer.baseAddress { explicit_bzero(p, buffer.count) }
                }
            }
        }
        while true {
            let n = chunk.withUnsafeMutableBytes { receive(into: $0) }
            if n == 0 { return }   // end of stream, an error, or (draining) nothing more buffered
            let frames = chunk.withUnsafeBytes { splitter.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            for frame in frames {
                guard answer(frame) else { return }
            }
            answered()
        }
    }
}

/// A Unix-socket server's accept loop, shared by the bridge, the control socket and the
/// ssh-agent socket: one thread per connection, peers' credentials read at accept, and a
/// graceful stop.
///
/// **Threads (leader and follower).** One thread at a time waits in `poll` on the listening
/// socket. When a connection arrives, that same thread accepts it, starts a thread that takes
/// over the waiting, and serves the connection itself; it ends when the handler returns. So the
/// thread that `poll` woke reads the first request: no second wake-up sits between a client's
/// connect and its first answer (`ssh-keygen -Y sign` and a one-shot CLI connect per request).
/// Threads are not kept for reuse: measured, connections served by a reused thread made the
/// 4-connection agent benchmark about 10 % slower (BENCHMARKS.md, 2026-12-02).
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
    /// Threads that run (the accepting one and those serving).
    private let live = Mutex(0)
    private let spinNanoseconds: UInt64
    private let onStopped: @Sendable () -> Void
    /// Told of each thread counted in and out of `live`; none in production.
    private let observer: (any SocketListenerObserver)?

    /// Listens at `path` (see ``UnixSocket/listen(path:what:)``).
    /// - Parameters:
    ///   - spin: how long a connection looks for the next request before it sleeps.
    ///   - observer: told of each thread started and ended; nil, the default, in production.
    public convenience init(path: String, what: String = "a SiteKeep daemon", spin: Duration = .microseconds(50),
                            observer: (any SocketListenerObserver)? = nil,
                            onStopped: @escaping @Sendable () -> Void = {}) throws(SocketError) {
        // A socket systemd passed for this path is served as it is (and left for systemd to
        // remove); otherwise the path is bound here.
        if let fd = UnixSocket.takeActivated(path: path) {
            try self.init(listener: fd, path: nil, spin: spin, observer: observer, onStopped: onStopped)
            return
        }
        let fd = try UnixSocket.listen(path: path, what: what)
        do { try self.init(listener: fd, path: path, spin: spin, observer: observer, onStopped: onStopped) } catch {
            close(fd)
            unlink(path)
            throw error
        }
    }

    /// Serves an already listening socket (systemd socket activation passes fd 3); `path`, when
    /// given, is removed at shutdown; `observer` (none in production) is told of each thread
    /// started and ended.
    public init(listener: Int32, path: String? = nil, spin: Duration = .microseconds(50),
                observer: (any SocketListenerObserver)? = nil,
                onStopped: @escaping @Sendable () -> Void = {}) throws(SocketError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .call("pipe", errno: .current) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        self.listener = listener
        self.path = path
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let c = spin.components
        spinNanoseconds = UInt64(max(0, c.seconds)) * 1_000_000_000 + UInt64(max(0, c.attoseconds) / 1_000_000_000)
        self.onStopped = onStopped
        self.observer = observer
    }

    /// Whether ``shutdown()`` has begun.
    public var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Starts accepting; `handle` runs for each connection on a thread of its own, and the
    /// connection is closed when it returns.
    public func start(_ handle: @escaping @Sendable (SocketConnection) -> Void) {
        live.withLock { $0 += 1 }
        observer?.threadStarted()
        if !SystemThread.detach({ [self] in serve(handle) }) {
            // No thread at all: stop at once, so shutdown() does not wait forever.
            observer?.threadEnded()
            live.withLock { $0 -= 1 }
            stopping.store(true, ordering: .releasing)
            close(listener)
            if let path { unlink(path) }
            onStopped()
            stopped.signal()
        }
    }

    /// Serves `fd`, a connection made some other way than by this listener's `accept` (one end
    /// of a socket pair the daemon handed on), as an accepted one: on a thread of its own,
    /// drained and closed by ``shutdown()`` like the rest. The listener owns `fd` from here;
    /// false (and `fd` closed) when it is stopping or no thread could be started.
    @discardableResult
    public func adopt(_ fd: Int32, _ handle: @escaping @Sendable (SocketConnection) -> Void) -> Bool {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let admitted = live.withLock { n -> Bool in
            guard !stopping.load(ordering: .acquiring) else { return false }
            n += 1
            return true
        }
        guard admitted else { close(fd); return false }
        observer?.threadStarted()
        let connection = SocketConnection(fd: fd, peer: UnixSocket.peerCredentials(fd), wake: wakeRead,
                                          spinNanoseconds: spinNanoseconds) { [self] in stopping.load(ordering: .relaxed) }
        let started = SystemThread.detach { [self] in
            handle(connection)
            connection.writer.close()
            leave()
        }
        if !started {
            connection.writer.close()
            leave()
        }
        return started
    }

    /// A serving thread is done: counted out, and the last one out after a shutdown began
    /// reports the listener stopped.
    private func leave() {
        observer?.threadEnded()
        let last = live.withLock { n -> Bool in
            n -= 1
            return n == 0 && stopping.load(ordering: .acquiring)
        }
        if last {
            onStopped()
            stopped.signal()
        }
    }

    /// Stops gracefully (see the type's discussion) and returns when everything is closed.
    public func shutdown() {
        if !stopping.exchange(true, ordering: .acquiringAndReleasing) {
            var one: UInt8 = 1
            _ = write(wakeWrite, &one, 1)
        }
        stopped.wait()
        stopped.signal()   // let any other waiter through too
    }

    /// One thread: wait for a connection, hand the waiting on to a new thread, serve.
    private func serve(_ handle: @escaping @Sendable (SocketConnection) -> Void) {
        while let connection = acceptOne() {
            live.withLock { $0 += 1 }
            observer?.threadStarted()
            if SystemThread.detach({ [self] in serve(handle) }) {
                handle(connection)
                connection.writer.close()
                break
            }
            // Out of threads: refuse this connection and go on accepting.
            observer?.threadEnded()
            live.withLock { $0 -= 1 }
            connection.writer.close()
        }
        // The accepting thread sets `stopping` before it leaves, so the count reaches 0 only
        // once no thread accepts or serves.
        leave()
    }

    /// Waits for and accepts the next connection; nil when the listener stops, after closing
    /// the listening socket (only the one accepting thread ever touches it).
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
        stopping.store(true, ordering: .releasing)
        close(listener)
        if let path { unlink(path) }
        return nil
    }
}
