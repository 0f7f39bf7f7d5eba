internal import SiteKeepCustody
internal import SiteKeepDaemon
internal import SiteKeepJSON
internal import SiteKeepSystem

/// `config`, `config get|set|unset`: the daemon's settings kept with the store (``DaemonSettings``),
/// read by every way a daemon starts (`unlock`'s autostart, `serve`, the systemd unit).
///
/// Run inside the store's daemon when one runs (as every key-using command is), so a change is
/// applied to it at once where it can be, and `config` shows what the running daemon uses.
enum ConfigCommands {
    static var all: [CommandSpec] { [show, get, set, unset] }

    static let keyList = DaemonSettings.Key.allCases.map { "\($0.rawValue) (\($0.allowed); default \($0.defaultValue.isEmpty ? "unset" : $0.defaultValue))" }
        .joined(separator: "; ")

    static let show = CommandSpec(
        path: ["config"],
        summary: "Show the daemon's settings and where each comes from (default, stored, or this run's command line)",
        discussion: """
        The settings live with the store (daemon.json, mode 0600) and every way the daemon starts \
        reads them: 'sitekeep unlock' starting one, 'sitekeep serve', the systemd unit. A \
        command-line option of 'serve' or 'unlock' (--idle-lock, --ssh-agent, --sync-every, \
        --metered) or SITEKEEP_SSH_AGENT=1 overrides a setting for that run only; with a daemon \
        running, this lists what it uses and names each override. The settings: \(keyList).
        """,
        examples: [CommandExample("sitekeep config", "every setting, its value and its source"),
                   CommandExample("sitekeep config --json", "the same as JSON")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let stored = try DaemonSettings.load(home: store.home.path)
        let running = store.shared?.daemon?.settingsInForce()
        let rows: [(key: String, value: String, source: String)] = DaemonSettings.Key.allCases.map { key in
            if let live = running?.first(where: { $0.key == key }) {
                // What a restart would use: the stored value, or the default where none is stored.
                let kept = stored.stored[key] == nil ? "default" : "stored"
                let source = live.storedValue.map { "\(live.source) for this run (\(kept): \(shown($0)))" } ?? live.source
                return (key.rawValue, live.value, source)
            }
            // A value that needs a tag and has none never applies (doctor says so too).
            if stored.untagged.contains(key) { return (key.rawValue, key.defaultValue, "default (daemon.json's '\(shown(stored[key]))' is ignored: it has no tag)") }
            return (key.rawValue, stored[key], stored.stored[key] == nil ? "default" : "stored")
        }
        let json: JSONValue = .object([
            JSONMember(key: "daemon", value: .bool(running != nil)),
            JSONMember(key: "settings", value: .array(rows.map { .object([JSONMember(key: "key", value: .string($0.key)),
                                                                          JSONMember(key: "value", value: .string($0.value)),
                                                                          JSONMember(key: "source", value: .string($0.source))]) })),
        ])
        inv.emit(json) {
            Table(headers: ["SETTING", "VALUE", "SOURCE"], rows: rows.map { [$0.key, shown($0.value), $0.source] }).render { inv.style($0, .bold) }
                + (running == nil ? "\n(no daemon runs for this store: these are what the next start uses)" : "")
        }
    }

    static let get = CommandSpec(
        path: ["config", "get"],
        summary: "Print one of the daemon's settings (the stored value, else its default)",
        arguments: [ArgumentSpec("KEY", "ssh-agent, ssh-agent-socket, idle-lock, lock-on-session-lock, sync-interval, metered, prompt, tpm-tcti or fido2-device")],
        examples: [CommandExample("sitekeep config get idle-lock", "the idle lock the daemon starts with")]
    ) { inv in
        let key = try DaemonSettings.key(try inv.requiredArgument("KEY"))
        let store = try StoreContext.open(inv)
        let stored = try DaemonSettings.load(home: store.home.path)
        let value = stored.untagged.contains(key) ? key.defaultValue : stored[key]
        inv.emit(["key": .string(key.rawValue), "value": .string(value), "stored": .bool(stored.stored[key] != nil)]) { value }
    }

    static let set = CommandSpec(
        path: ["config", "set"],
        summary: "Store one of the daemon's settings; a running daemon applies it at once where it can",
        discussion: """
        A change that widens what may use or approve a key (turning the ssh-agent on or moving \
        its socket, changing the prompt or a device (tpm-tcti, fido2-device), turning \
        lock-on-session-lock off, a longer idle lock) \
        needs your approval, as slot and SSH-policy changes do: the current secret given for this \
        command, the presence prompt, or the passphrase typed again. Narrowing needs none. A \
        running daemon applies idle-lock, lock-on-session-lock, ssh-agent, tpm-tcti and \
        fido2-device at once; \
        sync-interval, metered and prompt take effect at its next start ('sitekeep stop', then \
        'sitekeep unlock'), which the command says. The settings: \(keyList).
        """,
        arguments: [ArgumentSpec("KEY", "the setting"), ArgumentSpec("VALUE", "its new value")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep config set idle-lock 5m", "lock after 5 idle minutes (applied to a running daemon at once)"),
                   CommandExample("sitekeep config set ssh-agent on --passphrase-file pass.txt", "serve the ssh-agent socket from now on, approved with the current passphrase")]
    ) { inv in
        let key = try DaemonSettings.key(try inv.requiredArgument("KEY"))
        let value = try DaemonSettings.normalize(key, try inv.requiredArgument("VALUE"))
        let store = try StoreContext.open(inv)
        try change(inv, store: store, key: key, to: value)
    }

    static let unset = CommandSpec(
        path: ["config", "unset"],
        summary: "Forget one of the daemon's stored settings: its default applies again",
        discussion: "Approval is asked as for 'config set' when the default widens trust (an idle lock shorter than 15m going back to 15m, the agent socket back to its default path).",
        arguments: [ArgumentSpec("KEY", "the setting")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep config unset sync-interval", "back to syncing every 300 s")]
    ) { inv in
        let name = try inv.requiredArgument("KEY")
        let store = try StoreContext.open(inv)
        let key = try DaemonSettings.key(name)
        try change(inv, store: store, key: key, to: nil)
    }

    /// Stores `key` as `value` (nil: unset) after the approval a widening change needs, with its
    /// tag when the value needs one, applies that key alone to the daemon this runs in (if any),
    /// and says what happened. The file's other values are written back as they are, their tags
    /// untouched: a value written there by hand is neither applied nor tagged by this change.
    static func change(_ inv: Invocation, store: StoreContext, key: DaemonSettings.Key, to value: String?) throws {
        var settings = try DaemonSettings.load(home: store.home.path)
        // Widening is judged from the value that applies now, never from one written by hand
        // (a planted long idle lock would make a shorter, still long one look like narrowing).
        let old = settings.authenticated(by: store.custodian).settings[key]
        if let value { try settings.set(key, value) } else { settings.unset(key) }
        let new = settings[key]
        // Who may approve a key use, and where keys are offered, are themselves guarded by the
        // one gate: a process of the user's that reached the unlocked daemon must not turn the
        // agent on or swap the prompt for one that always says yes without the user's approval.
        if key.widensTrust(from: old, to: new) {
            let approval = try Approval.approve(inv, store: store, op: settingsOp, keyID: nil)
            try? store.custodian.auditLog.append(client: .commandLine, op: settingsOp, key: nil, result: "ok",
                                                 detail: "\(key.rawValue) \(shown(old)) -> \(shown(new)) (approved by \(approval.method))")
        }
        // A value beyond its default applies only with its tag, made under the master key now
        // that the change is approved (or needs no approval: it narrows what applies).
        if let stored = settings.stored[key], DaemonSettings.needsTag(key, stored) {
            try store.unlockOneShot(inv)
            settings.setTag(try DaemonSettings.tag(key, stored, by: store.custodian), for: key)
        }
        try settings.save(home: store.home.path)
        var lines = ["\(key.rawValue) = \(shown(new))\(settings.stored[key] == nil ? " (default)" : "")"]
        var json: [JSONMember] = [JSONMember(key: "key", value: .string(key.rawValue)), JSONMember(key: "value", value: .string(new))]
        if let daemon = store.shared?.daemon {
            let outcome = daemon.apply(key, stored: settings.stored[key])
            var state = "unchanged"
            if outcome.applied.contains(key) { state = "applied"; lines.append("The running daemon uses it now.") }
            if outcome.overridden.contains(key) {
                state = "overridden"
                let how = daemon.settingsInForce().first { $0.key == key }?.source ?? "its command line"
                lines.append("The running daemon keeps \(how) until it stops; the new value is used from its next start ('sitekeep stop', then 'sitekeep unlock').")
            }
            if outcome.atNextStart.contains(key) {
                state = "next-start"
                lines.append("The running daemon uses it from its next start: run 'sitekeep stop', then 'sitekeep unlock'.")
            }
            for why in outcome.failed {
                state = "failed"
                lines.append("Not applied to the running daemon: \(why).")
            }
            json.append(JSONMember(key: "daemon", value: .string(state)))
        } else {
            json.append(JSONMember(key: "daemon", value: .string("none")))
            // Run outside a daemon that serves the store (SITEKEEP_NO_DAEMON=1): say it did not apply.
            if (try? DaemonLink.find(inv)) ?? nil != nil {
                lines.append("A daemon runs for this store, but this command ran outside it: the daemon uses the change from its next start ('sitekeep stop', then 'sitekeep unlock').")
            }
        }
        inv.emit(.object(json)) { lines.joined(separator: "\n") }
    }

    /// The audit log's op for a settings change that needed approval.
    static let settingsOp = OpName.daemonConfig

    static func shown(_ value: String) -> String { value.isEmpty ? "(unset)" : value }
}
