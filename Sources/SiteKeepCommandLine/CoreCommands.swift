import Foundation
internal import SiteKeepBridge
import SiteKeepWiring
internal import SiteKeepCore
internal import SiteKeepJSON
internal import SiteKeepPartitions
internal import SiteKeepVault
internal import SiteKeepCustody
internal import SiteKeepKeyring
internal import SiteKeepDaemon
import SiteKeepVocabulary

/// The native core's commands: `schedule`, `agenda`, `remind`, `next`, `workflow`, `inbox`, `identity`.
/// Each reads its inputs (a site's partition, the vault, the core's state files), lets the core
/// decide, and prints.
enum CoreCommands {
    static var all: [CommandSpec] {
        [scheduleList, scheduleAdd, scheduleRemove, scheduleExport, agendaList, agendaLoad, remindPlan, remindList, remindAdd, remindRemove, next,
         workflowList, workflowShow, workflowRun, inbox, identitySet]
    }

    static let siteOption = OptionSpec.option("--site", value: "ORIGIN", "the site (one of its origins, or its id)")

    /// The site of `--site`, its opened partition and the core's state folder.
    struct SiteContext {
        let store: StoreContext
        let registry: SiteRegistry
        let site: Site
        let partition: Partition
        var state: CoreStateDirectory { CoreStateDirectory(home: store.home.path) }
        var agenda: AgendaLoader { AgendaLoader(cache: PartitionAgendaCache(partition: partition)) }
    }

    static func siteContext(_ inv: Invocation) throws -> SiteContext {
        guard let name = inv.option("--site") else { throw UsageError("give --site ORIGIN", command: inv.spec.commandLine) }
        let store = try StoreContext.open(inv)
        let reg = try SiteCommands.registry(store)
        let s = try SiteCommands.site(name, in: reg, command: inv.spec.commandLine)
        if s.protection == .whenUnlocked { try store.unlockOneShot(inv) }
        return SiteContext(store: store, registry: reg, site: s, partition: try reg.openPartition(forIdentifier: s.id))
    }

    static func schedule(_ c: SiteContext) throws -> ScheduleDocument {
        guard let text = try c.partition.storage.getItem(ScheduleDocument.storageKey) else { return ScheduleDocument() }
        do { return try ScheduleDocument(text: text, path: ScheduleDocument.storageKey) } catch {
            throw CommandFailure("the site's stored schedule is refused: \(error)", remedy: "replace it with 'sitekeep site storage set' or the site's own page", code: "invalid_schedule")
        }
    }

    static func setSchedule(_ s: ScheduleDocument, _ c: SiteContext) throws {
        try c.partition.storage.setItem(ScheduleDocument.storageKey, s.text)
    }

    /// `2026-12-05 09:30 Europe/Lisbon`: every time the core's commands print names its zone.
    static func stamp(_ i: Instant, _ zone: ZoneRules) -> String { AdHocReminders.stamp(i, zone) }

    static func failure(_ e: CoreFieldError) -> CommandFailure { CommandFailure(e.description, code: "bad_request") }
    static func failure(_ e: CoreFileError) -> CommandFailure { CommandFailure("SiteKeep's state file \(e)", code: "io") }

    static func entryJSON(_ e: ScheduleEntry, zone: ZoneRules) -> JSONValue {
        var m = [JSONMember(key: "id", value: .string(e.pick.id)), JSONMember(key: "pickedAt", value: .string(e.pick.at.instant.rfc3339)),
                 JSONMember(key: "inAgenda", value: .bool(e.item != nil))]
        if let i = e.item {
            m += [JSONMember(key: "title", value: .string(i.title)), JSONMember(key: "stage", value: .string(i.stage)),
                  JSONMember(key: "start", value: .string(i.start.rfc3339)), JSONMember(key: "end", value: .string(i.end.rfc3339)),
                  JSONMember(key: "local", value: .string(zone.local(i.start).description)), JSONMember(key: "kind", value: .string(i.kind.rawValue))]
        }
        return .object(m)
    }

    // MARK: schedule

    static let scheduleList = CommandSpec(
        path: ["schedule", "list"],
        summary: "List a site's picks (nr.schedule.v1) with their agenda items; picks the agenda lacks are shown as such",
        options: [siteOption, UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep schedule list --site https://promptugal.news", "the picks, soonest first"),
                   CommandExample("sitekeep schedule list --site https://promptugal.news --json", "as JSON")]
    ) { inv in
        let c = try siteContext(inv)
        defer { c.partition.close() }
        let agenda = try c.agenda.currentOrEmpty()
        let entries = try schedule(c).entries(in: agenda)
        inv.emit(.array(entries.map { entryJSON($0, zone: agenda.zone) })) {
            entries.isEmpty ? "No picks; add one with 'sitekeep schedule add ID --site \(inv.option("--site") ?? "ORIGIN")'." :
            Table(headers: ["WHEN", "TITLE", "STAGE", "ID"], rows: entries.map { e in
                guard let i = e.item else { return ["-", "(not in the agenda)", "-", e.pick.id] }
                return [stamp(i.start, agenda.zone), i.title, i.stage ?? "-", e.pick.id]
            }).render { inv.style($0, .bold) }
        }
    }

