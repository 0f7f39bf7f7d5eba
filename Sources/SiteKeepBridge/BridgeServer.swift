import Glibc
import Foundation
internal import SiteKeepJSON
internal import SiteKeepSocket
public import SiteKeepBridgeProtocol
import SiteKeepSystem

/// The daemon's bridge socket server: newline-delimited JSON over a Unix socket, one thread per
/// connection (the shared ``SocketListener``), each connection bound to one site by its `hello`.
///
/// - Peers are checked with `SO_PEERCRED`: another uid gets one `forbidden_peer` frame and is closed.
/// - The connecting process is identified (``PeerProcess``) when it is accepted and again at its
///   `hello`, and binds a site only if `hosts` says it is one of the site's hosts; otherwise
///   `hello` gets `forbidden_host`.
/// - A malformed or oversized frame gets an error reply; the connection goes on.
/// - A connection whose site was removed or changed since its `hello` gets one `forbidden_origin`
///   reply and is closed (``BridgeConnection/isRevoked``).
/// - ``shutdown()`` stops accepting, lets every connection answer every frame it has already
///   received (in-flight requests finish), closes them, removes the socket it created and then
///   runs `onStopped` (where the daemon flushes its audit log).
public final class BridgeServer: Sendable {
    public let dispatcher: BridgeDispatcher
    /// The socket path, when the server created the socket (nil under socket activation).
    public var path: String? { listener.path }
    private let listener: SocketListener
    private let hosts: any HostAuthority
    private let maxFrame: Int

    /// Listens on `path` (folder 0700, socket 0600; a stale socket is replaced).
    /// - Parameter hosts: which processes may bind a connection to a site.
    public convenience init(dispatcher: BridgeDispatcher, path: String, hosts: any HostAuthority,
                            onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        do {
            self.init(dispatcher: dispatcher, listener: try SocketListener(path: path, onStopped: onStopped), hosts: hosts)
        } catch { throw BridgeError(error) }
    }

    /// Serves an already listening socket (systemd socket activation passes fd 3).
    public convenience init(dispatcher: BridgeDispatcher, listener fd: Int32, path: String? = nil, hosts: any HostAuthority,
                            onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        do {
            self.init(dispatcher: dispatcher, listener: try SocketListener(listener: fd, path: path, onStopped: onStopped), hosts: hosts)
        } catch { throw BridgeError(error) }
    }

    private init(dispatcher: BridgeDispatcher, listener: SocketListener, hosts: any HostAuthority) {
        self.dispatcher = dispatcher
        self.listener = listener
        self.hosts = hosts
        maxFrame = JSONLimits.message.maxBytes
    }

    /// Starts accepting (see ``SocketListener``: a thread per connection) and returns.
    public func start() {
        listener.start { [self] connection in serve(connection) }
    }

    /// Stops gracefully (see the type's discussion) and returns when everything is closed.
    public func shutdown() {
        listener.shutdown()
    }

    /// Serves `fd`, one end of a connection the daemon made itself and handed to a host it
    /// started, on a thread of its own, with `host` deciding which sites its `hello` may bind
    /// (``HostCheck/launched(sites:hostName:)``). The server owns `fd` from here (closed when the
    /// connection ends, or at once when the server is stopping); false when it was not served.
    @discardableResult
    public func adopt(connection fd: Int32, host: HostCheck) -> Bool {
        listener.adopt(fd) { [self] connection in serve(connection, host: host) }
    }

    private func serve(_ socket: SocketConnection) {
        let fd = socket.fd
        let identify = { @Sendable () -> Result<PeerProcess, PeerProcessError> in
            Result { () throws(PeerProcessError) in try PeerProcess.identify(socket: fd) }
        }
        serve(socket, host: HostCheck.socket(accepted: identify(), identifyNow: identify, authority: hosts))
    }

