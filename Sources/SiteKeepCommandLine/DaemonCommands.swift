#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepAgent
internal import SiteKeepBridge
internal import SiteKeepBridgeProtocol
internal import SiteKeepKeyring
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepDesktop
internal import SiteKeepJSON
internal import SiteKeepPartitions

/// `serve`: the daemon that holds unlocked keys and serves the bridge.
enum DaemonCommands {
    static var all: [CommandSpec] { [serve] }

    static let serve = CommandSpec(
        path: ["serve"],
        summary: "Run the daemon: it alone holds unlocked keys, serves the bridge socket and the control socket",
        discussion: """
        Listens on $SITEKEEP_SOCK (else $XDG_RUNTIME_DIR/sitekeep/bridge.sock; folder 0700, socket \
        0600; peers of another uid refused), or on the socket systemd passes (LISTEN_FDS). Each \
        connection is bound to one app-bound site by its hello. 'sitekeep unlock' and 'lock' reach \
        it through control.sock beside the bridge socket. Key ops that need presence ask the \
        program in $SITEKEEP_ASKPASS. Stops cleanly on SIGTERM or SIGINT, finishing in-flight \
        requests and flushing the audit log.

        --ssh-agent (or SITEKEEP_SSH_AGENT=1) also serves the ssh-agent protocol on \
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
                  DaemonVaultSync.everyOption, DaemonVaultSync.meteredOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep serve --unlock --prf-file prf.bin", "serve, unlocked with a passkey's PRF bytes"),
                   CommandExample("sitekeep serve --team-key summit --idle-lock 5m", "serve locked (unlock later), lock after 5 idle minutes; key uses are approved by $SITEKEEP_ASKPASS"),
                   CommandExample("sitekeep serve --ssh-agent", "also be the SSH agent for ssh, ssh-keygen and git (see 'sitekeep agent env')")],
        printsData: false
    ) { inv in
        let idleSeconds: Int
        if let text = inv.option("--idle-lock") {
            idleSeconds = try IdleLock.parse(text, command: inv.spec.commandLine)
        } else {
            idleSeconds = try inv.intOption("--idle", default: IdleLock.defaultSeconds / 60, range: 1...24 * 60) * 60
        }
        if !inv.flag("--unlock"), let given = [SecretSource.passphrase, .prf, .recoveryCode].first(where: { inv.option($0.option) != nil }) {
            inv.note("warning: \(given.option) is read only with --unlock; the daemon starts locked (add --unlock, or run 'sitekeep unlock' later)")
        }
        try checkAskpass(inv.environment)
        var store = try StoreContext.open(inv, configuration: CustodianConfiguration(idleLifetime: .seconds(idleSeconds)))
        guard try store.custodian.isInitialized() else { throw CustodyError.notInitialized }
        if inv.flag("--unlock") { try store.unlockOneShot(inv) }
        let registry = try SiteCommands.registry(store)
        // One registry and one vault library for the bridge and for every command run here.
        store.shared = SharedStoreServices(registry: registry, library: VaultCommands.library(store))
        let hosted = store
        let (made, core) = try DaemonServices.makeWithCore(hosted, registry: registry, teamKeyID: inv.option("--team-key"), environment: inv.environment)
        // Vaults with a remote sync on an interval while unlocked (issue 14); vault.status reports it.
        let vaultSync = try DaemonVaultSync.make(hosted, inv: inv)
        var services = made
        if let vaultSync { services.vault = vaultSync.vaultService() }
        let dispatcher = try BridgeDispatcher(catalogue: try OpCatalogue.bundled(), services: services)
        vaultSync?.start(dispatcher)
        // Reminders fire from here: desktop notifications, or printed where no service answers.
        core.start(dispatcher: dispatcher, environment: inv.environment) { inv.note($0) }
        let custodian = store.custodian
        let controlBox = ControlBox()
        let agentPath = inv.flag("--ssh-agent") || inv.option("--ssh-agent-socket") != nil || inv.environment["SITEKEEP_SSH_AGENT"] == "1"
            ? try AgentSocketPath.resolve(inv.option("--ssh-agent-socket"), environment: inv.environment) : nil
        let environment = inv.environment
        try BridgeDaemon.run(dispatcher: dispatcher, environment: inv.environment, ready: { path in
            if let agentPath {
                do {
                    let agent = try SSHAgentService.start(path: agentPath, custodian: custodian, environment: inv.environment) { inv.note($0) }
                    controlBox.onShutdown { agent.shutdown() }
                    inv.note("sitekeep serve: ssh-agent on \(agentPath) (eval \"$(sitekeep agent env)\")")
                } catch {
                    inv.note("sitekeep serve: no ssh-agent socket: \(error)")
                }
            }
            // Under socket activation there is no path of our own: the control socket goes where the
            // bridge socket would (SITEKEEP_SOCK or XDG_RUNTIME_DIR), and nowhere if neither is set.
            guard let bridgePath = path ?? (try? DaemonSockets.bridge(environment: inv.environment)) else {
                inv.note("sitekeep serve: serving the socket systemd passed; no control socket (set SITEKEEP_SOCK or XDG_RUNTIME_DIR), so unlock with --unlock at start")
                return
            }
            let controlPath = DaemonSockets.besideBridge(bridgePath)
            do {
                let control = try ControlServer(path: controlPath, storeID: custodian.storeID, storeLabel: hosted.home.path, handler: { request, secret in
                    DaemonControl.handle(request, secret: secret, custodian: custodian, registry: registry, home: hosted.home.path)
                }, session: { request, connection in
                    RemoteSession.serve(request, connection, hosted: hosted, environment: environment)
                })
                control.start()
                controlBox.set(control)
            } catch {
                inv.note("sitekeep serve: no control socket (\(error)); unlock with --unlock at start")
            }
            // Lock with the login session: the screensaver's ActiveChanged, logind's Lock.
            if let watcher = SessionLockWatcher.start(environment: inv.environment, onLock: { source in
                if custodian.isUnlocked { inv.note("sitekeep serve: the session locked (\(source)); locking") }
                custodian.lock()
            }) {
                controlBox.onShutdown { watcher.stop() }
                inv.note("sitekeep serve: locks with the session: watching \(watcher.sources.joined(separator: " and "))")
            }
            inv.note("sitekeep serve: store \(hosted.home.path); listening on \(path ?? "the socket systemd passed"); control at \(controlPath); \(custodian.isUnlocked ? "unlocked" : "locked"); idle lock after \(idleSeconds) s")
        }, onStopped: {
            vaultSync?.stop()
            core.stop()
            controlBox.shutdown()
            custodian.lock()
            custodian.auditLog.flush()
        })
        inv.note("sitekeep serve: stopped")
    }
}

extension DaemonCommands {
    /// Refuses a `SITEKEEP_ASKPASS` that cannot work (relative, missing, not an executable file)
    /// at start, rather than at the first key use ("no presence service is configured").
    static func checkAskpass(_ environment: [String: String]) throws {
        guard let program = environment["SITEKEEP_ASKPASS"], !program.isEmpty else { return }
        var info = stat()
        let why: String? = !program.hasPrefix("/") ? "is not an absolute path"
            : stat(program, &info) != 0 ? "does not exist"
            : info.st_mode & S_IFMT != S_IFREG ? "is not a regular file"
            : access(program, X_OK) != 0 ? "is not executable" : nil
        if let why {
            throw CommandFailure("SITEKEEP_ASKPASS=\(String(String.UnicodeScalarView(program.unicodeScalars.prefix(200).filter { $0.value >= 0x20 && $0.value != 0x7f }))) \(why), so no key use could ever be approved",
                                 remedy: "set SITEKEEP_ASKPASS to the absolute path of an executable program that asks the user (chmod +x it), or unset it", code: "bad_askpass")
        }
    }
}

/// The control server and the other sockets the ready callback starts, stopped at shutdown.
final class ControlBox: @unchecked Sendable {
    // @unchecked: `server` and `stops` are only touched under `lock`.
    private let lock = NSLock()
    private var server: ControlServer?
    private var stops: [@Sendable () -> Void] = []
    func set(_ s: ControlServer) { lock.lock(); server = s; lock.unlock() }
    /// Runs `stop` at shutdown, before the control server stops.
    func onShutdown(_ stop: @escaping @Sendable () -> Void) { lock.lock(); stops.append(stop); lock.unlock() }
    func shutdown() {
        lock.lock(); let s = server, pending = stops; server = nil; stops = []; lock.unlock()
        for stop in pending { stop() }
        s?.shutdown()
    }
}

/// The daemon's ssh-agent socket over its custodian.
enum SSHAgentService {
    /// Starts the agent socket at `path`; presence through `$SITEKEEP_ASKPASS` (without it,
    /// keys are listed but every signature is refused with a note saying why).
    static func start(path: String, custodian: Custodian, environment: [String: String],
                      note: @escaping @Sendable (String) -> Void) throws -> AgentSocketServer {
        let verifier: any PresenceVerifier
        do {
            verifier = try AskpassPresenceVerifier.fromEnvironment(environment)
        } catch {
            note("sitekeep serve: ssh-agent: \(error); signatures will be refused until the daemon is started with it")
            verifier = UnavailablePresence(reason: error.description)
        }
        let keys = CustodyAgentKeys(custodian: custodian, presence: WindowedAgentPresence(verifier: verifier, lockScope: custodian.lockScope))
        let server = try AgentSocketServer(path: path, keys: keys) { peer, why in
            note("sitekeep serve: ssh-agent: refused a request from \(peer.label): \(why)")
        }
        server.start()
        return server
    }
}

/// A presence verifier that always refuses, saying why (no askpass program is configured).
struct UnavailablePresence: PresenceVerifier {
    let reason: String
    func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        throw .presenceUnavailable(reason)
    }
}

/// What the control socket does: `status`, `lock`, `unlock`, and `sites` (the app-bound sites
/// for a web-view host: id, name, origins and the folder it keeps the site's web data in; no
/// secrets, and it works while locked).
enum DaemonControl {
    static func handle(_ request: ControlServer.Request, secret: UnsafeRawBufferPointer?, custodian: Custodian,
                       registry: SiteRegistry, home: String) -> JSONValue {
        let method = request.method
        switch request.op {
        case "sites":
            var list: [JSONValue] = []
            for site in registry.sites() where site.isAppBound {
                guard let folder = try? registry.webFolder(forIdentifier: site.id) else {
                    return ["ok": false, "error": .string("cannot create the web folder of \(site.displayName)")]
                }
                list.append(["id": .string(site.id.string), "name": .string(site.displayName),
                             "origins": .array(site.origins.map { .string($0.serialized) }), "webFolder": .string(folder)])
            }
            return ["ok": true, "sites": .array(list)]
        case "status":
            return ["ok": true, "unlocked": .bool(custodian.isUnlocked), "store": .string(custodian.storeID), "home": .string(home),
                    "pid": .int(Int64(getpid()))]
        case "lock":
            custodian.lock()
            return ["ok": true]
        case "unlock":
            guard let secret, secret.count > 0 else { return ["ok": false, "code": "no_secret", "error": "no unlock secret was sent"] }
            do {
                let bytes = try SecretBytes(copying: secret)
                let unlockSecret: UnlockSecret
                switch method {
                case "passphrase": unlockSecret = .passphrase(bytes)
                case "prf": unlockSecret = .prf(bytes)
                case "recovery": unlockSecret = .recoveryCode(bytes)
                default: return ["ok": false, "error": "unknown unlock method"]
                }
                try custodian.unlock(unlockSecret)
                return ["ok": true, "unlocked": true]
            } catch let e as CustodyError {
                return ["ok": false, "code": "unlock_failed", "error": .string(e.description)]
            } catch {
                return ["ok": false, "error": "unlock failed"]
            }
        default:
            return ["ok": false, "code": "bad_request", "error": "unknown control op"]
        }
    }
}
