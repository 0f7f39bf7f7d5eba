import Foundation
import Testing
import SiteKeepAgent
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The user's own keys beside the team's (issue 47): the real `ssh-add`, `ssh-keygen` and `ssh`
/// against `sitekeep serve --ssh-agent` and an sshd on loopback, each started by the test and
/// stopped by pid.
@Suite(.serialized) struct SSHAddDaemonTests {
    typealias Daemon = SSHAgentDaemonTests.Daemon
    static let sshAdd = SSHAgentDaemonTests.sshAdd, keygen = SSHAgentDaemonTests.keygen
    static let ssh = SSHAgentDaemonTests.ssh, sshd = SSHAgentDaemonTests.sshd
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    /// A key made by ssh-keygen in the daemon's folder: `type` with `bits`, a passphrase (empty: none).
    static func makeKey(_ d: Daemon, _ name: String, type: String, bits: String? = nil, passphrase: String = "", comment: String) throws -> String {
        let path = d.dir + "/" + name
        let made = ChildProcess.capture(keygen, ["-q", "-t", type] + (bits.map { ["-b", $0] } ?? []) + ["-N", passphrase, "-C", comment, "-f", path])
        #expect(made.status == 0, "\(made.err)")
        return path
    }

    static func publicLine(_ path: String) throws -> String {
        try String(contentsOfFile: path + ".pub", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `ssh-add ARGS` through the daemon's agent.
    static func sshAdd(_ d: Daemon, _ args: [String], extra: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
        ChildProcess.capture(sshAdd, args, environment: d.clientEnv.merging(extra) { $1 })
    }

    /// An OpenSSH Ed25519 key with a passphrase: `ssh-add` decrypts it itself (the passphrase
    /// through SSH_ASKPASS) and hands it to SiteKeep's agent, which wraps it in custody; a login
    /// to a loopback sshd with it passes SiteKeep's prompt (denied: refused); it survives a
    /// restart of the daemon.
    @Test(.enabled(if: have(sshAdd, ssh, sshd, keygen))) func anOwnKeyWithAPassphraseLogsInThroughTheAgent() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop(), "the daemon did not stop cleanly: \(d.log)") }
        let key = try Self.makeKey(d, "id_ed25519", type: "ed25519", passphrase: "correct horse battery", comment: "me@laptop")
        let askpass = try d.store.file("ssh-askpass.sh", Array("#!/bin/sh\necho 'correct horse battery'\n".utf8))
        chmod(askpass, 0o700)
        let added = Self.sshAdd(d, [key], extra: ["SSH_ASKPASS": askpass, "SSH_ASKPASS_REQUIRE": "force", "DISPLAY": ":0"])
        #expect(added.status == 0, "ssh-add: \(added.err)\nserve: \(d.log)")
        let fingerprint = ChildProcess.capture(Self.keygen, ["-l", "-f", key + ".pub"]).out.split(separator: " ")[1]
        let listed = Self.sshAdd(d, ["-l"])
        #expect(listed.out.contains("256 \(fingerprint) me@laptop (ED25519)"), "\(listed.out)")
        #expect(listed.out.split(separator: "\n").first?.contains("sitekeep:summit") == true, "team keys first: \(listed.out)")

        let server = try SSHServer(dir: d.dir + "/sshd", authorizedKeys: try Self.publicLine(key))
        defer { server.stop() }
        d.deny(true)
        let denied = server.login(agent: d.agentSocket)
        #expect(denied.status == 255 && denied.err.contains("Permission denied"), "\(denied.err)")
        d.deny(false)
        let ok = server.login(agent: d.agentSocket)
        #expect(ok.status == 0 && ok.out == "sitekeep-login-ok\n", "ssh: \(ok.err)\nsshd: \(server.log)\nserve: \(d.log)")
        #expect(d.prompts.last?.contains("with your key added by ssh-add, \"me@laptop\"") == true, "\(d.prompts)")
        #expect(d.prompts.last?.contains("Op: ssh.sign") == true)