    private func serve(_ socket: SocketConnection, host: HostCheck) {
        let out = socket.writer
        guard let peer = socket.admit(sendTimeout: 5, refusingStrangers: { out in
            let f = BridgeFailure(.forbiddenPeer, "the SiteKeep daemon serves only its own user")
            _ = out.send(BridgeMessage.failure(id: .null, f).bytes)
        }) else { return }
        let connection = BridgeConnection(peer: peer, host: host) { bytes in _ = out.send(bytes) }
        defer { dispatcher.disconnect(connection) }
        let executor = ConnectionExecutor()
        // What a page sent (a `vault.save`'s plaintext) is wiped, not only freed.
        socket.serveFrames(splitting: BridgeFrames(reader: FrameReader(maxFrame: maxFrame)), chunkBytes: 64 << 10, wipingReads: true) { frame in
            answer(frame, connection: connection, executor: executor, out: out)
        }
    }

    /// Answers one frame; false when the peer is gone or the connection was revoked.
    private func answer(_ frame: FrameReader.Frame, connection: BridgeConnection, executor: ConnectionExecutor, out: SocketWriter) -> Bool {
        var reply: [UInt8]
        switch frame {
        case .oversized:
            reply = BridgeMessage.failure(id: .null, BridgeFailure(.tooLarge, "a frame is longer than \(maxFrame) bytes; it was skipped")).bytes
        case .frame(let bytes):
            let d = dispatcher
            reply = executor.run { await d.handle(bytes, connection: connection) }
                ?? BridgeMessage.failure(id: .null, BridgeFailure(.internal, "the request did not complete")).bytes
        }
        let sent = out.send(reply)
        // A reply may carry vault plaintext (`vault.load`): wiped once sent, not only freed.
        wipe(&reply)
        guard sent else { return false }
        // A connection whose site was removed or changed got its refusal; close it.
        return !connection.isRevoked
    }
}

/// The bridge's newline-delimited frames (``FrameReader``, bounded by the request limit)
/// through the sockets' one serve loop.
private struct BridgeFrames: FrameSplitter {
    var reader: FrameReader
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [FrameReader.Frame] { reader.feed(bytes) }
}

/// Runs the daemon until SIGTERM or SIGINT: socket activation when systemd passed a socket
/// (`LISTEN_FDS`/`LISTEN_PID`, fd 3), else a socket at `$SITEKEEP_SOCK` or
/// `$XDG_RUNTIME_DIR/sitekeep/bridge.sock`.
public enum BridgeDaemon {
    /// Blocks SIGTERM/SIGINT in this thread (call it from the main thread before starting any other
    /// thread or task, so every thread inherits the mask), serves, and returns after a graceful
    /// shutdown. `onStopped` runs after the last connection closed (flush the audit log there).
    /// - Parameter ready: called with the socket path (nil under activation) once serving.
    public static func run(dispatcher: BridgeDispatcher, hosts: any HostAuthority, environment: [String: String]? = nil,
                           ready: @Sendable (String?) -> Void = { _ in },
                           onStopped: @escaping @Sendable () -> Void = {}) throws(BridgeError) {
        let environment = environment ?? ProcessInfo.processInfo.environment
        let signals = TerminationSignals.block(ignoringBrokenPipes: true)
        let server: BridgeServer
        let activated: Int32?
        do { activated = try UnixSocket.activatedListener(environment: environment) } catch { throw BridgeError(error) }
        if let fd = activated {
            server = try BridgeServer(dispatcher: dispatcher, listener: fd, hosts: hosts, onStopped: onStopped)
        } else {
            server = try BridgeServer(dispatcher: dispatcher, path: try DaemonSockets.bridge(environment: environment),
                                      hosts: hosts, onStopped: onStopped)
        }
        server.start()
        ready(server.path)
        _ = signals.wait()
        server.shutdown()
    }
}

/// Overwrites `bytes` with zeros where the compiler cannot elide it: glibc's `explicit_bzero`,
/// which is what `SecureMemory.zero` (`sodium_memzero`) calls on glibc, so the bridge wipes what
/// a page sent and what a reply carried without linking libsodium.
private func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        if let p = buffer.baseAddress { explicit_bzero(p, buffer.count) }
    }
}
