import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The other agent behind SiteKeep's (issue 47): a real OpenSSH `ssh-agent` started by the test
/// holding a key added with `ssh-add -c` (so the other agent runs its own askpass, which counts
/// the signatures it is asked for), `sitekeep serve --ssh-agent` with `config set
/// ssh-agent-upstream`, and an sshd on loopback; each started by the test and stopped by pid.
@Suite(.serialized) struct SSHUpstreamAgentTests {
    typealias Daemon = SSHAgentDaemonTests.Daemon
    static let sshAgent = "/usr/bin/ssh-agent"
    static let sshAdd = SSHAgentDaemonTests.sshAdd, keygen = SSHAgentDaemonTests.keygen
    static let ssh = SSHAgentDaemonTests.ssh, sshd = SSHAgentDaemonTests.sshd
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    /// An OpenSSH ssh-agent at `socket`, whose confirmations are approved by an askpass that
    /// appends a line to `asked` each time; returns its pid.
    static func startAgent(_ d: Daemon, socket: String, asked: String) throws -> pid_t {
        let askpass = try d.store.file("upstream-askpass.sh", Array("#!/bin/sh\necho asked >> '\(asked)'\nexit 0\n".utf8))
        chmod(askpass, 0o700)
        let started = ChildProcess.capture(sshAgent, ["-s", "-a", socket],
                                           environment: ["SSH_ASKPASS": askpass, "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"])
        #expect(started.status == 0, "\(started.err)")
        let pidText = try #require(started.out.split(separator: ";").first { $0.contains("SSH_AGENT_PID=") })
        return try #require(pid_t(pidText.split(separator: "=")[1]))
    }

