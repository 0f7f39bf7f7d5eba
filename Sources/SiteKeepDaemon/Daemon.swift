#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import Dispatch
import Synchronization
public import SiteKeepBridge
import SiteKeepWiring
import SiteKeepAgent
import SiteKeepBridgeProtocol
import SiteKeepCore
import SiteKeepCustody
import SiteKeepDesktop
import SiteKeepFIDO2
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepPartitions
import SiteKeepSocket
import SiteKeepSystem
import SiteKeepVault
import SiteKeepVaultRemotes

/// A store's daemon: the one process that holds the store's unlocked keys and serves it. It
/// wires the store's custody, site registry, vault library and native core into the bridge's
/// modules, and serves the bridge socket, the control socket (`unlock`, `lock`, `status`,
/// `sites`, and `run` when ``DaemonOptions/runCommand`` is set), the ssh-agent socket when asked,
/// reminders, vault sync and the session-lock watch.
///
/// The command line's `sitekeep serve` is a thin command over this type; a host (a web-view
/// host, a test) starts the same daemon the same way:
///
/// ```swift
/// var options = DaemonOptions()
/// options.bridgeSocket = runtime + "/bridge.sock"
/// let daemon = try Daemon.open(home: home, options: options)
/// try daemon.start()          // serving; unlock through control.sock or daemon.store.custodian
/// defer { daemon.stop() }
/// ```
public final class Daemon: Sendable {
    /// The open store, with the daemon's shared registry and vault library.
    public let store: OpenStore
    public let options: DaemonOptions
    private let running = Mutex<Running?>(nil)
    /// Set from the first line of ``start()`` until ``stop()``, so two starts never race.
    private let claimed = Mutex(false)
    /// The settings in force: those stored with the store when it started (or changed since by
    /// ``apply(_:)``), and what this run's command line overrides.
    private let inForce: Mutex<(stored: DaemonSettings, overrides: [DaemonSettings.Key: String])>
    /// Set while ``run()`` waits for a signal: a `stop` request then stops it as SIGTERM does.
    private let servesUntilSignal = Atomic(false)

    /// What ``start()`` started, stopped by ``stop()``.
    private struct Running: Sendable {
        let dispatcher: BridgeDispatcher
        let bridge: BridgeServer
        let core: DaemonCore
        let sync: VaultSync?
        var control: ControlServer?
        let launcher: HostLauncher
        var agent: AgentSocketServer?
        var watcher: SessionLockWatcher?
        var controlPath: String?
        /// The agent socket served with keys (nil: none, or the "off" one systemd passed).
        var agentPath: String?
    }

    private init(store: OpenStore, options: DaemonOptions, settings: DaemonSettings) {
        self.store = store
        self.options = options
        inForce = Mutex((settings, options.overrides))
    }

    /// Opens the store in `home` for a daemon (its custodian with the idle lifetime of
    /// `options`, one shared registry and vault library). Starts nothing: unlock it if you
    /// like, then call ``start()``.
    /// - Throws: ``DaemonError`` (`no_store`, `keyring_mismatch`, `keyring`, `bad_askpass`),
    ///   `CustodyError.notInitialized`, or the keyring's error.
    public static func open(home: String, options: DaemonOptions = DaemonOptions()) throws -> Daemon {
        try Askpass.check(options.environment)
        var configuration = CustodianConfiguration(idleLifetime: .seconds(options.idleLockSeconds))
        // The security key the daemon's environment names (else the one plugged in), and a line
        // in its log whenever a key use waits for a touch, saying what the touch approves.
        if let device = options.environment[FIDO2Key.environmentVariable], !device.isEmpty {
            configuration.fido2Key = FIDO2Key(path: device)
        }
        // The TPM and the security key the store's settings name, read at each use.
        configuration.deviceSettings = { DaemonSettings.devices(home: home) }
        let log = options.log
        configuration.touchNotice = { notice in log("waiting: \(notice)") }
        var store = try OpenStore.open(home: home, keyring: options.keyring, configuration: configuration)
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        // One registry and one vault library for the bridge and for every command run here.
        store.shared = SharedStoreServices(registry: try store.registry(), library: store.vaultLibrary(),
                                           presence: PromptPresenceVerifier(setting: options.prompt, environment: options.environment))
        // A long-running reader: other processes' vault changes are noticed by inotify, not by
        // looking at five files on every bridge read.
        store.shared?.library.watchForChanges()
        // A damaged fetched object the daemon fetches again is one line in its log.
        if let library = store.shared?.library {
            VaultSyncService.installRefetch(on: library, remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                            custodian: store.custodian, log: log)
        }
        // The settings as stored, for `config` (the options already hold them, with this run's
        // overrides: the command line read them before it opened the daemon). Locked, no tag can
        // be checked: values that widen trust wait for the first unlock (settingsAtUnlock).
        let loaded = (try? DaemonSettings.load(home: home)) ?? DaemonSettings()
        let view = loaded.authenticated { _, _ in nil }
        for key in view.ignored { options.log(loaded.ignoredMessage(key)) }
        for key in view.unchecked { options.log("\(DaemonSettings.fileName): \(key.rawValue) '\(loaded[key])' widens trust; it applies once its tag is checked at the first unlock") }
        return Daemon(store: store, options: options, settings: view.settings)
    }

