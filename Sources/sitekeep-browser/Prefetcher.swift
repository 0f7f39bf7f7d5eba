import CWebKitGTK
import Foundation
import SiteKeepBrowserCore
import SiteKeepJSON
import SiteKeepVocabulary

/// Keeps the reading list for offline reading: for each site the window has open, the articles
/// of its reading list (`reading.get`) not read and not kept yet are fetched in the background
/// and kept like an opened page (``PageKeeper``), so they can be read offline though never opened.
///
/// A round runs 2 s after a site's first view opens, every 15 minutes, and when the network
/// comes back (GLib's network monitor). Its bounds:
/// - only the site's own pages: ``PrefetchPlan`` refuses list entries on other origins, and the
///   hidden view refuses any navigation or redirect off the site (frames included);
/// - at most ``PrefetchPlan/limit`` pages a round, ``concurrency`` at a time, each given
///   `--prefetch-timeout` (30 s; a page that never ends is stopped and dropped) and at most
///   ``maximumPage`` bytes by its declared length;
/// - within the kept-page budget: a prefetch never drops a kept page, and the round stops when
///   the budget is reached;
/// - offline (a page that cannot be reached), the round stops fetching from that origin.
///
/// The pages are loaded in views of their own that are never shown, on the site's network
/// session (its cookies), with the page's scripts off (`enable-javascript-markup`: nothing of
/// the page runs unseen) and no bridge (no page scripts of the host): no visible view is
/// reloaded or touched.
@MainActor
final class Prefetcher {
    /// Pages fetched at once, over all sites (each is a web process while it loads).
    static let concurrency = 2
    /// The largest page taken, by its declared length.
    static let maximumPage: Int64 = 16 << 20
    /// How often the lists are looked at again.
    static let interval: UInt32 = 15 * 60_000

    private struct Job {
        let context: SiteContext
        let url: String
    }

    private struct Round {
        var plan: PrefetchPlan
        var kept = 0
        var skipped = 0
        var stopped: String?
    }

    private unowned let browser: Browser
    private var queue: [Job] = []
    private var running: [HiddenLoad] = []
    private var rounds: [String: Round] = [:]
    private var contexts: [String: SiteContext] = [:]

    init(browser: Browser) {
        self.browser = browser
        every(milliseconds: Self.interval) { [weak self] in
            guard let self else { return false }
            self.startAll()
            return true
        }
        if let monitor = g_network_monitor_get_default() {
            typealias Changed = @MainActor (Bool) -> Void
            let onChange: Changed = { [weak self] available in if available { self?.startAll() } }
            _ = skb_connect_network_changed(monitor, { _, available, ctx in
                let f = Callback<Changed>.from(ctx)
                MainActor.assumeIsolated { f(available != 0) }
            }, Callback(onChange).retained, releaseCallback)
        }
    }

    /// A site's first view opened: its round starts in 2 s (after the view's own page).
    func add(_ context: SiteContext) {
        guard contexts[context.site.id] == nil else { return }
        contexts[context.site.id] = context
        after(milliseconds: 2000) { [weak self] in self?.start(context) }
    }

    private func startAll() { for c in contexts.values { start(c) } }

    /// Starts a round for the site of `context` unless one is running.
    private func start(_ context: SiteContext) {
        let site = context.site
        guard rounds[site.id] == nil else { return }
        rounds[site.id] = Round(plan: .empty)
        context.readingList { [weak self] items in
            guard let self else { return }
            let plan = PrefetchPlan.make(items, site: site) { context.kept.contains(url: $0) }
            self.rounds[site.id]?.plan = plan
            for id in plan.refused {
                self.browser.note("\(site.name): the reading list names \(id), which is not on \(site.name); it is not fetched")
            }
            self.queue += plan.urls.map { Job(context: context, url: $0) }
            self.pump()
            self.finishIfDone(site)
        }
    }

    private func pump() {
        while running.count < Self.concurrency, !queue.isEmpty {
            let job = queue.removeFirst()
            let load = HiddenLoad(context: job.context, url: job.url, policy: browser.policy,
                                  timeout: browser.options.prefetchTimeout) { [weak self] load, outcome in
                self?.finished(load, outcome)
            }
            running.append(load)
            load.start()
        }
    }

