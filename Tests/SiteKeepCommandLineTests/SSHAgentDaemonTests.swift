import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepAgent
import SiteKeepWiring
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `sitekeep serve --ssh-agent` as a real process, used by the real clients: ssh-add, ssh-keygen,
/// git and ssh against an sshd on loopback, each started by the test and stopped by pid. The
/// askpass program logs every prompt and denies while the `deny` file exists.
@Suite(.serialized) struct SSHAgentDaemonTests {
    /// A store with team keys summit (Ed25519) and desk (P-256), a daemon serving it with the
    /// ssh-agent socket, and the environment a client needs.
    final class Daemon: @unchecked Sendable {
        let store: CLIStore
        private(set) var pid: pid_t
        private let serve: (path: String, env: [String])
        var dir: String { store.dir.path }
        var agentSocket: String { dir + "/run/agent.sock" }
        var bridgeSocket: String { dir + "/run/bridge.sock" }
        /// Each prompt the askpass was shown (its argument: a dialog's lines), in order.
        var prompts: [String] { ((try? String(contentsOfFile: dir + "/prompts", encoding: .utf8)) ?? "").split(separator: "\u{1E}").map(String.init) }
        var log: String { (try? String(contentsOfFile: dir + "/serve.log", encoding: .utf8)) ?? "" }
        /// What a client process needs: the agent, and a HOME of its own.
        var clientEnv: [String: String] { ["SSH_AUTH_SOCK": agentSocket, "HOME": dir, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"] }

        init(enable: [(String, [String])]) async throws {
            let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
            store = try CLIStore()
            _ = try await store.initialize()
            #expect(await store.run(["team", "add", "summit", "--name", "Summit team", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["team", "add", "desk", "--algorithm", "p256", "--passphrase-file", store.passFile]).status == 0)
            for (id, options) in enable {
                let r = await store.run(["team", "ssh", "enable", id, "--passphrase-file", store.passFile] + options)
                #expect(r.status == 0, "\(r.err)")
            }
            let askpass = try store.file("askpass.sh", Array("#!/bin/sh\nprintf '%s\\036' \"$1\" >> '\(store.dir.path)/prompts'\n[ \"$SSH_ASKPASS_PROMPT\" = confirm ] || exit 3\n[ -e '\(store.dir.path)/deny' ] && exit 1\nexit 0\n".utf8))
            chmod(askpass, 0o700)
            try FileManager.default.createDirectory(atPath: store.dir.path + "/run", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(store.dir.path)/run/bridge.sock", "SITEKEEP_AGENT_SOCK=\(store.dir.path)/run/agent.sock",
                       "SITEKEEP_ASKPASS=\(askpass)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
            serve = (sitekeep, env)
            pid = 0
            try start()
        }

        private func start() throws {
            pid = try #require(Self.spawn(serve.path, ["serve", "--keyring", "file", "--ssh-agent", "--unlock", "--passphrase-file", store.passFile],
                                          env: serve.env, log: store.dir.path + "/serve.log"))
            var tries = 0
            while !AgentClient.isAnswering(path: store.dir.path + "/run/agent.sock"), tries < 400 { usleep(25_000); tries += 1 }
            #expect(AgentClient.isAnswering(path: agentSocket), "the agent socket did not come up: \(log)")
        }

        /// Stops the daemon and starts it again on the same store (unlocked, as before).
        func restart() throws {
            #expect(stop(), "the daemon did not stop cleanly: \(log)")
            try start()
        }

        func deny(_ on: Bool) {
            if on { _ = FileManager.default.createFile(atPath: dir + "/deny", contents: Data()) } else { try? FileManager.default.removeItem(atPath: dir + "/deny") }
        }

        /// A sitekeep command in-process, talking to this daemon where it needs to.
        func sitekeep(_ args: [String]) async -> (status: Int32, out: String, err: String) {
            await runTool(args + ["--home", store.home, "--keyring", "file"],
                          environment: ["SITEKEEP_SOCK": bridgeSocket, "SITEKEEP_AGENT_SOCK": agentSocket])
        }

        func openssh(_ id: String) async throws -> String {
            let r = await sitekeep(["team", "show", id, "--ssh"])
            #expect(r.status == 0, "\(r.err)")
            return r.out.trimmingCharacters(in: .newlines)
        }

        /// Stops the daemon with SIGTERM; true when it exited by itself and removed its socket.
        func stop() -> Bool {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            for _ in 0..<200 { if waitpid(pid, &status, WNOHANG) == pid { return status & 0x7f == 0 && !FileManager.default.fileExists(atPath: agentSocket) }; usleep(25_000) }
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
            return false
        }

        static func spawn(_ path: String, _ args: [String], env: [String], log: String) -> pid_t? {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
            let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
            return posix_spawn(&pid, path, &actions, nil, argv, envp) == 0 ? pid : nil
        }
    }

