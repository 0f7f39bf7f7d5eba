import Glibc
import Foundation
import Synchronization
public import SiteKeepJSON
internal import SiteKeepCrypto
internal import SiteKeepSystem

/// The daemon's local control socket (`control.sock`, beside the bridge socket; 0600 in a 0700
/// folder; peers of another uid refused). It is how `sitekeep unlock`, `lock` and `status`
/// reach the one process that holds unlocked keys, and how a web-view host (`sitekeep-browser`)
/// learns the app-bound sites and where it keeps each one's web data (`sites`). Sites never use it.
///
/// Framing: one request per connection. A JSON header line `{"op": "status" | "lock" |
/// "unlock" | "sites", "method": "passphrase" | "prf" | "recovery", "length": N}`, then, for `unlock`,
/// exactly N raw secret bytes (at most ``maximumSecretLength``); the reply is one JSON line. The
/// secret is received straight into guarded memory (`SecretBytes`), which is wiped and freed
/// as soon as the handler returns; it is never logged or echoed.
public final class ControlServer: Sendable {
    /// What the daemon does for each request. `secret` is only valid during the call.
    public typealias Handler = @Sendable (_ op: String, _ method: String?, _ secret: UnsafeRawBufferPointer?) -> JSONValue

    public let path: String
    /// The longest unlock secret a request may carry: 64 KiB, the command line's passphrase limit.
    public static let maximumSecretLength = 64 << 10
    private let listener: Int32
    private let handler: Handler
    private let stopping = Mutex(false)

    /// Listens at `path` (a stale socket is replaced).
    public init(path: String, handler: @escaping Handler) throws(BridgeError) {
        self.path = path
        self.listener = try UnixSocket.listen(path: path)
        self.handler = handler
    }

    /// The control socket's path for a bridge socket path: `control.sock` in the same folder.
    public static func path(besideBridgeSocket bridge: String) -> String {
        (bridge as NSString).deletingLastPathComponent + "/control.sock"
    }

    /// Starts the accept thread.
    public func start() {
        Thread.detachNewThread { [self] in
            while !stopping.withLock({ $0 }) {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR { continue }
                    return
                }
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                serve(fd)
                close(fd)
            }
        }
    }

    /// Stops accepting and removes the socket.
    public func shutdown() {
        stopping.withLock { $0 = true }
        Glibc.shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    private func reply(_ fd: Int32, _ value: JSONValue) {
        _ = UnixSocket.writeAll(fd, JSONSerializer.bytes(value) + [0x0a])
    }

    private func serve(_ fd: Int32) {
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard let peer = UnixSocket.peerCredentials(fd), peer.uid == getuid() else {
            reply(fd, ["ok": false, "error": "forbidden_peer"])
            return
        }
        // The header line, at most 1 KiB.
        var header: [UInt8] = []
        var byte: UInt8 = 0
        while header.count < 1024 {
            let n = recv(fd, &byte, 1, 0)
            if n <= 0 { return }
            if byte == 0x0a { break }
            header.append(byte)
        }
        guard let value = try? JSONParser.parse(header, limits: .message),
              var reader = try? JSONObjectReader(value, path: "control"),
              let op = try? reader.string("op") else {
            reply(fd, ["ok": false, "error": "bad_request"])
            return
        }
        let method = try? reader.optionalString("method")
        let length = (try? reader.optional("length")?.intValue).flatMap { $0 } ?? 0
        guard (try? reader.finish()) != nil, length >= 0, length <= Self.maximumSecretLength else {
            reply(fd, ["ok": false, "error": "bad_request"])
            return
        }
        guard length > 0 else {
            reply(fd, handler(op, method ?? nil, nil))
            return
        }
        // Received straight into guarded memory (sodium_malloc; wiped when freed), never an array.
        var complete = false
        guard let secret = try? SecretBytes(count: Int(length), initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            var got = 0
            while got < buffer.count {
                let n = recv(fd, buffer.baseAddress! + got, buffer.count - got, 0)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return }
                got += n
            }
            complete = true
        }), complete else { return }
        let answer = secret.withUnsafeBytes { handler(op, method ?? nil, $0) }
        reply(fd, answer)
    }
}

/// The CLI's side of the control socket.
public enum ControlClient {
    /// Sends one request; returns the reply, or nil when no daemon listens at `path`.
    ///
    /// Before a byte is sent (the header, let alone an unlock secret) the socket is checked as
    /// every client checks it (``UnixSocket/connect(path:)``): its folder private to this user,
    /// the socket file this user's, and the listener's `SO_PEERCRED` uid this user's.
    /// - Throws: ``BridgeError/untrustedSocket(path:reason:)`` when a check fails.
    public static func send(path: String, op: String, method: String? = nil, secret: UnsafeRawBufferPointer? = nil) throws(BridgeError) -> JSONValue? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        let fd: Int32
        do { fd = try UnixSocket.connect(path: path) } catch {
            if case .untrustedSocket = error { throw error }
            return nil
        }
        defer { close(fd) }
        var header: [JSONMember] = [JSONMember(key: "op", value: .string(op))]
        if let method { header.append(JSONMember(key: "method", value: .string(method))) }
        header.append(JSONMember(key: "length", value: .integer(secret?.count ?? 0)))
        guard UnixSocket.writeAll(fd, JSONSerializer.bytes(.object(header)) + [0x0a]) else { throw .connectionClosed }
        if let secret, secret.count > 0 {
            // Straight from the caller's guarded memory: no copy.
            do { try FileIO.writeAll(fd, secret, socket: true) } catch { throw .connectionClosed }
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < 65536 {
            let n = recv(fd, &byte, 1, 0)
            if n <= 0 { break }
            if byte == 0x0a { break }
            line.append(byte)
        }
        guard let value = try? JSONParser.parse(line, limits: .message) else { throw .protocolViolation("the daemon's control reply is not JSON") }
        return value
    }
}
