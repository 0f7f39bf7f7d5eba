import CWebKitGTK
import Foundation
import SiteKeepBrowserCore
import SiteKeepJSON
import SiteKeepSystem

/// One app-bound site in the browser: its own WebKit network session (data and cache
/// directories inside the site's web folder, as the daemon named it), the relay and page scripts
/// built from the site's `hello`, its kept pages, and a connection of the host's own for the
/// site's session (`tabs.get|set`, `reading.get`).
///
/// Each view gets its own user content manager holding only its site's scripts: WebKit's
/// user-script allow lists ignore ports, so sites on one host cannot share one, and the script
/// message signals name no view, so a manager per view is what tells the host which view (and so
/// which site) a message came from.
@MainActor
final class SiteContext {
    let site: BrowserSite
    let session: OpaquePointer
    let host: any BridgeChannel
    let kept: KeptPageCache

    /// - Parameter note: where a refused download is reported (the window's notes).
    init(site: BrowserSite, link: any DaemonLink, keptBudget: Int64,
         note: @escaping @MainActor (String) -> Void) throws(DaemonLinkError) {
        self.site = site
        guard let origin = site.pageOrigins.first else { throw .protocolViolation("\(site.name) has no origin") }
        host = try link.open(origin: origin, onEvent: { _, _ in }, onClose: {})
        kept = KeptPageCache(folder: site.keptDirectory, budget: keptBudget, digest: sha256Hex)
        for dir in [site.dataDirectory, site.cacheDirectory] { _ = try? PrivateFolder.make(dir) }
        session = webkit_network_session_new(site.dataDirectory, site.cacheDirectory)
        Self.refuseDownloads(on: session, siteName: site.name, note: note)
    }

    /// SiteKeep's browser does not download files (docs/browser.md, "Downloads"). Every view's
    /// responses are decided explicitly (``ResponsePolicy``: an attachment or a type WebKit
    /// cannot show is refused), so no download should ever start; this is the second wall, on
    /// the session every view and prefetch of the site uses. Whatever starts a download on it
    /// (a response let through by mistake, `<a download>`, a future code path) has it
    /// cancelled at once, and its `decide-destination` refused, so WebKit's default handler
    /// (the XDG download folder, or `$HOME`) never chooses a file.
    private static func refuseDownloads(on session: OpaquePointer, siteName: String, note: @escaping @MainActor (String) -> Void) {
        typealias Started = @MainActor (OpaquePointer?) -> Void
        let onStarted: Started = { download in
            guard let download else { return }
            let url = string(skb_download_uri(download))
            skb_refuse_download(download)
            note(ResponsePolicy.downloadNote(siteName: siteName, url: url))
        }
        _ = skb_connect_download_started(session, { _, download, ctx in
            let f = Callback<Started>.from(ctx)
            MainActor.assumeIsolated { f(download) }
        }, Callback(onStarted).retained, releaseCallback)
    }

    /// A user content manager for one view of this site: the page shim (page world) and the
    /// relay (isolated world), both top frame only, and the relay's two handlers, registered in
    /// the isolated world only, whose messages go to `bridge` and `hostMessage`.
    func makeManager(bridge: @escaping @MainActor (String?, PendingReply) -> Void,
                     hostMessage: @escaping @MainActor (String?) -> Void) -> OpaquePointer {
        let manager = webkit_user_content_manager_new()!
        let shim = webkit_user_script_new(PageScripts.pageShim(site: site, version: host.version, ops: host.ops),
                                          WEBKIT_USER_CONTENT_INJECT_TOP_FRAME, WEBKIT_USER_SCRIPT_INJECT_AT_DOCUMENT_START, nil, nil)
        let relay = webkit_user_script_new_for_world(PageScripts.relay(site: site), WEBKIT_USER_CONTENT_INJECT_TOP_FRAME,
                                                     WEBKIT_USER_SCRIPT_INJECT_AT_DOCUMENT_START, PageScripts.worldName, nil, nil)
        webkit_user_content_manager_add_script(manager, shim)
        webkit_user_content_manager_add_script(manager, relay)
        webkit_user_script_unref(shim)
        webkit_user_script_unref(relay)

        typealias Bridge = @MainActor (OpaquePointer?, OpaquePointer?) -> Bool
        typealias HostMsg = @MainActor (OpaquePointer?) -> Void
        let onBridge: Bridge = { value, reply in
            guard let reply, let value, let context = jsc_value_get_context(value) else { return false }
            bridge(text(value), PendingReply(reply: reply, context: context))
            return true
        }
        _ = skb_connect_message_with_reply(manager, PageScripts.bridgeHandler, { _, value, reply, ctx in
            let f = Callback<Bridge>.from(ctx)
            return MainActor.assumeIsolated { f(value, reply) } ? 1 : 0
        }, Callback(onBridge).retained, releaseCallback)
        let onHost: HostMsg = { value in hostMessage(text(value)) }
        _ = skb_connect_message(manager, PageScripts.hostHandler, { _, value, ctx in
            let f = Callback<HostMsg>.from(ctx)
            MainActor.assumeIsolated { f(value) }
        }, Callback(onHost).retained, releaseCallback)
        _ = webkit_user_content_manager_register_script_message_handler_with_reply(manager, PageScripts.bridgeHandler, PageScripts.worldName)
        _ = webkit_user_content_manager_register_script_message_handler(manager, PageScripts.hostHandler, PageScripts.worldName)
        return manager
    }

