import Foundation
import Glibc
import Testing
import SiteKeepJSON
@testable import SiteKeepBridge
import SiteKeepSocket
import SiteKeepTestSupport

/// One raw connection to the daemon: frames written and read as bytes, so two replies can be
/// compared byte for byte.
final class RawConnection {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(_ path: String) throws { fd = try UnixSocket.connectUnchecked(path: path) }
    /// A connection for `site` from a host the daemon at `path` started (``TestHost``).
    init(_ path: String, site: String) throws { fd = try TestHost.descriptor(socket: path, site: site) }
    deinit { close(fd) }

    /// Sends `frame` and returns the next reply line (without its newline).
    func exchange(_ frame: String) throws -> [UInt8] {
        guard UnixSocket.writeAll(fd, Array((frame + "\n").utf8)) else { throw SpawnError("write to the daemon failed") }
        let deadline = Date().addingTimeInterval(30)
        while true {
            if let nl = buffer.firstIndex(of: 0x0a) {
                let line = Array(buffer[..<nl])
                buffer.removeFirst(nl + 1)
                return line
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard Date() < deadline, poll(&p, 1, 1000) >= 0 else { throw SpawnError("no reply from the daemon") }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if n == 0 { throw SpawnError("the daemon closed the connection") }
            if n > 0 { buffer += chunk[..<n] }
        }
    }

    func reply(_ frame: String) throws -> JSONValue { try JSONParser.parse(try exchange(frame)) }
}

/// `sitekeep serve` as a real process with two sites and their vaults: over its socket a site
/// reaches its own vault and nothing of the other's (threat T41), a forged HEAD is refused
/// (T15), and another process's `vault assign` or commit counts from the next request (T116).
@Suite(.serialized) struct VaultScopingTests {
    static let promptugal = "https://promptugal.news", summit = "https://web-summit.sgit.ai"

    @Test func aSiteReachesOnlyItsOwnVaultsOverTheSocket() async throws {
        let sitekeep = try #require(builtExecutable("sitekeep"), "build the sitekeep executable first (swift build)")
        let sgit = try sgitPath()
        let f = try TempFolder("vaultscope")
        let home = f.path + "/home", run = f.path + "/run", sock = run + "/bridge.sock"
        mkdir(run, 0o700)
        let pass = try f.file("pass.txt", Array("scoping passphrase\n".utf8))
        let env = ["HOME": f.path, "NO_COLOR": "1"]
        func cli(_ args: [String], sourceLocation: SourceLocation = #_sourceLocation) async -> ToolRun {
            let r = await runTool(args + ["--home", home, "--keyring", "file"])
            #expect(r.status == 0, "\(args.joined(separator: " ")): \(r.err)", sourceLocation: sourceLocation)
            return r
        }
        func vault(_ name: String, _ keyText: String, _ file: String, _ contents: String) throws -> String {
            let path = f.path + "/" + name
            #expect(try Child.run(sgit, ["init", path, "--vault-key", keyText], in: f.path, environment: env).code == 0)
            try Data(contents.utf8).write(to: URL(fileURLWithPath: path + "/" + file))
            #expect(try Child.run(sgit, ["commit", "-m", "one"], in: f.path, environment: env, cwd: path).code == 0)
            return path
        }
        _ = await cli(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19"])
        _ = await cli(["site", "add", "Promptugal", "--origin", Self.promptugal, "--app-bound", "--passphrase-file", pass, "--host", TestHost.runner])
        _ = await cli(["site", "add", "Summit", "--origin", Self.summit, "--app-bound", "--passphrase-file", pass, "--host", TestHost.runner])
        let p = try vault("p", "p pass:pvault01", "p.txt", "promptugal's note\n")
        let w = try vault("w", "w pass:wvault01", "sitekeep-sites-web-summit.json", "summit's backup\n")
        let x = try vault("x", "x pass:xvault01", "x.txt", "before\n")
        for (name, path, key, site) in [("pnotes", p, "p pass:pvault01", Self.promptugal), ("wbackup", w, "w pass:wvault01", Self.summit),
                                        ("pforged", x, "x pass:xvault01", Self.promptugal)] {
            let keyFile = try f.file(name + ".key", Array(key.utf8))
            _ = await cli(["vault", "add", name, "--path", path, "--key-file", keyFile, "--site", site, "--passphrase-file", pass])
        }
        // pforged's HEAD replaced by a commit of another clone (its own signing key), as anyone
        // holding the read key and write access to the folder can: files copied, ref moved.
        let clone = f.path + "/x2"
        #expect(try Child.run(sgit, ["clone", "x pass:xvault01", clone, "--base-url", x + "/.sg_vault"], in: f.path, environment: env).code == 0)
        try Data("forged\n".utf8).write(to: URL(fileURLWithPath: clone + "/x.txt"))
        #expect(try Child.run(sgit, ["commit", "-m", "forged"], in: f.path, environment: env, cwd: clone).code == 0)
        let refs = Set(try FileManager.default.contentsOfDirectory(atPath: x + "/.sg_vault/bare/refs"))
        let xRef = try #require(refs.first { $0.hasPrefix("ref-pid-snw-") })
        let cloneRef = try #require(try FileManager.default.contentsOfDirectory(atPath: clone + "/.sg_vault/bare/refs").first { $0.hasPrefix("ref-pid-snw-") && !refs.contains($0) })
        #expect(try Child.run("/bin/sh", ["-c", "cp -R '\(clone)/.sg_vault/bare/.' '\(x)/.sg_vault/bare/' && cp '\(clone)/.sg_vault/bare/refs/\(cloneRef)' '\(x)/.sg_vault/bare/refs/\(xRef)'"],
                               in: f.path).code == 0)

