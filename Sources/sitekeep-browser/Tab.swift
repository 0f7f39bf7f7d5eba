import CWebKitGTK
import Foundation
import SiteKeepBrowserCore
import SiteKeepJSON
import SiteKeepSystem

/// How a tab's current page came to be shown.
enum PageSource: String {
    /// Loaded from the network.
    case network
    /// A kept copy, shown at its real URL.
    case kept
}

/// One tab: a web view of one site, on that site's network session, with its own bridge
/// connection bound to the site by the host (`hello` with the site's origin, never one the page
/// names), and its own user content manager.
@MainActor
final class Tab {
    let context: SiteContext
    unowned let browser: Browser
    let view: UnsafeMutablePointer<WebKitWebView>
    let label: UnsafeMutablePointer<GtkWidget>
    private var channel: (any BridgeChannel)?
    private(set) var source: PageSource = .network
    /// The scroll position to restore after the next load (0…1), if any.
    var pendingScroll: Double?
    /// The last scroll position the relay reported (0…1).
    var scroll: Double = 0
    /// Subresources of the page being loaded, for its kept copy.
    private var resources: [OpaquePointer] = []
    /// Bumped at every new load: work for an older page is dropped.
    private var generation = 0
    /// The last URL a navigation by the user's own gesture asked for (only such navigations may
    /// open the system browser).
    private var gestureURL: String?
    private var lastExternal = Date.distantPast

    var site: BrowserSite { context.site }
    var viewKey: UnsafeMutableRawPointer { UnsafeMutableRawPointer(view) }
    var widget: UnsafeMutablePointer<GtkWidget> { skb_widget(UnsafeMutableRawPointer(view)) }
    var uri: String? { string(webkit_web_view_get_uri(view)) }
    var title: String? { string(webkit_web_view_get_title(view)) }

    init(context: SiteContext, browser: Browser) {
        self.context = context
        self.browser = browser
        let settings = webkit_settings_new()!
        webkit_settings_set_enable_developer_extras(settings, 0)
        webkit_settings_set_javascript_can_open_windows_automatically(settings, 0)
        webkit_settings_set_enable_back_forward_navigation_gestures(settings, 1)
        if browser.automation { webkit_settings_set_enable_write_console_messages_to_stdout(settings, 1) }
        var bridgeBox: ((String?, PendingReply) -> Void)?
        var hostBox: ((String?) -> Void)?
        let manager = context.makeManager(bridge: { text, reply in bridgeBox?(text, reply) }, hostMessage: { text in hostBox?(text) })
        view = skb_web_view_new(context.session, manager, settings)
        g_object_unref(UnsafeMutableRawPointer(manager))
        g_object_unref(UnsafeMutableRawPointer(settings))
        label = gtk_label_new(context.site.name)
        gtk_label_set_ellipsize(OpaquePointer(label), PANGO_ELLIPSIZE_END)
        gtk_label_set_max_width_chars(OpaquePointer(label), 24)
        gtk_label_set_width_chars(OpaquePointer(label), 14)
        bridgeBox = { [unowned self] text, reply in self.bridgeRequest(text, reply: reply) }
        hostBox = { [unowned self] text in self.hostMessage(text) }
        connectSignals()
        openChannel()
    }

    // MARK: - Bridge

    private func openChannel() {
        guard let origin = site.pageOrigins.first else { return }
        do {
            channel = try browser.link.open(origin: origin, onEvent: { [weak self] name, data in
                onMainLoop { self?.deliver(event: name, data: data) }
            }, onClose: {})
        } catch {
            browser.note("\(site.name): no bridge connection for this tab (\(error))")
        }
    }

    /// A page's request, from the relay. Answered with the daemon's reply, or refused when the
    /// view is not on its site (the relay checks `location.origin`; the host checks the view).
    private func bridgeRequest(_ text: String?, reply: PendingReply) {
        guard let uri, site.owns(url: uri) else {
            reply.answer(.error("forbidden_origin", "this view is not on \(site.name)"))
            return
        }
        guard let text else { reply.answer(.error("bad_request", "postMessage takes an object {op, ...args}")); return }
        switch PageRequest.parse(text) {
        case .failure(let r): reply.answer(r)
        case .success(let request):
            guard let channel else { reply.answer(.error("internal", "no connection to the SiteKeep daemon")); return }
            let box = UncheckedBox(reply)
            channel.send(op: request.op, args: request.args) { r in
                onMainLoop { box.value.answer(r) }
            }
        }
    }