    static let sshAdd = "/usr/bin/ssh-add", keygen = "/usr/bin/ssh-keygen", git = "/usr/bin/git", ssh = "/usr/bin/ssh", sshd = "/usr/sbin/sshd"
    static let python = "/usr/bin/python3"
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    @Test(.enabled(if: have(sshAdd))) func sshAddListsExactlyTheEnabledKeys() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop(), "the daemon did not stop cleanly: \(d.log)") }
        let one = ChildProcess.capture(Self.sshAdd, ["-L"], environment: d.clientEnv)
        #expect(one.status == 0, "\(one.err)")
        #expect(one.out == (try await d.openssh("summit")) + "\n")
        // Enabling desk shows on the next connection; the listing names key and display name.
        #expect(await d.sitekeep(["team", "ssh", "enable", "desk", "--passphrase-file", d.store.passFile]).status == 0)
        let two = ChildProcess.capture(Self.sshAdd, ["-l"], environment: d.clientEnv)
        #expect(two.out.split(separator: "\n").map { $0.split(separator: " ").dropFirst(2).joined(separator: " ") }
                == ["sitekeep:desk (ECDSA)", "sitekeep:summit Summit team (ED25519)"], "\(two.out)")
        #expect(await d.sitekeep(["team", "ssh", "disable", "summit"]).status == 0)
        #expect(ChildProcess.capture(Self.sshAdd, ["-L"], environment: d.clientEnv).out == (try await d.openssh("desk")) + "\n")
        // ssh-add -D removes no team key (SSHAddDaemonTests: what it removes); ssh-add -x does
        // not lock SiteKeep; the agent goes on serving.
        #expect(ChildProcess.capture(Self.sshAdd, ["-D"], environment: d.clientEnv).status == 0)
        // ssh-add -D's protocol 1 request is answered, not logged as malformed.
        #expect(!d.log.contains("message type 9"), "\(d.log)")
        #expect(ChildProcess.capture(Self.sshAdd, ["-x"], stdin: "pw\npw\n", environment: d.clientEnv).status != 0)
        #expect(ChildProcess.capture(Self.sshAdd, ["-L"], environment: d.clientEnv).out.contains("sitekeep:desk"))
        // `agent env` gives the line a shell evaluates; ssh-add then finds the agent.
        let env = await d.sitekeep(["agent", "env"])
        #expect(env.status == 0 && env.out == "SSH_AUTH_SOCK=\(d.agentSocket); export SSH_AUTH_SOCK;\n", "\(env.out) \(env.err)")
        let sitekeep = try #require(BuiltProducts.sitekeep)
        let shell = ChildProcess.capture("/bin/sh", ["-c", "unset SSH_AUTH_SOCK; eval \"$('\(sitekeep)' agent env)\"; ssh-add -L"],
                                         environment: ["SITEKEEP_AGENT_SOCK": d.agentSocket, "HOME": d.dir])
        #expect(shell.out.contains("sitekeep:desk"), "\(shell.err)")
        // After a lock the agent still lists the keys (public facts): a use then asks for the
        // unlock, or is refused naming `sitekeep unlock` (issue 47).
        #expect(await d.sitekeep(["lock"]).status == 0)
        let locked = ChildProcess.capture(Self.sshAdd, ["-L"], environment: d.clientEnv)
        #expect(locked.status == 0 && locked.out.contains("sitekeep:desk"), "\(locked.out) \(locked.err)")
    }

    @Test(.enabled(if: have(keygen))) func sshKeygenSignsThroughTheAgentAndVerifies() async throws {
        let d = try await Daemon(enable: [("summit", []), ("desk", ["--namespace", "git"])])
        defer { #expect(d.stop()) }
        let message = try d.store.file("message.txt", Array("signed through the SiteKeep agent\n".utf8))
        let summitPub = try d.store.file("summit.pub", Array((try await d.openssh("summit") + "\n").utf8))
        let deskPub = try d.store.file("desk.pub", Array((try await d.openssh("desk") + "\n").utf8))
        let allowed = try d.store.file("allowed_signers", Array("summit@example.com \(try await d.openssh("summit"))\ndesk@example.com \(try await d.openssh("desk"))\n".utf8))

        let signed = ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", summitPub, "-n", "file", message], environment: d.clientEnv)
        #expect(signed.status == 0, "\(signed.err) \(d.log)")
        let sigText = try String(contentsOfFile: message + ".sig", encoding: .utf8)
        let verified = ChildProcess.capture(Self.keygen, ["-Y", "verify", "-f", allowed, "-I", "summit@example.com", "-n", "file", "-s", message + ".sig"],
                                            stdin: try String(contentsOfFile: message, encoding: .utf8))
        #expect(verified.status == 0 && verified.out.contains("Good \"file\" signature for summit@example.com"), "\(verified.out)\(verified.err)")
        // team sign --ssh-namespace makes the same bytes (Ed25519 is deterministic).
        let mine = await d.sitekeep(["team", "sign", "summit", "--message-file", message, "--ssh-namespace", "file", "--passphrase-file", d.store.passFile])
        #expect(mine.status == 0 && mine.out == sigText, "\(mine.err)")
        #expect(d.prompts.last?.contains("ssh-keygen") == true && d.prompts.last?.contains("namespace \"file\"") == true && d.prompts.last?.contains("summit") == true)

        // The P-256 key signs in its one namespace (its r and s travel as mpints) and refuses another.
        try FileManager.default.removeItem(atPath: message + ".sig")
        let gitSig = ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", deskPub, "-n", "git", message], environment: d.clientEnv)
        #expect(gitSig.status == 0, "\(gitSig.err)")
        let gitOK = ChildProcess.capture(Self.keygen, ["-Y", "verify", "-f", allowed, "-I", "desk@example.com", "-n", "git", "-s", message + ".sig"],
                                         stdin: try String(contentsOfFile: message, encoding: .utf8))
        #expect(gitOK.status == 0, "\(gitOK.out)\(gitOK.err)")
        try FileManager.default.removeItem(atPath: message + ".sig")
        let refused = ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", deskPub, "-n", "file", message], environment: d.clientEnv)
        #expect(refused.status != 0 && !FileManager.default.fileExists(atPath: message + ".sig"))

        // Denied presence: ssh-keygen fails cleanly, writes no signature, and the agent goes on.
        d.deny(true)
        let denied = ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", summitPub, "-n", "other", message], environment: d.clientEnv)
        #expect(denied.status != 0 && denied.err.contains("agent refused"), "\(denied.err)")
        #expect(!FileManager.default.fileExists(atPath: message + ".sig"))
        d.deny(false)
        #expect(ChildProcess.capture(Self.keygen, ["-Y", "sign", "-f", summitPub, "-n", "other", message], environment: d.clientEnv).status == 0)

        let log = await d.sitekeep(["log", "show", "--json", "--limit", "50"])
        let lines = try JSONParser.parse(log.out).arrayValue ?? []
        let agentLines = lines.filter { $0["site"] == "ssh-agent" }.map { "\($0["key"]?.stringValue ?? "") \($0["result"]?.stringValue ?? "") \($0["detail"]?.stringValue ?? "")" }
        #expect(agentLines == ["summit@v1 ok sshsig namespace file", "desk@v1 ok sshsig namespace git", "desk@v1 policy-refused sshsig namespace file",
                               "summit@v1 presence-refused sshsig namespace other", "summit@v1 ok sshsig namespace other"], "\(agentLines)")
        #expect(await d.sitekeep(["log", "verify"]).status == 0)
    }

    @Test(.enabled(if: have(keygen, git))) func gitSignsCommitsWithATeamKey() async throws {
        let d = try await Daemon(enable: [("summit", ["--namespace", "git", "--no-login"])])
        defer { #expect(d.stop()) }
        let pub = try d.store.file("summit.pub", Array((try await d.openssh("summit") + "\n").utf8))
        let allowed = try d.store.file("allowed_signers", Array("team@example.com namespaces=\"git\" \(try await d.openssh("summit"))\n".utf8))
        let repo = d.dir + "/repo"
        func git(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(Self.git, ["-C", repo, "-c", "user.name=Team", "-c", "user.email=team@example.com", "-c", "gpg.format=ssh",
                                            "-c", "user.signingKey=\(pub)", "-c", "gpg.ssh.allowedSignersFile=\(allowed)"] + args, environment: d.clientEnv)
        }
        #expect(ChildProcess.capture(Self.git, ["init", "-q", repo], environment: d.clientEnv).status == 0)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: repo + "/a.txt"))
        #expect(git(["add", "a.txt"]).status == 0)
        // Denied presence: git commit -S fails and makes no commit.
        d.deny(true)
        let refused = git(["commit", "-q", "-S", "-m", "not signed"])
        #expect(refused.status != 0, "a commit was made without presence")
        #expect(git(["rev-parse", "--verify", "-q", "HEAD"]).status != 0)
        d.deny(false)
        let commit = git(["commit", "-q", "-S", "-m", "signed by a SiteKeep team key"])
        #expect(commit.status == 0, "\(commit.err) \(d.log)")
        let verify = git(["verify-commit", "HEAD"])
        #expect(verify.status == 0 && verify.err.contains("Good \"git\" signature for team@example.com"), "\(verify.err)")
        #expect(d.prompts.last?.contains("a signature of a git commit or tag (SSHSIG namespace \"git\")") == true, "\(d.prompts)")
        // A tampered allowed-signers key makes verification fail (the check is real).
        let other = ChildProcess.capture(Self.keygen, ["-q", "-t", "ed25519", "-N", "", "-f", d.dir + "/other"])
        #expect(other.status == 0)
        try Data("team@example.com namespaces=\"git\" \(try String(contentsOfFile: d.dir + "/other.pub", encoding: .utf8))".utf8).write(to: URL(fileURLWithPath: allowed))
        #expect(git(["verify-commit", "HEAD"]).status != 0)
    }

    /// An sshd on a loopback port, with its own config and host key, accepts a login by a team
    /// key through the agent, the prompt naming the host key and saying the login is direct;
    /// denied presence and, after `sitekeep lock`, the lock refuse it.
    @Test(.enabled(if: have(ssh, sshd, keygen))) func sshdAcceptsATeamKeyLoginUntilLock() async throws {
        let d = try await Daemon(enable: [("summit", []), ("desk", [])])
        defer { #expect(d.stop()) }
        let server = try SSHServer(dir: d.dir + "/sshd", authorizedKeys: try await d.openssh("summit"))
        defer { server.stop() }
        let hostFingerprint = ChildProcess.capture(Self.keygen, ["-l", "-f", server.hostKey + ".pub"]).out.split(separator: " ")[1]

        // Denied presence: the login fails, and the agent goes on serving.
        d.deny(true)
        let denied = server.login(agent: d.agentSocket)
        #expect(denied.status == 255 && denied.err.contains("Permission denied"), "\(denied.err)")
        d.deny(false)

        let ok = server.login(agent: d.agentSocket)
        #expect(ok.status == 0 && ok.out == "sitekeep-login-ok\n", "ssh: \(ok.err)\nsshd: \(server.log)\nserve: \(d.log)")
        let summitFP = await d.sitekeep(["team", "show", "summit", "--json"]).out
        let fp = try #require(try JSONParser.parse(summitFP)["sshFingerprint"]?.stringValue)
        #expect(server.log.contains("Accepted publickey for \(SSHServer.user) from 127.0.0.1") && server.log.contains(fp), "\(server.log)")
        // The askpass gets the dialog's lines (issue 33): title, key, op, the verified destination, who asks.
        #expect(d.prompts.last?.hasPrefix("SiteKeep: approve a signature\nKey: summit\nOp: ssh.sign\nFor: an SSH login to host \(hostFingerprint) (ED25519), verified by the connection's session binding, directly, as user \"\(SSHServer.user)\"\nAsked by: \"ssh\" (pid ") == true, "\(d.prompts)")

        // The P-256 key logs in too (the server turns summit down first; no prompt for that).
        let before = d.prompts.count
        try server.authorize(try await d.openssh("desk"))
        let p256 = server.login(agent: d.agentSocket)
        #expect(p256.status == 0, "\(p256.err) \(server.log)")
        #expect(d.prompts.count == before + 1 && d.prompts.last?.hasPrefix("SiteKeep: approve a signature\nKey: desk\nOp: ssh.sign\n") == true, "\(d.prompts)")
        try server.authorize(try await d.openssh("summit"))

        #expect(server.login(agent: d.agentSocket).status == 0)   // within the window: no new prompt needed
        #expect(await d.sitekeep(["lock"]).status == 0)
        let locked = server.login(agent: d.agentSocket)
        #expect(locked.status == 255 && locked.err.contains("Permission denied"), "\(locked.err)")
        let log = await d.sitekeep(["log", "show", "--limit", "200", "--json"])
        let details = (try JSONParser.parse(log.out).arrayValue ?? []).filter { $0["site"] == "ssh-agent" }.compactMap { $0["detail"]?.stringValue }
        #expect(details.contains("ssh user-auth as \(SSHServer.user) to host \(hostFingerprint) (ED25519), directly"))
    }

    /// A hostile hop (issue 32, defect 3): the real ssh client forwards the agent (`ssh -A`) to
    /// an sshd; on the far side a program asks the forwarded agent to sign a login for a session
    /// beyond it, with a user name made to read as a direct login to the host the user trusts
    /// and padded with 300 spaces. The prompt the askpass program is given leads with the key,
    /// the unverified destination and the forwarding hop; the name comes after, quoted and cut.
    /// A name with a bidi control is refused without a prompt.
    @Test(.enabled(if: have(ssh, sshd, keygen, python))) func aForwardedHopCannotRewriteTheDestinationThePromptShows() async throws {
        let d = try await Daemon(enable: [("summit", [])])
        defer { #expect(d.stop()) }
        let server = try SSHServer(dir: d.dir + "/sshd", authorizedKeys: try await d.openssh("summit"))
        defer { server.stop() }
        let hostFingerprint = String(ChildProcess.capture(Self.keygen, ["-l", "-f", server.hostKey + ".pub"]).out.split(separator: " ")[1])
        // The far side's program: lists the forwarded agent's keys and asks it to sign an SSH
        // login request for the first one, as the user name in the file it is given.
        let hop = try d.store.file("hop.py", Array("""
        import os, socket, struct, sys
        def s(b): return struct.pack('>I', len(b)) + b
        a = socket.socket(socket.AF_UNIX); a.connect(os.environ['SSH_AUTH_SOCK'])
        def ask(p):
            a.sendall(s(p)); n = struct.unpack('>I', a.recv(4, socket.MSG_WAITALL))[0]
            return a.recv(n, socket.MSG_WAITALL)
        ids = ask(bytes([11])); blob = ids[9:9 + struct.unpack('>I', ids[5:9])[0]]
        user = open(sys.argv[1], 'rb').read()
        data = s(os.urandom(32)) + bytes([50]) + s(user) + s(b'ssh-connection') + s(b'publickey') + bytes([1]) + s(b'ssh-ed25519') + s(blob)
        print('signed' if ask(bytes([13]) + s(blob) + s(data) + struct.pack('>I', 0))[0] == 14 else 'refused')

        """.utf8))
        let posing = "root to host \(hostFingerprint) (ED25519), directly" + String(repeating: " ", count: 300)
        let padded = try d.store.file("padded.txt", Array(posing.utf8))
        let shown = String(String.UnicodeScalarView(posing.unicodeScalars.prefix(64)))
        let bidi = try d.store.file("bidi.txt", Array("root\u{202E}tsoh".utf8))
        func viaHop(_ userFile: String) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(Self.ssh, ["-A", "-F", "none", "-p", "\(server.port)", "-o", "UserKnownHostsFile=\(server.dir)/known_hosts",
                                            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentityFile=\(server.dir)/no-such-key",
                                            "-o", "IdentityAgent=\(d.agentSocket)", "-o", "PasswordAuthentication=no",
                                            "\(SSHServer.user)@127.0.0.1", "\(Self.python) \(hop) \(userFile)"], environment: ["HOME": server.dir])
        }

        let before = d.prompts.count
        let signed = viaHop(padded)
        #expect(signed.status == 0 && signed.out == "signed\n", "ssh: \(signed.out) \(signed.err)\nsshd: \(server.log)\nserve: \(d.log)")
        #expect(d.prompts.count == before + 2, "one prompt for the login to the hop, one for the hop's request: \(d.prompts)")
        let prompt = try #require(d.prompts.last)
        #expect(prompt.hasPrefix("SiteKeep: approve a signature\nKey: summit\nOp: ssh.sign\nFor: an SSH login to an UNVERIFIED host (the connection did not identify it), "
                                 + "FORWARDED through \(hostFingerprint), as user \"\(shown)…\"\nAsked by: \"ssh\" (pid "), "\(prompt)")
        #expect(prompt.contains(" on the SSH agent socket\nCovers only this use (prompt ") && prompt.hasSuffix(")."), "\(prompt)")

        let refused = viaHop(bidi)
        #expect(refused.status == 0 && refused.out == "refused\n", "ssh: \(refused.out) \(refused.err)")
        // The new ssh process's login to the hop is asked for (an approval serves only the
        // process that asked); the hop's request, whose user name holds a bidi control, is not.
        #expect(d.prompts.count == before + 3, "a login whose user name holds a bidi control gets no prompt: \(d.prompts)")
        #expect(d.prompts.last?.contains("For: an SSH login to host \(hostFingerprint)") == true, "\(d.prompts.last ?? "")")
        #expect(d.log.contains("U+202E") && d.log.contains("user name"), "the daemon says why: \(d.log)")
    }
}

