#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Synchronization
public import SiteKeepBridge
import SiteKeepAgent
import SiteKeepBridgeProtocol
import SiteKeepCustody
import SiteKeepDesktop
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepPartitions
import SiteKeepSocket
import SiteKeepSystem
import SiteKeepVault

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

    /// What ``start()`` started, stopped by ``stop()``.
    private struct Running: Sendable {
        let dispatcher: BridgeDispatcher
        let bridge: BridgeServer
        let core: DaemonCore
        let sync: VaultSync?
        var control: ControlServer?
        var agent: AgentSocketServer?
        var watcher: SessionLockWatcher?
        var controlPath: String?
    }

    private init(store: OpenStore, options: DaemonOptions) {
        self.store = store
        self.options = options
    }

    /// Opens the store in `home` for a daemon (its custodian with the idle lifetime of
    /// `options`, one shared registry and vault library). Starts nothing: unlock it if you
    /// like, then call ``start()``.
    /// - Throws: ``DaemonError`` (`no_store`, `keyring_mismatch`, `keyring`, `bad_askpass`),
    ///   `CustodyError.notInitialized`, or the keyring's error.
    public static func open(home: String, options: DaemonOptions = DaemonOptions()) throws -> Daemon {
        try Askpass.check(options.environment)
        var store = try OpenStore.open(home: home, keyring: options.keyring,
                                       configuration: CustodianConfiguration(idleLifetime: .seconds(options.idleLockSeconds)))
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        // One registry and one vault library for the bridge and for every command run here.
        store.shared = SharedStoreServices(registry: try store.registry(), library: store.vaultLibrary(),
                                           presence: PromptPresenceVerifier(setting: options.prompt, environment: options.environment))
        // A long-running reader: other processes' vault changes are noticed by inotify, not by
        // looking at five files on every bridge read.
        store.shared?.library.watchForChanges()
        return Daemon(store: store, options: options)
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
        let wired = try StoreBridge.make(store, registry: registry, teamKeyID: options.teamKeyID, presence: presence, vault: sync?.vaultService())
        let dispatcher = try wired.dispatcher()
        let bridge: BridgeServer
        do {
            if options.bridgeSocket == nil, let fd = try UnixSocket.activatedListener(environment: env) {
                bridge = try BridgeServer(dispatcher: dispatcher, listener: fd)
            } else {
                bridge = try BridgeServer(dispatcher: dispatcher, path: try options.bridgeSocket ?? DaemonSockets.bridge(environment: env))
            }
        } catch {
            wired.core.stop()
            throw error
        }
        // Vaults with a remote sync on an interval while unlocked (issue 14); vault.status reports it.
        sync?.start(dispatcher)
        store.shared?.attach(sync?.scheduler)
        // Reminders fire from here: desktop notifications, or printed where no service answers.
        wired.core.start(dispatcher: dispatcher, environment: env, note: log)
        bridge.start()
        var run = Running(dispatcher: dispatcher, bridge: bridge, core: wired.core, sync: sync)
        if let agentPath = options.sshAgentSocket {
            do {
                run.agent = try SSHAgentService.start(path: agentPath, custodian: custodian, presence: presence, note: log)
                log("ssh-agent on \(agentPath) (eval \"$(sitekeep agent env)\")")
            } catch {
                log("no ssh-agent socket: \(error)")
            }
        }
        startControl(&run, bridgePath: bridge.path, registry: registry)
        // Lock with the login session: the screensaver's ActiveChanged, logind's Lock.
        if let watcher = SessionLockWatcher.start(environment: env, onLock: { source in
            if custodian.isUnlocked { log("the session locked (\(source)); locking") }
            custodian.lock()
        }) {
            run.watcher = watcher
            log("locks with the session: watching \(watcher.sources.joined(separator: " and "))")
        }
        log("store \(store.home.path); listening on \(bridge.path ?? "the socket systemd passed"); control at \(run.controlPath ?? "none"); \(custodian.isUnlocked ? "unlocked" : "locked"); idle lock after \(options.idleLockSeconds) s")
        running.withLock { $0 = run }
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
            let control = try ControlServer(path: controlPath, storeID: custodian.storeID, storeLabel: store.home.path, handler: { request, secret in
                let answer = ControlOps.handle(request, secret: secret, custodian: custodian, registry: registry, home: store.home.path)
                // Prompts follow the terminal and display of whoever last unlocked (with the secret).
                if request.op == "unlock", answer["ok"] == .bool(true), let prompt = store.shared?.presence as? PromptPresenceVerifier {
                    prompt.adopt(ControlServer.unlockPromptKeys.reduce(into: [:]) { $0[$1.value] = request.header[$1.key]?.stringValue })
                }
                return answer
            }, session: { request, connection in
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
        run.bridge.shutdown()
        store.shared?.attach(nil)
        run.sync?.stop()
        run.core.stop()
        run.agent?.shutdown()
        run.watcher?.stop()
        run.control?.shutdown()
        store.custodian.lock()
        store.custodian.auditLog.flush()
    }

    /// Serves until SIGTERM or SIGINT, then stops cleanly. Blocks both signals in this thread
    /// first (call it from the main thread before any other thread starts, so every thread the
    /// daemon starts inherits the mask) and ignores SIGPIPE.
    public func run() throws {
        let signals = TerminationSignals.block(ignoringBrokenPipes: true)
        try start()
        _ = signals.wait()
        stop()
    }
}
