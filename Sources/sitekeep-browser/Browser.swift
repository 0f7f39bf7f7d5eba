import CWebKitGTK
import Foundation
import Glibc
import SiteKeepBrowserCore
import SiteKeepJSON
import SiteKeepSystem

/// What the command line asked for.
struct BrowserOptions {
    /// Pages to open (each on its app-bound site); empty: restore the saved sessions.
    var urls: [String] = []
    /// Sites to open (name, id or origin); empty with no URLs: every site with a saved session.
    var sites: [String] = []
    var keptBudget: Int64 = 256 << 20
    /// Fetch the reading list's articles for offline reading (``Prefetcher``).
    var prefetch = true
    /// How long one prefetched page may take to load, in seconds.
    var prefetchTimeout: UInt32 = 30
    /// Machine-readable events on stdout and commands on stdin (tests and scripts).
    var automation = false
    var width: Int32 = 1024
    var height: Int32 = 768
}

/// The window: a tab strip that hides while reading down (and shows on a tab switch), no address
/// bar until Ctrl+L, one key for back (Alt+Left, or WebKit's swipe gesture), F5 to reload
/// (nothing reloads on its own), F9 for the site's reading list, and the tab keys a reader
/// expects (``Keys``): Ctrl+T, Ctrl+W, Ctrl+Shift+T, Ctrl+Tab, Ctrl+Q; Ctrl+click and
/// middle-click open a link in a new tab.
@MainActor
final class Browser {
    let link: any DaemonLink
    let policy: NavigationPolicy
    let options: BrowserOptions
    var automation: Bool { options.automation }
    private let app: UnsafeMutablePointer<GtkApplication>
    private var window: UnsafeMutablePointer<GtkWidget>?
    private var notebook: UnsafeMutablePointer<GtkWidget>!
    private var addressRevealer: UnsafeMutablePointer<GtkWidget>!
    private var address: UnsafeMutablePointer<GtkWidget>!
    private var readingRevealer: UnsafeMutablePointer<GtkWidget>!
    private var readingList: UnsafeMutablePointer<GtkWidget>!
    private var contexts: [String: SiteContext] = [:]
    private(set) var tabs: [Tab] = []
    private var saveScheduled: Set<String> = []
    private var quitting = false
    /// Tabs closed with Ctrl+W, the last one last, for Ctrl+Shift+T (at most 50).
    private var closedTabs: [(site: BrowserSite, url: String, scroll: Double)] = []
    /// Key presses (not modifiers) and button presses the window received (automation: a
    /// synthesized key or click is answered once the window has it).
    private(set) var keyPressesSeen = 0
    private(set) var buttonPressesSeen = 0
    private let automationChannel: Automation?
    private var prefetcher: Prefetcher?

    init(link: any DaemonLink, sites: [BrowserSite], options: BrowserOptions) {
        self.link = link
        self.policy = NavigationPolicy(sites: sites)
        self.options = options
        app = gtk_application_new("org.sitekeep.Browser", G_APPLICATION_NON_UNIQUE)
        automationChannel = options.automation ? Automation() : nil
        Signal.void(UnsafeMutableRawPointer(app), "activate") { [unowned self] in self.activate() }
    }

    func run() -> Int32 {
        g_application_run(skb_application(UnsafeMutableRawPointer(app)), 0, nil)
    }

    func note(_ text: String) {
        FileHandle.standardError.write(Data("sitekeep-browser: \(text)\n".utf8))
        automationChannel?.emit(["event": "note", "text": .string(text)])
    }

    // MARK: - Window

    private func activate() {
        let win = gtk_application_window_new(app)!
        window = win
        gtk_window_set_title(skb_window(UnsafeMutableRawPointer(win)), "SiteKeep")
        gtk_window_set_default_size(skb_window(UnsafeMutableRawPointer(win)), options.width, options.height)

        let box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0)!
        address = gtk_entry_new()
        gtk_entry_set_placeholder_text(cast(address), "Address on one of your sites (Enter to go, Esc to close)")
        addressRevealer = gtk_revealer_new()
        gtk_revealer_set_child(OpaquePointer(addressRevealer), address)
        gtk_revealer_set_reveal_child(OpaquePointer(addressRevealer), 0)
        gtk_box_append(cast(box), addressRevealer)

