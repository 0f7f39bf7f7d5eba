#if canImport(Glibc)
import Glibc
#endif
public import SiteKeepJSON
import SiteKeepSocket

/// The daemon's control socket wire (`control.sock`): how the `sitekeep` command line reaches the
/// one process that holds a store's unlocked keys. Sites never use it.
///
/// One request per connection. The client sends a JSON header line:
///
/// ```
/// {"v": 3, "op": "hello" | "status" | "lock" | "unlock" | "stop" | "set" | "sites" | "run", "store": "<store id>", ...}
/// ```
///
/// - `stop` (store required) asks the daemon to stop as SIGTERM does; it answers `{"ok": true,
///   "pid": N}` first. `set` (store required) adds `"key": "idle-lock"` and `"value"` (a
///   duration): the idle lock of this run only.
///
/// - `store` is the store id the client means; a daemon serving another store refuses with
///   `wrong_store` (so `--home B` never reaches store A's daemon).
/// - `unlock` adds `"method": "passphrase" | "prf" | "recovery" | "tpm2" | "fido2"` and
///   `"length": N`, then exactly N raw secret bytes follow the header (for `tpm2` and `fido2`:
///   one byte, 0 for no PIN, or 1 then the PIN). Every other op sends `"length": 0` or none.
/// - `run` adds `"argv"` (the command line as typed, without the program name), `"cwd"` (the
///   client's working folder, against which the daemon makes local paths absolute), `"env"`
///   (the variables that shape output, `TERM`, `NO_COLOR`, `COLUMNS`, and those the store's
///   folder is resolved from, `SITEKEEP_HOME`, `XDG_DATA_HOME`, `HOME`) and `"tty"` (which of
///   the client's streams are terminals). The daemon refuses with `runs_here` a command that
///   runs in its own process, and with `wrong_store` one that names another store; otherwise
///   both sides speak ``ControlFrame``s until the daemon sends `exit`.
///
/// Every other op gets one JSON line back: `{"ok": true, ...}` or
/// `{"ok": false, "code": "...", "error": "..."}`.
public enum ControlWire {
    /// The version a client sends as `v` (3: `run` carries the command line as typed and the
    /// daemon reads it; 2 sent it with paths already made absolute).
    public static let version = 3
    /// The longest header line either side accepts.
    public static let maximumHeaderBytes = 64 << 10
    /// The longest unlock secret a request may carry: 64 KiB, the command line's passphrase limit.
    public static let maximumSecretLength = 64 << 10
}

/// A frame of a `run` session: one kind byte, a big-endian 32-bit length, the payload.
public struct ControlFrame: Sendable, Equatable {
    /// What a frame carries.
    public enum Kind: UInt8, Sendable {
        /// Daemon → client: bytes for standard output.
        case stdout = 0x6f   // "o"
        /// Daemon → client: raw bytes for standard output (file contents, unchanged), as
        /// opposed to text.
        case stdoutBytes = 0x62   // "b"
        /// Daemon → client: bytes for standard error.
        case stderr = 0x65   // "e"
        /// Daemon → client: ask the user (payload: JSON `{"prompt": text, "secret": bool}`);
        /// client → daemon: the answer (payload: the typed bytes, without the newline).
        case prompt = 0x70   // "p"
        /// Daemon → client: read standard input (payload: a 4-byte maximum);
        /// client → daemon: what was read (empty: end of input).
        case stdin = 0x69    // "i"
        /// Daemon → client: the command finished (payload: its 4-byte exit status).
        case exit = 0x78     // "x"
        /// Client → daemon: the user interrupted (Ctrl-C); the command stops at its next read.
        case cancel = 0x63   // "c"
    }

    /// The largest payload of one frame.
    public static let maximumPayload = 1 << 20

    public let kind: Kind
    public let payload: [UInt8]

    public init(_ kind: Kind, _ payload: [UInt8] = []) {
        self.kind = kind
        self.payload = payload
    }

    /// A 32-bit big-endian number as a payload.
    public static func number(_ n: UInt32) -> [UInt8] {
        [UInt8(n >> 24), UInt8(truncatingIfNeeded: n >> 16), UInt8(truncatingIfNeeded: n >> 8), UInt8(truncatingIfNeeded: n)]
    }