    /// A daemon event (`schedule.changed`, …) becomes the page's own event (`nr:schedule`).
    private func deliver(event name: String, data: JSONValue) {
        guard let uri, site.owns(url: uri), let script = PageScripts.dispatch(event: name, data: data) else { return }
        browser.evaluate(self, script, world: nil) { _ in }
    }

    private func hostMessage(_ text: String?) {
        guard let text, let m = try? JSONParser.parse(Array(text.utf8), limits: .message) else { return }
        if let s = m["scroll"]?.doubleValue, s.isFinite {
            scroll = min(1, max(0, s))
            browser.scrolled(self, direction: m["dir"]?.stringValue ?? "none")
        } else if let url = m["open"]?.stringValue {
            gestureURL = url
            navigate(to: url)
        }
    }

    // MARK: - Loading

    /// Loads `url` from the network.
    func load(_ url: String) {
        source = .network
        webkit_web_view_load_uri(view, url)
    }

    /// Shows the kept copy of `url` at its real URL; false when none is kept.
    @discardableResult
    func showKept(_ url: String) -> Bool {
        guard let page = context.kept.page(for: url) else { return false }
        source = .kept
        generation += 1
        resources.removeAll()
        // content_uri is what the view shows; base_uri is the document's own URL (its origin).
        webkit_web_view_load_alternate_html(view, String(decoding: page.document, as: UTF8.self), url, url)
        return true
    }

    /// Opens `url` at launch: the kept copy when there is one (a restored tab is not reloaded
    /// unless asked), else the network.
    func restore(_ url: String, scroll: Double) {
        pendingScroll = scroll
        self.scroll = scroll
        if showKept(url) {
            browser.note("\(site.name): \(url) is shown from its kept copy, as it was when kept; F5 fetches it again")
        } else {
            load(url)
        }
    }

    /// F5: fetch the page again from the network.
    func reload() {
        pendingScroll = scroll
        if source == .kept, let uri { load(uri) } else { source = .network; webkit_web_view_reload(view) }
    }

    func goBack() {
        if webkit_web_view_can_go_back(view) != 0 { webkit_web_view_go_back(view) }
    }

    /// Applies the navigation policy to `url` asked for in this view.
    func navigate(to url: String) {
        switch browser.policy.decide(url, in: site) {
        case .stay: load(url)
        case .openSite(let other): browser.openTab(site: other, url: url)
        case .external(let u): openExternally(u)
        case .refuse(let why): browser.note(why)
        }
    }

    /// Whether a navigation is a link clicked with the middle button, or the primary one with
    /// Ctrl held: the reader's way to open a link in a new tab.
    private static func opensInNewTab(_ action: OpaquePointer) -> Bool {
        guard webkit_navigation_action_get_navigation_type(action) == WEBKIT_NAVIGATION_TYPE_LINK_CLICKED else { return false }
        let button = webkit_navigation_action_get_mouse_button(action)
        let ctrl = webkit_navigation_action_get_modifiers(action) & GDK_CONTROL_MASK.rawValue != 0
        return button == 2 || (button == 1 && ctrl)
    }

    /// `url` in a new tab behind this one (this site's, another app-bound site's), or the
    /// system browser, as the navigation policy says.
    private func navigateInNewTab(to url: String) {
        switch browser.policy.decide(url, in: site) {
        case .stay: browser.openTab(site: site, url: url, select: false)
        case .openSite(let other): browser.openTab(site: other, url: url, select: false)
        case .external(let u): openExternally(u)
        case .refuse(let why): browser.note(why)
        }
    }

    /// Hands `url` to the system browser, only for a navigation the user asked for, at most once
    /// every two seconds (a page cannot start browsers in a loop).
    private func openExternally(_ url: String) {
        guard url == gestureURL, Date(timeIntervalSince1970: Clocks.wallSeconds()).timeIntervalSince(lastExternal) > 2 else {
            browser.note("\(site.name): a navigation to \(url) was not made by the user; not opened")
            return
        }
        gestureURL = nil
        lastExternal = Date(timeIntervalSince1970: Clocks.wallSeconds())
        browser.openExternally(url)
    }