    /// Saves the site's session (`tabs.set`); `done` runs on the main loop with the reply.
    func save(_ session: TabSession, done: (@MainActor @Sendable (PageReply) -> Void)? = nil) {
        host.send(op: "tabs.set", args: session.arguments) { reply in
            if let done { onMainLoop { done(reply) } }
        }
    }

    /// Saves and waits for the reply (at quit), at most `timeout`.
    func saveAndWait(_ session: TabSession, timeout: Double = 3) -> Bool {
        let sema = DispatchSemaphore(value: 0)
        let ok = OkBox()
        host.send(op: "tabs.set", args: session.arguments) { reply in
            ok.set(reply.json["ok"]?.boolValue == true)
            sema.signal()
        }
        return sema.wait(timeout: .now() + timeout) == .success && ok.value
    }

    /// The saved session (blocking; at launch).
    func loadSession() -> TabSession {
        let sema = DispatchSemaphore(value: 0)
        let box = ReplyBox()
        host.send(op: "tabs.get", args: .object([])) { reply in box.set(reply); sema.signal() }
        guard sema.wait(timeout: .now() + 5) == .success, let r = box.value, r.json["ok"]?.boolValue == true,
              let result = r.json["result"] else { return TabSession() }
        return TabSession(result: result, site: site)
    }

    /// The site's reading list (`reading.get`), on the main loop.
    func readingList(_ done: @escaping @MainActor @Sendable ([ReadingItem]) -> Void) {
        host.send(op: "reading.get", args: .object([])) { reply in
            let list = ReadingItem.list(from: reply)
            onMainLoop { done(list) }
        }
    }
}

extension SiteContext {
    /// The list F9 shows (``ReadingList/merge(records:kept:site:limit:)``): the site's reading
    /// records and, as unread, its kept pages with no record. The kept pages are listed off the
    /// main loop, with the daemon's reply; `done` runs on the main loop.
    func shownReadingList(_ done: @escaping @MainActor @Sendable (ReadingList) -> Void) {
        let site = site, kept = kept
        host.send(op: "reading.get", args: .object([])) { reply in
            let list = ReadingList.merge(records: ReadingItem.list(from: reply), kept: kept.keptPages().map(\.url), site: site)
            onMainLoop { done(list) }
        }
    }
}

/// A page's promise, waiting for the daemon's reply: holds WebKit's reply object and the
/// script context the answer is made in until ``answer(_:)`` (once; a second call does nothing).
@MainActor
final class PendingReply {
    private var reply: OpaquePointer?
    private let context: OpaquePointer

    init(reply: OpaquePointer, context: OpaquePointer) {
        self.reply = webkit_script_message_reply_ref(reply)
        self.context = context
        g_object_ref(UnsafeMutableRawPointer(context))
    }

    func answer(_ r: PageReply) {
        guard let reply else { return }
        self.reply = nil
        if let v = jsc_value_new_string(context, r.text) {
            webkit_script_message_reply_return_value(reply, v)
            g_object_unref(UnsafeMutableRawPointer(v))
        } else {
            webkit_script_message_reply_return_error_message(reply, "the bridge reply could not be passed to the page")
        }
        webkit_script_message_reply_unref(reply)
        g_object_unref(UnsafeMutableRawPointer(context))
    }
}

final class OkBox: @unchecked Sendable {
    // @unchecked: set before the semaphore is signalled, read after it is waited on.
    private(set) var value = false
    func set(_ v: Bool) { value = v }
}

final class ReplyBox: @unchecked Sendable {
    // @unchecked: set before the semaphore is signalled, read after it is waited on.
    private(set) var value: PageReply?
    func set(_ v: PageReply) { value = v }
}