    /// The bridge's dispatcher while the daemon runs.
    public var dispatcher: BridgeDispatcher? { running.withLock { $0?.dispatcher } }
    /// The bridge socket's path while the daemon runs (nil under socket activation).
    public var bridgePath: String? { running.withLock { $0?.bridge.path } }
    /// The control socket's path while the daemon runs (nil when it has none).
    public var controlPath: String? { running.withLock { $0?.controlPath } }

    /// Starts serving and returns: reminders and vault sync, the bridge socket, then the
    /// ssh-agent socket (when asked), the control socket and the session-lock watch. A socket
    /// other than the bridge's that cannot start is logged, not thrown.
    /// - Throws: ``DaemonError`` `running` when it already runs; the socket's error when the
    ///   bridge socket cannot be served (no path, or it cannot listen).
    public func start() throws {
        guard claimed.withLock({ c in defer { c = true }; return !c }) else {
            throw DaemonError("this daemon is already running", remedy: "call stop() before starting it again", code: "running")
        }
        do { try serve() } catch {
            claimed.withLock { $0 = false }
            throw error
        }
    }

    private func serve() throws {
        let env = options.environment
        let log = options.log
        let custodian = store.custodian
        // Requests never wait for the audit log's fsync; stop() flushes it.
        custodian.auditLog.syncInBackground()
        let registry = try store.registry()
        let sync = options.syncIntervalSeconds > 0
            ? VaultSync(store: store, interval: .seconds(options.syncIntervalSeconds), metered: options.metered, note: log) : nil
        let presence = store.shared?.presence ?? PromptPresenceVerifier(setting: options.prompt, environment: env)
        // A key use while locked asks for the unlock on the prompt (unless unlock-on-use is
        // off); an unlock made so checks the settings' tags as `sitekeep unlock` does.
        custodian.setUnlocksOnUse(options.unlockOnUse, kind: options.unlockOnUseKind) { [weak self] in
            self?.options.log("unlocked on use: the secret was given on the prompt")
            self?.settingsAtUnlock()
        }
        // Entries of sites.json written by hand bind nothing; the log names each, with its fix.
        // The lanes of each site's own vaults, for inbox.list and inbox.mark.
        let lanes = LaneInbox(service: sync?.scheduler.service ?? VaultSyncService(library: store.shared?.library ?? store.vaultLibrary(),
                                                                                   remotes: VaultRemoteRegistry(file: store.home.path + "/vault-remotes.json"),
                                                                                   custodian: custodian), home: store.home.path)
        let wired = try StoreBridge.make(store, registry: registry, teamKeyID: options.teamKeyID, presence: presence, vault: sync?.vaultService(),
                                         lanes: lanes, note: { log($0) })
        let dispatcher = try wired.dispatcher()
        // Only a site's hosts bind it, and a host is a process this daemon started (HostLauncher:
        // the SiteKeep browser beside this program, pinned by its SHA-256 now, and the programs
        // the user added for a site). On the bridge socket only the command line binds, for a
        // site the user let it act for (`--command-line-host`).
        let resolver = RegistrySiteResolver(registry: registry)
        let me = ProcessEnvironment.executablePath()
        let commandLine: Set<String> = me.map { exe in
            let folder = exe.lastIndex(of: "/").map { String(exe[..<$0]) } ?? "."
            return [exe, folder + "/sitekeep-main", folder + "/sitekeep"]
        } ?? []
        let hosts = SiteHostAuthority.commandLineOnly(programs: commandLine, hostsOf: { resolver.hosts($0) })
        let bridge: BridgeServer
        do {
            if options.bridgeSocket == nil, let fd = try UnixSocket.activatedListener(environment: env) {
                bridge = try BridgeServer(dispatcher: dispatcher, listener: fd, hosts: hosts)
            } else {
                bridge = try BridgeServer(dispatcher: dispatcher, path: try options.bridgeSocket ?? DaemonSockets.bridge(environment: env), hosts: hosts)
            }
        } catch {
            wired.core.stop()
            throw error
        }
        // Reminders fire from here: desktop notifications, or printed where no service answers.
        wired.core.start(dispatcher: dispatcher, environment: env, note: log)
        // New lane messages take the reminders' path: one notification per check that found
        // some (titles and senders only). Attached before the sync starts, so the check at
        // unlock can show what it finds.
        let core = wired.core
        sync?.lanes.attach { check in
            let shown = core.notify(LaneNotice.notification(for: check, now: SystemClock().now()))
            log("lane messages: \(check.news.count) new\(shown ? "" : " (not shown: no notification service and no log; tried again at the next check)")")
            return shown
        }
        // Vaults with a remote sync on an interval while unlocked (issue 14); vault.status reports
        // it; each round ends with a lane check.
        sync?.start(dispatcher)
        store.shared?.attach(sync?.scheduler)
        bridge.start()
        let launcher = HostLauncher(registry: registry, bridge: bridge, custodian: custodian,
                                    browser: HostLauncher.pinBrowser(besideExecutable: me), log: log)
        var run = Running(dispatcher: dispatcher, bridge: bridge, core: wired.core, sync: sync, launcher: launcher)
        startAgent(&run, path: options.sshAgentSocket)
        startControl(&run, bridgePath: bridge.path, registry: registry)
        if options.lockOnSessionLock { startWatcher(&run) } else { log("does not lock with the session (lock-on-session-lock off)") }
        store.shared?.attach(daemon: self)
        let access = wired.core.access
        store.shared?.attach(release: { access.release($0) })
        // Unlocked already (`serve --unlock`): the settings' tags can be checked now.
        if custodian.isUnlocked { settingsAtUnlock() }
        log("store \(store.home.path); listening on \(bridge.path ?? "the socket systemd passed"); control at \(run.controlPath ?? "none"); \(custodian.isUnlocked ? "unlocked" : "locked"); idle lock after \(Int(custodian.idleLifetime.components.seconds)) s")
        running.withLock { $0 = run }
    }