    private func finished(_ load: HiddenLoad, _ outcome: HiddenLoad.Outcome) {
        running.removeAll { $0 === load }
        let site = load.context.site
        switch outcome {
        case .kept:
            rounds[site.id]?.kept += 1
            browser.automationEmit(["event": "prefetched", "site": .string(site.name), "url": .string(load.url)])
        case .offline(let why):
            // That origin is out of reach: its other pages wait for the next round.
            let origin = try? Origin(ofURL: load.url)
            rounds[site.id]?.stopped = "offline"
            queue.removeAll { $0.context.site.id == site.id && (try? Origin(ofURL: $0.url)) == origin }
            browser.note("\(site.name): \(load.url) could not be fetched (\(why)); the reading list is fetched again when online")
        case .full:
            rounds[site.id]?.stopped = "budget"
            queue.removeAll { $0.context.site.id == site.id }
            browser.note("\(site.name): the kept-page budget is reached; the rest of the reading list is not fetched (raise --kept-budget)")
        case .skipped(let why):
            rounds[site.id]?.skipped += 1
            browser.note("\(site.name): \(load.url) was not kept: \(why)")
        }
        pump()
        finishIfDone(site)
    }

    /// Ends the site's round once nothing of it waits or runs, and says how it went.
    private func finishIfDone(_ site: BrowserSite) {
        guard let round = rounds[site.id], !queue.contains(where: { $0.context.site.id == site.id }),
              !running.contains(where: { $0.context.site.id == site.id }) else { return }
        rounds.removeValue(forKey: site.id)
        browser.automationEmit(["event": "prefetch", "site": .string(site.name), "kept": .int(Int64(round.kept)),
                                "skipped": .int(Int64(round.skipped)), "refused": .int(Int64(round.plan.refusedCount)),
                                "deferred": .int(Int64(round.plan.deferred)),
                                "stopped": round.stopped.map { .string($0) } ?? .null])
    }
}

/// One page loaded in a view that is never shown, then kept.
@MainActor
final class HiddenLoad {
    enum Outcome {
        case kept
        /// The site cannot be reached.
        case offline(String)
        /// The kept-page budget is reached.
        case full
        /// This page is not kept (not a page, too large, too slow, left the site).
        case skipped(String)
    }

    let context: SiteContext
    let url: String
    private let policy: NavigationPolicy
    private let timeout: UInt32
    private let view: UnsafeMutablePointer<WebKitWebView>
    private var resources: [OpaquePointer] = []
    /// Whether the page's document has arrived (before that, a navigation is the page's own).
    private var committed = false
    private var done: (@MainActor (HiddenLoad, Outcome) -> Void)?
    private var site: BrowserSite { context.site }

    /// - Parameter timeout: seconds the page may take to load.
    init(context: SiteContext, url: String, policy: NavigationPolicy, timeout: UInt32, done: @escaping @MainActor (HiddenLoad, Outcome) -> Void) {
        self.context = context
        self.url = url
        self.policy = policy
        self.timeout = timeout
        self.done = done
        let settings = webkit_settings_new()!
        webkit_settings_set_enable_javascript_markup(settings, 0)
        webkit_settings_set_javascript_can_open_windows_automatically(settings, 0)
        webkit_settings_set_enable_developer_extras(settings, 0)
        webkit_settings_set_enable_media(settings, 0)
        webkit_settings_set_enable_webgl(settings, 0)
        let manager = webkit_user_content_manager_new()!
        view = skb_web_view_new(context.session, manager, settings)
        g_object_ref_sink(UnsafeMutableRawPointer(view))
        g_object_unref(UnsafeMutableRawPointer(manager))
        g_object_unref(UnsafeMutableRawPointer(settings))
        connectSignals()
    }

    func start() {
        webkit_web_view_load_uri(view, url)
        after(milliseconds: timeout * 1000) { [weak self] in
            guard let self else { return }
            self.finish(.skipped("it did not load within \(self.timeout) s"))
        }
    }

    /// Reports once, then lets the view go (after the signal that got here has returned).
    private func finish(_ outcome: Outcome) {
        guard let done else { return }
        self.done = nil
        let view = view
        let resources = resources
        self.resources.removeAll()
        after(milliseconds: 0) {
            webkit_web_view_stop_loading(view)
            for r in resources { g_object_unref(UnsafeMutableRawPointer(r)) }
            g_object_unref(UnsafeMutableRawPointer(view))
        }
        done(self, outcome)
    }

