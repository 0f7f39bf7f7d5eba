#if canImport(Glibc)
import Glibc
#endif
import Synchronization
public import SiteKeepJSON
import SiteKeepSocket

/// The channel between the daemon and a host it started: the capability a host holds to act for
/// its sites, handed over at launch and never obtainable by connecting to a socket.
///
/// The daemon starts a host itself (`sitekeep open`, `sitekeep host run SITE -- PROG`), from
/// an executable it opened and verified, and gives it one end of a connected socket pair as
/// descriptor ``descriptor`` (named in the environment as ``environmentVariable``). Over it the
/// host asks, one JSON line per request:
///
/// ```
/// {"op": "sites"}      → {"ok": true, "sites": [{"id", "name", "origins", "webFolder"}, …]}
/// {"op": "connect"}    → {"ok": true} with one descriptor attached: a bridge connection
/// ```
///
/// The host's descriptors are exactly these: standard input, output and error (the client's, or
/// /dev/null), the channel (3), and its own executable as the daemon checked it (4, read-only:
/// what was executed, kept open for an interpreter to read its script; a host may close it).
///
/// A connection the channel hands out speaks the bridge protocol (`hello` first) and binds only
/// the sites the host was started for; the listening bridge socket binds none of them. Refusals
/// are `{"ok": false, "code": …, "error": …}`. The channel closes when the daemon stops; a host
/// whose channel closed has lost its sites.
public enum HostChannel {
    /// The environment variable that names the channel's descriptor in a started host.
    public static let environmentVariable = "SITEKEEP_HOST_FD"
    /// The descriptor number the daemon gives the channel in the host.
    public static let descriptor: Int32 = 3
    /// The longest line either side sends.
    public static let maximumLineBytes = 1 << 20
}

/// Why a host's channel could not give what it asked for.
public enum HostChannelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The process was not started by the daemon as a host (no channel in its environment).
    case notStartedByTheDaemon
    /// The daemon refused (its code and message).
    case refused(code: String, message: String)
    /// The channel closed (the daemon stopped) or answered outside the protocol.
    case closed(String)

    public var description: String {
        switch self {
        case .notStartedByTheDaemon:
            "this program was not started by the SiteKeep daemon, so it holds no site; start it with 'sitekeep host run SITE -- PROGRAM' (or the browser with 'sitekeep open')"
        case let .refused(code, message): "the daemon refused: \(code): \(message)"
        case .closed(let why): "the daemon's channel closed (\(why)); start the host again with 'sitekeep host run' or 'sitekeep open'"
        }
    }
}

/// A host's end of its ``HostChannel``: one request at a time.
public final class HostChannelClient: Sendable {
    /// The channel's descriptor (close-on-exec once taken).
    public let fd: Int32

    /// The channel this process was started with: ``HostChannel/environmentVariable`` names
    /// ``HostChannel/descriptor``, which must be a connected Unix socket. It is made
    /// close-on-exec, so a program this host starts does not inherit its sites.
    public static func inherited(environment: [String: String]) throws(HostChannelError) -> HostChannelClient {
        guard let text = environment[HostChannel.environmentVariable], let fd = Int32(text), fd == HostChannel.descriptor else {
            throw .notStartedByTheDaemon
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else { throw .notStartedByTheDaemon }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return HostChannelClient(fd: fd)
    }

    /// A channel on `fd` (a test's socket pair).
    public init(fd: Int32) { self.fd = fd }

    /// The sites this host acts for, as the daemon describes them.
    public func sites() throws(HostChannelError) -> JSONValue {
        let reply = try request(["op": "sites"], descriptors: 0).reply
        guard let list = reply["sites"], list.arrayValue != nil else { throw .closed("the answer to 'sites' lacks sites") }
        return list
    }

    /// A new bridge connection for this host's sites (send `hello` on it first). The caller owns
    /// the descriptor.
    public func connect() throws(HostChannelError) -> Int32 {
        let (_, fds) = try request(["op": "connect"], descriptors: 1)
        guard let fd = fds.first else { throw .closed("the answer to 'connect' carried no connection") }
        return fd
    }

    /// Closes the channel (the host gives up its sites).
    public func close() { _ = Glibc.close(fd) }

    private let oneAtATime = Mutex(())

    private func request(_ value: JSONValue, descriptors: Int) throws(HostChannelError) -> (reply: JSONValue, descriptors: [Int32]) {
        try oneAtATime.withLock { _ throws(HostChannelError) in try exchange(value, descriptors: descriptors) }
    }

    private func exchange(_ value: JSONValue, descriptors: Int) throws(HostChannelError) -> (reply: JSONValue, descriptors: [Int32]) {
        guard UnixSocket.writeAll(fd, JSONSerializer.bytes(value) + [0x0a]) else { throw .closed("the daemon is gone") }
        guard let (line, fds) = DescriptorPassing.receiveLine(fd, limit: HostChannel.maximumLineBytes, maximumDescriptors: descriptors) else {
            throw .closed("the daemon is gone")
        }
        guard let reply = try? JSONParser.parse(line, limits: .document) else {
            for f in fds { _ = Glibc.close(f) }
            throw .closed("the daemon's answer is not JSON")
        }
        guard reply["ok"]?.boolValue == true else {
            for f in fds { _ = Glibc.close(f) }
            throw .refused(code: reply["code"]?.stringValue ?? "internal", message: reply["error"]?.stringValue ?? "")
        }
        return (reply, fds)
    }
}
