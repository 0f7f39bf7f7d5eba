public import SiteKeepBridge
public import SiteKeepSocket
public import SiteKeepPartitions
import Synchronization
import SiteKeepSystem
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's ``HostAuthority``: a process binds a site's connection only when it runs the
/// SiteKeep browser (every site's host) or one of the executables the user added for that site
/// (``SiteHost``), as it is on disk now, and loads no code the executable does not name.
///
/// A process is refused when:
/// - it runs as another user;
/// - its environment sets a variable that loads other code (``PeerProcess/codeLoadingVariableNames``:
///   `LD_PRELOAD`, `LD_LIBRARY_PATH`, `GIO_EXTRA_MODULES`, ...);
/// - it does not hold its end of the connection on a descriptor of its own
///   (``PeerProcess/Holding``): another process connected and handed it on;
/// - the file it runs was replaced or deleted since it started;
/// - that file is none of the site's hosts: a host matches when the file now at its path is the
///   one the process runs (device, inode, size and time), and, for a host kept with a SHA-256,
///   when the file's contents still have that digest (computed once per file state).
public final class SiteHostAuthority: HostAuthority {
    /// The built-in host, every site's: the executable, and the identity it had when the daemon
    /// started (a file put at that path later is not the browser this daemon trusts).
    public struct BuiltIn: Sendable {
        public let name: String
        public let path: String
        public let identity: ExecutableIdentity

        /// The executable at `path` as it is now; nil when there is none.
        public init?(name: String, path: String) {
            guard let identity = ExecutableIdentity(path: path) else { return nil }
            self.name = name
            self.path = path
            self.identity = identity
        }
    }

    private let builtIns: [BuiltIn]
    private let hostsOf: @Sendable (BridgeSite) -> [SiteHost]
    private let inspectable: @Sendable (SiteHost) -> Bool
    /// Whether the hosts that bind by what they show are the command line alone (the daemon).
    private let launchedHostsOnly: Bool
    private let digests = Mutex<[ExecutableIdentity: String]>([:])

    /// - Parameters:
    ///   - builtIns: hosts of every site (the SiteKeep browser beside the daemon).
    ///   - hostsOf: the hosts the user added for a site, as the registry says now.
    ///   - inspectable: which added hosts may bind by what the connecting process shows of
    ///     itself. The daemon allows only the command line (`--command-line-host`, the user's
    ///     explicit opt-in): every other host binds a site only when the daemon started it
    ///     (``HostCheck/launched(_:)``), since any process of the user can rewrite what it shows.
    public convenience init(builtIns: [BuiltIn], hostsOf: @escaping @Sendable (BridgeSite) -> [SiteHost],
                inspectable: @escaping @Sendable (SiteHost) -> Bool = { _ in true }) {
        self.init(builtIns: builtIns, hostsOf: hostsOf, inspectable: inspectable, launchedHostsOnly: false)
    }

    private init(builtIns: [BuiltIn], hostsOf: @escaping @Sendable (BridgeSite) -> [SiteHost],
                 inspectable: @escaping @Sendable (SiteHost) -> Bool, launchedHostsOnly: Bool) {
        self.builtIns = builtIns
        self.hostsOf = hostsOf
        self.inspectable = inspectable
        self.launchedHostsOnly = launchedHostsOnly
    }

    /// The daemon's bridge socket: no built-in host, and of the added hosts only `programs`
    /// (the command line's own executables) bind by inspection.
    public static func commandLineOnly(programs: Set<String>, hostsOf: @escaping @Sendable (BridgeSite) -> [SiteHost]) -> SiteHostAuthority {
        SiteHostAuthority(builtIns: [], hostsOf: hostsOf, inspectable: { programs.contains($0.path) }, launchedHostsOnly: true)
    }

    /// The SiteKeep browser installed beside `executable` (the daemon's own program), when there
    /// is one.
    public static func browser(besideExecutable executable: String) -> BuiltIn? {
        guard let slash = executable.lastIndex(of: "/") else { return nil }
        return BuiltIn(name: "the SiteKeep browser", path: String(executable[..<slash]) + "/sitekeep-browser")
    }

