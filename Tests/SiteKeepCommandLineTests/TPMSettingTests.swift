import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 47, item 5: the TPM is a setting of the store (`config set tpm-tcti …`), read by the
/// daemon and the command line alike, not only by the daemon's environment. A private swtpm; the
/// daemon and every command run with no SITEKEEP_TPM_TCTI at all.
@Suite(.enabled(if: SoftwareTPM.executable != nil, "swtpm is not installed: run tools/setup"))
struct TPMSettingTests {
    @Test func withTheSettingADaemonAddsAndUnlocksATPMSlotFromAShellWithoutTheVariable() async throws {
        let tpm = try #require(SoftwareTPM.start(), "swtpm would not start")
        defer { tpm.stop() }
        let store = try CLIStore()
        _ = try await store.initialize()
        let bed = try PrivateDaemon(store: store)
        defer { bed.stop() }
        try bed.startDaemon()
        // A shell without the variable: this process's environment is not passed on.
        let shellEnv = bed.env.merging(["PATH": "/usr/bin:/bin"]) { $1 }
        func sh(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(bed.sitekeep, args, input: [], environment: shellEnv, inheritingEnvironment: false)
        }
        #expect(sh(["unlock", "--passphrase-file", store.passFile]).status == 0)
        let pin = try store.file("pin.txt", Array("4711\n".utf8))

        // Without the setting the daemon looks for the kernel's TPM, which this machine lacks,
        // and says how to name another.
        let before = sh(["slot", "add", "tpm2", "--passphrase-file", store.passFile, "--pin-file", pin])
        #expect(before.status != 0 && before.err.contains("config set tpm-tcti"), "\(before.err)")
        // A value written into daemon.json by hand (no tag under the master key) is never used.
        let file = store.home + "/daemon.json"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("{\"tpm-tcti\":\"\(tpm.tcti)\"}\n".utf8),
                                               attributes: [.posixPermissions: 0o600]))
        let planted = sh(["slot", "add", "tpm2", "--passphrase-file", store.passFile, "--new-pin-file", pin])
        #expect(planted.status != 0 && planted.err.contains("config set tpm-tcti"), "\(planted.err)")

        // A device change widens trust: approved by the current passphrase, stored with its tag,
        // and used by the running daemon at once.
        let set = sh(["config", "set", "tpm-tcti", tpm.tcti, "--passphrase-file", store.passFile, "--json"])
        #expect(set.status == 0, "\(set.err)")
        #expect(try JSONParser.parse(set.out)["daemon"] == .string("applied"), "\(set.out)")
        let shown = sh(["config", "--json"])
        let row = try JSONParser.parse(shown.out)["settings"]?.arrayValue?.first { $0["key"] == .string("tpm-tcti") }
        #expect(row?["value"] == .string(tpm.tcti), "\(shown.out)")

        let added = sh(["slot", "add", "tpm2", "--passphrase-file", store.passFile, "--new-pin-file", pin, "--json"])
        #expect(added.status == 0, "\(added.err)")
        // The plain listing says what unlock will ask and what can refuse it (not only --json).
        let listed = sh(["slot", "list"])
        #expect(listed.out.contains("TPM PIN, no PCRs"), "\(listed.out)")
        #expect(sh(["lock"]).status == 0)
        let unlocked = sh(["unlock", "--tpm2", "--pin-file", pin, "--json"])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        let status = try JSONParser.parse(sh(["status", "--json"]).out)
        #expect(status["unlocked"] == .bool(true), "\(status)")

        // A refused value names what the setting takes; `cmd` (which runs a program) is not a TPM.
        let bad = sh(["config", "set", "tpm-tcti", "cmd:/bin/true", "--passphrase-file", store.passFile])
        #expect(bad.status != 0 && bad.err.contains("device, swtpm, mssim or tabrmd"), "\(bad.err)")
    }

    /// Issue 47: a key use while the daemon is locked unlocks it with the TPM when the prompt
    /// cannot ask for the passphrase (an askpass program, which only approves) and no security
    /// key answers: a PIN-less TPM slot opens with nothing typed, then the use is approved and
    /// `ssh-keygen -Y sign` over the agent socket signs.
    @Test func aLockedUseUnlocksWithTheTPM() async throws {
        let tpm = try #require(SoftwareTPM.start(), "swtpm would not start")
        defer { tpm.stop() }
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["team", "ssh", "enable", "summit", "--namespace", "file", "--no-login", "--passphrase-file", store.passFile]).status == 0)
        let bed = try PrivateDaemon(store: store)
        defer { bed.stop() }
        let agent = bed.run + "/agent.sock"
        try bed.startDaemon(["--ssh-agent-socket", agent])
        let shellEnv = bed.env.merging(["PATH": "/usr/bin:/bin", "SITEKEEP_FIDO2_DEVICE": ""]) { $1 }
        func sh(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture(bed.sitekeep, args, input: [], environment: shellEnv, inheritingEnvironment: false)
        }
        #expect(sh(["unlock", "--passphrase-file", store.passFile]).status == 0)
        #expect(sh(["config", "set", "tpm-tcti", tpm.tcti, "--passphrase-file", store.passFile]).status == 0)
        let added = sh(["slot", "add", "tpm2", "--passphrase-file", store.passFile])
        #expect(added.status == 0, "\(added.err)")
        let pub = try store.file("summit.pub", Array(sh(["team", "show", "summit", "--ssh"]).out.utf8))
        let data = try store.file("data.txt", Array("a file to sign".utf8))
        #expect(sh(["lock"]).status == 0)

        let signed = ChildProcess.capture("/usr/bin/ssh-keygen", ["-Y", "sign", "-f", pub, "-n", "file", data], input: [],
                                          environment: ["SSH_AUTH_SOCK": agent, "HOME": store.dir.path, "PATH": "/usr/bin:/bin"],
                                          inheritingEnvironment: false)
        #expect(signed.status == 0, "\(signed.err)")
        #expect(FileManager.default.fileExists(atPath: data + ".sig"))
        let status = try JSONParser.parse(sh(["status", "--json"]).out)
        #expect(status["unlocked"] == .bool(true), "\(status)")
    }
}