    /// The ssh-agent socket at `path` (nil: none). Where systemd passed an agent socket and the
    /// agent is off, that socket is served with no keys, each request refused saying how to turn
    /// it on, so a client never waits on a socket nobody answers.
    private func startAgent(_ run: inout Running, path: String?) {
        let log = options.log
        if let path {
            do {
                // The daemon's one verifier (built in open), so a live start from `config set`
                // asks as the bridge does.
                let presence = store.shared?.presence ?? PromptPresenceVerifier(setting: options.prompt, environment: options.environment)
                // The other agent's socket is read from the settings in force at each use, so
                // `config set ssh-agent-upstream` (tagged, approved) applies at once.
                run.agent = try SSHAgentService.start(path: path, custodian: store.custodian, presence: presence, note: log,
                                                      upstream: { [weak self] in self?.upstreamAgent(own: path) })
                run.agentPath = path
                log("ssh-agent on \(path) (eval \"$(sitekeep agent env)\")")
            } catch {
                log("no ssh-agent socket: \(error)")
            }
        } else if let passed = DaemonSettings.defaultAgentSocket(environment: options.environment), UnixSocket.isActivated(path: passed) {
            run.agent = try? AgentSocketServer(path: passed, keys: AgentOff())
            run.agent?.start()
            run.agentPath = nil
        }
    }

    /// Lock with the login session: the screensaver's ActiveChanged, logind's Lock.
    private func startWatcher(_ run: inout Running) {
        let log = options.log
        let custodian = store.custodian
        if let watcher = SessionLockWatcher.start(environment: options.environment, onLock: { source in
            if custodian.isUnlocked { log("the session locked (\(source)); locking") }
            custodian.lock()
        }) {
            run.watcher = watcher
            log("locks with the session: watching \(watcher.sources.joined(separator: " and "))")
        }
    }

