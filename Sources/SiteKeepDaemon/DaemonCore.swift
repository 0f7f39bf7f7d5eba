import Dispatch
import Synchronization
import SiteKeepBridge
import SiteKeepWiring
import SiteKeepCore
import SiteKeepDesktop
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepVocabulary

/// The daemon's native core: delivers every site's reminders as desktop notifications at their
/// time (``DeliveryLoop``), re-plans when a site's picks or leads change, keeps the "what is
/// next" snapshot current, and turns a notification's default action into `notify.opened` for
/// the site's host.
final class DaemonCore: Sendable {
    let state: CoreStateDirectory
    let registry: SiteRegistry
    let access: PartitionAccess
    private let loop = Mutex<DeliveryLoop?>(nil)
    private let dispatcher = Mutex<BridgeDispatcher?>(nil)
    private let notifier = Mutex<FreedesktopNotifier?>(nil)
    /// Where reminders go once started (the desktop's notifications, else the log): lane
    /// notices take the same path (``notify(_:)``).
    private let sink = Mutex<(any NotificationSink)?>(nil)

    init(home: String, registry: SiteRegistry, access: PartitionAccess) {
        state = CoreStateDirectory(home: home)
        self.registry = registry
        self.access = access
        // A removed site (by `site remove` in this daemon or in another process) is forgotten at
        // once, as its connections are refused at once. On a queue: the registry tells from
        // inside its callers' locks.
        registry.onSiteRemoved { [weak self] id in
            guard let core = self else { return }
            DispatchQueue.global().async { core.forget(siteID: id.string) }
        }
    }

    /// Re-plan now (picks or leads changed).
    func replan() { loop.withLock { $0 }?.replan() }

    /// Forgets a removed site: its core folder is deleted (again, should a call in flight have
    /// written there after `site remove` deleted it) and a round runs now, so its reminders are
    /// no longer pending and "what is next" no longer shows its items.
    func forget(siteID: String) {
        try? state.removeSite(siteID)
        replan()
    }

    /// Every site whose partition opens: its picks, agenda and leads.
    func inputs() -> [(BridgeSite, ReminderInput)] {
        var out: [(BridgeSite, ReminderInput)] = []
        for s in registry.sites() {
            let b = BridgeSite(id: s.id.string, name: s.displayName, origins: s.origins.map(\.serialized), isAppBound: s.isAppBound)
            guard let (schedule, agenda) = try? access.coreInputs(b), !(schedule.picks.isEmpty && agenda.items.isEmpty) else { continue }
            let policy = (try? state.reminderPolicy(site: b.id)) ?? .standard
            out.append((b, ReminderInput(siteID: b.id, schedule: schedule, agenda: agenda, policy: policy)))
        }
        // The reminders set by hand ('sitekeep remind add'), delivered as one more site's.
        if let mine = try? state.adHocReminders().input {
            out.append((BridgeSite(id: AdHocReminders.siteID, name: "reminders", origins: [], isAppBound: false), mine))
        }
        return out
    }

    /// Starts delivering. - Parameter note: where the daemon's messages go (the daemon's log).
    func start(dispatcher d: BridgeDispatcher, environment: [String: String], note: @escaping @Sendable (String) -> Void) {
        dispatcher.withLock { $0 = d }
        let printed = PrintingNotifier { note("\($0)") }
        let sink: any NotificationSink
        if environment["SITEKEEP_NOTIFY"] == "print" {
            sink = printed
        } else {
            let desktop = FreedesktopNotifier { [weak self] n in self?.opened(n) }
            desktop.startListening()
            notifier.withLock { $0 = desktop }
            sink = FallbackNotifier(primary: desktop, fallback: printed, note: { note("\($0)") })
        }
        self.sink.withLock { $0 = sink }
        let names = Mutex<[String: String]>([:])
        let deliverer = ReminderDeliverer(ledger: FileDeliveryLedger(path: state.deliveredLedger), sink: sink, clock: SystemClock())
        let state = self.state
        let latest = Mutex<[NextSnapshot.Source]>([])
        let l = DeliveryLoop(deliverer: deliverer, inputs: { [weak self] in
            let all = self?.inputs() ?? []
            names.withLock { n in for (b, _) in all { n[b.id] = b.name } }
            latest.withLock { $0 = all.map { NextSnapshot.Source(siteName: $0.0.name, schedule: $0.1.schedule, agenda: $0.1.agenda) } }
            return all.map(\.1)
        }, onRound: { result in
            switch result {
            case .success(let round):
                for n in round.delivered { note("reminder \(n.late ? "(late) " : "")\(n.key): \(n.title)") }
                for f in round.failed { note("reminder \(f.key) not shown: \(f.reason)") }
                let sources = latest.withLock { $0 }
                do {
                    try CoreFiles.ensureDirectory(state.root)
                    let pending = round.pending.values.reduce(0) { $0 + $1.count }
                    try NextSnapshotStore(path: state.nextSnapshot).write(NextSnapshot.build(sources, now: SystemClock().now(), lastSync: nil,
                                                                                              extraBadges: ["reminders": pending]))
                } catch { note("the what-is-next snapshot was not written: \(error)") }
            case .failure(let e):
                note("reminders stopped for this round: \(e)")
            }
        })
        do { try CoreFiles.ensureDirectory(state.root) } catch { note("\(error)") }
        loop.withLock { $0 = l }
        l.start()
    }

    /// Shows `n` as reminders are shown (the desktop's Notifications, else the log); false
    /// when the core has not started or nothing could show it.
    func notify(_ n: DesktopNotification) -> Bool {
        guard let sink = sink.withLock({ $0 }) else { return false }
        do { try sink.deliver(n) } catch { return false }
        return true
    }

    /// The user took a reminder's default action: tell the site's hosts to open its page.
    private func opened(_ n: DesktopNotification) {
        guard let url = n.url, let d = dispatcher.withLock({ $0 }) else { return }
        d.broadcast("notify.opened", data: ["id": .string(n.key), "title": .string(n.title), "url": .string(url)], siteID: n.siteID)
    }

    func stop() {
        loop.withLock { l in defer { l = nil }; return l }?.stop()
        sink.withLock { $0 = nil }
        notifier.withLock { n in defer { n = nil }; return n }?.stopListening()
    }
}