    private func connectSignals() {
        let raw = UnsafeMutableRawPointer(view)
        ViewSignal.loadChanged(view) { [unowned self] event in self.loadChanged(event) }
        ViewSignal.loadFailed(view) { [unowned self] uri, error in self.loadFailed(uri, error) }
        ViewSignal.decidePolicy(view) { [unowned self] decision, type in self.decide(decision, type) }
        ViewSignal.resourceLoadStarted(view) { [unowned self] resource in
            if let resource, self.source == .network {
                g_object_ref(UnsafeMutableRawPointer(resource))
                self.resources.append(resource)
            }
        }

        typealias Terminated = @MainActor () -> Void
        let onTerminated: Terminated = { [unowned self] in
            // Never reload on our own: show the kept copy, or leave the view as it is.
            self.browser.note("\(self.site.name): the page's web process ended")
            if let uri = self.uri { self.showKept(uri) }
        }
        _ = skb_connect_web_process_terminated(view, { _, _, ctx in
            let f = Callback<Terminated>.from(ctx)
            MainActor.assumeIsolated { f() }
        }, Callback(onTerminated).retained, releaseCallback)

        Signal.notify(raw, "title") { [unowned self] in
            gtk_label_set_text(OpaquePointer(self.label), self.title ?? self.site.name)
            self.browser.changed(self)
        }
    }

    private func loadChanged(_ event: WebKitLoadEvent) {
        switch event {
        case WEBKIT_LOAD_STARTED:
            if source == .network {
                generation += 1
                for r in resources { g_object_unref(UnsafeMutableRawPointer(r)) }
                resources.removeAll()
            }
        case WEBKIT_LOAD_FINISHED:
            let gen = generation
            let shownFrom = source
            if pendingScroll != nil {
                // Layout settles after the load event; scroll once it has.
                after(milliseconds: 100) { [weak self] in
                    guard let self, self.generation == gen else { return }
                    self.applyPendingScroll { self.browser.loaded(self, source: shownFrom) }
                }
            } else {
                browser.evaluate(self, PageScripts.scrollPosition, world: PageScripts.worldName) { [weak self] value in
                    guard let self else { return }
                    if let v = value.flatMap(Double.init) { self.scroll = v }
                    self.browser.loaded(self, source: shownFrom)
                }
            }
            if source == .network { keepPage(generation: gen) }
        default:
            break
        }
    }

    /// Scrolls to the position being restored. Layout may not be done when the load is (and a
    /// view that is not shown has no height to scroll in), so it looks again every 100 ms, up to
    /// 3 s; a tab not shown keeps the target until ``Browser`` shows it and calls this again.
    func applyPendingScroll(attempt: Int = 0, then done: @escaping @MainActor () -> Void = {}) {
        guard let target = pendingScroll else { done(); return }
        browser.evaluate(self, PageScripts.scroll(to: target), world: PageScripts.worldName) { [weak self] value in
            guard let self, self.pendingScroll == target else { done(); return }
            let reached = value.flatMap(Double.init) ?? -1
            if reached >= 0, abs(reached - target) < 0.02 {
                self.pendingScroll = nil
                self.scroll = reached
                done()
            } else if attempt < 30, gtk_widget_get_mapped(self.widget) != 0 {
                after(milliseconds: 100) { [weak self] in self?.applyPendingScroll(attempt: attempt + 1, then: done) }
            } else {
                done()
            }
        }
    }

    /// A failed main-frame load: offline (or the site down), show the kept copy at the real URL.
    private func loadFailed(_ failing: String?, _ error: UnsafeMutablePointer<GError>?) -> Bool {
        guard let failing, site.owns(url: failing), source == .network else { return false }
        if let error, error.pointee.domain == webkit_policy_error_quark() { return false }
        if context.kept.contains(url: failing) {
            browser.note("\(site.name): \(failing) could not be loaded; showing the kept copy")
            after(milliseconds: 0) { [weak self] in self?.showKept(failing) }
            return true
        }
        return false
    }

    // MARK: - Policy

