#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import CLinux
import Synchronization
import SiteKeepBridge
import SiteKeepBridgeProtocol
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepSocket
import SiteKeepSystem
import SiteKeepVocabulary

/// A site's host is a process the daemon started (issue 45): the daemon opens the host's
/// executable, checks what it opened, starts that very descriptor with an environment it builds,
/// and hands the new process a ``HostChannel`` over which it gets bridge connections already
/// tied to its sites. Nothing a process shows of itself (its `/proc` entries, its path, its
/// environment) makes it a host, since any process of the user can rewrite all of that; and a
/// connection that arrives on the bridge socket binds no app-bound site.
///
/// Two kinds of host:
/// - **the SiteKeep browser** beside the daemon's own program, every app-bound site's host; its
///   SHA-256 is pinned when the daemon starts, and a launch runs it only while the file still has
///   that digest;
/// - **a program the user added for a site** (`sitekeep site host add`), for that site only, run
///   only while its file has the digest kept when it was added (or, for a file the user cannot
///   change, such as a system interpreter, while that still holds).
///
/// The check and the start cannot be raced: the digest is taken from the opened descriptor, the
/// descriptor itself is executed (`/proc/self/fd/N`, as `fexecve` does), and the file's change
/// time (`st_ctim`, which only the kernel sets) must be the same before the digest and after the
/// start, and older than a second before the digest, so a write in between, even within one
/// clock tick, is seen.
final class HostLauncher: Sendable {
    /// The SiteKeep browser as this daemon pinned it when it started.
    struct PinnedBrowser: Sendable {
        let path: String
        let sha256: String
    }

    private let registry: SiteRegistry
    private let bridge: BridgeServer
    private let custodian: Custodian
    private let browser: PinnedBrowser?
    private let log: @Sendable (String) -> Void
    /// The hosts running now (pid → its pidfd), signalled when the daemon stops.
    private let running = Mutex<[Int32: Int32]>([:])
    private let stopping = Atomic(false)

    init(registry: SiteRegistry, bridge: BridgeServer, custodian: Custodian, browser: PinnedBrowser?, log: @escaping @Sendable (String) -> Void) {
        self.registry = registry
        self.bridge = bridge
        self.custodian = custodian
        self.browser = browser
        self.log = log
    }

    /// The browser beside `executable` (the daemon's own program), pinned: its SHA-256 now.
    static func pinBrowser(besideExecutable executable: String?) -> PinnedBrowser? {
        guard let executable, let slash = executable.lastIndex(of: "/") else { return nil }
        let path = String(executable[..<slash]) + "/sitekeep-browser"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let digest = try? VerifiedExecutable.digest(fd) else { return nil }
        return PinnedBrowser(path: path, sha256: digest)
    }

    // MARK: - The control request

    /// The header fields a `launch` request may carry.
    static let fields: Set<String> = ["v", "op", "store", "program", "site", "path", "argv", "env", "cwd", "method", "length"]

    /// Serves one `launch` request on `connection` (its header read; `descriptors`, which the
    /// client attached to it, are its standard input, output and error, owned here): starts the
    /// host, answers `{"ok": true, "pid": N}`, waits for the host to end and answers
    /// `{"exited": status}`. The client closing its connection stops the host.
    func serve(_ request: ControlServer.Request, descriptors: [Int32], connection: SocketConnection) {
        defer { for fd in descriptors { close(fd) } }
        let started: (pid: Int32, pidfd: Int32, name: String)
        do {
            started = try start(request, stdio: descriptors, connection: connection)
        } catch {
            reply(connection, ["ok": false, "code": .string(error.code), "error": .string(error.message)])
            return
        }
        reply(connection, ["ok": true, "pid": .int(Int64(started.pid))])
        let status = wait(for: started.pid, pidfd: started.pidfd, client: connection.fd)
        log("\(started.name) (pid \(started.pid)) \(status)")
        reply(connection, ["exited": .int(Int64(status.status))])
    }

