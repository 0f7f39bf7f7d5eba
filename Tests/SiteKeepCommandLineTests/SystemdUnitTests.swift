import Foundation
import Testing
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The systemd units in tools/systemd, run as written: `systemd-analyze verify`, then the
/// socket unit's three sockets passed by name to the service's own `ExecStart` line. A real
/// systemd user manager is used where the machine has one; otherwise `systemd-socket-activate`
/// passes the sockets exactly as the socket unit does (both print which they used).
@Suite(.serialized) struct SystemdUnitTests {
    static var unitFolder: URL {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        return dir.appendingPathComponent("tools/systemd")
    }

    /// `Key=value` lines of a unit file's section-less view, in order.
    static func values(_ key: String, in unit: String) -> [String] {
        unit.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// The units pass `systemd-analyze verify` (a missing ExecStart binary, an unknown option,
    /// a bad path all fail it), run against a home where ~/.local/bin/sitekeep is the build's.
    @Test func unitsVerify() throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            print("SystemdUnitTests: skipped systemd-analyze verify: /usr/bin/systemd-analyze is not installed")
            return
        }
        let dir = try Fixtures.temporaryDirectory("sk-units")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (home, run) = try Self.homeWithBinaries(dir, sitekeep: sitekeep)
        for name in ["sitekeep.socket", "sitekeep.service"] {
            try FileManager.default.copyItem(at: Self.unitFolder.appendingPathComponent(name), to: dir.appendingPathComponent(name))
        }
        let r = ChildProcess.capture("/usr/bin/systemd-analyze", ["verify", "--user", dir.appendingPathComponent("sitekeep.socket").path,
                                                                   dir.appendingPathComponent("sitekeep.service").path],
                                     environment: ["HOME": home, "XDG_RUNTIME_DIR": run])
        #expect(r.status == 0 && !r.err.contains("sitekeep"), "systemd-analyze verify: \(r.out)\(r.err)")
    }

    /// Under socket activation the first `sitekeep unlock` works (it reached the activated
    /// control socket instead of starting a second daemon that met systemd's bridge socket),
    /// then a signature and `status` go through the daemon, the agent socket answers, and
    /// `sitekeep stop` ends the service cleanly.
    @Test func socketActivatedDaemonUnlocksTheFirstTimeSignsAndStops() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            print("SystemdUnitTests: skipped: /usr/bin/systemd-socket-activate is not installed (Debian: systemd)")
            return
        }
        let manager = "/run/user/\(getuid())/systemd"
        print("SystemdUnitTests: " + (FileManager.default.fileExists(atPath: manager)
            ? "a systemd user manager exists (\(manager)), but the test leaves the user's own units alone; running the units under systemd-socket-activate"
            : "no systemd user manager on this machine; running the units under systemd-socket-activate"))
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let (home, run) = try Self.homeWithBinaries(store.dir, sitekeep: sitekeep)
        let approve = try store.file("approve.sh", Array("#!/bin/sh\nexit 0\n".utf8))
        chmod(approve, 0o700)

        let socketUnit = try String(contentsOf: Self.unitFolder.appendingPathComponent("sitekeep.socket"), encoding: .utf8)
        let serviceUnit = try String(contentsOf: Self.unitFolder.appendingPathComponent("sitekeep.service"), encoding: .utf8)
        func expand(_ s: String) -> String { s.replacingOccurrences(of: "%t", with: run).replacingOccurrences(of: "%h", with: home) }
        let listens = Self.values("ListenStream", in: socketUnit).map(expand)
        let names = Self.values("FileDescriptorName", in: socketUnit)
        #expect(names == ["bridge", "control", "agent"], "the socket unit names its sockets bridge, control and agent")
        #expect(listens.count == names.count && listens.allSatisfy { $0.hasPrefix(run + "/sitekeep/") }, "\(listens)")
        let execStart = try #require(Self.values("ExecStart", in: serviceUnit).first).split(separator: " ").map { expand(String($0)) }
        // systemd makes the folder (DirectoryMode=0700); systemd-socket-activate does not.
        mkdir(run + "/sitekeep", 0o700)

        let env = ["SITEKEEP_HOME": store.home, "XDG_RUNTIME_DIR": run, "HOME": home, "SITEKEEP_ASKPASS": approve, "NO_COLOR": "1",
                   "SITEKEEP_SOCK": "", "SITEKEEP_AGENT_SOCK": "", "SITEKEEP_NO_DAEMON": ""]
        var activatorArgs = listens.flatMap { ["-l", $0] } + ["--fdname=" + names.joined(separator: ":")]
        activatorArgs += env.keys.sorted().flatMap { ["-E", $0] } + execStart
        let activatorEnv = env.map { "\($0.key)=\($0.value)" } + ["PATH=/usr/bin:/bin"]
            + ["DBUS_SESSION_BUS_ADDRESS", "SITEKEEP_TEST_KEYRING"].compactMap { k in ProcessInfo.processInfo.environment[k].map { "\(k)=\($0)" } }
        let pid = try #require(ChildProcess.spawn("/usr/bin/systemd-socket-activate", activatorArgs, env: activatorEnv))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        for path in listens { #expect(ChildProcess.waitForPath(path, pid: pid, seconds: 20), "\(path) did not appear") }

        func cli(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(sitekeep, args, environment: env)
        }
        let unlocked = cli(["unlock", "--passphrase-file", store.passFile])
        #expect(unlocked.status == 0 && unlocked.out.contains("daemon holds the keys"), "the first unlock: \(unlocked.out)\(unlocked.err)")
        #expect(!unlocked.err.contains("already listens"))

        let message = try store.file("note.txt", Array("signed under systemd\n".utf8))
        let signed = cli(["team", "sign", "summit", "--message-file", message, "--json"])
        #expect(signed.status == 0 && signed.out.contains("signature"), "sign: \(signed.out)\(signed.err)")
        let status = cli(["status"])
        #expect(status.status == 0 && status.out.contains("unlocked (daemon)"), "status: \(status.out)\(status.err)")
        // The agent socket is served (no keys while the ssh-agent setting is off), not left unanswered.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-add") {
            let agent = ChildProcess.capture("/usr/bin/ssh-add", ["-l"], environment: ["SSH_AUTH_SOCK": run + "/sitekeep/agent.sock"])
            #expect(agent.out.contains("no identities") || agent.err.contains("no identities"), "ssh-add -l: \(agent.out)\(agent.err)")
        }

        let stopped = cli(["stop"])
        #expect(stopped.status == 0 && stopped.out.contains("Stopped the daemon"), "stop: \(stopped.out)\(stopped.err)")
        var st: Int32 = 0
        var exited = false
        for _ in 0..<200 { if waitpid(pid, &st, WNOHANG) == pid { exited = true; break }; usleep(50_000) }
        #expect(exited && st & 0x7f == 0 && (st >> 8) & 0xff == 0, "the activated daemon did not exit 0 after stop (status \(st))")
    }

    /// With an older socket unit that passes only `bridge.sock`, the first `unlock` still works:
    /// something listens on the bridge socket, so it waits for the daemon its connection started
    /// (which makes its own control socket) instead of starting a second one that would fail
    /// with "already listens".
    @Test func aBridgeOnlySocketUnitStillUnlocksTheFirstTime() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            print("SystemdUnitTests: skipped: /usr/bin/systemd-socket-activate is not installed (Debian: systemd)")
            return
        }
        let store = try CLIStore()
        _ = try await store.initialize()
        let (home, run) = try Self.homeWithBinaries(store.dir, sitekeep: sitekeep)
        mkdir(run + "/sitekeep", 0o700)
        let env = ["SITEKEEP_HOME": store.home, "XDG_RUNTIME_DIR": run, "HOME": home, "NO_COLOR": "1",
                   "SITEKEEP_SOCK": "", "SITEKEEP_AGENT_SOCK": "", "SITEKEEP_NO_DAEMON": ""]
        let args = ["-l", run + "/sitekeep/bridge.sock"] + env.keys.sorted().flatMap { ["-E", $0] } + [home + "/.local/bin/sitekeep", "serve"]
        let pid = try #require(ChildProcess.spawn("/usr/bin/systemd-socket-activate", args, env: env.map { "\($0.key)=\($0.value)" } + ["PATH=/usr/bin:/bin"]))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, WNOHANG) }
        #expect(ChildProcess.waitForPath(run + "/sitekeep/bridge.sock", pid: pid, seconds: 20))
        let unlocked = ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile], environment: env)
        #expect(unlocked.status == 0 && unlocked.out.contains("daemon holds the keys"), "the first unlock: \(unlocked.out)\(unlocked.err)")
        let stopped = ChildProcess.capture(sitekeep, ["stop"], environment: env)
        #expect(stopped.status == 0 && stopped.out.contains("Stopped the daemon"), "stop: \(stopped.out)\(stopped.err)")
    }

    /// A home whose ~/.local/bin holds the build's three executables (the unit's ExecStart),
    /// and a private runtime folder.
    static func homeWithBinaries(_ dir: URL, sitekeep: String) throws -> (home: String, run: String) {
        let home = dir.appendingPathComponent("h").path
        let bin = home + "/.local/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let built = URL(fileURLWithPath: sitekeep).deletingLastPathComponent().path
        for name in ["sitekeep", "sitekeep-main", "sitekeep-read"] {
            try? FileManager.default.createSymbolicLink(atPath: bin + "/" + name, withDestinationPath: built + "/" + name)
        }
        let run = dir.appendingPathComponent("r").path
        mkdir(run, 0o700)
        chmod(run, 0o700)
        return (home, run)
    }
}
