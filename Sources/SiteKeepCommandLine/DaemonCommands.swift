#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import SiteKeepDaemon
internal import SiteKeepKeyring
internal import SiteKeepJSON

/// `serve` and `stop`: the daemon that holds unlocked keys and serves the bridge (``Daemon``; this file only
/// reads the command line into ``DaemonOptions``).
enum DaemonCommands {
    static var all: [CommandSpec] { [serve, stop] }

    static let serve = CommandSpec(
        path: ["serve"],
        summary: "Run the daemon: it alone holds unlocked keys, serves the bridge socket and the control socket",
        discussion: """
        Starts with the settings kept with the store ('sitekeep config'); the options below \
        override them for this run only. Listens on $SITEKEEP_SOCK (else $XDG_RUNTIME_DIR/sitekeep/bridge.sock; folder 0700, socket \
        0600; peers of another uid refused), or on the socket systemd passes (LISTEN_FDS). Each \
        connection is bound to one app-bound site by its hello. 'sitekeep unlock' and 'lock' reach \
        it through control.sock beside the bridge socket. Key ops that need presence ask the \
        program in $SITEKEEP_ASKPASS. Stops cleanly on SIGTERM or SIGINT, finishing in-flight \
        requests and flushing the audit log; 'sitekeep stop' does the same.

        The ssh-agent setting ('sitekeep config set ssh-agent on'), or --ssh-agent (or \
        SITEKEEP_SSH_AGENT=1) for one run, also serves the ssh-agent protocol on \
        --ssh-agent-socket, else $SITEKEEP_AGENT_SOCK, else $XDG_RUNTIME_DIR/sitekeep/agent.sock \
        (peers of another uid refused): the team keys turned on with 'sitekeep team ssh enable' \
        sign SSH logins and SSHSIG signatures (git, ssh-keygen -Y sign), each after presence \
        ($SITEKEEP_ASKPASS, naming the key and the destination host or namespace) and with an \
        audit line. 'eval "$(sitekeep agent env)"' points ssh at it. Nothing is listed while \
        locked.
        """,
        options: [UnlockOptions.recoveryFile,
                  .flag("--unlock", "unlock at start with the secret options (else wait for 'sitekeep unlock')"),
                  .option("--team-key", value: "ID", "the team key identity.get reports (default: the first team key); key.sign always names its key"),
                  .option("--idle-lock", value: "DURATION", "lock after this long unused: 90s, 15m, 2h (default 15m), like ssh-add -t"),
                  .option("--idle", value: "MINUTES", "the same as --idle-lock, in minutes (older spelling)"),
                  .flag("--ssh-agent", "also serve team keys over the ssh-agent protocol (also: SITEKEEP_SSH_AGENT=1)"),
                  .option("--ssh-agent-socket", value: "PATH", "the ssh-agent socket (default $SITEKEEP_AGENT_SOCK, else $XDG_RUNTIME_DIR/sitekeep/agent.sock)"),
                  syncEveryOption, meteredOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep serve --unlock --prf-file prf.bin", "serve, unlocked with a passkey's PRF bytes"),
                   CommandExample("sitekeep serve --team-key summit --idle-lock 5m", "serve locked (unlock later), lock after 5 idle minutes; key uses are approved by $SITEKEEP_ASKPASS"),
                   CommandExample("sitekeep serve --ssh-agent", "also be the SSH agent for ssh, ssh-keygen and git (see 'sitekeep agent env')")],
        printsData: false
    ) { inv in
        var options = DaemonOptions(environment: inv.environment)
        // The settings kept with the store first (every way a daemon starts reads them), then
        // this command line's options over them, for this run only.
        // Locked, no tag can be checked: values that widen trust are left out here and applied
        // at the first unlock if their tags verify (Daemon.settingsAtUnlock), else logged.
        let settings = try DaemonSettings.load(home: inv.settings.home).authenticated { _, _ in nil }.settings
        options.apply(settings, agentSocket: try? AgentSocketPath.resolve(nil, environment: inv.environment))
        if settings[.sshAgent] == "on", options.sshAgentSocket == nil {
            inv.note("sitekeep serve: the ssh-agent setting is on, but neither SITEKEEP_AGENT_SOCK nor XDG_RUNTIME_DIR is set, so there is no agent socket; set one with 'sitekeep config set ssh-agent-socket /ABSOLUTE/PATH'")
        }
        if let text = inv.option("--idle-lock") {
            options.idleLockSeconds = try IdleLock.parse(text, command: inv.spec.commandLine)
            options.overrides[.idleLock] = "--idle-lock \(text)"
        } else if let minutes = inv.option("--idle") {
            options.idleLockSeconds = try inv.intOption("--idle", default: IdleLock.defaultSeconds / 60, range: 1...24 * 60) * 60
            options.overrides[.idleLock] = "--idle \(minutes)"
        }
        if !inv.flag("--unlock"), let given = UnlockKinds.secretSources.first(where: { inv.option($0.option) != nil }) {
            inv.note("warning: \(given.option) is read only with --unlock; the daemon starts locked (add --unlock, or run 'sitekeep unlock' later)")
        }
        options.keyring = KeyringChoice(rawValue: inv.settings.keyring) ?? .auto
        options.teamKeyID = inv.option("--team-key")
        if let every = inv.option("--sync-every") {
            options.syncIntervalSeconds = try inv.intOption("--sync-every", default: 300, range: 0...24 * 3600)
            options.overrides[.syncInterval] = "--sync-every \(every)"
        }
        if inv.flag("--metered") {
            options.metered = true
            options.overrides[.metered] = "--metered"
        }
        if inv.flag("--ssh-agent") || inv.option("--ssh-agent-socket") != nil || inv.environment["SITEKEEP_SSH_AGENT"] == "1" {
            options.sshAgentSocket = try AgentSocketPath.resolve(inv.option("--ssh-agent-socket"), environment: inv.environment)
            options.overrides[.sshAgent] = inv.flag("--ssh-agent") ? "--ssh-agent" : inv.option("--ssh-agent-socket") != nil ? "--ssh-agent-socket" : "SITEKEEP_SSH_AGENT=1"
            if inv.option("--ssh-agent-socket") != nil { options.overrides[.sshAgentSocket] = "--ssh-agent-socket" }
        }
        // A daemon of this store already serving: binding its sockets again would only say
        // "already listens"; name the daemon and how to stop it or change it while it runs.
        // (Not under socket activation: the control socket found would be our own, passed by
        // systemd and not yet served, and the question would wait for ever.)
        let activated = inv.environment["LISTEN_PID"].flatMap { Int32($0) } == getpid()
        if !activated, let running = try DaemonLink.find(inv) {
            throw CommandFailure("a daemon already serves this store (pid \(running.pid.map(String.init) ?? "?"), control at \(running.controlPath))",
                                 remedy: "stop it with 'sitekeep stop' and start again, or change the running one with 'sitekeep config set' (e.g. 'sitekeep config set ssh-agent on', applied at once)",
                                 code: "running")
        }
        options.log = { inv.note("sitekeep serve: \($0)") }
        let environment = inv.environment
        options.runCommand = { request, connection, hosted in
            RemoteSession.serve(request, connection, hosted: hosted, environment: environment)
        }
        let daemon = try Daemon.open(home: inv.settings.home, options: options)
        if inv.flag("--unlock") { try daemon.store.unlockOneShot(inv) }
        try daemon.run()
        inv.note("sitekeep serve: stopped")
    }