    /// Hosts for a socket server whose clients are this program itself (a host that serves
    /// the bridge to its own threads, a benchmark): this executable, for every site.
    public static func thisProgram() -> SiteHostAuthority {
        let me = ProcessEnvironment.executablePath() ?? "/proc/self/exe"
        return SiteHostAuthority(builtIns: BuiltIn(name: "this program", path: me).map { [$0] } ?? [], hostsOf: { _ in [] })
    }

    public func refusal(of process: PeerProcess, for site: BridgeSite) -> String? {
        let who = "\(process.executablePath) (pid \(process.pid))"
        guard process.uid == getuid() else { return "\(who) runs as another user" }
        if !process.codeLoadingVariables.isEmpty {
            return "\(who) runs with \(process.codeLoadingVariables.joined(separator: ", ")) set, which load code the host does not name; "
                + "start the host without \(process.codeLoadingVariables.count == 1 ? "it" : "them") to use \(site.name)"
        }
        switch process.holding {
        case .own, .unknown: break
        case .standardStreamsOnly:
            return "\(who) holds this connection only as its standard input or output, so another program opened it; a host connects to the daemon itself"
        case .notHeld:
            return "\(who) does not hold this connection: another process does (one that connected, handed it on and then started a host?); a host connects to the daemon itself"
        }
        if process.executableReplaced {
            return "\(who) runs a file that was replaced or deleted since it started (an update?); restart it to use \(site.name)"
        }
        if builtIns.contains(where: { $0.identity == process.executable }) { return nil }
        if let stale = builtIns.first(where: { $0.path == process.executablePath }) {
            return "\(who) is \(stale.name), but not the file that was there when the daemon started (it was updated or rebuilt); "
                + "restart the daemon (sitekeep stop, then sitekeep serve) to trust the new one"
        }
        let added = hostsOf(site)
        for host in added where ExecutableIdentity(path: host.path) == process.executable {
            guard inspectable(host) else {
                return "\(who) is a host of \(site.name), but a host binds a site only when the SiteKeep daemon starts it; "
                    + "start it with: sitekeep host run \(Self.siteArgument(site)) -- \(host.path)"
            }
            guard let pinned = host.sha256 else { return nil }
            if digest(of: host.path, identity: process.executable) == pinned { return nil }
            return "\(who) is \(site.name)'s host \(host.path), but the file changed since it was added (its SHA-256 differs); "
                + "if you updated it, add it again: sitekeep site host add \(Self.siteArgument(site)) \(host.path)"
        }
        let accepted = (builtIns.map(\.name) + added.filter(inspectable).map(\.path)).joined(separator: ", ")
        guard launchedHostsOnly else {
            return "\(who) is not a host of \(site.name), which accepts \(accepted.isEmpty ? "no host" : accepted); "
                + "to let this program act for the site: sitekeep site host add \(Self.siteArgument(site)) \(process.executablePath)"
        }
        if let me = try? SiteHost(path: process.executablePath, sha256: nil), inspectable(me) {
            // The command line ('sitekeep call'): its one fix is the user's opt-in for this site.
            return "\(site.name) does not let the command line ('sitekeep call') act for it; "
                + "to let it: sitekeep site host add \(Self.siteArgument(site)) --command-line"
        }
        if process.executablePath.hasSuffix("/sitekeep-browser") {
            return "\(who) is the SiteKeep browser, which binds a site only when the SiteKeep daemon starts it: open it with 'sitekeep open'"
        }
        return "\(who) was not started by the SiteKeep daemon as a host of \(site.name)\(accepted.isEmpty ? "" : " (on this socket it accepts only \(accepted))"); "
            + "a host binds a site only when the daemon starts it: 'sitekeep open' for the browser, "
            + "'sitekeep host run \(Self.siteArgument(site)) -- PROGRAM' for a program added with 'sitekeep site host add'"
    }

    /// The SHA-256 of the file at `path`, known to be the file with `identity`, computed once
    /// per identity (a changed file has another).
    private func digest(of path: String, identity: ExecutableIdentity) -> String? {
        if let known = digests.withLock({ $0[identity] }) { return known }
        guard let d = SiteHost.fileSHA256(path), ExecutableIdentity(path: path) == identity else { return nil }
        digests.withLock { m in
            if m.count >= 64 { m.removeAll() }
            m[identity] = d
        }
        return d
    }

    private static func siteArgument(_ site: BridgeSite) -> String { site.origins.first ?? site.id }
}
