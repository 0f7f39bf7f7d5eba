import Foundation
import Glibc
import Testing
import SiteKeepBridge
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 32, defects 1 and 2, as the review found them: another process of the same user, with
/// the daemon unlocked and the presence program denying, through every socket the daemon
/// serves (control, bridge, ssh-agent). Nothing signs, no slot changes, no policy changes and
/// no signer or unsigned history is trusted; the user was asked each time (and said no).
/// tools/attack runs this suite and reports it as "same-user client".
@Suite(.serialized) struct SameUserClientTests {
    /// An SSH user-authentication request for some host (`ssh` builds these; a signature over
    /// one logs in wherever the session id came from).
    static func loginRequest() -> [UInt8] {
        func string(_ b: [UInt8]) -> [UInt8] {
            let n = UInt32(b.count)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + b
        }
        return string([UInt8](repeating: 0x42, count: 32)) + [50] + string(Array("root".utf8)) + string(Array("ssh-connection".utf8))
            + string(Array("publickey".utf8)) + [1] + string(Array("ssh-ed25519".utf8)) + string([0, 0, 0, 11] + Array("ssh-ed25519".utf8))
    }

    /// `sitekeep ARGS` as its own process of the same user, stdin /dev/null (no terminal, no
    /// secret unless the arguments name one), a client of `s`'s daemon.
    static func sitekeep(_ s: ServedStore, _ args: [String]) throws -> (code: Int32?, out: String, err: String) {
        let env = ["SITEKEEP_SOCK": s.sock, "SITEKEEP_HOME": s.home, "SITEKEEP_KEYRING": "file", "HOME": s.folder.path]
        let r = try Child.run(s.sitekeep, args, in: s.folder.path, environment: env, timeout: 90)
        return (r.code, String(decoding: r.out, as: UTF8.self), r.err)
    }

