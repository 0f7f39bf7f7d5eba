import CWebKitGTK

// Swift's side of the C shims: boxes that carry a Swift closure through a C context pointer,
// released by GLib's destroy notify when the handler goes. Every callback runs on GTK's main
// thread (the only thread that touches GTK or WebKit objects), so it enters the main actor with
// `MainActor.assumeIsolated`.

/// A retained closure passed as a C context pointer.
final class Callback<F>: @unchecked Sendable {
    // @unchecked: created and called on the main thread only.
    let fn: F
    init(_ fn: F) { self.fn = fn }
    var retained: UnsafeMutableRawPointer { Unmanaged.passRetained(self).toOpaque() }
    static func from(_ p: UnsafeMutableRawPointer?) -> F { Unmanaged<Callback<F>>.fromOpaque(p!).takeUnretainedValue().fn }
}

/// GLib's destroy notify for a ``Callback`` context: releases it.
let releaseCallback: skb_destroy_fn = { context, _ in
    if let context { Unmanaged<AnyObject>.fromOpaque(context).release() }
}

typealias VoidHandler = @MainActor () -> Void
typealias BoolHandler = @MainActor () -> Bool

@MainActor
enum Signal {
    static func void(_ instance: UnsafeMutableRawPointer, _ name: String, _ fn: @escaping VoidHandler) {
        _ = skb_connect_void(instance, name, { _, ctx in
            let f = Callback<VoidHandler>.from(ctx)
            MainActor.assumeIsolated { f() }
        }, Callback(fn).retained, releaseCallback)
    }

    static func bool(_ instance: UnsafeMutableRawPointer, _ name: String, _ fn: @escaping BoolHandler) {
        _ = skb_connect_bool(instance, name, { _, ctx in
            let f = Callback<BoolHandler>.from(ctx)
            return MainActor.assumeIsolated { f() } ? 1 : 0
        }, Callback(fn).retained, releaseCallback)
    }

    static func notify(_ instance: UnsafeMutableRawPointer, _ property: String, _ fn: @escaping VoidHandler) {
        _ = skb_connect_notify(instance, "notify::" + property, { _, _, ctx in
            let f = Callback<VoidHandler>.from(ctx)
            MainActor.assumeIsolated { f() }
        }, Callback(fn).retained, releaseCallback)
    }
}

/// A web view's signals, each to a Swift closure (a tab's and a prefetch's views use them alike).
@MainActor
enum ViewSignal {
    typealias Load = @MainActor (WebKitLoadEvent) -> Void
    /// (failing URI, error) -> handled
    typealias Failed = @MainActor (String?, UnsafeMutablePointer<GError>?) -> Bool
    /// (decision, type) -> handled
    typealias Decide = @MainActor (UnsafeMutablePointer<WebKitPolicyDecision>?, WebKitPolicyDecisionType) -> Bool
    typealias Resource = @MainActor (OpaquePointer?) -> Void

    static func loadChanged(_ view: UnsafeMutablePointer<WebKitWebView>, _ fn: @escaping Load) {
        _ = skb_connect_load_changed(view, { _, event, ctx in
            let f = Callback<Load>.from(ctx)
            MainActor.assumeIsolated { f(event) }
        }, Callback(fn).retained, releaseCallback)
    }

    static func loadFailed(_ view: UnsafeMutablePointer<WebKitWebView>, _ fn: @escaping Failed) {
        _ = skb_connect_load_failed(view, { _, _, uri, error, ctx in
            let f = Callback<Failed>.from(ctx)
            return MainActor.assumeIsolated { f(string(uri), error) } ? 1 : 0
        }, Callback(fn).retained, releaseCallback)
    }

    static func decidePolicy(_ view: UnsafeMutablePointer<WebKitWebView>, _ fn: @escaping Decide) {
        _ = skb_connect_decide_policy(view, { _, decision, type, ctx in
            let f = Callback<Decide>.from(ctx)
            return MainActor.assumeIsolated { f(decision, type) } ? 1 : 0
        }, Callback(fn).retained, releaseCallback)
    }

    static func resourceLoadStarted(_ view: UnsafeMutablePointer<WebKitWebView>, _ fn: @escaping Resource) {
        _ = skb_connect_resource_load_started(view, { _, resource, _, ctx in
            let f = Callback<Resource>.from(ctx)
            MainActor.assumeIsolated { f(resource) }
        }, Callback(fn).retained, releaseCallback)
    }
}

/// Runs `work` on GTK's main loop (from any thread).
func onMainLoop(_ work: @escaping @MainActor @Sendable () -> Void) {
    let box = Callback<@MainActor @Sendable () -> Void>(work)
    skb_idle_add({ ctx in
        let b = Unmanaged<Callback<@MainActor @Sendable () -> Void>>.fromOpaque(ctx!).takeRetainedValue()
        MainActor.assumeIsolated { b.fn() }
    }, box.retained)
}

/// Runs `work` every `ms` milliseconds on the main loop while it returns true.
@MainActor
func every(milliseconds ms: UInt32, _ work: @escaping @MainActor () -> Bool) {
    let box = Callback<@MainActor () -> Bool>(work)
    _ = skb_timeout_add(ms, { ctx in
        let b = Unmanaged<Callback<@MainActor () -> Bool>>.fromOpaque(ctx!)
        let again = MainActor.assumeIsolated { b.takeUnretainedValue().fn() }
        if !again { b.release() }
        return again ? 1 : 0
    }, box.retained)
}

/// Runs `work` once after `ms` milliseconds on the main loop.
@MainActor
func after(milliseconds ms: UInt32, _ work: @escaping @MainActor () -> Void) {
    every(milliseconds: ms) { work(); return false }
}

/// A C string from GLib as a Swift string (nil stays nil).
func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }

/// Takes ownership of a GLib-allocated string.
func takeString(_ p: UnsafeMutablePointer<CChar>?) -> String? {
    guard let p else { return nil }
    defer { g_free(p) }
    return String(cString: p)
}

/// The JSON text of a JavaScript value (`undefined` → nil).
func jsonText(_ value: OpaquePointer?) -> String? {
    guard let value else { return nil }
    if jsc_value_is_undefined(value) != 0 { return nil }
    return takeString(jsc_value_to_json(value, 0))
}

/// The text of a JavaScript string value.
func text(_ value: OpaquePointer?) -> String? {
    guard let value, jsc_value_is_string(value) != 0 else { return nil }
    return takeString(jsc_value_to_string(value))
}

/// A GError's message, freeing it.
func message(_ error: UnsafeMutablePointer<GError>?) -> String {
    guard let error else { return "unknown error" }
    defer { g_error_free(error) }
    return String(cString: error.pointee.message)
}

/// SHA-256 of `bytes` as lower-case hex (GLib's GChecksum: the browser links no crypto library).
@Sendable func sha256Hex(_ bytes: [UInt8]) -> String {
    bytes.withUnsafeBufferPointer { b in
        takeString(g_compute_checksum_for_data(G_CHECKSUM_SHA256, b.baseAddress, gsize(b.count))) ?? ""
    }
}

/// A GObject pointer seen as one of its C struct types (what GTK's casting macros do).
func cast<T>(_ p: UnsafeMutablePointer<GtkWidget>) -> UnsafeMutablePointer<T> {
    UnsafeMutableRawPointer(p).assumingMemoryBound(to: T.self)
}
