import Foundation
import SiteKeepKeyring
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The Secret Service failure modes, each on a bus the test owns. libsecret and GDBus cache the
/// session bus for the whole process, so every scenario runs in a child process (an exit test)
/// that points `DBUS_SESSION_BUS_ADDRESS` at its own bus before touching libsecret. The child
/// reports through its exit code and standard error.
@Suite struct SecretServiceErrorTests {
    static let haveDBus = FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
    static let haveKeyring = haveDBus && FileManager.default.isExecutableFile(atPath: "/usr/bin/gnome-keyring-daemon")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus")
    static let havePythonDBus = haveDBus
        && FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/dbus/__init__.py")

    static let item = KeyringItemID(store: "error-tests", kind: "slot", id: "one")

    @Test func noBusGivesNoSecretServiceQuickly() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/sitekeep-test-bus", 1)
            unsetenv("DISPLAY")
            exit(Child.expectNoService())
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test(.enabled(if: haveDBus))
    func busWithoutTheServiceGivesNoSecretService() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            exit(Child.onPrivateBus { _ in Child.expectNoService() })
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test(.enabled(if: havePythonDBus))
    func silentServiceGivesTimeoutWithinTheLimit() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            exit(Child.onPrivateBus { bus in
                // Owns org.freedesktop.secrets and never reads, so never answers, a call.
                let fake: Daemon
                do {
                    fake = try Daemon("/usr/bin/python3", ["-c", """
                        import sys, time, dbus
                        bus = dbus.bus.BusConnection(sys.argv[1])
                        bus.request_name("org.freedesktop.secrets")
                        print("ready", flush=True)
                        time.sleep(120)
                        """, bus.address], readyMarker: "ready")
                } catch {
                    return Child.fail(90, "cannot start the silent service: \(error)")
                }
                return withExtendedLifetime(fake) { Child.expectTimeout() }
            })
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }

    @Test(.enabled(if: haveKeyring))
    func lockedCollectionIsReportedNotMistakenForMissing() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            exit(Child.onPrivateBus { bus in
                let keyring: Daemon
                do {
                    keyring = try Daemon("/usr/bin/gnome-keyring-daemon", ["--foreground", "--unlock", "--components=secrets"],
                                         environment: ["HOME": bus.folder.path, "XDG_RUNTIME_DIR": bus.folder.path + "/run",
                                                       "DBUS_SESSION_BUS_ADDRESS": bus.address, "PATH": "/usr/bin:/bin"],
                                         input: "pw")
                } catch {
                    return Child.fail(90, "cannot start gnome-keyring-daemon: \(error)")
                }
                return withExtendedLifetime(keyring) { Child.expectLocked(address: bus.address) }
            })
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }
}

/// What the child processes run. Each returns 0 when the behaviour is right, else prints why.
enum Child {
    /// Starts a private bus (its programs are stopped before this returns), points this process
    /// at it and runs `body`.
    static func onPrivateBus(_ body: (PrivateBus) -> Int32) -> Int32 {
        let bus: PrivateBus
        do {
            bus = try PrivateBus()
        } catch {
            return fail(91, "cannot start a private D-Bus: \(error)")
        }
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        return withExtendedLifetime(bus) { body(bus) }
    }

    static func fail(_ code: Int32, _ message: String) -> Int32 {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        return code
    }

    static func expectNoService() -> Int32 {
        let keyring = SecretServiceKeyring(timeout: 5)
        let start = monotonicSeconds()
        do {
            _ = try keyring.load(SecretServiceErrorTests.item)
            return fail(1, "load succeeded without a Secret Service")
        } catch {
            guard case .noSecretService = error else { return fail(2, "load: \(error)") }
        }
        do {
            try keyring.store([1], for: SecretServiceErrorTests.item, label: "x")
            return fail(3, "store succeeded without a Secret Service")
        } catch {
            guard case .noSecretService = error else { return fail(4, "store: \(error)") }
        }
        guard case .unavailable(.noSecretService) = SecretServiceKeyring.probe() else {
            return fail(5, "probe: \(SecretServiceKeyring.probe())")
        }
        let elapsed = monotonicSeconds() - start
        guard elapsed < 2 else { return fail(6, "took \(elapsed) s") }
        return 0
    }

    static func expectTimeout() -> Int32 {
        let keyring = SecretServiceKeyring(timeout: 1)
        var start = monotonicSeconds()
        do {
            _ = try keyring.load(SecretServiceErrorTests.item)
            return fail(1, "load succeeded against a silent service")
        } catch {
            guard error == .timeout(seconds: 1) else { return fail(2, "load: \(error)") }
        }
        var elapsed = monotonicSeconds() - start
        guard elapsed >= 0.9, elapsed < 3 else { return fail(3, "load gave up after \(elapsed) s, limit 1 s") }
        start = monotonicSeconds()
        guard case .unavailable(.timeout) = SecretServiceKeyring.probe(timeout: 0.5) else {
            return fail(4, "probe did not time out")
        }
        elapsed = monotonicSeconds() - start
        guard elapsed < 2 else { return fail(5, "probe took \(elapsed) s, limit 0.5 s") }
        return 0
    }