    /// `schedule add` and `schedule remove`: one pick id, the site's schedule changed by `edit`
    /// (which says whether it changed and what to tell the user), stored when it changed.
    static func editCommand(_ verb: String, summary: String, example: CommandExample,
                            edit: @escaping @Sendable (inout ScheduleDocument, String, SiteContext) throws -> (changed: Bool, message: String)) -> CommandSpec {
        CommandSpec(
            path: ["schedule", verb], summary: summary,
            arguments: [ArgumentSpec("ID", "the agenda item's id")],
            options: [siteOption, UnlockOptions.recoveryFile],
            secretInputs: UnlockOptions.secretInputs,
            examples: [example], printsData: false
        ) { inv in
            let id = try inv.requiredArgument("ID")
            let c = try siteContext(inv)
            defer { c.partition.close() }
            // The site's vault gets the change too (agenda/picks.json): unlock before anything changes.
            let mirror = VaultPicksMirror(library: VaultCommands.library(c.store))
            let mirrored: String?
            mirrored = try mirror.vaultName(siteID: c.site.id.string)
            if mirrored != nil { try c.store.unlockOneShot(inv) }
            let old = try schedule(c)
            var s = old
            let (changed, message) = try edit(&s, id, c)
            if changed {
                try setSchedule(s, c)
                do throws(PicksMirrorError) {
                    if let vault = try mirror.mirror(old: old, new: s, siteID: c.site.id.string, now: SystemClock().now()) {
                        inv.note("Mirrored to the vault \(vault) (agenda/picks.json); the next push sends it.")
                    }
                } catch {
                    let code = if case .vault(let e) = error { e.code } else { "internal" }
                    throw CommandFailure("the schedule is stored, but not mirrored to the site's vault: \(error)", code: code)
                }
            }
            inv.say(message)
        }
    }

    static let scheduleAdd = editCommand("add", summary: "Pick an agenda item: add its id to the site's schedule",
                                         example: CommandExample("sitekeep schedule add ps26-cs-24-1000 --site https://promptugal.news --prf-file prf.bin", "pick the session ps26-cs-24-1000 (the prf unlocks the site's vault, where the picks are mirrored)")) { s, id, c in
        let added: Bool
        do throws(CoreFieldError) { added = try s.add(id: id, at: SystemClock().now()) } catch { throw failure(error) }
        let known = (try? c.agenda.currentOrEmpty().item(id: id)) ?? nil
        return (added, added ? "Picked \(id)\(known.map { ": \($0.title)" } ?? " (not in the loaded agenda)")." : "\(id) was already picked.")
    }

    static let scheduleRemove = editCommand("remove", summary: "Remove a pick from the site's schedule",
                                            example: CommandExample("sitekeep schedule remove ps26-cs-24-1000 --site https://promptugal.news --prf-file prf.bin", "unpick it")) { s, id, _ in
        let removed = s.remove(id: id)
        return (removed, removed ? "Removed \(id)." : "\(id) was not picked.")
    }

    static let scheduleExport = CommandSpec(
        path: ["schedule", "export"],
        summary: "Write the site's picks as an RFC 5545 calendar (.ics): stable UIDs, SEQUENCE bumped on change",
        discussion: """
        One VEVENT per pick the agenda knows, with DTSTART and DTEND in the agenda's zone and its \
        VTIMEZONE (times in the hour repeated when summer time ends are written in UTC), a VALARM \
        for the reminder lead, and a UID per pick and site, so importing the file again updates \
        events instead of duplicating them. Picks the agenda lacks are named on standard error.
        """,
        options: [.flag("--ics", "RFC 5545, the default and only format (may be left out)"), siteOption, .option("--output", value: "FILE", "write to FILE (default: standard output)"),
                  UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep schedule export --site https://promptugal.news", "print the calendar (iCalendar)"),
                   CommandExample("sitekeep schedule export --site https://promptugal.news --output picks.ics", "write it to picks.ics")],
        printsData: false
    ) { inv in
        let c = try siteContext(inv)
        defer { c.partition.close() }
        let agenda = try c.agenda.currentOrEmpty()
        let out: CalendarExport.Output
        do {
            var state = try c.state.calendarState(site: c.site.id)
            let policy = try c.state.reminderPolicy(site: c.site.id.string)
            let host = c.site.origins.first.map { URL(string: $0.serialized)?.host ?? c.site.id.string } ?? c.site.id.string
            out = CalendarExport.render(schedule: try schedule(c), agenda: agenda, host: host, policy: policy, state: &state,
                                        now: SystemClock().now(), name: c.site.displayName)
            try c.state.setCalendarState(state, site: c.site.id)
        } catch let e as CoreFileError { throw failure(e) }
        if let path = inv.option("--output") {
            do throws(CoreFileError) { try CoreFiles.writeAtomically(Array(out.text.utf8), to: path, mode: 0o644) } catch { throw failure(error) }
            inv.note("Wrote \(out.exported.count) events to \(path).")
        } else {
            inv.io.write(out.text)
        }
        if !out.skipped.isEmpty { inv.note("Not exported (not in the agenda): \(out.skipped.joined(separator: ", "))") }
    }