    private func decide(_ decision: UnsafeMutablePointer<WebKitPolicyDecision>?, _ type: WebKitPolicyDecisionType) -> Bool {
        guard let decision else { return false }
        let specific = OpaquePointer(decision)
        switch type {
        case WEBKIT_POLICY_DECISION_TYPE_NAVIGATION_ACTION:
            // Main frame and subframes alike (WebKitGTK does not say which), redirects included:
            // remember what the user asked for, and decide a foreign address here, before any
            // request is made in the site's session (``NavigationPolicy/decideAction``). What
            // goes on is checked again when its response arrives.
            guard let action = webkit_navigation_policy_decision_get_navigation_action(specific),
                  let url = string(webkit_uri_request_get_uri(webkit_navigation_action_get_request(action))) else { return false }
            let gesture = webkit_navigation_action_is_user_gesture(action) != 0
            if gesture { gestureURL = url }
            // Ctrl+click and middle-click on a link: the link in a new tab, this page stays.
            if Self.opensInNewTab(action) {
                webkit_policy_decision_ignore(decision)
                navigateInNewTab(to: url)
                return true
            }
            switch browser.policy.decideAction(url, in: site, userGesture: gesture) {
            case .proceed:
                return false
            case .stopHere(let verdict):
                webkit_policy_decision_ignore(decision)
                switch verdict {
                case .external(let u): openExternally(u)
                case .openSite(let other):
                    gestureURL = nil
                    browser.openTab(site: other, url: url)
                case .refuse(let why): browser.note(why)
                case .stay: break
                }
                return true
            }
        case WEBKIT_POLICY_DECISION_TYPE_NEW_WINDOW_ACTION:
            // window.open and target=_blank: never a new window; a tab of the right site, or the system browser.
            webkit_policy_decision_ignore(decision)
            if let action = webkit_navigation_policy_decision_get_navigation_action(specific),
               let url = string(webkit_uri_request_get_uri(webkit_navigation_action_get_request(action))) {
                if webkit_navigation_action_is_user_gesture(action) != 0 { gestureURL = url }
                switch browser.policy.decide(url, in: site) {
                case .stay: browser.openTab(site: site, url: url)
                case .openSite(let other): browser.openTab(site: other, url: url)
                case .external(let u): openExternally(u)
                case .refuse(let why): browser.note(why)
                }
            }
            return true
        case WEBKIT_POLICY_DECISION_TYPE_RESPONSE:
            decideResponse(decision, specific)
            return true
        default:
            return false
        }
    }

    /// A frame's response, always decided here, never left to WebKit's default (which
    /// downloads an attachment, with no click, into `$HOME`: issue 32, defect 6). A frame's
    /// document, of any origin, is shown only when ``ResponsePolicy`` says it is a page;
    /// anything else (an attachment, a type WebKit cannot show) is ignored with a note, so the
    /// browser downloads nothing. The main frame's document must also be on the view's site:
    /// another app-bound site opens in a tab of its own (only for the reader's own navigation),
    /// a foreign address goes to the system browser.
    private func decideResponse(_ decision: UnsafeMutablePointer<WebKitPolicyDecision>, _ specific: OpaquePointer) {
        let url = FrameResponse.url(specific)
        let verdict = FrameResponse.verdict(specific)
        guard FrameResponse.isMainFrame(specific) else {
            if verdict == .show {
                webkit_policy_decision_use(decision)
            } else {
                webkit_policy_decision_ignore(decision)
                browser.note(ResponsePolicy.note(siteName: site.name, url: url ?? "an unnamed address", frame: true))
            }
            return
        }
        guard let url else { webkit_policy_decision_ignore(decision); return }
        switch browser.policy.decide(url, in: site) {
        case .stay:
            if verdict == .show {
                webkit_policy_decision_use(decision)
            } else {
                webkit_policy_decision_ignore(decision)
                browser.note(ResponsePolicy.note(siteName: site.name, url: url, frame: false))
            }
        case .openSite(let other):
            webkit_policy_decision_ignore(decision)
            if url == gestureURL {
                gestureURL = nil
                browser.openTab(site: other, url: url)
            } else {
                browser.note("\(site.name): a navigation to \(other.name) was not made by the user; not opened")
            }
        case .external(let u):
            webkit_policy_decision_ignore(decision)
            openExternally(u)
        case .refuse(let why):
            webkit_policy_decision_ignore(decision)
            browser.note(why)
        }
    }

    // MARK: - Kept pages

    /// Keeps the page just loaded (``PageKeeper``).
    private func keepPage(generation gen: Int) {
        guard let url = uri, site.owns(url: url) else { return }
        PageKeeper.keep(view: view, url: url, title: title, resources: resources, into: context.kept,
                        current: { [weak self] in self?.generation == gen }) { [weak self] outcome in
            guard let self else { return }
            switch outcome {
            case .kept: self.browser.kept(self, url: url)
            case .failed(let why): self.browser.note("\(self.site.name): \(url) was not kept: \(why)")
            case .notAPage, .dropped: break
            }
        }
    }

    /// Closes the tab's connection and drops what it holds.
    func close() {
        channel?.close()
        channel = nil
        for r in resources { g_object_unref(UnsafeMutableRawPointer(r)) }
        resources.removeAll()
    }
}

/// Carries a main-thread object through a @Sendable closure that comes back to the main loop.
struct UncheckedBox<T>: @unchecked Sendable {
    // @unchecked: the value is only touched on the main thread (the closure hops back there first).
    let value: T
    init(_ value: T) { self.value = value }
}