    /// The control socket beside the bridge socket. Under socket activation there is no path of
    /// our own: it goes where the bridge socket would (SITEKEEP_SOCK or XDG_RUNTIME_DIR), and
    /// nowhere if neither is set.
    private func startControl(_ run: inout Running, bridgePath: String?, registry: SiteRegistry) {
        let log = options.log
        guard let path = bridgePath ?? (try? DaemonSockets.bridge(environment: options.environment)) else {
            log("serving the socket systemd passed; no control socket (set SITEKEEP_SOCK or XDG_RUNTIME_DIR), so unlock with --unlock at start")
            return
        }
        let controlPath = DaemonSockets.besideBridge(path)
        let custodian = store.custodian, store = self.store, runCommand = options.runCommand
        do {
            let control = try ControlServer(path: controlPath, storeID: custodian.storeID, storeLabel: store.home.path, handler: { [self] request, secret in
                if let answer = ControlOps.handleDaemon(request, daemon: self) { return answer }
                var answer = ControlOps.handle(request, secret: secret, custodian: custodian, registry: registry, home: store.home.path)
                // Prompts follow the terminal and display of whoever last unlocked (with the secret);
                // an unlock that names neither (a script) leaves them where they were. The answer
                // says where prompts now ask, so `unlock` in a new terminal can say they moved.
                if request.op == "unlock", answer["ok"] == .bool(true), let prompt = store.shared?.presence as? PromptPresenceVerifier {
                    let moved = prompt.adopt(ControlServer.unlockPromptKeys.reduce(into: [:]) { $0[$1.value] = request.header[$1.key]?.stringValue })
                    if case .object(var members) = answer {
                        members.append(JSONMember(key: "prompt", value: .string(prompt.plan.description)))
                        members.append(JSONMember(key: "promptMoved", value: .bool(moved)))
                        answer = .object(members)
                    }
                }
                if request.op == "unlock", answer["ok"] == .bool(true) { self.settingsAtUnlock() }
                // `unlock --idle-lock`: a longer idle lock widens trust, so it comes only with the
                // secret, applied once the unlock it came with succeeded (a bare `set` may only shorten).
                if request.op == "unlock", answer["ok"] == .bool(true), let text = request.header["idle_lock"]?.stringValue,
                   let seconds = IdleLock.seconds(parsing: text) {
                    self.overrideIdleLock(seconds: seconds, how: "--idle-lock \(text) of 'sitekeep unlock'")
                }
                return answer
            }, session: { [launcher = run.launcher] request, connection in
                if request.op == "launch" {
                    launcher.serve(request, descriptors: request.descriptors, connection: connection)
                    return
                }
                guard let runCommand else {
                    _ = connection.writer.send(JSONSerializer.bytes(["ok": false, "code": "bad_request", "error": "this daemon runs no commands; run the command in its own process"]))
                    return
                }
                runCommand(request, connection, store)
            })
            control.start()
            run.control = control
            run.controlPath = controlPath
        } catch {
            log("no control socket (\(error)); unlock with --unlock at start")
        }
    }

    /// Stops: the bridge socket drains (in-flight requests finish), then vault sync, reminders,
    /// the ssh-agent socket, the session-lock watch and the control socket stop; custody locks
    /// and the audit log is flushed. Does nothing when not running.
    public func stop() {
        defer { claimed.withLock { $0 = false } }
        guard let run = running.withLock({ r in defer { r = nil }; return r }) else { return }
        // The hosts this daemon started lose their sites with it (their waits end, so the
        // control socket's drain below does not wait on them).
        run.launcher.stopAll()
        run.bridge.shutdown()
        store.shared?.attach(nil)
        run.sync?.stop()
        run.core.stop()
        store.shared?.attach(daemon: nil)
        store.shared?.attach(release: nil)
        run.agent?.shutdown()
        run.watcher?.stop()
        run.control?.shutdown()
        store.custodian.lock()
        store.custodian.auditLog.flush()
    }

    /// Serves until SIGTERM or SIGINT (or a `stop` request on the control socket, which sends
    /// this process SIGTERM), then stops cleanly. Blocks both signals in this thread first (call
    /// it from the main thread before any other thread starts, so every thread the daemon starts
    /// inherits the mask) and ignores SIGPIPE.
    public func run() throws {
        let signals = TerminationSignals.block(ignoringBrokenPipes: true)
        try start()
        servesUntilSignal.store(true, ordering: .releasing)
        _ = signals.wait()
        servesUntilSignal.store(false, ordering: .releasing)
        stop()
    }

    /// Asks ``run()`` to stop as SIGTERM does (drain, lock, flush); false when this daemon is
    /// not serving through ``run()`` (a host that called ``start()`` stops it itself).
    func willStop() -> Bool {
        guard servesUntilSignal.load(ordering: .acquiring) else { return false }
        options.log("stop requested on the control socket")
        // Sent a moment later, so the reply leaves before the control socket drains.
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { _ = kill(getpid(), SIGTERM) }
        return true
    }