    // MARK: agenda

    static let agendaList = CommandSpec(
        path: ["agenda", "list"],
        summary: "List a site's loaded agenda: each item's id, times (with their zone), kind and whether it is picked",
        discussion: "What to choose from: pick an item with 'sitekeep schedule add ID --site ORIGIN'. Items that have ended are left out unless --all is given.",
        options: [siteOption, .flag("--all", "include the items that have ended"), .flag("--picked", "only the picked items")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep agenda list --site https://promptugal.news", "what is on, soonest first, with the ids to pick"),
                   CommandExample("sitekeep agenda list --site https://promptugal.news --json", "as JSON")]
    ) { inv in
        let c = try siteContext(inv)
        defer { c.partition.close() }
        let agenda = try c.agenda.currentOrEmpty()
        let picked = Set(try schedule(c).picks.map(\.id))
        let now = SystemClock().now()
        let items = agenda.items.filter { (inv.flag("--all") || $0.end > now) && (!inv.flag("--picked") || picked.contains($0.id)) }
        inv.emit(.array(items.map { i in
            var m = [JSONMember(key: "id", value: .string(i.id)), JSONMember(key: "title", value: .string(i.title))]
            if let stage = i.stage { m.append(JSONMember(key: "stage", value: .string(stage))) }
            m += [JSONMember(key: "kind", value: .string(i.kind.rawValue)), JSONMember(key: "start", value: .string(i.start.rfc3339)),
                  JSONMember(key: "end", value: .string(i.end.rfc3339)), JSONMember(key: "zone", value: .string(agenda.zone.identifier)),
                  JSONMember(key: "picked", value: .bool(picked.contains(i.id)))]
            return .object(m)
        })) {
            if agenda.items.isEmpty { return "No agenda loaded; load one with 'sitekeep agenda load FILE-OR-URL --site \(inv.option("--site") ?? "ORIGIN")'." }
            if items.isEmpty { return "No agenda items to show (\(agenda.items.count) in all; --all shows those that have ended)." }
            return Table(headers: ["START", "END", "TITLE", "STAGE", "KIND", "PICKED", "ID"], rows: items.map { i in
                [stamp(i.start, agenda.zone), agenda.zone.local(i.end).hourMinute, i.title, i.stage ?? "-", i.kind.rawValue,
                 picked.contains(i.id) ? "yes" : "-", i.id]
            }).render { inv.style($0, .bold) }
        }
    }