    static let stop = CommandSpec(
        path: ["stop"],
        summary: "Stop the store's daemon, as 'ssh-agent -k' or 'gpgconf --kill' do: it locks, flushes its log and exits",
        discussion: """
        Asks the daemon serving this store, over its control socket (your own user's, this \
        store's), to stop as SIGTERM stops it: running requests finish, custody locks (every \
        unwrapped key wiped), the audit log is flushed, the sockets close. Waits until the process \
        is gone. Says so when no daemon runs for this store (and leaves another store's daemon \
        alone). Under systemd socket activation, the next connection starts it again.
        """,
        examples: [CommandExample("sitekeep stop", "stop the daemon and wipe the keys it holds"),
                   CommandExample("sitekeep stop --json", "the same, saying whether a daemon was stopped")]
    ) { inv in
        guard let daemon = try DaemonLink.find(inv) else {
            if let other = DaemonLink.otherStoreDaemon(inv) {
                inv.emit(["stopped": false, "daemon": false, "otherStoreDaemon": .string(other)]) {
                    "No daemon serves this store, so none was stopped (the daemon running serves \(other); stop it with 'sitekeep stop --home \(other)')."
                }
            } else {
                inv.emit(["stopped": false, "daemon": false]) { "No daemon runs for this store." }
            }
            return
        }
        let pid = try daemon.stop()
        inv.emit(["stopped": true, "daemon": true, "pid": .int(pid)]) { "Stopped the daemon (pid \(pid)); the keys it held are wiped." }
    }

    static let syncEveryOption = OptionSpec.option("--sync-every", value: "SECONDS",
                                                   "sync the vaults that have a remote this often while unlocked, and at unlock (default 300; 0: never)")
    static let meteredOption = OptionSpec.flag("--metered", "treat the network as metered: no background sync (NetworkManager's Metered is also honoured)")
}