    static func askedCount(_ file: String) -> Int {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// `ssh-add -l` through SiteKeep lists its own keys, then the other agent's with their
    /// comments; a login with the other agent's key passes SiteKeep's prompt first (denied: the
    /// login fails, the refusal is in the audit log and the other agent was never asked to sign;
    /// approved: it logs in, the other agent signed once); `ssh-add -D` through SiteKeep leaves
    /// the other agent's key; an absent other agent leaves SiteKeep's keys listed, with a daemon
    /// log line; unset, none of its keys is listed.
    @Test(.enabled(if: have(sshAgent, sshAdd, ssh, sshd, keygen))) func theOtherAgentsKeysAreListedAfterSiteKeepsAndSignThroughItsPrompt() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop(), "the daemon did not stop cleanly: \(d.log)") }
        let socket = d.dir + "/up.sock", asked = d.dir + "/upstream-asked"
        let agentPID = try Self.startAgent(d, socket: socket, asked: asked)
        defer { kill(agentPID, SIGKILL) }
        let key = d.dir + "/id_other"
        #expect(ChildProcess.capture(Self.keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "other@laptop", "-f", key]).status == 0)
        let added = ChildProcess.capture(Self.sshAdd, ["-c", key], environment: ["SSH_AUTH_SOCK": socket])
        #expect(added.status == 0, "\(added.err)")
        let fingerprint = String(ChildProcess.capture(Self.keygen, ["-l", "-f", key + ".pub"]).out.split(separator: " ")[1])

        // Unset: only SiteKeep's own key.
        #expect(ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv).out.split(separator: "\n").count == 1)

        // Set (it widens trust: approved on the prompt, and tagged).
        let set = await d.sitekeep(["config", "set", "ssh-agent-upstream", socket])
        #expect(set.status == 0, "\(set.err)")
        let listed = ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv).out.split(separator: "\n").map(String.init)
        #expect(listed.count == 2, "\(listed) \(d.log)")
        #expect(listed.first?.contains("sitekeep:summit") == true, "SiteKeep's keys first: \(listed)")
        #expect(listed.last == "256 \(fingerprint) other@laptop (ED25519)", "\(listed)")

        let server = try SSHServer(dir: d.dir + "/sshd", authorizedKeys: try String(contentsOfFile: key + ".pub", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        defer { server.stop() }
        // Denied on SiteKeep's prompt: the other agent is never asked.
        d.deny(true)
        let denied = server.login(agent: d.agentSocket)
        #expect(denied.status == 255 && denied.err.contains("Permission denied"), "\(denied.err)")
        #expect(Self.askedCount(asked) == 0, "the other agent was asked to sign after a denial")
        #expect(d.prompts.last?.contains("a key of your other agent (\"\(socket)\")") == true, "\(d.prompts)")
        #expect(d.prompts.last?.contains(fingerprint) == true, "\(d.prompts)")
        // Approved: forwarded, signed by the other agent (its own confirmation counted), logged in.
        d.deny(false)
        let ok = server.login(agent: d.agentSocket)
        #expect(ok.status == 0 && ok.out == "sitekeep-login-ok\n", "ssh: \(ok.err)\nsshd: \(server.log)\nserve: \(d.log)")
        #expect(Self.askedCount(asked) == 1)

        let log = await d.sitekeep(["log", "show", "--limit", "200", "--json"])
        let lines = (try JSONParser.parse(log.out).arrayValue ?? []).filter { ($0["detail"]?.stringValue ?? "").contains("other agent key \(fingerprint)") }
        #expect(lines.map { $0["result"]?.stringValue ?? "" } == ["presence-refused", "ok"], "\(log.out)")

        // ssh-add -D through SiteKeep never reaches the other agent; -d of its key is refused.
        #expect(ChildProcess.capture(Self.sshAdd, ["-D"], environment: d.clientEnv).status == 0)
        #expect(ChildProcess.capture(Self.sshAdd, ["-d", key + ".pub"], environment: d.clientEnv).status != 0)
        #expect(d.log.contains("which SiteKeep's ssh-add never removes"), "\(d.log)")
        #expect(ChildProcess.capture(Self.sshAdd, ["-l"], environment: ["SSH_AUTH_SOCK": socket]).out.contains(fingerprint))

        // The other agent gone: SiteKeep's key is still listed, and the daemon's log says why.
        kill(agentPID, SIGKILL)
        usleep(200_000)
        let alone = ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv)
        #expect(alone.status == 0 && alone.out.split(separator: "\n").count == 1, "\(alone)")
        #expect(d.log.contains("did not list its keys"), "\(d.log)")

        // Unset: none of its keys is listed.
        #expect(await d.sitekeep(["config", "unset", "ssh-agent-upstream"]).status == 0)
        #expect(ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv).out.split(separator: "\n").count == 1)
    }

    /// A value of `ssh-agent-upstream` written into daemon.json by hand (no tag) is never used:
    /// the other agent's keys are not listed, and the daemon's log says why.
    @Test(.enabled(if: have(sshAgent, sshAdd, keygen))) func aPlantedUpstreamSettingIsNeverUsed() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop(), "the daemon did not stop cleanly: \(d.log)") }
        let socket = d.dir + "/up.sock", asked = d.dir + "/upstream-asked"
        let agentPID = try Self.startAgent(d, socket: socket, asked: asked)
        defer { kill(agentPID, SIGKILL) }
        let key = d.dir + "/id_other"
        #expect(ChildProcess.capture(Self.keygen, ["-q", "-t", "ed25519", "-N", "", "-C", "planted", "-f", key]).status == 0)
        #expect(ChildProcess.capture(Self.sshAdd, [key], environment: ["SSH_AUTH_SOCK": socket]).status == 0)
        let file = d.store.home + "/daemon.json"
        try Data("{\"ssh-agent-upstream\":\"\(socket)\"}\n".utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o600)
        try d.restart()
        let listed = ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv).out
        #expect(!listed.contains("planted") && listed.contains("sitekeep:summit"), "\(listed)")
        #expect(d.log.contains("ssh-agent-upstream"), "\(d.log)")
    }
}