    static let agendaLoad = CommandSpec(
        path: ["agenda", "load"],
        summary: "Load a site's public agenda (a JSON file, or a URL fetched with If-None-Match) into its partition",
        discussion: "The agenda is validated before it replaces the cached one; a refusal names the bad field. URLs (https, or http to loopback) are fetched sending the cached copy's ETag, at most 16 MiB and following no redirect.",
        arguments: [ArgumentSpec("SOURCE", "an http(s) URL or a file path")],
        options: [siteOption, UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep agenda load https://promptugal.news/api/v1/agenda.json --site https://promptugal.news", "fetch and cache the agenda")],
        printsData: false
    ) { inv in
        let source = try inv.requiredArgument("SOURCE")
        let c = try siteContext(inv)
        defer { c.partition.close() }
        let now = SystemClock().now()
        if source.hasPrefix("http://") || source.hasPrefix("https://") {
            let loader = AgendaLoader(cache: PartitionAgendaCache(partition: c.partition), fetcher: HTTPAgendaFetcher())
            let (agenda, how) = try await loader.refresh(url: source, now: now)
            switch how {
            case .updated: inv.say("Loaded \(agenda.items.count) agenda items from \(source).")
            case .notModified: inv.say("The agenda at \(source) is unchanged (\(agenda.items.count) items).")
            case .stale(let why): throw CommandFailure("the agenda could not be fetched (\(why)); the cached copy (\(agenda.items.count) items) stays", code: "fetch_failed")
            }
        } else {
            let bytes = try InputFile.read(source, option: "SOURCE", limit: 16 << 20)
            let agenda = try c.agenda.load(body: bytes, source: "file:" + source, now: now)
            inv.say("Loaded \(agenda.items.count) agenda items from \(source).")
        }
    }

    // MARK: reminders

    /// Every site whose partition opens without asking (after-login, or when-unlocked once unlocked): its schedule and agenda.
    static func allInputs(_ store: StoreContext, registry: SiteRegistry, only: Site? = nil) -> [(Site, ScheduleDocument, Agenda)] {
        var out: [(Site, ScheduleDocument, Agenda)] = []
        for s in (only.map { [$0] } ?? registry.sites()) {
            guard let p = try? registry.openPartition(forIdentifier: s.id) else { continue }
            defer { p.close() }
            let c = SiteContext(store: store, registry: registry, site: s, partition: p)
            guard let sched = try? schedule(c), let agenda = try? c.agenda.currentOrEmpty() else { continue }
            out.append((s, sched, agenda))
        }
        return out
    }

    /// A pending reminder: the site's name (nil for one set by hand), the reminder, the zone it is shown in.
    typealias PendingReminder = (site: String?, reminder: Reminder, zone: ZoneRules)

    /// One row per reminder. The ID column holds the item's id: a reminder set by hand's own
    /// (what `remind remove` takes), or the agenda item's (what `schedule add|remove` take).
    static func reminderRows(_ list: [PendingReminder]) -> [[String]] {
        list.map { s, r, z in [stamp(r.fireAt, z), r.item.kind.rawValue, r.title, s ?? "-", r.item.id] }
    }

    static let reminderHeaders = ["AT", "KIND", "TITLE", "SITE", "ID"]

    static func reminderJSON(_ p: PendingReminder) -> JSONValue {
        ["site": .string(p.site), "id": .string(p.reminder.id), "item": .string(p.reminder.item.id), "title": .string(p.reminder.title),
         "kind": .string(p.reminder.item.kind.rawValue), "at": .string(p.reminder.fireAt.rfc3339), "start": .string(p.reminder.item.start.rfc3339),
         "local": .string(stamp(p.reminder.fireAt, p.zone)), "zone": .string(p.zone.identifier)]
    }

    static func pending(_ inv: Invocation, setLeads: Bool) throws -> [PendingReminder] {
        let store = try StoreContext.open(inv)
        let reg = try SiteCommands.registry(store)
        let only = try inv.option("--site").map { try SiteCommands.site($0, in: reg, command: inv.spec.commandLine) }
        let state = CoreStateDirectory(home: store.home.path)
        var out: [PendingReminder] = []
        var sources: [NextSnapshot.Source] = []
        do {
            for (s, sched, agenda) in allInputs(store, registry: reg, only: only) {
                var policy = try state.reminderPolicy(site: s.id.string)
                if setLeads {
                    if let m = inv.option("--session-lead") { policy.leads[.session] = Int64(try minutes(m, inv)) * 60_000 }
                    if let m = inv.option("--standup-lead") { policy.leads[.standup] = Int64(try minutes(m, inv)) * 60_000 }
                    try state.setReminderPolicy(policy, site: s.id.string)
                }
                let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: state.deliveredLedger), sink: PrintingNotifierStub(), clock: SystemClock(), policy: policy)
                out += try d.pending(ReminderInput(siteID: s.id.string, schedule: sched, agenda: agenda)).map { (s.displayName, $0, agenda.zone) }
                sources.append(NextSnapshot.Source(siteName: s.displayName, schedule: sched, agenda: agenda))
            }
            if only == nil {
                let mine = try state.adHocReminders()
                if let input = mine.input {
                    let d = ReminderDeliverer(ledger: FileDeliveryLedger(path: state.deliveredLedger), sink: PrintingNotifierStub(), clock: SystemClock())
                    let zones = Dictionary(mine.reminders.map { ($0.id, $0.zone) }, uniquingKeysWith: { a, _ in a })
                    out += try d.pending(input).map { (nil, $0, zones[$0.item.id] ?? input.agenda.zone) }
                }
            }
            if setLeads && only == nil {
                try CoreFiles.ensureDirectory(state.home)
                // The count is the pending list's, as `remind list` and the daemon count.
                try NextSnapshotStore(path: state.nextSnapshot).write(NextSnapshot.build(sources, now: SystemClock().now(), lastSync: nil,
                                                                                          extraBadges: ["reminders": out.count]))
            }
        } catch let e as CoreFileError { throw failure(e) }
        return out.sorted { $0.reminder.fireAt < $1.reminder.fireAt }
    }

    struct PrintingNotifierStub: NotificationSink { func deliver(_ n: DesktopNotification) throws(DeliveryError) {} }

    static func minutes(_ text: String, _ inv: Invocation) throws -> Int {
        guard let m = Int(text), (0...1440).contains(m) else { throw UsageError("a lead is 0 to 1440 minutes, not '\(text)'", command: inv.spec.commandLine) }
        return m
    }

    static let remindPlan = CommandSpec(
        path: ["remind", "plan"],
        summary: "Plan the next reminders (at most 64 per site) from the picks and agendas; set the leads",
        discussion: "A lead per kind, default 10 minutes before each picked session and each stand-up. 'sitekeep serve' delivers them as desktop notifications; this plans and shows them, and rewrites the 'what is next' snapshot.",
        options: [siteOption, .option("--session-lead", value: "MINUTES", "minutes before a picked session"),
                  .option("--standup-lead", value: "MINUTES", "minutes before a stand-up")],
        examples: [CommandExample("sitekeep remind plan", "plan every site's reminders"),
                   CommandExample("sitekeep remind plan --site https://promptugal.news --session-lead 15", "warn 15 minutes before picked sessions")]
    ) { inv in
        let list = try pending(inv, setLeads: true)
        inv.emit(.array(list.map(reminderJSON))) {
            list.isEmpty ? "No reminders to plan." : Table(headers: reminderHeaders, rows: reminderRows(list)).render { inv.style($0, .bold) }
        }
    }

    static let remindList = CommandSpec(
        path: ["remind", "list"],
        summary: "Show the reminders still pending (not yet delivered)",
        options: [siteOption],
        examples: [CommandExample("sitekeep remind list", "what will be shown, soonest first"), CommandExample("sitekeep remind list --json", "as JSON")]
    ) { inv in
        let list = try pending(inv, setLeads: false)
        inv.emit(.array(list.map(reminderJSON))) {
            list.isEmpty ? "No reminders pending." : Table(headers: reminderHeaders, rows: reminderRows(list)).render { inv.style($0, .bold) }
        }
    }

    /// The zone a time given by hand is read in: `TZ` when it names a zone, else the system's.
    static func localZone(_ inv: Invocation) -> ZoneRules {
        if let tz = inv.environment["TZ"].map({ $0.hasPrefix(":") ? String($0.dropFirst()) : $0 }), let z = ZoneRules(identifier: tz) { return z }
        return ZoneRules(identifier: TimeZone.current.identifier) ?? .utc
    }

    static let remindAdd = CommandSpec(
        path: ["remind", "add"],
        summary: "Set a reminder of your own: TEXT shown as a desktop notification at a time (--at) or after a while (--in)",
        discussion: """
        The daemon ('sitekeep serve', or the one 'sitekeep unlock' starts) shows it as it shows the \
        agenda's reminders, once, within 30 seconds of its time (late, and marked so, if no daemon \
        ran then; dropped a day after). --at takes HH:MM (the next one: today, or tomorrow once it has passed), 'YYYY-MM-DD HH:MM' (both in \
        the local zone: TZ, or the system's) or an RFC 3339 time with its offset; --in takes \
        20m, 90s, 2h, 1h30m or 1d. 'sitekeep remind list' shows it with its id; \
        'sitekeep remind remove ID' takes it back.
        """,
        arguments: [ArgumentSpec("TEXT", "what to be reminded of (one line, at most 200 bytes)")],
        options: [.option("--at", value: "TIME", "when: HH:MM (the next one), 'YYYY-MM-DD HH:MM' or RFC 3339"),
                  .option("--in", value: "DURATION", "after how long: 20m, 90s, 2h, 1h30m, 1d")],
        examples: [CommandExample("sitekeep remind add 'Stand up and stretch' --in 20m", "in twenty minutes"),
                   CommandExample("sitekeep remind add 'Call Ana' --at 09:30", "at the next 09:30 local time (tomorrow once it has passed)")]
    ) { inv in
        let text = try inv.requiredArgument("TEXT")
        let at = inv.option("--at"), after = inv.option("--in")
        guard (at == nil) != (after == nil) else {
            throw UsageError(at == nil ? "say when: --at TIME or --in DURATION" : "give --at or --in, not both", command: inv.spec.commandLine)
        }
        let zone = localZone(inv)
        let now = SystemClock().now()
        let state = CoreStateDirectory(home: inv.settings.home)
        let added: AdHocReminder
        do {
            let when = try at.map { t throws(CoreFieldError) in try ReminderTime.at(t, zone: zone, now: now) } ?? ReminderTime.after(after ?? "", now: now)
            var all = try state.adHocReminders()
            added = try all.add(text: text, at: when, zone: zone, now: now)
            try CoreFiles.ensureDirectory(state.root)
            try state.setAdHocReminders(all)
        } catch let e as CoreFieldError { throw CommandFailure(e.description, code: "bad_request") } catch let e as CoreFileError { throw failure(e) }
        inv.emit(["id": .string(added.id), "text": .string(added.text), "at": .string(added.at.rfc3339), "local": .string(stamp(added.at, zone)),
                  "zone": .string(zone.identifier)]) {
            "Reminder \(added.id) set for \(stamp(added.at, zone)): \(added.text)"
        }
        if (try? DaemonLink.find(inv)) == nil {
            inv.note("No daemon runs: the reminder is shown when one does ('sitekeep unlock' or 'sitekeep serve').")
        }
    }

    static let remindRemove = CommandSpec(
        path: ["remind", "remove"],
        summary: "Take back a reminder set with 'remind add' (its id is in 'sitekeep remind list')",
        arguments: [ArgumentSpec("ID", "the reminder's id, e.g. r1")],
        examples: [CommandExample("sitekeep remind remove r1", "the reminder r1 is not shown")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let state = CoreStateDirectory(home: inv.settings.home)
        var all: AdHocReminders
        do throws(CoreFileError) { all = try state.adHocReminders() } catch { throw failure(error) }
        guard let gone = all.remove(id: id) else {
            let ids = all.reminders.map(\.id)
            throw CommandFailure("no reminder \(id)", remedy: ids.isEmpty ? "there are none; set one with 'sitekeep remind add TEXT --in 20m'" : "the ids are \(ids.joined(separator: ", ")) ('sitekeep remind list')", code: "not_found")
        }
        do throws(CoreFileError) { try state.setAdHocReminders(all) } catch { throw failure(error) }
        inv.emit(["removed": .string(gone.id)]) { "Removed \(gone.id) (\(stamp(gone.at, gone.zone)): \(gone.text))." }
    }

    static let next = CommandSpec(
        path: ["next"],
        summary: "What is next: the next items, badge counts and the last sync (the widget's snapshot file, readable with no key)",
        options: [.flag("--refresh", "recompute the snapshot from the sites first")],
        examples: [CommandExample("sitekeep next", "the next items"), CommandExample("sitekeep next --json", "the snapshot as JSON")]
    ) { inv in
        let state = CoreStateDirectory(home: inv.settings.home)
        let store = NextSnapshotStore(path: state.nextSnapshot)
        var snap: NextSnapshot?
        do throws(CoreFileError) { snap = inv.flag("--refresh") ? nil : try store.read() } catch { throw failure(error) }
        if snap == nil {
            let ctx = try StoreContext.open(inv)
            let reg = try SiteCommands.registry(ctx)
            let sources = allInputs(ctx, registry: reg).map { NextSnapshot.Source(siteName: $0.0.displayName, schedule: $0.1, agenda: $0.2) }
            // "reminders" counts what `remind list` lists (your own included, delivered ones not),
            // as the daemon's snapshot does: one source of truth for "pending".
            let waiting = try pending(inv, setLeads: false).count
            let built = NextSnapshot.build(sources, now: SystemClock().now(), lastSync: nil, extraBadges: ["reminders": waiting])
            do throws(CoreFileError) { try store.write(built) } catch { throw failure(error) }
            snap = built
        }
        guard let snap else { return }
        inv.emit(snap.json) {
            let badges = snap.badges.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: " · ")
            let rows = snap.items.map { [$0.shownStart, $0.title, $0.stage ?? "-", $0.site] }
            return (rows.isEmpty ? "Nothing next." : Table(headers: ["AT", "TITLE", "STAGE", "SITE"], rows: rows).render { inv.style($0, .bold) })
                + "\n\(badges)" + (snap.lastSync.map { " · last sync \($0.rfc3339)" } ?? "")
        }
    }

    // MARK: workflows

    static let sourceOptions: [OptionSpec] = [siteOption, .option("--vault", value: "NAME", "the registered vault whose workflows/ to read (default: the site's vault, or the store's only one)"),
                                              .option("--dir", value: "PATH", "read workflow files from a folder instead"), UnlockOptions.recoveryFile]

    /// The site id of `--site` (nil without it).
    static func siteID(_ inv: Invocation) throws -> String? {
        guard let origin = inv.option("--site") else { return nil }
        let store = try StoreContext.open(inv)
        return try SiteCommands.site(origin, in: try SiteCommands.registry(store), command: inv.spec.commandLine).id.string
    }

    /// The vault of `--vault`/`--site` with the scope of its state.
    static func resolvedVault(_ inv: Invocation) throws -> (ResolvedVault, VaultLibrary) {
        let site = try siteID(inv)
        let library = try VaultCommands.unlockedLibrary(inv)
        do throws(VaultChoiceError) { return (try CoreVaultAccess(library: library).choose(inv.option("--vault"), siteID: site), library) } catch {
            switch error {
            case .vault(let e): throw e
            case .noVaultForSite:
                throw CommandFailure("no vault chosen: the site has no vault of its own", remedy: "give the site one vault ('sitekeep vault add NAME --path DIR --site ORIGIN'), or name one with --vault", code: "not_configured")
            case .noVaultNamed:
                throw CommandFailure("no vault chosen", remedy: "register a vault ('sitekeep vault add'), or name it with --vault", code: "not_configured")
            }
        }
    }

    static func workflowSource(_ inv: Invocation) throws -> (any WorkflowSource, CoreScope, CoreStateDirectory) {
        let state = CoreStateDirectory(home: inv.settings.home)
        if let dir = inv.option("--dir") { return (DirectoryWorkflowSource(path: dir), CoreScope(site: try siteID(inv), vault: nil), state) }
        let (r, _) = try resolvedVault(inv)
        return (VaultWorkflowSource(vault: r.vault), r.scope, state)
    }

    static func catalogue(_ inv: Invocation) throws -> (WorkflowCatalogue, CoreScope, CoreStateDirectory) {
        let (src, scope, state) = try workflowSource(inv)
        do throws(CoreFileError) { return (try WorkflowCatalogue(source: src), scope, state) } catch { throw failure(error) }
    }

    static func stepText(_ s: WorkflowStep) -> String {
        switch s {
        case .page(let url, let t): (t.map { "\($0): " } ?? "") + url
        case .query(let q, let site, let t): (t.map { "\($0): " } ?? "") + "query \(q.rawValue)" + (site.map { " on \($0)" } ?? "")
        }
    }

    static let workflowList = CommandSpec(
        path: ["workflow", "list"],
        summary: "List the reading workflows (the vault's workflows/*.json); files that do not validate are named",
        options: sourceOptions, secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep workflow list --vault notes --prf-file prf.bin", "the workflows in the vault notes")]
    ) { inv in
        let (cat, _, _) = try catalogue(inv)
        for r in cat.refused { inv.note("refused: \(r)") }
        inv.emit(.array(cat.workflows.map { ["name": .string($0.name), "title": .string($0.title), "steps": .integer($0.steps.count)] })) {
            cat.workflows.isEmpty ? "No workflows; an agent proposes one by writing workflows/NAME.json into the vault (docs/WORKFLOWS.md)." :
            Table(headers: ["NAME", "TITLE", "STEPS"], rows: cat.workflows.map { [$0.name, $0.title, String($0.steps.count)] }).render { inv.style($0, .bold) }
        }
    }

    static func named(_ inv: Invocation) throws -> (Workflow, CoreScope, CoreStateDirectory) {
        let name = try inv.requiredArgument("NAME")
        let (cat, scope, state) = try catalogue(inv)
        guard let w = cat.workflow(named: name) else {
            throw CommandFailure("no workflow \(name)", remedy: "see 'sitekeep workflow list'", code: "not_found")
        }
        return (w, scope, state)
    }

    static let workflowShow = CommandSpec(
        path: ["workflow", "show"],
        summary: "Show a workflow's steps",
        arguments: [ArgumentSpec("NAME", "the workflow's name")],
        options: sourceOptions, secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep workflow show morning --vault notes --prf-file prf.bin", "the morning run's steps")]
    ) { inv in
        let (w, _, _) = try named(inv)
        inv.emit(w.json) { "\(w.title) (\(w.name))\n" + w.steps.enumerated().map { "  \($0.offset + 1). \(stepText($0.element))" }.joined(separator: "\n") }
    }

    static let workflowRun = CommandSpec(
        path: ["workflow", "run"],
        summary: "Run a workflow as a sequence of tabs: show the current step; --next moves on",
        discussion: "The position is kept between runs (in the core state of the site that owns the vault, or of --site), so 'sitekeep workflow run morning --next' steps through the run one tab at a time; --restart starts again.",
        arguments: [ArgumentSpec("NAME", "the workflow's name")],
        options: sourceOptions + [.flag("--next", "move to the next step first"), .flag("--restart", "start again at the first step")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep workflow run morning --vault notes --prf-file prf.bin", "show the current step"),
                   CommandExample("sitekeep workflow run morning --next --vault notes --prf-file prf.bin", "next")]
    ) { inv in
        let (w, scope, state) = try named(inv)
        do {
            var run = WorkflowRun(w, position: inv.flag("--restart") ? 0 : (try state.workflowPositions(scope)[w.name] ?? 0))
            var done = false
            if inv.flag("--next") { done = !run.next() }
            try state.setWorkflowPosition(run.position, name: w.name, scope: scope)
            inv.emit(["name": .string(w.name), "position": .integer(run.position), "total": .integer(w.steps.count), "step": run.current.json, "done": .bool(done)]) {
                (done ? "The run is done (the last step stays open). " : "") + "Step \(run.position + 1) of \(w.steps.count): \(stepText(run.current))"
            }
        } catch let e as CoreFileError { throw failure(e) }
    }

    // MARK: inbox

    static let inbox = CommandSpec(
        path: ["inbox"],
        summary: "What agents wrote into the vault since you last looked (briefs, reviews, answers, workflows)",
        discussion: """
        Lists the inbox folders of the vault (inbox/briefs, inbox/reviews, inbox/answers, inbox/, \
        workflows/) against the listing at your last look, unread first: pull the vault first \
        ('sitekeep vault pull', or the daemon's sync) to see what agents pushed. --mark-read PATH \
        or --all-read records read marks in the vault at sitekeep/inbox-read.json (committed; \
        pushed by the next sync, and merged with other devices' marks on pull, so they travel). \
        The state is the site's: --site ORIGIN uses that site's vault, as its pages' inbox.list does.
        """,
        options: [siteOption, .option("--vault", value: "NAME", "the registered vault (default: the site's vault, or the store's only one)"),
                  .option("--mark-read", value: "PATH", "mark one item read"), .flag("--all-read", "mark every item read"), UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox --vault notes --prf-file prf.bin", "what is new"),
                   CommandExample("sitekeep inbox --site https://promptugal.news --prf-file prf.bin", "what is new in the site's vault"),
                   CommandExample("sitekeep inbox --vault notes --all-read --prf-file prf.bin", "mark everything read")]
    ) { inv in
        let (r, library) = try resolvedVault(inv)
        let state = CoreStateDirectory(home: inv.settings.home)
        let listing: [VaultListingEntry]
        listing = try CoreVaultAccess.listing(r.vault)
        let one = inv.option("--mark-read")
        if let p = one, !Inbox.isItem(p, in: listing) {
            throw CommandFailure("\(p) is not in the inbox", remedy: "see 'sitekeep inbox'", code: "not_found")
        }
        let all = inv.flag("--all-read")
        let items: [InboxItem]
        do throws(CoreFileError) {
            items = try state.lookAtInbox(listing: listing, scope: r.scope, marks: CoreVaultAccess(library: library).marks(r, state: state),
                                          now: SystemClock().now()) { items in all ? items : items.filter { $0.path == one } }
        } catch { throw failure(error) }
        inv.emit(.array(items.map { ["path": .string($0.path), "kind": .string($0.kind.rawValue), "unread": .bool($0.unread), "new": .bool($0.isNewSinceLastLook)] })) {
            items.isEmpty ? "The inbox is empty." :
            Table(headers: ["", "KIND", "PATH"], rows: items.map { [$0.unread ? ($0.isNewSinceLastLook ? "new" : "unread") : "", $0.kind.rawValue, $0.path] }).render { inv.style($0, .bold) }
        }
    }

    // MARK: identity

    static let identitySet = CommandSpec(
        path: ["identity", "set"],
        summary: "Set the team id and display name identity.get answers (for every site, or one); never a secret",
        options: [.option("--team", value: "ID", "the team id"), .option("--name", value: "NAME", "the display name"), siteOption],
        examples: [CommandExample("sitekeep identity set --team summit --name 'Dinis Cruz'", "the identity every site sees"),
                   CommandExample("sitekeep identity set --team newsroom --name Dinis --site https://newsroom.sgit.ai", "one site's own")],
        printsData: false
    ) { inv in
        guard let team = inv.option("--team"), let name = inv.option("--name") else { throw UsageError("give --team ID and --name NAME", command: inv.spec.commandLine) }
        let state = CoreStateDirectory(home: inv.settings.home)
        do {
            let profile = try IdentityProfile(teamID: team, displayName: name)
            var settings = try state.identitySettings() ?? IdentitySettings()
            if let origin = inv.option("--site") {
                let store = try StoreContext.open(inv)
                let s = try SiteCommands.site(origin, in: try SiteCommands.registry(store), command: inv.spec.commandLine)
                settings.sites[s.id.string] = profile
            } else {
                settings.store = profile
            }
            try state.setIdentitySettings(settings)
            inv.say("identity.get now answers \(team) (\(name))\(inv.option("--site").map { " to \($0)" } ?? "").")
        } catch let e as CoreFieldError { throw failure(e) } catch let e as CoreFileError { throw failure(e) }
    }
}