        notebook = gtk_notebook_new()
        gtk_notebook_set_scrollable(OpaquePointer(notebook), 1)
        gtk_widget_set_vexpand(notebook, 1)
        gtk_widget_set_hexpand(notebook, 1)

        readingList = gtk_list_box_new()
        let scroller = gtk_scrolled_window_new()!
        gtk_scrolled_window_set_child(OpaquePointer(scroller), readingList)
        gtk_widget_set_size_request(scroller, 280, -1)
        readingRevealer = gtk_revealer_new()
        gtk_revealer_set_transition_type(OpaquePointer(readingRevealer), GTK_REVEALER_TRANSITION_TYPE_SLIDE_LEFT)
        gtk_revealer_set_child(OpaquePointer(readingRevealer), scroller)
        gtk_revealer_set_reveal_child(OpaquePointer(readingRevealer), 0)

        let row = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 0)!
        gtk_box_append(cast(row), notebook)
        gtk_box_append(cast(row), readingRevealer)
        gtk_widget_set_vexpand(row, 1)
        gtk_box_append(cast(box), row)
        gtk_window_set_child(skb_window(UnsafeMutableRawPointer(win)), box)

        Signal.void(UnsafeMutableRawPointer(address), "activate") { [unowned self] in self.addressEntered() }
        _ = skb_connect_switch_page(OpaquePointer(notebook), { _, _, _, ctx in
            let f = Callback<VoidHandler>.from(ctx)
            MainActor.assumeIsolated { f() }
        }, Callback<VoidHandler>({ [unowned self] in
            // The tab being shown is known only after the switch: look once the loop turns.
            after(milliseconds: 0) { [weak self] in
                guard let self else { return }
                self.tabShown()
                self.current?.applyPendingScroll()
                if gtk_revealer_get_reveal_child(OpaquePointer(self.readingRevealer)) != 0 { self.fillReadingList() }
            }
            self.scheduleSaveAll()
        }).retained, releaseCallback)
        installKeys(win)
        // A close request is honoured at once: the window goes, the sessions are saved, the
        // browser quits (``quit()``); TRUE only stops GTK destroying the window under the save.
        Signal.bool(UnsafeMutableRawPointer(win), "close-request") { [unowned self] in self.quit(); return true }
        _ = skb_unix_signal_add(SIGTERM, { ctx in
            MainActor.assumeIsolated { Unmanaged<Browser>.fromOpaque(ctx!).takeUnretainedValue().quit() }
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
        _ = skb_unix_signal_add(SIGINT, { ctx in
            MainActor.assumeIsolated { Unmanaged<Browser>.fromOpaque(ctx!).takeUnretainedValue().quit() }
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())

        if options.prefetch { prefetcher = Prefetcher(browser: self) }
        openInitialTabs()
        gtk_window_present(skb_window(UnsafeMutableRawPointer(win)))
        automationChannel?.start(self)
        automationChannel?.emit(["event": "ready", "tabs": .int(Int64(tabs.count))])
    }

    private func installKeys(_ win: UnsafeMutablePointer<GtkWidget>) {
        let keys = gtk_event_controller_key_new()!
        gtk_event_controller_set_propagation_phase(keys, GTK_PHASE_CAPTURE)
        typealias Key = @MainActor (UInt32, GdkModifierType) -> Bool
        let onKey: Key = { [unowned self] keyval, state in self.key(keyval, state) }
        _ = skb_connect_key_pressed(keys, { _, keyval, _, state, ctx in
            let f = Callback<Key>.from(ctx)
            return MainActor.assumeIsolated { f(keyval, state) } ? 1 : 0
        }, Callback(onKey).retained, releaseCallback)
        gtk_widget_add_controller(win, keys)
        // Sees every key and button press the window gets, before anything handles it, and
        // handles none: automation answers a synthesized key or click once it has arrived.
        if automation {
            let watch = gtk_event_controller_legacy_new()!
            gtk_event_controller_set_propagation_phase(watch, GTK_PHASE_CAPTURE)
            typealias Seen = @MainActor (OpaquePointer?) -> Void
            let onEvent: Seen = { [unowned self] event in
                guard let event else { return }
                switch gdk_event_get_event_type(event) {
                case GDK_KEY_PRESS where gdk_key_event_is_modifier(event) == 0: self.keyPressesSeen += 1
                case GDK_BUTTON_PRESS: self.buttonPressesSeen += 1
                default: break
                }
            }
            _ = skb_connect_event(watch, { _, event, ctx in
                let f = Callback<Seen>.from(ctx)
                MainActor.assumeIsolated { f(event) }
                return 0
            }, Callback(onEvent).retained, releaseCallback)
            gtk_widget_add_controller(win, watch)
        }
    }

    /// After a tab switch (Ctrl+Tab, a click on the strip, a new tab): the strip shows, the
    /// window is titled for the tab, and the page has the keyboard (not the strip, where Home
    /// and End would switch tabs), unless the address bar is up (Ctrl+T puts the focus there).
    private func tabShown() {
        showTabStrip(true)
        updateTitle()
        if gtk_revealer_get_reveal_child(OpaquePointer(addressRevealer)) == 0, let t = current { gtk_widget_grab_focus(t.widget) }
    }

    private func showTabStrip(_ show: Bool) {
        guard (gtk_notebook_get_show_tabs(OpaquePointer(notebook)) != 0) != show else { return }
        gtk_notebook_set_show_tabs(OpaquePointer(notebook), show ? 1 : 0)
        automationChannel?.emit(["event": "chrome", "tabStrip": .string(show ? "shown" : "hidden")])
    }

    /// The window's title: the shown tab's page and site, and "kept copy" when the page is shown
    /// from its kept copy (offline, or restored at launch: nothing was fetched; F5 fetches it).
    private func updateTitle() {
        guard let window else { return }
        var title = current.map { t in t.title.map { $0.isEmpty ? t.site.name : "\($0) — \(t.site.name)" } ?? t.site.name } ?? "SiteKeep"
        if current?.source == .kept { title += " · kept copy" }
        gtk_window_set_title(skb_window(UnsafeMutableRawPointer(window)), title)
    }

    var windowTitle: String {
        window.flatMap { string(gtk_window_get_title(skb_window(UnsafeMutableRawPointer($0)))) } ?? ""
    }

    private func key(_ keyval: UInt32, _ state: GdkModifierType) -> Bool {
        let ctrl = state.rawValue & GDK_CONTROL_MASK.rawValue != 0
        let alt = state.rawValue & GDK_ALT_MASK.rawValue != 0
        let shift = state.rawValue & GDK_SHIFT_MASK.rawValue != 0
        switch (keyval, ctrl, alt) {
        case (UInt32(GDK_KEY_t), true, false) where !shift:
            newTab(); return true
        case (UInt32(GDK_KEY_T), true, false), (UInt32(GDK_KEY_t), true, false):
            reopenClosedTab(); return true
        case (UInt32(GDK_KEY_q), true, false):
            quit(); return true
        case (UInt32(GDK_KEY_ISO_Left_Tab), true, false):
            switchTab(by: -1); return true
        case (UInt32(GDK_KEY_Tab), true, false) where shift:
            switchTab(by: -1); return true
        case (UInt32(GDK_KEY_l), true, false), (UInt32(GDK_KEY_L), true, false):
            showAddress(); return true
        case (UInt32(GDK_KEY_Escape), false, false) where gtk_revealer_get_reveal_child(OpaquePointer(addressRevealer)) != 0:
            hideAddress(); return true
        case (UInt32(GDK_KEY_Left), false, true), (UInt32(GDK_KEY_Back), _, _):
            current?.goBack(); return true
        case (UInt32(GDK_KEY_F5), _, _), (UInt32(GDK_KEY_r), true, false):
            current?.reload(); return true
        case (UInt32(GDK_KEY_F9), _, _):
            toggleReadingList(); return true
        case (UInt32(GDK_KEY_w), true, false):
            if let t = current { close(t) }; return true
        case (UInt32(GDK_KEY_Tab), true, false):
            switchTab(by: 1); return true
        default:
            return false
        }
    }

    private func showAddress() {
        let editable = skb_editable(UnsafeMutableRawPointer(address))
        gtk_editable_set_text(editable, current?.uri ?? "")
        gtk_revealer_set_reveal_child(OpaquePointer(addressRevealer), 1)
        gtk_widget_grab_focus(address)
        gtk_editable_select_region(editable, 0, -1)
    }

    private func hideAddress() {
        gtk_revealer_set_reveal_child(OpaquePointer(addressRevealer), 0)
        if let t = current { gtk_widget_grab_focus(t.widget) }
    }

    private func addressEntered() {
        let text = string(gtk_editable_get_text(skb_editable(UnsafeMutableRawPointer(address)))) ?? ""
        hideAddress()
        enterAddress(text)
    }

    /// What the reader typed into the address bar: the user's own navigation.
    func enterAddress(_ typed: String) {
        let text = typed.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return }
        let url = text.contains("://") || text.hasPrefix("about:") ? text : "https://" + text
        if let t = current {
            switch policy.decide(url, in: t.site) {
            case .stay: t.load(url)
            case .openSite(let s): openTab(site: s, url: url)
            case .external(let u): openExternally(u)
            case .refuse(let why): note(why)
            }
        } else if let s = policy.site(owning: url) {
            openTab(site: s, url: url)
        } else {
            openExternally(url)
        }
    }

    private func toggleReadingList() {
        let shown = gtk_revealer_get_reveal_child(OpaquePointer(readingRevealer)) != 0
        gtk_revealer_set_reveal_child(OpaquePointer(readingRevealer), shown ? 0 : 1)
        if !shown { fillReadingList() }
    }

    /// Fills the reading list panel for the tab shown. The panel is emptied first, and a reply
    /// is drawn only while its tab is still the one shown and the panel up: one site's list is
    /// never on screen over another site's tab (a tab switch fills it again).
    private func fillReadingList() {
        clearReadingList()
        guard let t = current else { return }
        t.context.shownReadingList { [weak self] list in
            guard let self, self.current === t, gtk_revealer_get_reveal_child(OpaquePointer(self.readingRevealer)) != 0 else { return }
            self.showReading(list, site: t.site)
        }
    }

    private func clearReadingList() {
        while let child = gtk_widget_get_first_child(readingList) { gtk_list_box_remove(OpaquePointer(readingList), child) }
    }

    private func showReading(_ list: ReadingList, site: BrowserSite) {
        let entries = list.items
        clearReadingList()
        let header = gtk_label_new("\(site.name): reading")!
        gtk_widget_add_css_class(header, "heading")
        gtk_list_box_append(OpaquePointer(readingList), header)
        if entries.isEmpty { gtk_list_box_append(OpaquePointer(readingList), gtk_label_new("nothing read or kept yet")) }
        let lines = entries.map(\.listLine) + (list.omitted > 0 ? ["… and \(list.omitted) more"] : [])
        for line in lines {
            let l = gtk_label_new(line)!
            gtk_label_set_xalign(OpaquePointer(l), 0)
            gtk_label_set_ellipsize(OpaquePointer(l), PANGO_ELLIPSIZE_MIDDLE)
            gtk_list_box_append(OpaquePointer(readingList), l)
        }
    }

    /// The tab strip hides while the reader scrolls down and comes back on the way up.
    func scrolled(_ tab: Tab, direction: String) {
        if tab === current {
            let shown = gtk_notebook_get_show_tabs(OpaquePointer(notebook)) != 0
            showTabStrip(direction == "up" || tab.scroll <= 0 ? true : (direction == "down" ? false : shown))
        }
        scheduleSave(tab.site)
    }

    // MARK: - Tabs

    var current: Tab? {
        let i = Int(gtk_notebook_get_current_page(OpaquePointer(notebook)))
        guard i >= 0, let page = gtk_notebook_get_nth_page(OpaquePointer(notebook), Int32(i)) else { return nil }
        return tabs.first { $0.widget == page }
    }

    private func context(for site: BrowserSite) -> SiteContext? {
        if let c = contexts[site.id] { return c }
        do {
            let c = try SiteContext(site: site, link: link, keptBudget: options.keptBudget) { [weak self] text in self?.note(text) }
            contexts[site.id] = c
            prefetcher?.add(c)
            return c
        } catch {
            note("\(site.name): \(error)")
            return nil
        }
    }

    @discardableResult
    func openTab(site: BrowserSite, url: String?, restoreScroll: Double? = nil, select: Bool = true) -> Tab? {
        guard let ctx = context(for: site) else { return nil }
        let tab = Tab(context: ctx, browser: self)
        tabs.append(tab)
        let index = gtk_notebook_append_page(OpaquePointer(notebook), tab.widget, tab.label)
        gtk_notebook_set_tab_reorderable(OpaquePointer(notebook), tab.widget, 1)
        showTabStrip(true)
        if select { gtk_notebook_set_current_page(OpaquePointer(notebook), index) }
        let target = url ?? site.startURL
        if let restoreScroll { tab.restore(target, scroll: restoreScroll) } else { tab.load(target) }
        scheduleSave(site)
        return tab
    }

    /// Ctrl+Tab (1), Ctrl+Shift+Tab (-1): the next or previous tab on the strip, round the ends.
    private func switchTab(by step: Int32) {
        let n = gtk_notebook_get_n_pages(OpaquePointer(notebook))
        guard n > 0 else { return }
        gtk_notebook_set_current_page(OpaquePointer(notebook), (gtk_notebook_get_current_page(OpaquePointer(notebook)) + n + step) % n)
    }

    /// Ctrl+T: a new tab on the shown tab's site (the first site when none is shown), at the
    /// front page of the origin the reader is on, with the address bar up to type where to go.
    private func newTab() {
        guard let site = current?.site ?? policy.sites.first else { return }
        openTab(site: site, url: site.frontPage(from: current?.uri))
        showAddress()
    }

    /// Ctrl+Shift+T: the tab closed last, again, at its page and scroll position.
    private func reopenClosedTab() {
        guard let last = closedTabs.popLast() else { return }
        openTab(site: last.site, url: last.url, restoreScroll: last.scroll)
    }

    func close(_ tab: Tab) {
        guard let i = tabs.firstIndex(where: { $0 === tab }) else { return }
        closedTabs.append((tab.site, tab.uri ?? tab.site.startURL, tab.scroll))
        if closedTabs.count > 50 { closedTabs.removeFirst() }
        let n = gtk_notebook_page_num(OpaquePointer(notebook), tab.widget)
        if n >= 0 { gtk_notebook_remove_page(OpaquePointer(notebook), n) }
        tab.close()
        tabs.remove(at: i)
        scheduleSave(tab.site)
    }

    private func openInitialTabs() {
        if !options.urls.isEmpty {
            for url in options.urls {
                if let s = policy.site(owning: url) { openTab(site: s, url: url) } else { note("\(url) is not on an app-bound site; not opened") }
            }
            gtk_notebook_set_current_page(OpaquePointer(notebook), 0)
            return
        }
        let chosen: [BrowserSite] = options.sites.isEmpty ? policy.sites : policy.sites.filter { s in
            options.sites.contains { $0 == s.id || $0 == s.name || s.owns(url: $0) }
        }
        var activeIndex: Int32?
        for site in chosen {
            guard let ctx = context(for: site) else { continue }
            let session = ctx.loadSession()
            if session.tabs.isEmpty {
                if !options.sites.isEmpty { openTab(site: site, url: nil, select: false) }
                continue
            }
            for (i, t) in session.tabs.enumerated() {
                guard let tab = openTab(site: site, url: t.url, restoreScroll: t.scroll, select: false) else { continue }
                if let title = t.title { gtk_label_set_text(OpaquePointer(tab.label), title) }
                if i == session.active, activeIndex == nil { activeIndex = Int32(tabs.count - 1) }
            }
        }
        if tabs.isEmpty, let first = chosen.first ?? policy.sites.first { openTab(site: first, url: nil) }
        gtk_notebook_set_current_page(OpaquePointer(notebook), activeIndex ?? 0)
    }

    // MARK: - Sessions

    /// The session of `site` as the window shows it now.
    private func session(of site: BrowserSite) -> TabSession {
        let mine = orderedTabs().filter { $0.site.id == site.id }
        let list = mine.map { TabSession.Tab(url: $0.uri ?? site.startURL, title: $0.title, scroll: $0.scroll) }
        let active = current.flatMap { c in mine.firstIndex { $0 === c } }
        return TabSession(tabs: list, active: active)
    }

    private func orderedTabs() -> [Tab] {
        let n = Int(gtk_notebook_get_n_pages(OpaquePointer(notebook)))
        return (0..<n).compactMap { i in
            let page = gtk_notebook_get_nth_page(OpaquePointer(notebook), Int32(i))
            return tabs.first { $0.widget == page }
        }
    }

    private func scheduleSaveAll() { for c in contexts.values { scheduleSave(c.site) } }

    /// Saves `site`'s session within a second, once however many changes come.
    func scheduleSave(_ site: BrowserSite) {
        guard !quitting, saveScheduled.insert(site.id).inserted else { return }
        after(milliseconds: 1000) { [weak self] in
            guard let self, !self.quitting else { return }
            self.saveScheduled.remove(site.id)
            guard let ctx = self.contexts[site.id] else { return }
            ctx.save(self.session(of: site))
        }
    }

    func changed(_ tab: Tab) {
        if tab === current { updateTitle() }
        scheduleSave(tab.site)
    }

    func loaded(_ tab: Tab, source: PageSource) {
        if tab === current { updateTitle() }
        scheduleSave(tab.site)
        automationChannel?.emit(["event": "loaded", "tab": .int(Int64(tabs.firstIndex { $0 === tab } ?? -1)),
                                 "site": .string(tab.site.name), "url": .string(tab.uri ?? ""),
                                 "source": .string(source.rawValue), "scroll": .double(tab.scroll)])
    }

    func kept(_ tab: Tab, url: String) {
        automationChannel?.emit(["event": "kept", "tab": .int(Int64(tabs.firstIndex { $0 === tab } ?? -1)), "url": .string(url)])
    }

    /// Quits (Ctrl+Q, a close request, SIGTERM): the window goes at once, then every site's
    /// session is saved as the window showed it (the daemon's answer awaited, 3 s at most each)
    /// and the browser ends. Once: a second request while saving finds `quitting` set. The
    /// window is hidden before the saves, so a close is seen honoured the moment it is asked,
    /// however long the daemon takes; a session save already on its way is answered by the
    /// daemon in turn, and a scheduled one is not sent.
    func quit() {
        guard !quitting else { return }
        quitting = true
        let sessions = contexts.values.map { ($0, session(of: $0.site)) }
        if let window { gtk_widget_set_visible(window, 0) }
        for (c, s) in sessions where !c.saveAndWait(s) { note("\(c.site.name): the session could not be saved") }
        for t in tabs { t.close() }
        automationChannel?.emit(["event": "quit"])
        g_application_quit(skb_application(UnsafeMutableRawPointer(app)))
    }

    // MARK: - Helpers

    func automationEmit(_ value: JSONValue) { automationChannel?.emit(value) }

    var tabStripShown: Bool { gtk_notebook_get_show_tabs(OpaquePointer(notebook)) != 0 }

    /// The index in ``tabs`` of the tab shown, if any.
    var activeIndex: Int? { current.flatMap { c in tabs.firstIndex { $0 === c } } }

    /// The address bar as the window has it (automation): revealed or not, whether the focus is
    /// in it, its text, and the selected range in characters (empty when nothing is selected).
    var addressState: JSONValue {
        let editable = skb_editable(UnsafeMutableRawPointer(address))
        var start: Int32 = 0, end: Int32 = 0
        let selected = gtk_editable_get_selection_bounds(editable, &start, &end) != 0
        // The focus is on the entry's own text widget, inside the entry.
        let focus = window.flatMap { gtk_window_get_focus(skb_window(UnsafeMutableRawPointer($0))) }
        let focused = focus.map { $0 == address || gtk_widget_is_ancestor($0, address) != 0 } ?? false
        return ["shown": .bool(gtk_revealer_get_reveal_child(OpaquePointer(addressRevealer)) != 0), "focused": .bool(focused),
                "text": .string(string(gtk_editable_get_text(editable)) ?? ""),
                "selection": selected ? [.int(Int64(start)), .int(Int64(end))] : []]
    }

    /// The reading list panel (automation): revealed or not, and the lines it shows, read off its rows.
    var readingListState: JSONValue {
        var lines: [JSONValue] = []
        var row = gtk_widget_get_first_child(readingList)
        while let r = row {
            if let text = string(skb_label_text(r)) { lines.append(.string(text)) }
            row = gtk_widget_get_next_sibling(r)
        }
        return ["shown": .bool(gtk_revealer_get_reveal_child(OpaquePointer(readingRevealer)) != 0), "lines": .array(lines)]
    }

    func select(_ index: Int) {
        guard tabs.indices.contains(index) else { return }
        let n = gtk_notebook_page_num(OpaquePointer(notebook), tabs[index].widget)
        if n >= 0 { gtk_notebook_set_current_page(OpaquePointer(notebook), n) }
    }

    /// Types a key as the reader would (automation), through the X server (``skb_x11_key``):
    /// `name` is a key with modifiers, "ctrl+shift+t", "F5", "alt+left", "Home", "ctrl+tab".
    /// `done` runs with true once the window has received the key press and handled it, false
    /// when the name is not a key, the display is not X11, or nothing came within 10 s.
    func typeKey(_ name: String, done: @escaping @MainActor (Bool) -> Void) {
        guard let window, let (keyval, mods) = Self.parseKey(name) else { done(false); return }
        let before = keyPressesSeen
        guard skb_x11_key(window, keyval, mods) != 0 else { done(false); return }
        waitFor({ [weak self] in (self?.keyPressesSeen ?? .max) > before }, done: done)
    }

    /// Clicks `button` (1 primary, 2 middle) with `modifiers` ("ctrl", "shift", "alt", joined
    /// by "+") on the middle of the first element `selector` names in the shown tab's page, as
    /// a mouse would, through the X server (``skb_x11_click``). `done` runs with true once the
    /// window has received the button press.
    func click(selector: String, button: UInt32, modifiers: String, done: @escaping @MainActor (Bool) -> Void) {
        guard let tab = current, let window, let mods = Self.parseModifiers(modifiers) else { done(false); return }
        let where_ = "(() => { const e = document.querySelector(\(JSONSerializer.string(.string(selector)))); if (!e) return null; "
            + "e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        evaluate(tab, where_, world: PageScripts.worldName) { [weak self] json in
            guard let self, self.current === tab, let json, let point = try? JSONParser.parse(Array(json.utf8), limits: .document),
                  let x = point.arrayValue?.first?.doubleValue, let y = point.arrayValue?.last?.doubleValue else { done(false); return }
            let before = self.buttonPressesSeen
            guard skb_x11_click(window, tab.widget, x, y, button, mods) != 0 else { done(false); return }
            self.waitFor({ [weak self] in (self?.buttonPressesSeen ?? .max) > before }, done: done)
        }
    }

    /// Clicks the label of tab `index` on the tab strip with the primary button, as a mouse
    /// would (automation); `done` runs with true once the window has received the press.
    func clickTabLabel(_ index: Int, done: @escaping @MainActor (Bool) -> Void) {
        guard window != nil, tabs.indices.contains(index), tabStripShown else { done(false); return }
        // A strip shown a moment ago is laid out at the next frame (later on a busy machine):
        // the click waits for the label to have its place, or it lands where the label is not.
        // The label is looked up each time: the tab may close meanwhile.
        let placedLabel: @MainActor () -> UnsafeMutablePointer<GtkWidget>? = { [weak self] in
            guard let self, self.tabs.indices.contains(index) else { return nil }
            let label = self.tabs[index].label
            return gtk_widget_get_mapped(label) != 0 && gtk_widget_get_width(label) > 0 ? label : nil
        }
        waitFor({ placedLabel() != nil }) { [weak self] placed in
            guard let self, placed, let window = self.window, let label = placedLabel() else { done(false); return }
            let before = self.buttonPressesSeen
            let x = Double(gtk_widget_get_width(label)) / 2, y = Double(gtk_widget_get_height(label)) / 2
            guard skb_x11_click(window, label, x, y, 1, GdkModifierType(rawValue: 0)) != 0 else { done(false); return }
            self.waitFor({ [weak self] in (self?.buttonPressesSeen ?? .max) > before }, done: done)
        }
    }

    /// Asks the window to close as a window manager does (automation): WM_DELETE_WINDOW
    /// through the X server.
    func requestClose() -> Bool {
        guard let window else { return false }
        return skb_x11_close(window) != 0
    }

    /// Calls `done(true)` once `condition` holds (looked at every 10 ms), `done(false)` after 10 s.
    private func waitFor(_ condition: @escaping @MainActor () -> Bool, done: @escaping @MainActor (Bool) -> Void) {
        let deadline = Clocks.monotonicNow().advanced(by: .seconds(10))
        every(milliseconds: 10) {
            if condition() { done(true); return false }
            if Clocks.monotonicNow() >= deadline { done(false); return false }
            return true
        }
    }

    /// A key name ("ctrl+shift+t", "F5", "Home") as an X keysym (GDK keyvals are X keysyms,
    /// letters lower case: Shift is pressed as a modifier) and its modifiers.
    static func parseKey(_ name: String) -> (UInt32, GdkModifierType)? {
        var parts = name.split(separator: "+").map(String.init)
        guard let key = parts.popLast(), !key.isEmpty, let mods = parseModifiers(parts.joined(separator: "+")) else { return nil }
        let spellings = key.count == 1 ? [key.lowercased()] : [key, key.prefix(1).uppercased() + key.dropFirst().lowercased(), key.uppercased()]
        for s in spellings {
            let keyval = gdk_keyval_from_name(s)
            if keyval != UInt32(GDK_KEY_VoidSymbol), keyval != 0 { return (keyval, mods) }
        }
        return nil
    }

    static func parseModifiers(_ text: String) -> GdkModifierType? {
        var mask: UInt32 = 0
        for m in text.lowercased().split(separator: "+") {
            switch m {
            case "ctrl", "control": mask |= GDK_CONTROL_MASK.rawValue
            case "shift": mask |= GDK_SHIFT_MASK.rawValue
            case "alt": mask |= GDK_ALT_MASK.rawValue
            default: return nil
            }
        }
        return GdkModifierType(rawValue: mask)
    }

    /// Where the keyboard is (automation): "page" (the shown tab's view), "address", "strip"
    /// (the tab strip), "other" or "none".
    var focusState: String {
        guard let window, let focus = gtk_window_get_focus(skb_window(UnsafeMutableRawPointer(window))) else { return "none" }
        if let t = current, focus == t.widget || gtk_widget_is_ancestor(focus, t.widget) != 0 { return "page" }
        if focus == address || gtk_widget_is_ancestor(focus, address) != 0 { return "address" }
        if focus == notebook || gtk_widget_is_ancestor(focus, notebook) != 0 { return "strip" }
        return "other"
    }

    /// Opens `url` in the system's browser (`xdg-open`), never through a shell.
    func openExternally(_ url: String) {
        automationChannel?.emit(["event": "external", "url": .string(url)])
        guard let xdgOpen = ChildProcess.locate("xdg-open", path: ProcessInfo.processInfo.environment["PATH"]) else {
            note("cannot run xdg-open for \(url): it is not on PATH (install xdg-utils)"); return
        }
        let child: ChildProcess
        do {
            child = try ChildProcess.spawn(xdgOpen, arguments: [url], stdin: .inherit, stdout: .inherit, stderr: .inherit, ownProcessGroup: false)
        } catch {
            note("cannot run xdg-open for \(url): \(error.cause) (install xdg-utils)"); return
        }
        // Reap it without blocking the window.
        Thread.detachNewThread { _ = child.wait() }
    }

    /// Evaluates `script` in `tab` (`world` nil: the page's own) and passes the result as JSON text.
    func evaluate(_ tab: Tab, _ script: String, world: String?, done: @escaping @MainActor (String?) -> Void) {
        evaluateValue(tab, script, world: world) { value in done(jsonText(value)) }
    }

    private func evaluateValue(_ tab: Tab, _ script: String, world: String?, done: @escaping @MainActor (OpaquePointer?) -> Void) {
        runScript(in: tab.view, script, world: world, done: done)
    }

    /// A PNG of the whole window.
    func screenshot(_ path: String) -> Bool {
        guard let window else { return false }
        return skb_widget_png(window, path) != 0
    }
}
