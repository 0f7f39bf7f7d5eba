import Glibc
import Foundation
import Synchronization
public import SiteKeepJSON

/// The daemon's socket server: newline-delimited JSON over a Unix socket, one thread per
/// connection, each connection bound to one site by its `hello`.
///
/// - Peers are checked with `SO_PEERCRED`: another uid gets one `forbidden_peer` frame and is closed.
/// - A malformed or oversized frame gets an error reply; the connection goes on.
/// - A connection whose site was removed or changed since its `hello` gets one `forbidden_origin`
///   reply and is closed (``BridgeConnection/isRevoked``).
/// - ``shutdown()`` stops accepting, lets every connection answer every frame it has already
///   received (in-flight requests finish), closes them, removes the socket it created and then
///   runs `onStopped` (where the daemon flushes its audit log).
public final class BridgeServer: Sendable {
    public let dispatcher: BridgeDispatcher
    /// The socket path, when the server created the socket (nil under socket activation).
    public let path: String?
    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private let connections = DispatchGroup()
    private let onStopped: @Sendable () -> Void
    private let maxFrame: Int

    /// Listens on `path` (folder 0700, socket 0600; a stale socket is replaced).
    public convenience init(dispatcher: BridgeDispatcher, path: String, onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        let fd = try UnixSocket.listen(path: path)
        try self.init(dispatcher: dispatcher, listener: fd, path: path, onStopped: onStopped)
    }