    /// Stops every host this daemon started (SIGTERM; the waits reap them): a host lives no
    /// longer than the daemon that gave it its sites.
    func stopAll() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        for (_, pidfd) in running.withLock({ $0 }) { _ = sitekeep_pidfd_signal(pidfd, SIGTERM) }
    }

    private func reply(_ connection: SocketConnection, _ value: JSONValue) {
        _ = connection.writer.send(JSONSerializer.bytes(value))
    }

    /// Why a launch was refused: a code for the client and a message naming what to do.
    struct Refusal: Error {
        let code: String
        let message: String
        init(_ code: String, _ message: String) {
            self.code = code
            self.message = message
        }
    }

    private func start(_ request: ControlServer.Request, stdio: [Int32], connection: SocketConnection) throws(Refusal) -> (pid: Int32, pidfd: Int32, name: String) {
        guard !stopping.load(ordering: .sequentiallyConsistent) else { throw Refusal("stopping", "the daemon is stopping; start it again with 'sitekeep unlock'") }
        let header = request.header
        guard stdio.count <= 3 else { throw Refusal("bad_request", "a launch carries at most three descriptors (standard input, output and error)") }
        guard let argvValues = (header["argv"] ?? .array([])).arrayValue, argvValues.count <= 256 else {
            throw Refusal("bad_request", "argv must be a list of at most 256 strings")
        }
        var arguments: [String] = []
        for value in argvValues {
            guard let a = value.stringValue, a.utf8.count <= 4096, !a.utf8.contains(0) else {
                throw Refusal("bad_request", "every argument must be a string of at most 4096 bytes without NUL")
            }
            arguments.append(a)
        }
        var callerEnvironment: [String: String] = [:]
        for member in header["env"]?.objectValue ?? [] {
            guard let v = member.value.stringValue else { throw Refusal("bad_request", "env must map names to strings") }
            callerEnvironment[member.key] = v
        }
        let cwd = header["cwd"]?.stringValue
        if let cwd, !cwd.hasPrefix("/") { throw Refusal("bad_request", "cwd must be an absolute path") }

        let program: (path: String, expected: String?, name: String, admits: @Sendable (BridgeSite) -> String?)
        let sites: [Site]
        switch header["program"]?.stringValue {
        case "browser":
            guard let browser else {
                throw Refusal("not_found", "no sitekeep-browser was beside this daemon's program when it started; install it there (tools/setup --browser, then SITEKEEP_BROWSER=1 swift build) and restart the daemon")
            }
            sites = registry.authenticSites().filter(\.isAppBound)
            guard !sites.isEmpty else {
                if let (site, standing) = registry.sitesNotAuthentic().first(where: { $0.site.isAppBound }), let problem = standing.problem(of: site) {
                    log("refused to start the SiteKeep browser: \(problem)")
                    throw Refusal("no_sites", "no app-bound site can bind yet: \(problem)")
                }
                throw Refusal("no_sites", "the store has no app-bound sites; add one with 'sitekeep site add NAME --origin https://… --app-bound'")
            }
            if arguments.contains("--automation") {
                // The automation channel drives the pages (and so the bridge) from the client's
                // standard input: a widening as large as adding a host, so it needs the secret.
                try approveAutomation(request, connection: connection)
            }
            let registry = self.registry
            program = (browser.path, browser.sha256, "the SiteKeep browser", { site in
                guard let id = try? SiteID(parsing: site.id), let now = registry.site(forIdentifier: id), now.isAppBound else {
                    return "\(site.name) is no longer an app-bound site"
                }
                return registry.standing(of: id).problem(of: now)
            })
        case "host":
            guard let siteText = header["site"]?.stringValue, let path = header["path"]?.stringValue else {
                throw Refusal("bad_request", "a host launch names the site and the program's path")
            }
            let site = try Self.site(siteText, in: registry)
            if let problem = registry.standing(of: site.id).problem(of: site) {
                log("refused to start a host for \(site.displayName): \(problem)")
                throw Refusal("not_authentic", problem)
            }
            guard site.isAppBound else {
                throw Refusal("not_app_bound", "\(site.displayName) is not app-bound, so it has no hosts; only app-bound sites use the bridge")
            }
            guard let resolved = realpath(path, nil) else {
                throw Refusal("not_found", "no program at \(DisplayText.escaped(path)): \(Errno.current)")
            }
            let real = String(cString: resolved)
            free(resolved)
            guard let host = site.hosts.first(where: { $0.path == real }) else {
                throw Refusal("not_a_host", "\(real) is not a host of \(site.displayName); if you trust it to act for the site: sitekeep site host add \(site.origins.first?.serialized ?? site.id.string) \(real)")
            }
            if host.sha256 == nil, SiteHost.changeableByThisUser(real) {
                throw Refusal("host_changed", "\(real) can now be changed by you, and no SHA-256 was kept when it was added; add it again so its digest is kept: sitekeep site host add \(site.origins.first?.serialized ?? site.id.string) \(real)")
            }
            sites = [site]
            let registry = self.registry, siteID = site.id, key = host.path
            program = (real, host.sha256, real, { bound in
                guard bound.id == siteID.string else { return "\(key) was started for \(site.displayName), not \(bound.name)" }
                guard let now = registry.site(forIdentifier: siteID), now.hosts.contains(where: { $0.path == key }) else {
                    return "\(key) is no longer a host of \(bound.name)"
                }
                return registry.standing(of: siteID).problem(of: now)
            })
        default:
            throw Refusal("bad_request", "program must be \"browser\" or \"host\"")
        }

        let executable: VerifiedExecutable
        do { executable = try VerifiedExecutable(path: program.path, expectedSHA256: program.expected, name: program.name) } catch {
            log("refused to start \(program.name): \(error.message)")
            throw error
        }
        defer { executable.close() }

        let (daemonEnd, hostEnd) : (Int32, Int32)
        do { (daemonEnd, hostEnd) = try DescriptorPassing.socketPair() } catch {
            throw Refusal("internal", "cannot make the host's channel: \(error)")
        }
        // Everything the child gets is moved above the numbers it is given at, so no dup2 of
        // one overwrites another before it is copied.
        let high = ([hostEnd, executable.fd] + stdio).map { fcntl($0, F_DUPFD_CLOEXEC, 64) }
        defer { for fd in high where fd >= 0 { close(fd) } }
        close(hostEnd)
        guard !high.contains(where: { $0 < 0 }) else {
            close(daemonEnd)
            throw Refusal("internal", "cannot prepare the host's descriptors: \(Errno.current)")
        }
        // The checked descriptor is what runs: descriptor 4 in the child, executed by its
        // /proc path (as fexecve does); an interpreter opens a script by that path after the
        // exec, so it stays open there (the host may close it). Everything else the daemon has
        // open is closed in the child, whatever it inherited without close-on-exec.
        let descriptors: [(parent: Int32, child: Int32)] = [(high[0], HostChannel.descriptor), (high[1], 4)]
        let programPath = "/proc/self/fd/4"
        func stream(_ index: Int) -> ChildProcess.Stream { index < stdio.count ? .descriptor(high[2 + index]) : .null }
        let environment = Self.environment(from: callerEnvironment, for: program.name)
        let child: ChildProcess
        do throws(SystemError) {
            child = try ChildProcess.spawn(programPath, arguments: arguments, environment: environment,
                                           stdin: stream(0), stdout: stream(1), stderr: stream(2),
                                           ownProcessGroup: false, detached: true, argv0: program.path,
                                           workingDirectory: cwd, descriptors: descriptors,
                                           closingFrom: 5)
        } catch {
            close(daemonEnd)
            throw Refusal("not_started", "cannot start \(program.name): \(error.cause)")
        }
        let pidfd = sitekeep_pidfd_open(child.pid)
        // The file must still be the one checked (its change time moved by no write since).
        guard executable.unchangedSinceCheck() else {
            if pidfd >= 0 { _ = sitekeep_pidfd_signal(pidfd, SIGKILL); close(pidfd) } else { kill(child.pid, SIGKILL) }
            _ = child.wait()
            close(daemonEnd)
            log("refused to start \(program.name): its file was written while it was being started")
            throw Refusal("host_changed", "\(program.name) was written while it was being started, so it was stopped; try again once it is no longer being changed")
        }
        running.withLock { $0[child.pid] = pidfd }
        let names = sites.map(\.displayName).joined(separator: ", ")
        log("started \(program.name) (pid \(child.pid)) for \(names)")
        serveChannel(daemonEnd, sites: { [registry] in
            sites.compactMap { registry.site(forIdentifier: $0.id) }.filter { program.admits(Self.bridgeSite($0)) == nil }
        }, admits: program.admits, name: program.name)
        return (child.pid, pidfd, program.name)
    }

    private func approveAutomation(_ request: ControlServer.Request, connection: SocketConnection) throws(Refusal) {
        let length = request.header["length"]?.intValue ?? 0
        guard request.method == "passphrase", length > 0, length <= Int64(ControlWire.maximumSecretLength) else {
            throw Refusal("approval_required", "--automation lets the program that started the browser drive its pages; it needs the passphrase (--passphrase-file F)")
        }
        var complete = false
        let secret: SecretBytes
        do {
            secret = try SecretBytes(count: Int(length), initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                complete = ControlFrame.receiveExactly(connection.fd, into: buffer)
            })
        } catch { throw Refusal("bad_request", "the passphrase could not be received") }
        guard complete else { throw Refusal("bad_request", "the passphrase could not be received") }
        do { try custodian.verifySecret(.passphrase(secret), op: .presenceSecret) } catch {
            throw Refusal("presence_denied", "--automation was not approved: \(error)")
        }
    }

    /// Waits until the host `pid` ends, or the client goes (then the host is stopped: SIGTERM,
    /// SIGKILL 5 s later), and reaps it.
    private func wait(for pid: Int32, pidfd: Int32, client: Int32) -> ChildProcess.Termination {
        defer {
            running.withLock { _ = $0.removeValue(forKey: pid) }
            if pidfd >= 0 { close(pidfd) }
        }
        let child = ChildProcess(pid: pid)
        guard pidfd >= 0 else { return child.wait() }
        var signalled = false
        var deadline: UInt64 = 0
        while true {
            var fds = [pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: client, events: signalled ? 0 : Int16(POLLIN) | 0x2000 /* POLLRDHUP */, revents: 0)]
            let n = poll(&fds, 2, 200)
            if n < 0, errno == EINTR { continue }
            if fds[0].revents != 0 { return child.wait() }
            var stop = stopping.load(ordering: .sequentiallyConsistent)
            if !signalled, fds[1].revents != 0 {
                // Bytes from the client are not part of the protocol and are dropped; its end
                // closing means the host goes with it.
                var byte: UInt8 = 0
                if fds[1].revents & Int16(POLLIN) != 0, recv(client, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 {
                    _ = recv(client, &byte, 1, 0)
                } else {
                    stop = true
                }
            }
            if stop, !signalled {
                _ = sitekeep_pidfd_signal(pidfd, SIGTERM)
                signalled = true
                deadline = Clocks.monotonicNanoseconds() + 5_000_000_000
            }
            if signalled, Clocks.monotonicNanoseconds() > deadline {
                _ = sitekeep_pidfd_signal(pidfd, SIGKILL)
                return child.wait()
            }
        }
    }

    // MARK: - The channel

    private func serveChannel(_ fd: Int32, sites: @escaping @Sendable () -> [Site], admits: @escaping @Sendable (BridgeSite) -> String?, name: String) {
        let registry = registry, bridge = bridge
        let started = SystemThread.detach {
            defer { close(fd) }
            while let (line, extra) = DescriptorPassing.receiveLine(fd, limit: HostChannel.maximumLineBytes, maximumDescriptors: 0) {
                for e in extra { close(e) }
                let request = try? JSONParser.parse(line, limits: .message)
                switch request?["op"]?.stringValue {
                case "sites":
                    var list: [JSONValue] = []
                    for site in sites() {
                        guard let folder = try? registry.webFolder(forIdentifier: site.id) else { continue }
                        list.append(["id": .string(site.id.string), "name": .string(site.displayName),
                                     "origins": .array(site.origins.map { .string($0.serialized) }), "webFolder": .string(folder)])
                    }
                    guard UnixSocket.writeAll(fd, JSONSerializer.bytes(["ok": true, "sites": .array(list)]) + [0x0a]) else { return }
                case "connect":
                    guard let (mine, theirs) = try? DescriptorPassing.socketPair() else {
                        guard UnixSocket.writeAll(fd, JSONSerializer.bytes(["ok": false, "code": "internal", "error": "cannot make a connection"]) + [0x0a]) else { return }
                        continue
                    }
                    defer { close(theirs) }
                    guard bridge.adopt(connection: mine, host: .launched(admits)) else {
                        _ = UnixSocket.writeAll(fd, JSONSerializer.bytes(["ok": false, "code": "stopping", "error": "the daemon is stopping"]) + [0x0a])
                        return
                    }
                    guard (try? DescriptorPassing.send(fd, JSONSerializer.bytes(["ok": true]) + [0x0a], descriptors: [theirs])) != nil else { return }
                default:
                    guard UnixSocket.writeAll(fd, JSONSerializer.bytes(["ok": false, "code": "bad_request", "error": "the channel's ops are 'sites' and 'connect'"]) + [0x0a]) else { return }
                }
            }
        }
        if !started { close(fd); log("no thread for the channel of \(name)") }
    }

    /// The site `text` names: its id, one of its origins, or its display name when one site
    /// has it.
    static func site(_ text: String, in registry: SiteRegistry) throws(Refusal) -> Site {
        if let id = try? SiteID(parsing: text), let s = registry.site(forIdentifier: id) { return s }
        if text.contains("://") {
            if let s = try? registry.site(forOrigin: text) { return s }
        } else {
            let named = registry.sites().filter { $0.displayName == text }
            if named.count == 1 { return named[0] }
            if named.count > 1 { throw Refusal("ambiguous", "\(named.count) sites are named \(DisplayText.escaped(text)); name one by its origin or id") }
        }
        throw Refusal("not_found", "no site \(DisplayText.escaped(text)); name it by its origin (https://…), its name or its id ('sitekeep site list')")
    }

    static func bridgeSite(_ site: Site) -> BridgeSite {
        BridgeSite(id: site.id.string, name: site.displayName, origins: site.origins.map(\.serialized), isAppBound: site.isAppBound)
    }

    // MARK: - The environment

    /// The variables a started host gets from the client that asked for it: what places it on
    /// the user's display, session bus, folders, language and terminal, and nothing that makes
    /// a program load other code (`LD_PRELOAD`, `GTK_MODULES`, `GIO_EXTRA_MODULES`, `PYTHONPATH`,
    /// …: none is on the list, whatever the client had).
    static let passedVariables: Set<String> = [
        "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP",
        "XDG_SESSION_DESKTOP", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
        "DBUS_SESSION_BUS_ADDRESS", "HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "LANGUAGE", "TZ",
        "TERM", "COLORTERM", "NO_COLOR", "COLUMNS", "LINES",
        "GDK_BACKEND", "GDK_SCALE", "GDK_DPI_SCALE", "GSK_RENDERER", "GTK_THEME", "GTK_A11Y", "NO_AT_BRIDGE",
        "WEBKIT_DISABLE_COMPOSITING_MODE", "WEBKIT_DISABLE_DMABUF_RENDERER", "WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS",
        "LIBGL_ALWAYS_SOFTWARE", "SITEKEEP_HOME", "SITEKEEP_BROWSER_SCREENSHOTS",
    ]

    static func environment(from caller: [String: String], for name: String) -> [String] {
        var out: [String] = []
        for (key, value) in caller.sorted(by: { $0.key < $1.key })
        where (passedVariables.contains(key) || key.hasPrefix("LC_")) && !PeerProcess.codeLoadingVariableNames.contains(key)
            && !value.utf8.contains(0) && !key.contains("=") {
            out.append("\(key)=\(value)")
        }
        if caller["PATH"] == nil { out.append("PATH=/usr/local/bin:/usr/bin:/bin") }
        out.append("\(HostChannel.environmentVariable)=\(HostChannel.descriptor)")
        return out
    }
}