    private func connectSignals() {
        ViewSignal.loadChanged(view) { [weak self] event in
            guard let self, self.done != nil else { return }
            if event == WEBKIT_LOAD_COMMITTED { self.committed = true }
            if event == WEBKIT_LOAD_FINISHED { self.loaded() }
        }
        ViewSignal.loadFailed(view) { [weak self] _, error in
            guard let self, self.done != nil else { return true }
            if let error, error.pointee.domain == webkit_policy_error_quark() {
                self.finish(.skipped("refused: \(String(cString: error.pointee.message))"))
            } else {
                self.finish(.offline(error.map { String(cString: $0.pointee.message) } ?? "the load failed"))
            }
            return true
        }
        ViewSignal.decidePolicy(view) { [weak self] decision, type in self?.decide(decision, type) ?? false }
        ViewSignal.resourceLoadStarted(view) { [weak self] resource in
            guard let self, let resource, self.done != nil else { return }
            g_object_ref(UnsafeMutableRawPointer(resource))
            self.resources.append(resource)
        }
    }

    /// The page loaded: keep it, without dropping kept pages to make room.
    private func loaded() {
        guard let shown = string(webkit_web_view_get_uri(view)), site.owns(url: shown) else {
            finish(.skipped("it did not stay on \(site.name)")); return
        }
        PageKeeper.keep(view: view, url: url, title: string(webkit_web_view_get_title(view)), resources: resources,
                        into: context.kept, makeRoom: false, current: { [weak self] in self?.done != nil }) { [weak self] outcome in
            switch outcome {
            case .kept: self?.finish(.kept)
            case .failed(.full): self?.finish(.full)
            case .failed(let e): self?.finish(.skipped("\(e)"))
            case .notAPage: self?.finish(.skipped("it is not an HTML page that loaded"))
            case .dropped: break
            }
        }
    }

    /// Every navigation of this view, redirects and frames included, stays on the site; no new
    /// windows; the page itself must be a page WebKit shows, of at most ``Prefetcher/maximumPage``
    /// bytes; a frame's document that is not a page (an attachment) is refused, never downloaded.
    private func decide(_ decision: UnsafeMutablePointer<WebKitPolicyDecision>?, _ type: WebKitPolicyDecisionType) -> Bool {
        guard let decision else { return false }
        let specific = OpaquePointer(decision)
        switch type {
        case WEBKIT_POLICY_DECISION_TYPE_NAVIGATION_ACTION, WEBKIT_POLICY_DECISION_TYPE_NEW_WINDOW_ACTION:
            let target = webkit_navigation_policy_decision_get_navigation_action(specific)
                .flatMap { string(webkit_uri_request_get_uri(webkit_navigation_action_get_request($0))) }
            if type == WEBKIT_POLICY_DECISION_TYPE_NAVIGATION_ACTION, let target, policy.decide(target, in: site) == .stay { return false }
            webkit_policy_decision_ignore(decision)
            // Before the page's document arrives a navigation is the page's own (its address or
            // a redirect): refused, the page ends here. After, it is a frame's: only it is refused.
            if type == WEBKIT_POLICY_DECISION_TYPE_NAVIGATION_ACTION, !committed {
                finish(.skipped("it leads off \(site.name) (to \(target ?? "an address without a URL"))"))
            }
            return true
        case WEBKIT_POLICY_DECISION_TYPE_RESPONSE:
            // Decided here, never by WebKit's default (which downloads attachments): a frame's
            // document is shown only when it is a page (``FrameResponse``), as in a tab.
            let verdict = FrameResponse.verdict(specific)
            guard FrameResponse.isMainFrame(specific) else {
                if verdict == .show { webkit_policy_decision_use(decision) } else { webkit_policy_decision_ignore(decision) }
                return true
            }
            let response = webkit_response_policy_decision_get_response(specific)
            let length = response.map { Int64(clamping: webkit_uri_response_get_content_length($0)) } ?? 0
            if verdict != .show || length > Prefetcher.maximumPage {
                webkit_policy_decision_ignore(decision)
                finish(.skipped(length > Prefetcher.maximumPage ? "it is \(length) bytes, more than \(Prefetcher.maximumPage)" : "it is not a page"))
                return true
            }
            webkit_policy_decision_use(decision)
            return true
        default:
            return false
        }
    }
}