    /// Serves an already listening socket (systemd socket activation passes fd 3).
    public init(dispatcher: BridgeDispatcher, listener: Int32, path: String? = nil,
                onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .socket(call: "pipe", errno: errno) }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        self.dispatcher = dispatcher
        self.listener = listener
        self.path = path
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.onStopped = onStopped
        maxFrame = JSONLimits.message.maxBytes
    }

    /// Starts the accept thread and returns.
    public func start() {
        Thread.detachNewThread { [self] in acceptLoop() }
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

    private func acceptLoop() {
        while !stopping.load(ordering: .acquiring) {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue } else { break } }
            if fds[1].revents != 0 { break }
            guard fds[0].revents & Int16(POLLIN) != 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }   // EMFILE, ECONNABORTED…: the daemon goes on
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            connections.enter()
            Thread.detachNewThread { [self] in
                serve(fd)
                connections.leave()
            }
        }
        close(listener)
        if let path { unlink(path) }
        connections.wait()
        onStopped()
        stopped.signal()
    }

    private func serve(_ fd: Int32) {
        let out = SocketWriter(fd: fd)
        defer { out.close() }
        UnixSocket.setSendTimeout(fd, seconds: 5)
        let peer = UnixSocket.peerCredentials(fd)
        guard let peer, peer.uid == getuid() else {
            let f = BridgeFailure(.forbiddenPeer, "the SiteKeep daemon serves only its own user")
            _ = out.send(BridgeMessage.failure(id: .null, f).bytes)
            return
        }
        let connection = BridgeConnection(peer: peer) { bytes in _ = out.send(bytes) }
        defer { dispatcher.disconnect(connection) }
        let executor = ConnectionExecutor()
        var reader = FrameReader(maxFrame: maxFrame)
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var draining = false
        var spinUntil: UInt64 = 0
        while true {
            if spinUntil != 0, stopping.load(ordering: .relaxed) { spinUntil = 0 }   // poll sees the wake pipe
            if !draining, spinUntil != 0 {
                // Just answered: look for the next request for a few microseconds before sleeping.
                // A client that sends it at once is then served without a cross-core wake-up
                // (~20 µs each way on a small VM); sched_yield lets any other runnable thread go first.
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 {
                    spinUntil = 0
                    guard handle(chunk, count: n, reader: &reader, connection: connection, executor: executor, out: out) else { return }
                    spinUntil = DispatchTime.now().uptimeNanoseconds + Self.spinNanoseconds
                    continue
                }
                if n == 0 { return }
                if errno == EINTR { continue }
                guard errno == EAGAIN || errno == EWOULDBLOCK else { return }
                if DispatchTime.now().uptimeNanoseconds >= spinUntil { spinUntil = 0 } else { sched_yield() }
                continue
            }
            if !draining {
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                let n = poll(&fds, 2, -1)
                if n < 0 { if errno == EINTR { continue } else { return } }
                if fds[1].revents != 0 {
                    // Shutdown: answer what has already arrived, then close.
                    draining = true
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    continue
                }
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }   // EOF, error, or (draining) nothing more buffered
            guard handle(chunk, count: n, reader: &reader, connection: connection, executor: executor, out: out) else { return }
            if !draining { spinUntil = DispatchTime.now().uptimeNanoseconds + Self.spinNanoseconds }
        }
    }

    /// How long a connection looks for its next request before it sleeps in `poll`.
    static let spinNanoseconds: UInt64 = 50_000

    /// Answers every whole frame in the first `count` bytes of `chunk`; false when the peer is gone.
    private func handle(_ chunk: [UInt8], count n: Int, reader: inout FrameReader, connection: BridgeConnection,
                        executor: ConnectionExecutor, out: SocketWriter) -> Bool {
        let frames = chunk.withUnsafeBytes { reader.feed(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        for frame in frames {
            let reply: [UInt8]
            switch frame {
            case .oversized:
                reply = BridgeMessage.failure(id: .null, BridgeFailure(.tooLarge, "a frame is longer than \(maxFrame) bytes; it was skipped")).bytes
            case .frame(let bytes):
                let d = dispatcher
                reply = executor.run { await d.handle(bytes, connection: connection) }
                    ?? BridgeMessage.failure(id: .null, BridgeFailure(.internal, "the request did not complete")).bytes
            }
            guard out.send(reply) else { return false }
            // A connection whose site was removed or changed got its refusal; close it.
            if connection.isRevoked { return false }
        }
        return true
    }
}

/// Serialises writes to one socket (replies from its thread, events from others) and makes sure
/// nothing is written after close (the fd number could be reused).
final class SocketWriter: Sendable {
    private let fd: Int32
    private let state = Mutex<Bool>(false)   // closed

    init(fd: Int32) { self.fd = fd }

    /// Writes `frame` and a newline; false when closed or the peer is gone.
    func send(_ frame: [UInt8]) -> Bool {
        state.withLock { closed in
            guard !closed else { return false }
            var bytes = frame
            bytes.append(0x0a)
            return UnixSocket.writeAll(fd, bytes)
        }
    }

    func close() {
        state.withLock { closed in
            guard !closed else { return }
            closed = true
            Glibc.close(fd)
        }
    }
}

/// Runs the daemon until SIGTERM or SIGINT: socket activation when systemd passed a socket
/// (`LISTEN_FDS`/`LISTEN_PID`, fd 3), else a socket at `$SITEKEEP_SOCK` or
/// `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`.
public enum BridgeDaemon {
    /// Blocks SIGTERM/SIGINT in this thread (call it from the main thread before starting any other
    /// thread or task, so every thread inherits the mask), serves, and returns after a graceful
    /// shutdown. `onStopped` runs after the last connection closed (flush the audit log there).
    /// - Parameter ready: called with the socket path (nil under activation) once serving.
    public static func run(dispatcher: BridgeDispatcher, environment: [String: String]? = nil,
                           ready: @Sendable (String?) -> Void = { _ in },
                           onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
        let server: BridgeServer
        if let fd = try UnixSocket.activatedListener(environment: environment) {
            server = try BridgeServer(dispatcher: dispatcher, listener: fd, onStopped: onStopped)
        } else {
            server = try BridgeServer(dispatcher: dispatcher, path: try UnixSocket.defaultPath(environment: environment),
                                      onStopped: onStopped)
        }
        server.start()
        ready(server.path)
        var sig: Int32 = 0
        sigwait(&set, &sig)
        server.shutdown()
    }

    /// The socket path clients use: `$SITEKEEP_SOCK`, else `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`.
    public static func socketPath(environment: [String: String]? = nil) throws(BridgeError) -> String {
        try UnixSocket.defaultPath(environment: environment ?? ProcessInfo.processInfo.environment)
    }
}