/// An executable opened for a launch and checked: the descriptor that will be executed, whose
/// contents had the expected SHA-256, and its change time when checked.
struct VerifiedExecutable {
    let fd: Int32
    private let identity: ExecutableIdentity

    init(path: String, expectedSHA256: String?, name: String) throws(HostLauncher.Refusal) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw HostLauncher.Refusal("not_found", "cannot open \(name) at \(path): \(Errno.current)") }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_mode & 0o111 != 0 else {
            Glibc.close(fd)
            throw HostLauncher.Refusal("not_found", "\(path) is not an executable file")
        }
        // A change in the same clock tick as the last one would leave the change time as it
        // was: wait until the file's change time is a second in the past (as git does with a
        // "racy" index entry), so any write from here on moves it.
        for _ in 0..<30 {
            guard fstat(fd, &st) == 0 else { break }
            let age = Clocks.wallNanoseconds() - (Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec))
            if age > 1_000_000_000 { break }
            usleep(100_000)
        }
        guard let before = ExecutableIdentity(descriptor: fd) else {
            Glibc.close(fd)
            throw HostLauncher.Refusal("not_found", "\(path) is not an executable file")
        }
        let digest: String
        do { digest = try Self.digest(fd) } catch {
            Glibc.close(fd)
            throw HostLauncher.Refusal("not_found", "cannot read \(path): \(error)")
        }
        if let expectedSHA256, digest != expectedSHA256 {
            Glibc.close(fd)
            throw HostLauncher.Refusal("host_changed", name == path
                ? "\(path) changed since it was added as a host (its SHA-256 differs); if you updated it and trust it, add it again: sitekeep site host add SITE \(path)"
                : "\(name) at \(path) changed since the daemon started (its SHA-256 differs: updated or rebuilt?); restart the daemon (sitekeep stop, then sitekeep unlock) to trust the new one")
        }
        guard ExecutableIdentity(descriptor: fd) == before else {
            Glibc.close(fd)
            throw HostLauncher.Refusal("host_changed", "\(path) was written while it was being checked; try again once it is no longer being changed")
        }
        self.fd = fd
        identity = before
    }

    /// Whether the file is as it was checked (a write, `chmod` or `utimensat` moves its change time).
    func unchangedSinceCheck() -> Bool { ExecutableIdentity(descriptor: fd) == identity }

    /// Closes the descriptor (once the host started, or the launch was refused).
    func close() { _ = Glibc.close(fd) }

    /// The SHA-256 (lower-case hex) of everything in the open file `fd`, read from offset 0.
    static func digest(_ fd: Int32) throws(SystemError) -> String {
        var hasher = SHA256.Hasher()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var offset: off_t = 0
        while true {
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("read", "an executable", errno: .current)
            }
            if n == 0 { break }
            hasher.update(chunk[0..<n])
            offset += off_t(n)
        }
        return Hex.encode(hasher.finalize())
    }
}