    // MARK: Settings while running

    /// One setting as the running daemon has it.
    public struct SettingInForce: Sendable, Equatable {
        public let key: DaemonSettings.Key
        /// The value in force.
        public let value: String
        /// `default`, `stored`, or how this run overrides it (`--idle-lock`, `SITEKEEP_SSH_AGENT=1`).
        public let source: String
        /// The stored (or default) value, when an override hides it.
        public let storedValue: String?
    }

    /// Every setting as this daemon runs with it.
    public func settingsInForce() -> [SettingInForce] {
        let (stored, overrides) = inForce.withLock { $0 }
        return DaemonSettings.Key.allCases.map { key in
            let storedValue = stored[key]
            if let how = overrides[key] {
                return SettingInForce(key: key, value: value(of: key), source: how, storedValue: storedValue)
            }
            return SettingInForce(key: key, value: storedValue, source: stored.stored[key] == nil ? "default" : "stored", storedValue: nil)
        }
    }

    /// What this run uses for `key` (the options it started with, or a change applied since).
    private func value(of key: DaemonSettings.Key) -> String {
        let live = running.withLock { $0 }
        switch key {
        case .sshAgent: return live?.agentPath != nil ? "on" : "off"
        case .sshAgentSocket: return live?.agentPath ?? options.sshAgentSocket ?? ""
        case .sshAgentUpstream: return inForce.withLock { $0.stored[.sshAgentUpstream] }
        case .idleLock: return IdleLock.text(seconds: Int(store.custodian.idleLifetime.components.seconds))
        case .lockOnSessionLock: return live?.watcher != nil || options.lockOnSessionLock ? "on" : "off"
        case .syncInterval: return String(options.syncIntervalSeconds)
        case .metered: return options.metered ? "on" : "off"
        case .prompt: return options.prompt ?? "auto"
        case .tpmTCTI: return String(describing: store.custodian.tpmConnection)
        case .fido2Device: return options.environment[FIDO2Key.environmentVariable].flatMap { $0.isEmpty ? nil : $0 }
            ?? store.custodian.configuration.deviceSettings().fido2Device?.value ?? ""
        case .unlockOnUse: return store.custodian.unlocksOnUse ? (store.custodian.unlockOnUseKind ?? "on") : "off"
        }
    }

    /// What ``apply(_:)`` did with a change of the stored settings.
    public struct SettingsApplied: Sendable, Equatable {
        /// Applied to this daemon at once.
        public var applied: [DaemonSettings.Key] = []
        /// Stored, but this run keeps the value its command line gave (until the next start).
        public var overridden: [DaemonSettings.Key] = []
        /// Stored, in force from the next start ('sitekeep stop', then 'sitekeep unlock').
        public var atNextStart: [DaemonSettings.Key] = []
        /// Changes that failed to apply, with why (the stored value stays).
        public var failed: [String] = []
    }

    /// Applies a change of one stored setting, `key` now `value` (nil: unset), to this running
    /// daemon where it can (idle lock, lock on session lock, the ssh-agent socket); says whether
    /// it waits for the next start (sync interval, metered, prompt) or this run's command line
    /// overrides it. Only `key` changes: what else the file holds (written there by whoever) is
    /// never applied live by a change of another key (`config set` names its key and value).
    public func apply(_ key: DaemonSettings.Key, stored value: String?) -> SettingsApplied {
        var new = inForce.withLock { $0.stored }
        if let value { try? new.set(key, value) } else { new.unset(key) }
        return apply(new, only: key)
    }

    /// Takes the settings file's tagged values at an unlock: those that widen trust and could not
    /// be checked while locked apply now if their tag verifies; one that does not is logged,
    /// naming the value and the fix, and its default stays. Values that need no tag were read
    /// at start and are not read again: a file written by hand is never applied live.
    func settingsAtUnlock() {
        guard let loaded = try? DaemonSettings.load(home: store.home.path) else { return }
        let view = loaded.authenticated(by: store.custodian)
        let current = inForce.withLock { $0.stored }
        for key in view.ignored where current[key] != loaded[key] { options.log(loaded.ignoredMessage(key)) }
        for key in DaemonSettings.Key.allCases where loaded.tags[key] != nil && !view.ignored.contains(key) && !view.unchecked.contains(key) {
            guard let value = view.settings.stored[key], current[key] != value else { continue }
            var new = current
            try? new.set(key, value)
            if key == .prompt, options.overrides[.prompt] == nil, let prompt = store.shared?.presence as? PromptPresenceVerifier {
                // Not applied live by `config set` (next start), but at start it could not be checked.
                inForce.withLock { try? $0.stored.set(key, value) }
                prompt.use(setting: value)
            } else {
                _ = apply(new, only: key)
            }
            options.log("\(DaemonSettings.fileName): \(key.rawValue) '\(value)' verified at unlock")
        }
    }

