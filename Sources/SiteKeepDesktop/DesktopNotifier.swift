internal import CGioLoader
import Foundation
public import SiteKeepCore
import Synchronization

/// Shows reminders through the freedesktop Notifications D-Bus API
/// (`org.freedesktop.Notifications.Notify` on the session bus), with a default action that
/// opens the item's page through the host.
///
/// Swift reaches D-Bus through GIO's `g_dbus_connection_call_sync`, loaded with `dlopen` on the
/// first notification (``CGioLoader``, as the keyring loads libsecret): no process is spawned per
/// notification, no text of ours is parsed as GVariant text (the arguments are built by GVariant
/// constructors), one connection is kept, and the `ActionInvoked` signal can be heard on it. A
/// process that never notifies never maps GIO.
///
/// ```swift
/// let n = FreedesktopNotifier { opened in host.open(opened.url) }
/// try n.deliver(notification)   // throws DeliveryError when no service answers
/// ```
public final class FreedesktopNotifier: NotificationSink {
    public let appName: String
    private let onAction: @Sendable (DesktopNotification) -> Void
    private let connection = Mutex<GioHandle?>(nil)
    private let shown = Mutex<[UInt32: DesktopNotification]>([:])
    private let listener = Mutex<(handle: GioHandle?, done: DispatchSemaphore?)>((nil, nil))

    /// - Parameter onAction: told when the user takes a notification's default action (on the listener's thread).
    public init(appName: String = "SiteKeep", onAction: @escaping @Sendable (DesktopNotification) -> Void = { _ in }) {
        self.appName = appName
        self.onAction = onAction
    }

    deinit {
        stopListening()
        if let c = connection.withLock({ $0 }) { sk_gio_connection_unref(c.raw) }
    }

    private func bus() throws(DeliveryError) -> OpaquePointer {
        var why: UnsafePointer<CChar>? = nil
        guard sk_gio_load(&why) == 0 else { throw DeliveryError(why.map { String(cString: $0) } ?? "GIO could not be loaded") }
        return try connection.withLock { (c: inout GioHandle?) throws(DeliveryError) -> GioHandle in
            if let c { return c }
            var error: UnsafeMutablePointer<sk_gio_error>? = nil
            guard let made = sk_gio_session_bus(&error) else { throw Self.failure(error, what: "no session bus") }
            c = GioHandle(made)
            return GioHandle(made)
        }.raw
    }

    static func failure(_ error: UnsafeMutablePointer<sk_gio_error>?, what: String) -> DeliveryError {
        defer { sk_gio_error_free(error) }
        guard let e = error, let m = e.pointee.message else { return DeliveryError(what) }
        return DeliveryError("\(what): \(String(cString: m))")
    }

    public func deliver(_ n: DesktopNotification) throws(DeliveryError) {
        let c = try bus()
        var error: UnsafeMutablePointer<sk_gio_error>? = nil
        let id = n.url == nil
            ? sk_gio_notify(c, appName, n.title, n.body, nil, -1, 5000, &error)
            : sk_gio_notify(c, appName, n.title, n.body, "Open", -1, 5000, &error)
        guard id != 0 else { throw Self.failure(error, what: "the notification service did not answer") }
        shown.withLock { m in
            m[id] = n
            if m.count > 256, let oldest = m.keys.min() { m.removeValue(forKey: oldest) }
        }
    }

    /// Starts hearing `ActionInvoked` on a thread of its own (once; a no-op when GIO or the bus is missing).
    public func startListening() {
        guard let c = try? bus() else { return }
        let done = DispatchSemaphore(value: 0)
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let handle = sk_gio_listen_new(c, { id, action, ctx in
            guard let ctx, let action else { return }
            let me = Unmanaged<FreedesktopNotifier>.fromOpaque(ctx).takeUnretainedValue()
            me.invoked(id: id, action: String(cString: action))
        }, context) else { return }
        let box = GioHandle(handle)
        let started = listener.withLock { l -> Bool in
            guard l.handle == nil else { return false }
            l = (box, done)
            return true
        }
        guard started else { sk_gio_listen_free(handle); return }
        let thread = Thread {
            sk_gio_listen_run(box.raw)
            done.signal()
        }
        thread.name = "sitekeep-notify-actions"
        thread.start()
    }

    /// Stops the listener and waits for its thread.
    public func stopListening() {
        let (handle, done) = listener.withLock { l -> (GioHandle?, DispatchSemaphore?) in defer { l = (nil, nil) }; return (l.handle, l.done) }
        guard let handle, let done else { return }
        sk_gio_listen_stop(handle.raw)
        done.wait()
        sk_gio_listen_free(handle.raw)
    }

    private func invoked(id: UInt32, action: String) {
        guard action == "default", let n = shown.withLock({ $0[id] }) else { return }
        onAction(n)
    }
}

/// A GIO handle shared between threads.
private struct GioHandle: @unchecked Sendable {
    // @unchecked: a GDBusConnection is thread-safe (GIO documents it so); a listener handle is run
    // on one thread and, from another, only stopped (an atomic flag and a main-context wakeup, both
    // thread-safe) and freed after that thread has finished.
    let raw: OpaquePointer
    init(_ raw: OpaquePointer) { self.raw = raw }
}

/// Prints reminders (where no notification service answers): one line each.
public struct PrintingNotifier: NotificationSink {
    private let write: @Sendable (String) -> Void
    public init(write: @escaping @Sendable (String) -> Void) { self.write = write }
    public func deliver(_ n: DesktopNotification) throws(DeliveryError) {
        write("reminder\(n.late ? " (late)" : ""): \(n.title): \(n.body)\(n.url.map { " <\($0)>" } ?? "")")
    }
}

/// The desktop's notifications, else the terminal: a reminder that the service cannot show is printed.
public struct FallbackNotifier: NotificationSink {
    public let primary: any NotificationSink
    public let fallback: any NotificationSink
    private let note: @Sendable (String) -> Void
    public init(primary: any NotificationSink, fallback: any NotificationSink, note: @escaping @Sendable (String) -> Void = { _ in }) {
        self.primary = primary; self.fallback = fallback; self.note = note
    }
    public func deliver(_ n: DesktopNotification) throws(DeliveryError) {
        do { try primary.deliver(n) } catch {
            note("no desktop notification (\(error.reason)); printing the reminder instead")
            try fallback.deliver(n)
        }
    }
}
