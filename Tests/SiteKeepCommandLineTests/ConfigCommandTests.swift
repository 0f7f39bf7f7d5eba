import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's settings kept with the store, through `sitekeep config`: validated, stored
/// privately, shown with their source, refused when tampered with, widened only with approval.
/// (A running daemon applying them, `stop` and `site remove` through the daemon:
/// SiteKeepDaemonTests/DaemonSettingsTests.)
@Suite(.serialized) struct ConfigCommandTests {
    /// Bad keys and values are refused naming the key and what it takes; good ones are stored
    /// 0600 and shown with their source; unset goes back to the default.
    @Test func settingsAreValidatedStoredPrivatelyAndShownWithTheirSource() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let unknown = await store.run(["config", "set", "idle", "5m"])
        #expect(unknown.status != 0 && unknown.err.contains("no setting 'idle'") && unknown.err.contains("idle-lock"), "\(unknown.err)")
        for (key, value, allowed) in [("idle-lock", "forever", "90s, 15m or 2h"), ("ssh-agent", "maybe", "on or off"),
                                      ("prompt", "askpass:relative/prog", "askpass:/ABSOLUTE/PATH"), ("sync-interval", "2d", "0 (never)"),
                                      ("ssh-agent-socket", "agent.sock", "absolute path")] {
            let r = await store.run(["config", "set", key, value, "--passphrase-file", store.passFile])
            #expect(r.status != 0 && r.err.contains("\(key) cannot be") && r.err.contains(allowed), "\(key) \(value): \(r.err)")
        }
        let file = store.home + "/daemon.json"
        #expect(!FileManager.default.fileExists(atPath: file), "a refused value wrote the settings file")

        let set = await store.run(["config", "set", "idle-lock", "5m"])
        #expect(set.status == 0 && set.out.contains("idle-lock = 5m"), "\(set.err)")
        var st = stat()
        #expect(lstat(file, &st) == 0 && st.st_mode & 0o777 == 0o600, "daemon.json is not 0600")
        let shown = try JSONParser.parse(await store.run(["config", "--json"]).out)
        let rows = shown["settings"]?.arrayValue ?? []
        #expect(rows.contains { $0["key"] == "idle-lock" && $0["value"] == "5m" && $0["source"] == "stored" }, "\(shown)")
        #expect(rows.contains { $0["key"] == "ssh-agent" && $0["value"] == "off" && $0["source"] == "default" }, "\(shown)")
        #expect(await store.run(["config", "get", "idle-lock"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "5m")
        #expect(await store.run(["config", "unset", "idle-lock", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["config", "get", "idle-lock"]).out.trimmingCharacters(in: .whitespacesAndNewlines) == "15m")
    }

    /// A settings file another process tampered with is refused, naming the file and the fix,
    /// and so is a daemon start on it: a link, a file others may write, an unknown key, a bad value.
    @Test func aTamperedSettingsFileIsRefusedNotFollowed() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let file = store.home + "/daemon.json"
        #expect(await store.run(["config", "set", "metered", "on"]).status == 0)
        chmod(file, 0o666)
        let widened = await store.run(["config"])
        #expect(widened.status != 0 && widened.err.contains("can be written by other users") && widened.err.contains("chmod 600"), "\(widened.err)")
        let serve = await store.run(["serve"])
        #expect(serve.status != 0 && serve.err.contains("daemon.json"), "serve started on a file others can write: \(serve.err)")
        chmod(file, 0o600)

        let elsewhere = try store.file("elsewhere.json", Array(#"{"prompt":"askpass:/tmp/yes.sh"}"#.utf8))
        unlink(file)
        symlink(elsewhere, file)
        let linked = await store.run(["config"])
        #expect(linked.status != 0 && linked.err.contains("symbolic link"), "\(linked.err)")
        unlink(file)

        for (text, says) in [(#"{"promptt":"auto"}"#, "unknown setting 'promptt'"), (#"{"prompt":"yes"}"#, "prompt cannot be 'yes'"),
                             (#"{"idle-lock":5}"#, "not a string"), ("[1]", "not a JSON object")] {
            let fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            _ = text.withCString { write(fd, $0, strlen($0)) }
            close(fd)
            let r = await store.run(["config"])
            #expect(r.status != 0 && r.err.contains(says) && r.err.contains("daemon.json"), "\(text): \(r.err)")
        }
    }

    /// Turning the agent on, changing the prompt or no longer locking with the session needs
    /// the user's approval; narrowing does not.
    @Test func wideningTrustNeedsApprovalNarrowingDoesNot() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        for (key, value) in [("ssh-agent", "on"), ("prompt", "terminal"), ("lock-on-session-lock", "off"), ("idle-lock", "2h")] {
            let r = await store.run(["config", "set", key, value])
            #expect(r.status != 0, "\(key) \(value) was stored without approval")
            #expect(await store.run(["config", "get", key]).out.trimmingCharacters(in: .whitespacesAndNewlines) != value)
            let approved = await store.run(["config", "set", key, value, "--passphrase-file", store.passFile])
            #expect(approved.status == 0, "\(key) \(value) with the passphrase: \(approved.err)")
        }
        for (key, value) in [("ssh-agent", "off"), ("lock-on-session-lock", "on"), ("idle-lock", "10m"), ("metered", "on")] {
            let r = await store.run(["config", "set", key, value])
            #expect(r.status == 0, "narrowing \(key) to \(value) asked for approval: \(r.err)")
        }
    }
}
