import Foundation
import Synchronization
import Testing
import SiteKeepTestSupport

/// A private session bus in `dir` with a real freedesktop Notifications service on it
/// (python-dbusmock's notification_daemon template), for the tests that watch what the daemon
/// notifies. Both processes are stopped by pid when this is released (or by ``stop()``).
final class NotificationBus: @unchecked Sendable {
    // @unchecked: set once in init; which child was stopped is behind its Mutex.
    private let dbus: NotificationDeliveryTests.Child
    private let mock: NotificationDeliveryTests.Child
    /// The environment that reaches the bus (`DBUS_SESSION_BUS_ADDRESS`, `HOME`).
    let env: [String]
    /// The service's log: one line per Notify (a body's further lines follow it).
    let logPath: String
    private let stopped = Mutex<(service: Bool, bus: Bool)>((false, false))

    /// Starts the bus and the service in `dir` (made 0700) and waits for the service's name.
    init(in dir: URL, home: String) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let bus = "unix:path=" + dir.appendingPathComponent("bus").path
        dbus = try NotificationDeliveryTests.Child("/usr/bin/dbus-daemon", ["--session", "--nofork", "--nopidfile", "--address=\(bus)"],
                                                   env: ["HOME=\(home)"], log: dir.appendingPathComponent("dbus.log").path)
        env = ["DBUS_SESSION_BUS_ADDRESS=\(bus)", "HOME=\(home)"]
        #expect(NotificationDeliveryTests.wait(5) { FileManager.default.fileExists(atPath: dir.appendingPathComponent("bus").path) })
        logPath = dir.appendingPathComponent("notify.log").path
        mock = try NotificationDeliveryTests.Child("/usr/bin/python3", ["-m", "dbusmock", "--session", "--template", "notification_daemon", "-l", logPath],
                                                   env: env, log: dir.appendingPathComponent("mock.out").path)
        #expect(ChildProcess.run("/usr/bin/gdbus", ["wait", "--session", "--timeout", "15", "org.freedesktop.Notifications"], environment: env) == 0,
                "the mock notification service did not appear")
    }

    /// What the service has logged so far.
    func logText() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Takes the Notifications service off the bus (the bus stays).
    /// Each child is stopped once: a second signal could reach a reused pid.
    func stopService() {
        if stopped.withLock({ s in defer { s.service = true }; return !s.service }) { mock.stop() }
    }

    /// Stops the service and the bus.
    func stop() {
        stopService()
        if stopped.withLock({ s in defer { s.bus = true }; return !s.bus }) { dbus.stop() }
    }

    deinit { stop() }
}
