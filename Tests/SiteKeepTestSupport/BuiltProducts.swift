import Foundation
import SiteKeepSystem
public import SiteKeepPartitions
public import SiteKeepBridgeProtocol
import SiteKeepSocket
import SiteKeepJSON
#if canImport(Glibc)
import Glibc
#endif

/// The package's executables as `swift build` left them (`.build/debug`), and the reference
/// tools the tests run, found from this file's own path, so they work from any test target and
/// any working directory.
public enum BuiltProducts {
    /// This checkout's `.build/debug` folder.
    public static var folder: String { root.appendingPathComponent(".build/debug").path }

    /// The package root (two folders above this file).
    static var root: URL {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        return dir
    }

    /// The built executable `name`, nil when it has not been built.
    public static func executable(_ name: String) -> String? {
        let candidate = folder + "/" + name
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// `sitekeep`, the front end (it runs a command in its store's daemon, else execs the whole tool).
    public static var sitekeep: String? { executable("sitekeep") }

    /// `sitekeep-main`, the whole tool in a process of its own (it sends no command to a daemon
    /// to run; `unlock`, `lock` and `status` still talk to the store's daemon).
    public static var sitekeepMain: String? { executable("sitekeep-main") }

    /// The reference sgit CLI: `SITEKEEP_TEST_SGIT`, else `.venv/bin/sgit` in the package (tools/setup).
    public static var sgit: String? {
        if let p = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], FileManager.default.isExecutableFile(atPath: p) { return p }
        let candidate = root.appendingPathComponent(".venv/bin/sgit").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }
}

/// A test's host of a site: a daemon binds a site's bridge connection only for a host it started
/// itself (`sitekeep host run`, the control op `launch`), so the tests add Python (a system
/// interpreter, the relay below) as the site's host and get their connections through it: the
/// daemon starts `python3 -c RELAY`, which asks its channel for a connection and hands that
/// connection to the test over a Unix socket of the test's. The connection then binds only the
/// site the relay was started for, as any started host's does.
public enum TestHost {
    /// The host program the tests add for their sites: the system's Python.
    public static let runner: String = {
        guard let p = realpath("/usr/bin/python3", nil) else { return "/usr/bin/python3" }
        defer { free(p) }
        return String(cString: p)
    }()
    /// `site add` arguments that make the test's host a host of the site.
    public static var arguments: [String] { ["--host", runner] }
    /// The same, for ``SiteRegistry/add(displayName:origins:appBound:protection:hosts:)``.
    public static func hosts() throws -> [SiteHost] { [try SiteHost.adding(runner)] }

    /// What the started host runs: one connection from its channel, passed on to the test.
    public static let relay = """
    import json, socket, sys
    ch = socket.socket(fileno=3)
    ch.sendall(b'{"op":"connect"}\\n')
    msg, fds, _, _ = socket.recv_fds(ch, 1, 1)
    line = msg
    while not line.endswith(b'\\n'):
        more = ch.recv(1)
        if not more: break
        line += more
    reply = json.loads(line)
    if not reply.get('ok') or not fds:
        sys.stderr.write(line.decode()); sys.exit(3)
    out = socket.socket(socket.AF_UNIX)
    out.connect(sys.argv[1])
    socket.send_fds(out, [b'x\\n'], fds)
    out.close()
    """

    /// Python that a host started by the daemon runs first: `connect()` returns a bridge
    /// connection (a socket) from the host's channel.
    public static let pythonChannel = """
    import json, socket
    def connect():
        ch = socket.socket(fileno=3)
        ch.sendall(b'{"op":"connect"}\\n')
        msg, fds, _, _ = socket.recv_fds(ch, 1, 1)
        line = msg
        while not line.endswith(b'\\n'):
            more = ch.recv(1)
            if not more: break
            line += more
        ch.detach()
        if not json.loads(line).get('ok') or not fds:
            raise SystemExit('the channel refused: ' + line.decode())
        return socket.socket(fileno=fds[0])

    """

