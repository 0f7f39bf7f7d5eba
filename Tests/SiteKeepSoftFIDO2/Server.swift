import Glibc

/// The carrier between libfido2's transport hooks (Sources/CFIDO2Loader) and the software
/// authenticator: one CTAPHID message a frame over a Unix socket, command (1 byte), length
/// (4 bytes, big-endian), payload. CTAPHID INIT, PING, CANCEL, WINK and CBOR are served at
/// message level (no HID reports, so no channel ids or continuation packets); MSG (U2F) is
/// refused with a CTAPHID ERROR. The vendor commands 0x50 to 0x53 are the test's controls.
public enum SoftFIDO2Wire {
    public static let maxMessage = 7609
    public static let ping: UInt8 = 0x01, msg: UInt8 = 0x03, initialize: UInt8 = 0x06, wink: UInt8 = 0x08
    public static let cbor: UInt8 = 0x10, cancel: UInt8 = 0x11, keepalive: UInt8 = 0x3b, error: UInt8 = 0x3f
    /// Controls: set the touch mode [mode]; read the counts → asked (4) touched (4);
    /// set a hostility [kind]; the PRF output [uv][id length (2)][id][eval input] → 32 bytes;
    /// set the INIT reply's nonce to a wrong one [0/1].
    public static let setTouch: UInt8 = 0x50, counts: UInt8 = 0x51, setHostility: UInt8 = 0x52, prf: UInt8 = 0x53, badNonce: UInt8 = 0x54

    static func frame(_ cmd: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [cmd, UInt8(n >> 24), UInt8((n >> 16) & 0xff), UInt8((n >> 8) & 0xff), UInt8(n & 0xff)] + payload
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    static func readAll(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, count - offset, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            offset += n
        }
        return out
    }

    /// One frame, nil at the end of the connection or on a bad length.
    static func readFrame(_ fd: Int32) -> (UInt8, [UInt8])? {
        guard let header = readAll(fd, 5) else { return nil }
        let n = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
        guard n <= maxMessage else { return nil }
        guard let payload = n == 0 ? [] : readAll(fd, n) else { return nil }
        return (header[0], payload)
    }

    static func address(_ path: String) -> sockaddr_un? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }
}

/// Serves a ``SoftAuthenticator`` on a Unix socket, one connection at a time, until the process
/// is killed.
public final class SoftFIDO2Server {
    let authenticator: SoftAuthenticator
    let socketPath: String
    var wrongNonce = false

    public init(authenticator: SoftAuthenticator, socketPath: String) {
        self.authenticator = authenticator
        self.socketPath = socketPath
    }

    /// Binds the socket (replacing a stale one), then serves forever; returns only on a bind error.
    public func run(ready: () -> Void) -> String {
        unlink(socketPath)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0, var addr = SoftFIDO2Wire.address(socketPath) else { return "cannot make the socket \(socketPath)" }
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else { return "cannot listen on \(socketPath): errno \(errno)" }
        ready()
        while true {
            let client = accept(fd, nil, nil)
            if client < 0 { continue }
            serve(client)
            close(client)
        }
    }

    func serve(_ fd: Int32) {
        while let (cmd, payload) = SoftFIDO2Wire.readFrame(fd) {
            if cmd == SoftFIDO2Wire.cbor, payload.first == 0x02, authenticator.hostility == .lyingLength {
                _ = SoftFIDO2Wire.writeAll(fd, [cmd, 0x00, 0x00, 0x10, 0x00] + [UInt8](repeating: 0, count: 10))
                return
            }
            guard let answer = reply(cmd, payload, fd: fd) else { continue }
            guard SoftFIDO2Wire.writeAll(fd, SoftFIDO2Wire.frame(answer.0, answer.1)) else { return }
        }
    }

