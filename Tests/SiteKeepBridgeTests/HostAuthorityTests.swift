import Foundation
import Testing
import SiteKeepBridge
import SiteKeepPartitions
import SiteKeepSocket
import SiteKeepWiring
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's host rule on described processes: the built-in browser's file, an added host's
/// file (trusted as a path, or pinned by its SHA-256), and the refusals, each naming why.
@Suite struct HostAuthorityTests {
    static let site = BridgeSite(id: "s1", name: "Summit", origins: ["https://web-summit.sgit.ai"], isAppBound: true)

    /// A copy of /bin/true in a fresh folder, and the description of a process running it.
    static func program(_ name: String = "host") throws -> (path: String, process: PeerProcess) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-hosts-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/" + name
        try FileManager.default.copyItem(atPath: "/bin/true", toPath: path)
        let identity = try #require(ExecutableIdentity(path: path))
        return (path, PeerProcess(pid: 4242, uid: getuid(), executablePath: path, executable: identity))
    }

    @Test func theBuiltInHostBindsEverySiteAndAnotherProgramNone() throws {
        let browser = try Self.program("sitekeep-browser")
        let other = try Self.program("other")
        let authority = SiteHostAuthority(builtIns: [try #require(SiteHostAuthority.browser(besideExecutable: (browser.path as NSString).deletingLastPathComponent + "/sitekeep"))],
                                          hostsOf: { _ in [] })
        #expect(authority.refusal(of: browser.process, for: Self.site) == nil)
        let why = try #require(authority.refusal(of: other.process, for: Self.site))
        #expect(why.contains("\(other.path) (pid 4242) is not a host of Summit"), "\(why)")
        #expect(why.contains("sitekeep site host add https://web-summit.sgit.ai \(other.path)"), "\(why)")
        // The browser's file replaced after the daemon started: said so, with the remedy.
        try FileManager.default.removeItem(atPath: browser.path)
        try FileManager.default.copyItem(atPath: "/bin/false", toPath: browser.path)
        let rebuilt = PeerProcess(pid: 4243, uid: getuid(), executablePath: browser.path, executable: try #require(ExecutableIdentity(path: browser.path)))
        let stale = try #require(authority.refusal(of: rebuilt, for: Self.site))
        #expect(stale.contains("restart the daemon"), "\(stale)")
    }

    @Test func anAddedHostBindsItsSiteWhileItsFileIsTheOneAdded() throws {
        let host = try Self.program()
        let added = try SiteHost.adding(host.path)
        #expect(added.sha256 != nil, "a file this user can change is kept with its digest")
        let authority = SiteHostAuthority(builtIns: [], hostsOf: { $0.id == "s1" ? [added] : [] })
        #expect(authority.refusal(of: host.process, for: Self.site) == nil)
        let elsewhere = BridgeSite(id: "s2", name: "Other", origins: ["https://other.example"], isAppBound: true)
        #expect(authority.refusal(of: host.process, for: elsewhere) != nil)
        // A digest that is not the file's: "changed since it was added".
        let stale = try SiteHost(path: host.path, sha256: String(repeating: "0", count: 64))
        let pinned = SiteHostAuthority(builtIns: [], hostsOf: { _ in [stale] })
        let why = try #require(pinned.refusal(of: host.process, for: Self.site))
        #expect(why.contains("changed since it was added"), "\(why)")
        // Another file put at the path: the process runs the old one, which is no longer the host.
        try FileManager.default.removeItem(atPath: host.path)
        try FileManager.default.copyItem(atPath: "/bin/false", toPath: host.path)
        #expect(authority.refusal(of: host.process, for: Self.site) != nil)
    }

    @Test func codeLoadingVariablesAReplacedFileAnotherUserAndAHandedOnConnectionAreRefused() throws {
        let host = try Self.program()
        let authority = SiteHostAuthority(builtIns: [], hostsOf: { _ in [try! SiteHost.adding(host.path)] })
        let p = host.process
        let preloaded = PeerProcess(pid: p.pid, uid: p.uid, executablePath: p.executablePath, executable: p.executable,
                                    codeLoadingVariables: ["LD_PRELOAD"])
        #expect(authority.refusal(of: preloaded, for: Self.site)?.contains("LD_PRELOAD set") == true)
        let replaced = PeerProcess(pid: p.pid, uid: p.uid, executablePath: p.executablePath, executableReplaced: true, executable: p.executable)
        #expect(authority.refusal(of: replaced, for: Self.site)?.contains("replaced or deleted") == true)
        let stranger = PeerProcess(pid: p.pid, uid: getuid() &+ 1, executablePath: p.executablePath, executable: p.executable)
        #expect(authority.refusal(of: stranger, for: Self.site)?.contains("another user") == true)
        // A host that does not hold its own connection (another process connected and handed it
        // on), or holds it only as standard input or output, is refused; where the kernel could
        // not say, the host binds.
        let handedOn = PeerProcess(pid: p.pid, uid: p.uid, executablePath: p.executablePath, executable: p.executable, holding: .notHeld)
        #expect(authority.refusal(of: handedOn, for: Self.site)?.contains("does not hold this connection") == true)
        let onStdin = PeerProcess(pid: p.pid, uid: p.uid, executablePath: p.executablePath, executable: p.executable, holding: .standardStreamsOnly)
        #expect(authority.refusal(of: onStdin, for: Self.site)?.contains("standard input or output") == true)
        let unknown = PeerProcess(pid: p.pid, uid: p.uid, executablePath: p.executablePath, executable: p.executable, holding: .unknown)
        #expect(authority.refusal(of: unknown, for: Self.site) == nil)
        #expect(authority.refusal(of: p, for: Self.site) == nil)
    }

    @Test func storedHostsAreValidated() {
        #expect(throws: PartitionError.self) { try SiteHost(path: "relative/host", sha256: nil) }
        #expect(throws: PartitionError.self) { try SiteHost(path: "/a\nb", sha256: nil) }
        #expect(throws: PartitionError.self) { try SiteHost(path: "/usr/bin/x", sha256: "ABC") }
        #expect(throws: PartitionError.self) { try SiteHost.adding("/nonexistent/sk-host") }
    }
}