    /// The payload read as a 32-bit big-endian number, when it is one.
    public var number: UInt32? {
        guard payload.count == 4 else { return nil }
        return payload.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Writes the frame's header and payload to `fd`; false when the peer is gone.
    public static func send(_ fd: Int32, _ kind: Kind, _ payload: UnsafeRawBufferPointer) -> Bool {
        var header = [kind.rawValue] + number(UInt32(payload.count))
        return header.withUnsafeMutableBytes { UnixSocket.writeAll(fd, UnsafeRawBufferPointer($0)) } && UnixSocket.writeAll(fd, payload)
    }

    /// ``send(_:_:_:)`` for an array.
    public static func send(_ fd: Int32, _ frame: ControlFrame) -> Bool {
        frame.payload.withUnsafeBytes { send(fd, frame.kind, $0) }
    }

    /// Reads one frame's header from `fd`: its kind and payload length; nil at end of stream or
    /// on a malformed or oversized header.
    public static func receiveHeader(_ fd: Int32) -> (kind: Kind, length: Int)? {
        var header = [UInt8](repeating: 0, count: 5)
        guard header.withUnsafeMutableBytes({ receiveExactly(fd, into: $0) }),
              let kind = Kind(rawValue: header[0]) else { return nil }
        let length = Int(header[1...4].reduce(0) { $0 << 8 | UInt32($1) })
        guard length <= maximumPayload else { return nil }
        return (kind, length)
    }

    /// Reads one whole frame.
    public static func receive(_ fd: Int32) -> ControlFrame? {
        guard let (kind, length) = receiveHeader(fd) else { return nil }
        var payload = [UInt8](repeating: 0, count: length)
        guard payload.withUnsafeMutableBytes({ receiveExactly(fd, into: $0) }) else { return nil }
        return ControlFrame(kind, payload)
    }

    /// Fills `buffer` from `fd`; false at end of stream or on an error first.
    public static func receiveExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        var got = 0
        while got < buffer.count {
            let n = recv(fd, buffer.baseAddress! + got, buffer.count - got, 0)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return false }
            got += n
        }
        return true
    }
}

/// The command line's side of the control socket.
public enum ControlClient {
    /// What a client says when it refuses a control socket.
    public static let remedy = "start the daemon yourself ('sitekeep unlock' or 'sitekeep serve') and keep SITEKEEP_SOCK, if set, in a folder only you can enter (mode 0700)"

    /// Connects to the control socket at `path` after the client checks
    /// (``UnixSocket/connect(path:remedy:)``); nil when no daemon listens there.
    /// - Throws: ``BridgeError/untrustedSocket(path:reason:)`` when a check fails (nothing was sent).
    public static func connect(path: String) throws(BridgeError) -> Int32? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        do { return try UnixSocket.connect(path: path, remedy: remedy) } catch {
            if case .untrusted = error { throw BridgeError(error) }
            return nil
        }
    }

    /// The header line of a request.
    public static func header(op: String, store: String?, extra: [JSONMember] = []) -> [UInt8] {
        var members: [JSONMember] = [JSONMember(key: "v", value: .int(Int64(ControlWire.version))), JSONMember(key: "op", value: .string(op))]
        if let store { members.append(JSONMember(key: "store", value: .string(store))) }
        members += extra
        return JSONSerializer.bytes(.object(members)) + [0x0a]
    }

    /// Sends one request and returns the daemon's JSON reply, or nil when no daemon listens at
    /// `path`. An `unlock` carries `secret` after the header; it is sent only after the socket
    /// passed every check.
    public static func send(path: String, store: String?, op: String, method: String? = nil,
                            secret: UnsafeRawBufferPointer? = nil, extra: [JSONMember] = []) throws(BridgeError) -> JSONValue? {
        guard let fd = try connect(path: path) else { return nil }
        defer { close(fd) }
        // A daemon that never answers (one still starting that hangs, a listener that is no
        // daemon) costs a bounded wait, not a hang; unlock's KDF takes about a second.
        UnixSocket.setReceiveTimeout(fd, seconds: 60)
        var fields = extra
        if let method { fields.append(JSONMember(key: "method", value: .string(method))) }
        fields.append(JSONMember(key: "length", value: .int(Int64(secret?.count ?? 0))))
        // A daemon that refuses the header (another store, a bad request) answers and closes
        // without reading the rest, so a failed write may still have a refusal to read.
        guard UnixSocket.writeAll(fd, header(op: op, store: store, extra: fields)) else { return try readReply(fd) }
        if let secret, secret.count > 0, !UnixSocket.writeAll(fd, secret) { return try readReply(fd) }
        return try readReply(fd)
    }

    /// Reads one JSON reply line.
    public static func readReply(_ fd: Int32) throws(BridgeError) -> JSONValue {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.count < ControlWire.maximumHeaderBytes {
            let n = recv(fd, &byte, 1, 0)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            if byte == 0x0a { break }
            line.append(byte)
        }
        guard !line.isEmpty else { throw .connectionClosed }
        guard let value = try? JSONParser.parse(line, limits: .message) else { throw .protocolViolation("the daemon's control reply is not JSON") }
        return value
    }
}