    /// Runs `python3 -c SCRIPT ARGS` (or `program` with `arguments`) as `site`'s host, started by
    /// the daemon whose bridge socket is `socket` (as `sitekeep host run` does) with `environment`
    /// as the caller's, and returns its exit status (nil when the daemon went away) and what it
    /// printed; `script` may call ``pythonChannel``'s `connect()`. Throws the daemon's refusal.
    public static func run(socket bridge: String, site: String, script: String, arguments: [String] = [],
                           program: String? = nil, environment: [String: String] = ["PATH": "/usr/bin:/bin"]) throws -> (status: Int32?, output: String) {
        let control = DaemonSockets.besideBridge(bridge)
        let store = try storeID(control: control)
        var out: [Int32] = [-1, -1]
        guard pipe(&out) == 0 else { throw Failure("pipe failed") }
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer { close(null) }
        let launched: LaunchedHost?
        do {
            launched = try ControlClient.launch(path: control, store: store, program: "host", site: site, hostPath: program ?? runner,
                                                arguments: program == nil ? ["-c", pythonChannel + script] + arguments : arguments,
                                                environment: environment, cwd: "/", stdio: [null, out[1], out[1]])
        } catch {
            close(out[0]); close(out[1])
            throw Failure("\(error)")
        }
        close(out[1])
        defer { close(out[0]) }
        guard let launched else { throw Failure("no daemon answers at \(control)") }
        defer { launched.close() }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(out[0], $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return (launched.waitForExit(), String(decoding: bytes, as: UTF8.self))
    }

    /// The id of the store the daemon at `control` serves, waiting up to `timeout` for its
    /// control socket to answer (it starts just after the bridge socket).
    static func storeID(control: String, timeout: Duration = .seconds(30)) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = try? ControlClient.send(path: control, store: nil, op: "status"), let store = status["store"]?.stringValue { return store }
            guard ContinuousClock.now < deadline else { throw Failure("no daemon answers at \(control)") }
            usleep(50_000)
        }
    }

    /// Why the test's host gave no connection.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// A bridge connection to the daemon whose bridge socket is `socket`, for the site `site`
    /// (an origin, name or id), obtained through a host the daemon started: send `hello` on it
    /// as on any connection. Throws the daemon's refusal (a site without the test's host, a
    /// daemon that is not running) in its own words.
    public static func connect(socket bridge: String, site: String, timeout: Duration = .seconds(30)) throws -> BridgeClient {
        BridgeClient.adopting(fd: try descriptor(socket: bridge, site: site, timeout: timeout), timeout: timeout)
    }

    /// ``connect(socket:site:timeout:)``'s connection as a plain descriptor (the caller closes it).
    public static func descriptor(socket bridge: String, site: String, timeout: Duration = .seconds(30)) throws -> Int32 {
        let control = DaemonSockets.besideBridge(bridge)
        let store = try storeID(control: control, timeout: timeout)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sk-host-\(UInt32.random(in: 0...UInt32.max))").path
        mkdir(folder, 0o700)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listenPath = folder + "/h.sock"
        let listener = try UnixSocket.listen(path: listenPath, what: "a test's host relay")
        defer { close(listener) }
        let launched: LaunchedHost?
        do {
            launched = try ControlClient.launch(path: control, store: store, program: "host", site: site, hostPath: runner,
                                                arguments: ["-c", relay, listenPath], environment: ["PATH": "/usr/bin:/bin"], cwd: "/", stdio: [])
        } catch { throw Failure("\(error)") }
        guard let launched else { throw Failure("no daemon answers at \(control)") }
        defer { launched.close() }
        var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        let c = timeout.components
        guard poll(&p, 1, Int32(c.seconds * 1000)) == 1 else { throw Failure("the test's host sent no connection within \(timeout)") }
        let conn = accept(listener, nil, nil)
        guard conn >= 0 else { throw Failure("accept failed: \(errno)") }
        defer { close(conn) }
        guard let (_, fds) = DescriptorPassing.receiveLine(conn, limit: 16, maximumDescriptors: 1), let fd = fds.first else {
            throw Failure("the test's host passed no connection")
        }
        return fd
    }
}