/// An sshd for one test: its own config, Ed25519 host key and authorized_keys under `dir`, on a
/// free loopback port, in the foreground (`-D`), stopped by pid.
final class SSHServer: @unchecked Sendable {
    let dir: String
    let port: Int
    let pid: pid_t
    var hostKey: String { dir + "/host_ed25519" }
    var log: String { (try? String(contentsOfFile: dir + "/sshd.log", encoding: .utf8)) ?? "" }
    static var user: String { String(cString: getpwuid(getuid())!.pointee.pw_name) }

    init(dir: String, authorizedKeys: String) throws {
        self.dir = dir
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // As root, sshd's privilege separation needs its (normally boot-created) empty folder.
        if getuid() == 0 { mkdir("/run/sshd", 0o755) }
        guard ChildProcess.capture("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "test-host", "-f", dir + "/host_ed25519"]).status == 0 else {
            throw CommandFailure("ssh-keygen could not make a host key")
        }
        port = try Self.freePort()
        let config = """
        ListenAddress 127.0.0.1:\(port)
        HostKey \(dir)/host_ed25519
        AuthorizedKeysFile \(dir)/authorized_keys
        PidFile none
        StrictModes no
        UsePAM no
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        PubkeyAuthentication yes
        PermitRootLogin prohibit-password
        LogLevel VERBOSE

        """
        try Data(config.utf8).write(to: URL(fileURLWithPath: dir + "/sshd_config"))
        try Data("[127.0.0.1]:\(port) \(try String(contentsOfFile: dir + "/host_ed25519.pub", encoding: .utf8))".utf8)
            .write(to: URL(fileURLWithPath: dir + "/known_hosts"))
        pid = try #require(SSHAgentDaemonTests.Daemon.spawn("/usr/sbin/sshd", ["-D", "-e", "-f", dir + "/sshd_config"], env: [], log: dir + "/sshd.log"))
        try authorize(authorizedKeys)
        var tries = 0
        while !Self.accepts(port), tries < 400 { usleep(25_000); tries += 1 }
    }

    func authorize(_ line: String) throws {
        try Data((line + "\n").utf8).write(to: URL(fileURLWithPath: dir + "/authorized_keys"))
    }

    /// `ssh` to this server as the current user through `agent`, checking the host key, with no
    /// key files, no config file and no questions.
    func login(agent: String) -> (status: Int32, out: String, err: String) {
        ChildProcess.capture("/usr/bin/ssh", ["-F", "none", "-p", "\(port)", "-o", "UserKnownHostsFile=\(dir)/known_hosts",
                                              "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentityFile=\(dir)/no-such-key",
                                              "-o", "IdentityAgent=\(agent)", "-o", "PasswordAuthentication=no",
                                              "\(Self.user)@127.0.0.1", "echo sitekeep-login-ok"], environment: ["HOME": dir])
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw CommandFailure("no free loopback port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: UInt16(port).bigEndian, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 } }
    }
}