/// A host the daemon started for a client's `launch` request: its pid, and the control
/// connection on which the daemon says when it ends. Closing the connection stops the host.
public final class LaunchedHost: Sendable {
    /// The host's process id.
    public let pid: Int32
    private let fd: Int32

    init(pid: Int32, fd: Int32) {
        self.pid = pid
        self.fd = fd
    }

    /// Waits until the host ends and returns its status (the shell's convention: 128 + a
    /// signal); nil when the daemon went away first.
    public func waitForExit() -> Int32? {
        UnixSocket.setReceiveTimeout(fd, seconds: 0)
        guard let reply = try? ControlClient.readReply(fd), let status = reply["exited"]?.intValue else { return nil }
        return Int32(clamping: status)
    }

    /// Closes the connection: the daemon stops the host (SIGTERM, then SIGKILL 5 s later).
    public func close() { _ = Glibc.close(fd) }
}

extension ControlClient {
    /// Asks the daemon at `path` to start a host (``HostChannel``): `program` is `"browser"` (the
    /// SiteKeep browser, for every app-bound site) or `"host"` (`hostPath`, a program the user
    /// added for `site`). The host gets `arguments`, the display, session and locale variables
    /// of `environment` the daemon passes on (never one that loads code), `cwd`, and `stdio`
    /// (up to three descriptors: its standard input, output and error; /dev/null for the rest).
    /// `passphrase`, when given, approves what needs the user's approval (the browser's
    /// `--automation`). Nil when no daemon listens at `path`.
    /// - Throws: ``BridgeError`` when the daemon refuses (its code and message) or the socket
    ///   fails the client's checks.
    public static func launch(path: String, store: String, program: String, site: String? = nil, hostPath: String? = nil,
                              arguments: [String], environment: [String: String], cwd: String, stdio: [Int32],
                              passphrase: UnsafeRawBufferPointer? = nil) throws(BridgeError) -> LaunchedHost? {
        guard let fd = try connect(path: path) else { return nil }
        var fields: [JSONMember] = [JSONMember(key: "program", value: .string(program))]
        if let site { fields.append(JSONMember(key: "site", value: .string(site))) }
        if let hostPath { fields.append(JSONMember(key: "path", value: .string(hostPath))) }
        fields.append(JSONMember(key: "argv", value: .array(arguments.map { .string($0) })))
        fields.append(JSONMember(key: "env", value: .object(environment.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: .string($0.value)) })))
        fields.append(JSONMember(key: "cwd", value: .string(cwd)))
        if passphrase != nil { fields.append(JSONMember(key: "method", value: .string("passphrase"))) }
        fields.append(JSONMember(key: "length", value: .int(Int64(passphrase?.count ?? 0))))
        UnixSocket.setReceiveTimeout(fd, seconds: 60)
        do {
            try DescriptorPassing.send(fd, header(op: "launch", store: store, extra: fields), descriptors: stdio)
        } catch {
            let reply = try? readReply(fd)
            Glibc.close(fd)
            if let reply { throw refusal(reply) }
            throw BridgeError(error)
        }
        if let passphrase, passphrase.count > 0 { _ = UnixSocket.writeAll(fd, passphrase) }
        let reply: JSONValue
        do { reply = try readReply(fd) } catch {
            Glibc.close(fd)
            throw error
        }
        guard reply["ok"] == .bool(true), let pid = reply["pid"]?.intValue else {
            Glibc.close(fd)
            throw refusal(reply)
        }
        return LaunchedHost(pid: Int32(clamping: pid), fd: fd)
    }

    private static func refusal(_ reply: JSONValue) -> BridgeError {
        .daemonRefused(code: reply["code"]?.stringValue ?? "refused", message: reply["error"]?.stringValue ?? "the daemon refused to start the host")
    }
}