        func serve() throws -> Child {
            unlink(sock)     // a socket left by a killed daemon
            let d = try Child(sitekeep, ["serve", "--unlock", "--passphrase-file", pass, "--home", home, "--keyring", "file"],
                              stdoutPath: f.path + "/serve.out", stderrPath: f.path + "/serve.err",
                              environment: ["SITEKEEP_SOCK": sock, "HOME": f.path])
            for _ in 0..<400 {
                if let fd = try? UnixSocket.connectUnchecked(path: sock) { close(fd); break }
                usleep(50_000)
            }
            return d
        }
        var daemon = try serve()
        defer { daemon.kill9() }
        let pc = try RawConnection(sock, site: "https://promptugal.news")
        #expect(try pc.reply(#"{"v":1,"id":"h","op":"hello","args":{"origin":"https://promptugal.news"}}"#)["ok"] == true, "\(daemon.stderr)")
        let own = try pc.reply(#"{"v":1,"id":"1","op":"vault.load","args":{"vault":"pnotes","path":"p.txt"}}"#)
        #expect(own["result"]?["content"] == "cHJvbXB0dWdhbCdzIG5vdGUK", "\(own)")
        // Summit's vault (its site's backup) and a name that does not exist: the same bytes.
        let theirs = try pc.exchange(#"{"v":1,"id":"2","op":"vault.load","args":{"vault":"wbackup","path":"sitekeep-sites-web-summit.json"}}"#)
        let none = try pc.exchange(#"{"v":1,"id":"2","op":"vault.load","args":{"vault":"no-such-vault","path":"sitekeep-sites-web-summit.json"}}"#)
        #expect(theirs == none, "\(String(decoding: theirs, as: UTF8.self)) vs \(String(decoding: none, as: UTF8.self))")
        #expect(try JSONParser.parse(theirs)["error"]?["code"] == "not_found")
        #expect(!String(decoding: theirs, as: UTF8.self).contains("summit") && !String(decoding: theirs, as: UTF8.self).contains("wbackup"))
        for op in ["vault.list", "vault.status"] {
            #expect(try pc.exchange(#"{"v":1,"id":"3","op":"\#(op)","args":{"vault":"wbackup"}}"#)
                    == (try pc.exchange(#"{"v":1,"id":"3","op":"\#(op)","args":{"vault":"no-such-vault"}}"#)), "\(op)")
        }
        // Several vaults and none named default: the site must name one.
        #expect(try pc.reply(#"{"v":1,"id":"4","op":"vault.load","args":{"path":"p.txt"}}"#)["error"]?["code"] == "not_configured")
        // The forged HEAD: vault_unverified, naming the commit and the new signer.
        let forged = try pc.reply(#"{"v":1,"id":"5","op":"vault.load","args":{"vault":"pforged","path":"x.txt"}}"#)
        #expect(forged["error"]?["code"] == "vault_unverified", "\(forged)")
        let message = forged["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("commit bare/data/obj-cas-imm-") && message.contains("key-rnd-imm-") && message.contains("new signer"))
        // Summit itself may not call vault ops at all (the catalogue lists promptugal.news only).
        let sc = try RawConnection(sock, site: "https://web-summit.sgit.ai")
        #expect(try sc.reply(#"{"v":1,"id":"h","op":"hello","args":{"origin":"https://web-summit.sgit.ai"}}"#)["ok"] == true)
        #expect(try sc.reply(#"{"v":1,"id":"6","op":"vault.load","args":{"vault":"wbackup","path":"x"}}"#)["error"]?["code"] == "not_allowed")

        // Summit removed and added again (a new site with its origin): its old vault stays out of reach.
        daemon.kill9()
        _ = await cli(["site", "remove", Self.summit, "--force", "--yes"])
        _ = await cli(["site", "add", "Summit again", "--origin", Self.summit, "--app-bound", "--passphrase-file", pass])
        _ = await cli(["vault", "assign", "pforged", "--site", Self.summit, "--passphrase-file", pass])
        daemon = try serve()
        let again = try RawConnection(sock, site: "https://promptugal.news")
        #expect(try again.reply(#"{"v":1,"id":"h","op":"hello","args":{"origin":"https://promptugal.news"}}"#)["ok"] == true)
        #expect(try again.exchange(#"{"v":1,"id":"7","op":"vault.load","args":{"vault":"wbackup","path":"x"}}"#)
                == (try again.exchange(#"{"v":1,"id":"7","op":"vault.load","args":{"vault":"no-such-vault","path":"x"}}"#)))
        #expect(try again.reply(#"{"v":1,"id":"8","op":"vault.load","args":{"path":"p.txt"}}"#)["result"]?["content"] == "cHJvbXB0dWdhbCdzIG5vdGUK",
                "with pforged given away, pnotes is promptugal's only vault and its default")

        // Another process changes what the running daemon serves (the daemon notices through its
        // inotify watch instead of looking at the files on every request): every change counts
        // from the next request, with no wait in between.
        let load = #"{"v":1,"id":"9","op":"vault.load","args":{"vault":"pnotes","path":"p.txt"}}"#
        _ = await cli(["vault", "assign", "pnotes", "--no-site", "--passphrase-file", pass])
        #expect(try again.exchange(load) == (try again.exchange(#"{"v":1,"id":"9","op":"vault.load","args":{"vault":"no-such-vault","path":"p.txt"}}"#)),
                "a vault given away by another process is out of reach at the next request")
        _ = await cli(["vault", "assign", "pnotes", "--site", Self.promptugal, "--passphrase-file", pass])
        #expect(try again.reply(load)["result"]?["content"] == "cHJvbXB0dWdhbCdzIG5vdGUK")
        try Data("promptugal's second note\n".utf8).write(to: URL(fileURLWithPath: p + "/p.txt"))
        #expect(try Child.run(sgit, ["commit", "-m", "two"], in: f.path, environment: env, cwd: p).code == 0)
        #expect(try again.reply(load)["result"]?["content"]?.stringValue == Data("promptugal's second note\n".utf8).base64EncodedString(),
                "sgit's commit is served at the next request")
        Attack.report("vault-scoping", "a site asked for another site's vault, a CLI-only one and a forged HEAD over the real daemon's socket: not_found byte-identical to an unknown name, vault_unverified; a vault given away or committed to by another process: seen at the next request")
    }
}