    /// Applies `new` for `key` alone (the stored settings in force become `new`'s value of it).
    private func apply(_ new: DaemonSettings, only key: DaemonSettings.Key) -> SettingsApplied {
        let (old, overrides) = inForce.withLock { s in
            defer {
                if let v = new.stored[key] { try? s.stored.set(key, v) } else { s.stored.unset(key) }
            }
            return s
        }
        var result = SettingsApplied()
        let changed = old[key] != new[key] ? [key] : []
        let log = options.log
        for key in changed {
            if overrides[key] != nil, !(key == .sshAgentSocket && overrides[.sshAgent] == nil) {
                result.overridden.append(key)
                continue
            }
            switch key {
            case .idleLock:
                store.custodian.setIdleLifetime(.seconds(IdleLock.seconds(parsing: new[.idleLock]) ?? IdleLock.defaultSeconds))
                result.applied.append(key)
                log("idle lock now \(new[.idleLock])")
            case .lockOnSessionLock:
                running.withLock { run in
                    guard var r = run else { return }
                    if new[key] == "on", r.watcher == nil { startWatcher(&r) }
                    if new[key] == "off" { r.watcher?.stop(); r.watcher = nil; log("no longer locks with the session") }
                    run = r
                }
                result.applied.append(key)
            case .sshAgent, .sshAgentSocket:
                if result.applied.contains(.sshAgent) || result.applied.contains(.sshAgentSocket) { continue }
                var wanted: String? = nil
                if new[.sshAgent] == "on" {
                    let socket = new[.sshAgentSocket]
                    wanted = socket.isEmpty ? DaemonSettings.defaultAgentSocket(environment: options.environment) : socket
                    if wanted == nil {
                        result.failed.append("ssh-agent: neither SITEKEEP_AGENT_SOCK nor XDG_RUNTIME_DIR is set for the daemon, so it has no agent socket; set ssh-agent-socket")
                        continue
                    }
                }
                let outcome: String? = running.withLock { run in
                    guard var r = run else { return "the daemon is not running" }
                    if r.agentPath == wanted { return nil }
                    r.agent?.shutdown()
                    r.agent = nil
                    r.agentPath = nil
                    startAgent(&r, path: wanted)
                    run = r
                    if let wanted, r.agentPath != wanted { return "the ssh-agent socket \(wanted) could not be started (see the daemon's log)" }
                    if wanted == nil { log("ssh-agent off") }
                    return nil
                }
                if let outcome { result.failed.append(outcome) } else { result.applied.append(key) }
            case .sshAgentUpstream:
                // Read by the agent at each listing and signature.
                result.applied.append(key)
                log("ssh-agent upstream \(new[key].isEmpty ? "none" : new[key])")
            case .unlockOnUse:
                store.custodian.setUnlocksOnUse(new[key] != "off", kind: ["on", "off"].contains(new[key]) ? nil : new[key])
                result.applied.append(key)
                log("unlock on use \(new[key])")
            case .syncInterval, .metered, .prompt:
                result.atNextStart.append(key)
            case .tpmTCTI, .fido2Device:
                // Custody reads the stored device settings at each use.
                result.applied.append(key)
            }
        }
        return result
    }

    /// The other agent's socket in force (``DaemonSettings/upstreamAgent(_:own:)``): a stored
    /// value applies only once its tag verified (at start while unlocked, or at the first unlock).
    func upstreamAgent(own: String) -> String? {
        DaemonSettings.upstreamAgent(inForce.withLock { $0.stored[.sshAgentUpstream] }, own: own)
    }

    /// Sets the idle lock of this run only (`sitekeep unlock --idle-lock` against a running
    /// daemon); the stored setting is unchanged and `config` shows the override.
    func overrideIdleLock(seconds: Int, how: String) {
        store.custodian.setIdleLifetime(.seconds(seconds))
        inForce.withLock { $0.overrides[.idleLock] = how }
        options.log("idle lock \(seconds) s for this run (\(how))")
    }
}
