#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A fake daemon: a real listening Unix socket, served by a python3 child that counts the bytes
/// each connection sends and answers a control request as `sitekeep serve` would (so a client
/// that trusts it goes on to send an unlock secret). With `uid`, the child binds the socket as
/// root and then drops to that uid before `listen`, so the file is ours but `SO_PEERCRED` shows
/// the other user, the case only the peer check catches. Stopped by pid in ``stop()``.
public final class FakeDaemon: @unchecked Sendable {
    // @unchecked: `pid` and `report` are written once in init; `stopped` only under `lock`.
    public let path: String
    private let pid: pid_t
    private let report: String
    private let lock = NSLock()
    private var stopped = false

    public static var available: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") }

    static let script = """
    import json, os, socket, sys
    path, report, uid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    out = open(report, 'w', buffering=1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    if uid >= 0:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
    s.listen(8)
    out.write('ready\\n')
    while True:
        c, _ = s.accept()
        c.settimeout(1.0)
        data = b''
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk: break
                data += chunk
                # Answer a control request as the daemon would, so a trusting client goes on
                # to send its secret.
                if b'\\n' in data:
                    header, _, rest = data.partition(b'\\n')
                    try: length = json.loads(header).get('length', 0)
                    except Exception: length = 0
                    if len(rest) >= length:
                        c.sendall(b'{"ok":true,"unlocked":false}\\n')
        except OSError:
            pass
        out.write('%d\\n' % len(data))
        c.close()
    """

    /// Listens at `path` (its folder must exist); as `uid` when given (needs root).
    public init(path: String, uid: UInt32? = nil) throws {
        self.path = path
        report = path + ".report-\(UInt32.random(in: 0...UInt32.max))"
        let words = ["/usr/bin/python3", "-c", Self.script, path, report, uid.map { String($0) } ?? "-1"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        guard posix_spawn(&child, words[0], nil, nil, argv, environ) == 0 else {
            throw FakeDaemonError("python3 could not be started")
        }
        pid = child
        for _ in 0..<200 {
            if lines.first == "ready" { return }
            usleep(20_000)
        }
        stop()
        throw FakeDaemonError("the fake daemon did not start listening at \(path)")
    }

    private var lines: [String] {
        ((try? String(contentsOfFile: report, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// The bytes each finished connection sent, in order.
    public var connections: [Int] { lines.dropFirst().compactMap { Int($0) } }

    /// ``connections``, once at least `count` have finished (or after `timeout` seconds).
    public func connections(atLeast count: Int, timeout: Double = 5) -> [Int] {
        let deadline = Date().addingTimeInterval(timeout)
        while connections.count < count && Date() < deadline { usleep(20_000) }
        return connections
    }

    /// Kills the child and reaps it; removes the socket and the report. Idempotent (the pid is
    /// never signalled once reaped).
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped else { return }
        stopped = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        unlink(path)
        unlink(report)
    }
}

public struct FakeDaemonError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}