    /// Waits up to `ms` for a CTAPHID CANCEL on the connection; true when one came.
    func waitForCancel(_ fd: Int32, _ ms: Int32) -> Bool {
        var left = Int(ms)
        while left > 0 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let step = min(left, 50)
            let r = poll(&p, 1, Int32(step))
            left -= step
            if r > 0 {
                guard let (cmd, _) = SoftFIDO2Wire.readFrame(fd) else { return false }
                if cmd == SoftFIDO2Wire.cancel { return true }
            }
        }
        return false
    }

    func reply(_ cmd: UInt8, _ payload: [UInt8], fd: Int32) -> (UInt8, [UInt8])? {
        switch cmd {
        case SoftFIDO2Wire.initialize:
            guard payload.count == 8 else { return (SoftFIDO2Wire.error, [0x03]) }
            var nonce = payload
            if wrongNonce { nonce[0] ^= 0xff }
            // nonce, channel id, CTAPHID protocol 2, version 1.0.0, capabilities CBOR | NMSG
            return (cmd, nonce + [0x00, 0x00, 0x00, 0x01] + [2, 1, 0, 0] + [0x04 | 0x08])
        case SoftFIDO2Wire.ping: return (cmd, payload)
        case SoftFIDO2Wire.wink: return (cmd, [])
        case SoftFIDO2Wire.cancel: return nil
        case SoftFIDO2Wire.cbor:
            return (cmd, authenticator.handle(payload, waitForCancel: { self.waitForCancel(fd, $0) }))
        case SoftFIDO2Wire.setTouch:
            guard let mode = payload.first.flatMap(SoftAuthenticator.TouchMode.init(rawValue:)) else { return (SoftFIDO2Wire.error, [0x02]) }
            authenticator.touchMode = mode
            return (cmd, [])
        case SoftFIDO2Wire.counts:
            return (cmd, SoftAuthenticator.be32(UInt32(authenticator.presenceAsked)) + SoftAuthenticator.be32(UInt32(authenticator.touches)))
        case SoftFIDO2Wire.setHostility:
            guard let kind = payload.first.flatMap(SoftAuthenticator.Hostility.init(rawValue:)) else { return (SoftFIDO2Wire.error, [0x02]) }
            authenticator.hostility = kind
            return (cmd, [])
        case SoftFIDO2Wire.badNonce:
            wrongNonce = payload.first == 1
            return (cmd, [])
        case SoftFIDO2Wire.prf:
            guard payload.count >= 3 else { return (SoftFIDO2Wire.error, [0x03]) }
            let n = Int(payload[1]) << 8 | Int(payload[2])
            guard payload.count >= 3 + n,
                  let out = authenticator.prfOutput(credentialID: Array(payload[3..<3 + n]), evalInput: Array(payload[(3 + n)...]),
                                                    userVerified: payload[0] == 1) else { return (SoftFIDO2Wire.error, [0x2e]) }
            return (cmd, out)
        default:
            return (SoftFIDO2Wire.error, [0x01])
        }
    }
}

/// The test's side of the controls: each call is one connection to the authenticator's socket.
public struct SoftFIDO2Control: Sendable {
    public let socketPath: String
    public init(socketPath: String) { self.socketPath = socketPath }

    public struct ControlError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Sends one frame and returns the answer's payload.
    public func exchange(_ cmd: UInt8, _ payload: [UInt8]) throws -> [UInt8] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ControlError(description: "socket: errno \(errno)") }
        defer { close(fd) }
        guard var addr = SoftFIDO2Wire.address(socketPath) else { throw ControlError(description: "socket path too long") }
        let connected = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw ControlError(description: "connect \(socketPath): errno \(errno)") }
        guard SoftFIDO2Wire.writeAll(fd, SoftFIDO2Wire.frame(cmd, payload)), let (answer, bytes) = SoftFIDO2Wire.readFrame(fd) else {
            throw ControlError(description: "the authenticator did not answer")
        }
        guard answer == cmd else { throw ControlError(description: "the authenticator answered command \(answer) with \(bytes)") }
        return bytes
    }

    /// Whether the next presence checks are touched (the default) or time out.
    public func setTouch(_ touched: Bool) throws { _ = try exchange(SoftFIDO2Wire.setTouch, [touched ? 0 : 1]) }

    /// Presence checks asked for and touches given since the authenticator started.
    public func counts() throws -> (asked: Int, touched: Int) {
        let b = try exchange(SoftFIDO2Wire.counts, [])
        guard b.count == 8 else { throw ControlError(description: "bad counts answer") }
        let asked = Int(b[0]) << 24 | Int(b[1]) << 16 | Int(b[2]) << 8 | Int(b[3])
        let touched = Int(b[4]) << 24 | Int(b[5]) << 16 | Int(b[6]) << 8 | Int(b[7])
        return (asked, touched)
    }

    public func setHostility(_ kind: SoftAuthenticator.Hostility) throws { _ = try exchange(SoftFIDO2Wire.setHostility, [kind.rawValue]) }

    public func setWrongNonce(_ on: Bool) throws { _ = try exchange(SoftFIDO2Wire.badNonce, [on ? 1 : 0]) }

    /// The WebAuthn PRF output the authenticator computes itself for the credential and input.
    public func prfOutput(credentialID: [UInt8], evalInput: [UInt8], userVerified: Bool) throws -> [UInt8] {
        try exchange(SoftFIDO2Wire.prf, [userVerified ? 1 : 0, UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xff)] + credentialID + evalInput)
    }
}
