internal import CGioLoader
import Foundation
import Synchronization

/// Hears the login session lock, so the daemon can lock with it: the screensaver's
/// `ActiveChanged(true)` (`org.freedesktop.ScreenSaver`, `org.gnome.ScreenSaver`) on the session
/// bus, and logind's `org.freedesktop.login1.Session.Lock` for this session on the system bus.
///
/// Through GIO loaded with `dlopen` (``CGioLoader``), on a thread of its own. Where a bus or GIO
/// is missing, that source is simply not watched; ``sources`` says what is.
///
/// ```swift
/// let watcher = SessionLockWatcher.start(environment: env) { source in custodian.lock() }
/// print(watcher?.sources ?? [])   // ["screensaver (session bus)", "logind (system bus)"]
/// ```
public final class SessionLockWatcher: Sendable {
    /// What is watched, for people: `screensaver (session bus)`, `logind (system bus)`.
    public let sources: [String]
    private let handle: Handle
    private let done = DispatchSemaphore(value: 0)
    private let onLock: @Sendable (String) -> Void
    private let stopped = Atomic<Bool>(false)
    private let box: Box

    private struct Handle: @unchecked Sendable {
        // @unchecked: the watch runs on its own thread; from others it is only stopped (an atomic
        // flag and a main-context wakeup) and freed after that thread finished. GDBusConnections
        // are thread-safe.
        let watch: OpaquePointer
        let session: OpaquePointer?
        let system: OpaquePointer?
    }

    private init(sources: [String], handle: Handle, box: Box, onLock: @escaping @Sendable (String) -> Void) {
        self.sources = sources
        self.box = box
        self.handle = handle
        self.onLock = onLock
    }

    /// logind's object path of the session `id` (`XDG_SESSION_ID`): every byte outside
    /// `[A-Za-z0-9]`, and a leading digit, becomes `_xx` (sd-bus's escaping).
    public static func logindSessionPath(_ id: String) -> String {
        var out = "/org/freedesktop/login1/session/"
        for (i, b) in id.utf8.enumerated() {
            let alnum = (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39)
            if alnum && !(i == 0 && b >= 0x30 && b <= 0x39) { out.append(Character(Unicode.Scalar(b))) } else { out += String(format: "_%02x", b) }
        }
        return out
    }

    /// Starts watching what this environment has; nil when nothing can be watched (no GIO, no
    /// bus). `onLock` is told the source (`screensaver` or `logind`) on the watcher's thread.
    public static func start(environment: [String: String], onLock: @escaping @Sendable (String) -> Void) -> SessionLockWatcher? {
        var why: UnsafePointer<CChar>? = nil
        guard sk_gio_load(&why) == 0 else { return nil }
        var sources: [String] = []
        var error: UnsafeMutablePointer<sk_gio_error>? = nil
        var session: OpaquePointer? = nil
        if environment["DBUS_SESSION_BUS_ADDRESS"].map({ !$0.isEmpty }) ?? false {
            session = sk_gio_session_bus(&error)
            sk_gio_error_free(error)
            error = nil
            if session != nil { sources.append("screensaver (session bus)") }
        }
        var system: OpaquePointer? = sk_gio_system_bus(&error)
        sk_gio_error_free(error)
        if let s = system, sk_gio_name_has_owner(s, "org.freedesktop.login1") != 1 {
            sk_gio_connection_unref(s)
            system = nil
        }
        if system != nil { sources.append("logind (system bus)") }
        guard !sources.isEmpty else { return nil }
        let path = environment["XDG_SESSION_ID"].flatMap { $0.isEmpty ? nil : logindSessionPath($0) }
        let box = Box()
        guard let watch = sk_gio_lock_watch_new(session, system, path, { source, context in
            guard let context else { return }
            Unmanaged<Box>.fromOpaque(context).takeUnretainedValue().fire(source == 0 ? "screensaver" : "logind")
        }, Unmanaged.passRetained(box).toOpaque()) else { return nil }
        let watcher = SessionLockWatcher(sources: sources, handle: Handle(watch: watch, session: session, system: system), box: box, onLock: onLock)
        box.target.withLock { $0 = watcher }
        let thread = Thread { [watcher] in
            sk_gio_lock_watch_run(watcher.handle.watch)
            watcher.done.signal()
        }
        thread.name = "sitekeep-session-lock"
        thread.start()
        return watcher
    }

    /// Stops watching and waits for the thread.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        sk_gio_lock_watch_stop(handle.watch)
        done.wait()
        sk_gio_lock_watch_free(handle.watch)
        if let s = handle.session { sk_gio_connection_unref(s) }
        if let s = handle.system { sk_gio_connection_unref(s) }
        box.target.withLock { $0 = nil }
        Unmanaged.passUnretained(box).release()   // the reference the C side held
    }

    /// What the C callback reaches: the watcher, weakly (the watcher owns the thread).
    private final class Box: Sendable {
        let target = Mutex<SessionLockWatcher?>(nil)
        func fire(_ source: String) {
            target.withLock { $0 }?.onLock(source)
        }
    }
}