        // Wrapped under the master key in the keyring: after a restart it is still offered.
        try d.restart()
        #expect(Self.sshAdd(d, ["-L"]).out.contains(try Self.publicLine(key)), "\(d.log)")
        #expect(server.login(agent: d.agentSocket).status == 0)
        let log = await d.sitekeep(["log", "show", "--limit", "200", "--json"])
        let lines = try JSONParser.parse(log.out).arrayValue ?? []
        #expect(lines.contains { $0["op"]?.stringValue == "agent.add" && $0["result"]?.stringValue == "ok" }, "\(log.out)")
        #expect(lines.contains { $0["op"]?.stringValue == "ssh.sign" && $0["result"]?.stringValue == "presence-refused" })
    }

    /// `-l`, `-L`, `-c`, `-t`, `-d`, `-D` mean what they mean to ssh-agent; an RSA key is refused
    /// with a daemon log line saying why; adding while locked is refused, naming `sitekeep unlock`.
    @Test(.enabled(if: have(sshAdd, keygen))) func sshAddFlagsMeanWhatTheyMeanToSSHAgent() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop(), "the daemon did not stop cleanly: \(d.log)") }
        let summit = try await d.openssh("summit")
        let mine = try Self.makeKey(d, "id_ed25519", type: "ed25519", comment: "mine")
        let p256 = try Self.makeKey(d, "id_ecdsa", type: "ecdsa", bits: "256", comment: "short-lived")
        let rsa = try Self.makeKey(d, "id_rsa", type: "rsa", bits: "2048", comment: "old")

        // -c: each use asks (no approval kept); -t: gone when its lifetime ends.
        #expect(Self.sshAdd(d, ["-c", mine]).status == 0, "\(d.log)")
        #expect(Self.sshAdd(d, ["-t", "3", p256]).status == 0, "\(d.log)")
        let all = Self.sshAdd(d, ["-L"]).out.split(separator: "\n").map(String.init)
        #expect(all == [summit, try Self.publicLine(mine), try Self.publicLine(p256)], "\(all)")
        let message = try d.store.file("message.txt", Array("mine\n".utf8))
        let before = d.prompts.count
        for _ in 0..<2 {
            try? FileManager.default.removeItem(atPath: message + ".sig")
            let signed = ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", mine + ".pub", "-n", "file", message], environment: d.clientEnv)
            #expect(signed.status == 0, "\(signed.err) \(d.log)")
        }
        #expect(d.prompts.count == before + 2, "ssh-add -c: both signatures asked: \(d.prompts)")
        // The P-256 key signs too, before its lifetime ends.
        try? FileManager.default.removeItem(atPath: message + ".sig")
        #expect(ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", p256 + ".pub", "-n", "file", message], environment: d.clientEnv).status == 0)
        usleep(3_300_000)
        #expect(Self.sshAdd(d, ["-L"]).out.split(separator: "\n").map(String.init) == [summit, try Self.publicLine(mine)])

        // An RSA key is refused, and the daemon's log says why.
        #expect(Self.sshAdd(d, [rsa]).status != 0)
        #expect(d.log.contains("\"ssh-rsa\" key was not added"), "\(d.log)")

        // -d removes one added key; a team key is not removed by it.
        #expect(Self.sshAdd(d, ["-d", mine]).status == 0)
        #expect(Self.sshAdd(d, ["-L"]).out == summit + "\n")
        let teamPub = try d.store.file("summit.pub", Array((summit + "\n").utf8))
        #expect(Self.sshAdd(d, ["-d", teamPub]).status != 0)
        #expect(d.log.contains("summit is a SiteKeep team key"), "\(d.log)")

        // -D removes every added key, persisted or with a lifetime, and no team key.
        #expect(Self.sshAdd(d, [mine]).status == 0)
        #expect(Self.sshAdd(d, ["-t", "600", p256]).status == 0)
        #expect(Self.sshAdd(d, ["-l"]).out.split(separator: "\n").count == 3)
        #expect(Self.sshAdd(d, ["-D"]).status == 0)
        #expect(Self.sshAdd(d, ["-L"]).out == summit + "\n")

        // A lifetime key does not survive a restart; a persisted one does.
        #expect(Self.sshAdd(d, [mine]).status == 0)
        #expect(Self.sshAdd(d, ["-t", "600", p256]).status == 0)
        try d.restart()
        #expect(Self.sshAdd(d, ["-L"]).out.split(separator: "\n").map(String.init) == [summit, try Self.publicLine(mine)])

        // Adding needs SiteKeep unlocked; the log names the fix.
        #expect(await d.sitekeep(["lock"]).status == 0)
        #expect(Self.sshAdd(d, [p256]).status != 0)
        #expect(d.log.contains("SiteKeep is locked, so ssh-add cannot add a key: run 'sitekeep unlock'"), "\(d.log)")
    }
}