    static func expectLocked(address: String) -> Int32 {
        // The daemon may still be starting.
        var probe = SecretServiceKeyring.probe()
        for _ in 0..<50 where probe != .available(locked: false) {
            usleep(100_000)
            probe = SecretServiceKeyring.probe()
        }
        guard probe == .available(locked: false) else { return fail(1, "keyring never came up: \(probe)") }
        let keyring = SecretServiceKeyring(timeout: 5)
        let item = SecretServiceErrorTests.item
        do {
            try keyring.store([0, 1, 0xFF], for: item, label: "SiteKeep lock test")
            guard try keyring.load(item) == [0, 1, 0xFF] else { return fail(2, "round trip changed the bytes") }
        } catch {
            return fail(3, "unlocked keyring failed: \(error)")
        }
        let lock = try? run("/usr/bin/gdbus", [
            "call", "--address", address, "--dest", "org.freedesktop.secrets",
            "--object-path", "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.Lock",
            "['/org/freedesktop/secrets/collection/login']",
        ])
        guard lock?.status == 0 else { return fail(4, "gdbus lock failed: \(String(describing: lock))") }
        guard SecretServiceKeyring.probe() == .available(locked: true) else {
            return fail(5, "probe after lock: \(SecretServiceKeyring.probe())")
        }
        let start = monotonicSeconds()
        let other = KeyringItemID(store: item.store, kind: item.kind, id: "two")
        let attempts: [(String, () throws(KeyringError) -> Void)] = [
            ("load", { () throws(KeyringError) in _ = try keyring.load(item) }),
            ("load of a missing item", { () throws(KeyringError) in _ = try keyring.load(other) }),
            ("store", { () throws(KeyringError) in try keyring.store([1], for: other, label: "x") }),
            ("delete", { () throws(KeyringError) in try keyring.delete(item) }),
        ]
        for (name, attempt) in attempts {
            do {
                try attempt()
                return fail(6, "\(name) succeeded on a locked collection")
            } catch {
                guard error == .collectionLocked else { return fail(7, "\(name): \(error), expected collectionLocked") }
            }
        }
        let elapsed = monotonicSeconds() - start
        guard elapsed < 4 else { return fail(8, "locked calls took \(elapsed) s") }
        return 0
    }
}

/// A private session bus with no activatable services, in its own temporary folder. Used only in
/// exit-test children: in the test runner itself, Foundation's `Process.waitUntilExit` spins for
/// ever beside Swift Testing's exit-test monitor.
final class PrivateBus: Sendable {
    let folder: TemporaryFolder
    let address: String
    private let daemon: Daemon

    init() throws {
        folder = try TemporaryFolder("bus")
        try FileManager.default.createDirectory(atPath: folder.path + "/run", withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(folder.path)/bus</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        try config.write(toFile: folder.path + "/bus.conf", atomically: true, encoding: .utf8)
        daemon = try Daemon("/usr/bin/dbus-daemon", ["--config-file=\(folder.path)/bus.conf", "--nofork", "--print-address=1"],
                            readyMarker: "unix:")
        address = daemon.firstLine
    }
}

/// A background program (posix_spawn; Foundation's `Process` hangs in `waitUntilExit` here),
/// killed and reaped when the value goes away.
final class Daemon: Sendable {
    private let pid: pid_t
    let firstLine: String

    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
         input: String? = nil, readyMarker: String? = nil) throws {
        var inPipe: [Int32] = [0, 0]
        var outPipe: [Int32] = [0, 0]
        guard pipe(&inPipe) == 0, pipe(&outPipe) == 0 else { throw DaemonError.notReady("pipe") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        if readyMarker != nil {
            posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        } else {
            // Nobody reads it: a closed pipe would kill the program with SIGPIPE.
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        for fd in inPipe + outPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envList = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = envList.map { strdup($0) } + [nil]
        defer { for p in argv + envp { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, nil, argv, envp)
        close(inPipe[0])
        close(outPipe[1])
        guard rc == 0 else {
            close(inPipe[1]); close(outPipe[0])
            throw DaemonError.notReady("\(executable): spawn failed \(rc)")
        }
        pid = child
        if let input { _ = input.withCString { write(inPipe[1], $0, strlen($0)) } }
        close(inPipe[1])
        var line = ""
        if let readyMarker {
            var buffer: [UInt8] = []
            var byte: UInt8 = 0
            while read(outPipe[0], &byte, 1) == 1 {
                if byte == UInt8(ascii: "\n") {
                    let text = String(decoding: buffer, as: UTF8.self)
                    if text.contains(readyMarker) { line = text; break }
                    buffer = []
                } else {
                    buffer.append(byte)
                }
            }
        }
        close(outPipe[0])
        firstLine = line
        if readyMarker != nil, line.isEmpty {
            Self.stop(child)
            throw DaemonError.notReady(executable)
        }
    }

    private static func stop(_ pid: pid_t) {
        kill(pid, SIGKILL)  // spawned from a dispatch thread, it inherits a mask that blocks SIGTERM
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }

    deinit { Self.stop(pid) }
}

enum DaemonError: Error {
    case notReady(String)
}