    @Test func anotherProcessGetsNothingFromAnUnlockedDaemonWhileTheUserDenies() async throws {
        let s = try await ServedStore(withVault: true)
        defer { s.stop() }
        s.deny(true)
        let folder = s.folder.path
        func attacker(_ args: [String]) throws -> (code: Int32?, out: String, err: String) { try Self.sitekeep(s, args) }
        let message = try s.folder.file("m.txt", Array("attack\n".utf8))
        let login = try s.folder.file("login.bin", Self.loginRequest())
        let newPass = try s.folder.file("new-pass.txt", Array("the attacker's passphrase\n".utf8))
        var tried: [String] = []

        // The control socket: every key use that could run asks the user, and a denial signs
        // nothing; one the key's policy forbids is refused by custody's gate before anyone is
        // asked (issue 46, item 2: the command line describes the request, the gate decides).
        for (what, args, policy) in [("SSHSIG in a namespace the policy forbids", ["team", "sign", "summit", "--ssh-namespace", "file", "--message-file", message], "namespace file"),
                                     ("SSHSIG in the allowed namespace", ["team", "sign", "summit", "--ssh-namespace", "git", "--message-file", message], nil),
                                     ("raw signature", ["team", "sign", "summit", "--message-file", message], nil),
                                     ("raw signature of an SSH login request", ["team", "sign", "summit", "--message-file", login], "SSH login request")] {
            let asked = s.prompts.count
            let r = try attacker(args)
            #expect(r.code == 1 && r.out.isEmpty, "\(what): \(r.out) \(r.err)")
            if let policy {
                #expect(r.err.contains(policy), "\(what): \(r.err)")
                #expect(s.prompts.count == asked, "\(what): refused before the user was asked")
            } else {
                #expect(!r.out.contains("SSH SIGNATURE") && r.err.contains("not approved"), "\(what): \(r.err)")
                #expect(s.prompts.count == asked + 1 && s.prompts.last?.op == "team.sign", "\(what): the user was asked")
            }
            tried.append("team sign (\(what))")
        }
        // Even approved, the key's policy holds and a login request is the agent's alone.
        s.deny(false)
        let approvedFile = try attacker(["team", "sign", "summit", "--ssh-namespace", "file", "--message-file", message])
        #expect(approvedFile.code == 1 && approvedFile.err.contains("namespace file"), "\(approvedFile.err)")
        let approvedLogin = try attacker(["team", "sign", "summit", "--message-file", login])
        #expect(approvedLogin.code == 1 && approvedLogin.err.contains("SSH login request"), "\(approvedLogin.err)")
        s.deny(true)

        // Who can unlock: a new recovery code, a new passphrase, a removed slot.
        let slotsBefore = try attacker(["slot", "list", "--json"])
        #expect(slotsBefore.code == 0)
        let slotID = try #require(JSONParser.parse(slotsBefore.out).arrayValue?.first?["id"]?.stringValue)
        for (what, args) in [("slot add recovery", ["slot", "add", "recovery"]),
                             ("slot passphrase", ["slot", "passphrase", slotID, "--new-passphrase-file", newPass]),
                             ("slot add passphrase", ["slot", "add", "passphrase", "--new-passphrase-file", newPass]),
                             ("slot remove", ["slot", "remove", slotID])] {
            let r = try attacker(args)
            #expect(r.code == 1 && r.out.isEmpty && r.err.contains("current secret"), "\(what): \(r.out) \(r.err)")
            tried.append(what)
        }
        #expect(try attacker(["slot", "list", "--json"]).out == slotsBefore.out, "no slot changed")

        // What a key may sign, and what a vault trusts.
        let widen = try attacker(["team", "ssh", "enable", "summit"])
        #expect(widen.code == 1 && widen.err.contains("not approved"), "\(widen.err)")
        let shown = try JSONParser.parse(try attacker(["team", "show", "summit", "--json"]).out)
        #expect(shown["ssh"]?["namespaces"] == .array(["git"]), "the policy is unchanged")
        let unsigned = try attacker(["vault", "policy", "notes", "--allow-unsigned"])
        #expect(unsigned.code == 1 && unsigned.err.contains("not approved"), "\(unsigned.err)")
        let status = try attacker(["vault", "status", "notes", "--json"])
        #expect(try JSONParser.parse(status.out)["allowUnsigned"] == .bool(false), "\(status.out) \(status.err)")
        let trust = try attacker(["vault", "trust", "notes", "key-rnd-imm-0123456789abcdef"])
        #expect(trust.code == 1 && trust.err.contains("not approved"), "\(trust.err)")
        tried += ["team ssh enable", "vault policy --allow-unsigned", "vault trust"]

        // The bridge socket: a page's key.sign is asked for and denied.
        let page = try s.connect("https://web-summit.sgit.ai")
        defer { page.close() }
        let bridge = failureCode { try page.call("key.sign", args: ["key": "summit", "data": .string(Base64.encode(Array("x".utf8)))]) }
        #expect(bridge == .presenceDenied)
        let bridgeLogin = failureCode { try page.call("key.sign", args: ["key": "summit", "data": .string(Base64.encode(Self.loginRequest()))]) }
        #expect(bridgeLogin == .presenceDenied || bridgeLogin == .notAllowed)
        tried.append("bridge key.sign")

        // The agent socket: ssh-keygen asks the agent, the user denies.
        let keygen = "/usr/bin/ssh-keygen"
        if FileManager.default.isExecutableFile(atPath: keygen) {
            let pub = try attacker(["team", "show", "summit", "--ssh"]).out
            let pubFile = try s.folder.file("summit.pub", Array(pub.utf8))
            let r = try Child.run(keygen, ["-Y", "sign", "-f", pubFile, "-n", "git", message], in: folder,
                                  environment: ["SSH_AUTH_SOCK": s.agentSock, "HOME": folder])
            #expect(r.code != 0 && !FileManager.default.fileExists(atPath: message + ".sig"), "\(r.err)")
            tried.append("ssh-keygen -Y sign through the agent")
        }

        // Nothing signed, and the audit log says each refusal.
        s.stop()
        let entries = s.auditEntries
        #expect(!entries.contains { ($0.op == "team.sign" || $0.op == "key.sign" || $0.op == "ssh.sign") && $0.result == "ok" })
        #expect(!entries.contains { $0.op.hasPrefix("slot.") && $0.result == "ok" })
        let refused = entries.filter { $0.op == "team.sign" && $0.result == "presence-refused" && $0.site == "command-line" }
        #expect(refused.count == 2 && refused.allSatisfy { $0.detail?.contains("pid") == true }, "each denied use is logged with who asked")
        #expect(entries.filter { $0.op == "team.sign" && $0.result == "policy-refused" && $0.site == "command-line" }.count == 4,
                "each use the policy forbids is logged, denied or approved")
        Attack.report("same-user client", "\(tried.count) uses through the control, bridge and agent sockets of an unlocked daemon, askpass denying: "
                      + tried.joined(separator: "; ") + "; none signed or changed anything")
    }

    /// The same uses with the user's approval or the current secret work: the gate asks, it
    /// does not forbid.
    @Test func theUsersOwnApprovalOrSecretStillWorks() async throws {
        let s = try await ServedStore(withVault: false)
        defer { s.stop() }
        func user(_ args: [String]) throws -> (code: Int32?, out: String, err: String) { try Self.sitekeep(s, args) }
        let message = try s.folder.file("m.txt", Array("mine\n".utf8))
        let asked = s.prompts.count
        let signed = try user(["team", "sign", "summit", "--ssh-namespace", "git", "--message-file", message])
        #expect(signed.code == 0 && signed.out.contains("BEGIN SSH SIGNATURE"), "\(signed.err)")
        #expect(s.prompts.count == asked + 1, "approved through the daemon's prompt")
        // With the current passphrase given for the command, no prompt is needed.
        s.deny(true)
        let added = try user(["slot", "add", "recovery", "--passphrase-file", s.passFile, "--json"])
        #expect(added.code == 0 && added.out.contains("recoveryCode"), "\(added.err)")
        let withSecret = try user(["team", "sign", "summit", "--message-file", message, "--passphrase-file", s.passFile])
        #expect(withSecret.code == 0, "\(withSecret.err)")
        #expect(s.prompts.count == asked + 1, "a secret given for the command is the approval")
    }
}
