import Foundation
import Testing
import SiteKeepBridgeProtocol
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Only a site's hosts bind it (issue 36, item 3), against the real `sitekeep serve`: a process
/// of the same user that is not the site's host (the test runner, a Python client) gets
/// `forbidden_host` at `hello`; once the user adds its program with `sitekeep site host add`
/// (approved with the passphrase) it binds that site and no other; it is refused again when
/// it runs with `LD_LIBRARY_PATH` set, and when the host is removed.
@Suite(.serialized) struct HostBindingTests {
    static let python = "/usr/bin/python3"

    /// Runs a Python client that connects to `sock`, sends one `hello` for `origin` and prints
    /// the reply line; returns the reply as JSON.
    static func pythonHello(_ sock: String, origin: String, environment: [String: String] = [:]) throws -> JSONValue {
        let script = """
        import socket, sys
        s = socket.socket(socket.AF_UNIX)
        s.connect(sys.argv[1])
        s.sendall(('{"v":1,"id":1,"op":"hello","args":{"origin":"' + sys.argv[2] + '"}}\\n').encode())
        buf = b''
        while not buf.endswith(b'\\n'):
            chunk = s.recv(65536)
            if not chunk: break
            buf += chunk
        sys.stdout.write(buf.decode())
        """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-c", script, sock, origin]
        p.environment = ["PATH": "/usr/bin:/bin"].merging(environment) { $1 }
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return try JSONParser.parse(Array(data), limits: .message)
    }

    static func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }
    static func message(_ reply: JSONValue) -> String { reply["error"]?["message"]?.stringValue ?? "" }

    @Test func aSiteBindsOnlyForItsHosts() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let run = store.dir.appendingPathComponent("run")
        let sock = run.appendingPathComponent("bridge.sock").path
        let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
        let pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"], env: env))
        defer { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
        #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")
        // The sites' entries are checked against their tags at the first unlock; until then
        // they bind nothing.
        let unlocked = ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile, "--keyring", "file"],
                                            environment: ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path])
        #expect(unlocked.status == 0, "\(unlocked.err)")

        // The test runner: another program of the same user, not a host of the site.
        let client = try BridgeClient.connect(path: sock, timeout: .seconds(30))
        defer { client.close() }
        do {
            _ = try client.hello(origin: "https://web-summit.sgit.ai")
            Issue.record("the test runner bound a site it is not a host of")
        } catch {
            #expect("\(error)".contains("forbidden_host"), "\(error)")
            #expect("\(error)".contains("is not a host of Summit"), "\(error)")
            #expect("\(error)".contains("sitekeep site host add"), "\(error)")
        }

        // A Python client: refused, and the message names what it runs.
        let refused = try Self.pythonHello(sock, origin: "https://web-summit.sgit.ai")
        #expect(Self.code(refused) == "forbidden_host", "\(refused)")
        #expect(Self.message(refused).contains("python3"), "\(refused)")

        // The user adds Python as Summit's host (approved with the passphrase): it binds Summit…
        let added = await store.run(["site", "host", "add", "https://web-summit.sgit.ai", Self.python, "--passphrase-file", store.passFile])
        #expect(added.status == 0, "\(added.err)")
        let bound = try Self.pythonHello(sock, origin: "https://web-summit.sgit.ai")
        #expect(bound["ok"] == true, "\(bound)")
        #expect(bound["result"]?["ops"]?.arrayValue?.isEmpty == false, "\(bound)")
        // …and not another site.
        let other = try Self.pythonHello(sock, origin: "https://promptugal.news")
        #expect(Self.code(other) == "forbidden_host", "\(other)")

        // The same program with a variable that loads other code is refused, naming it.
        let preloaded = try Self.pythonHello(sock, origin: "https://web-summit.sgit.ai", environment: ["LD_LIBRARY_PATH": "/nonexistent-sk"])
        #expect(Self.code(preloaded) == "forbidden_host", "\(preloaded)")
        #expect(Self.message(preloaded).contains("LD_LIBRARY_PATH"), "\(preloaded)")

        // The listing and the audit say who may bind each site.
        let listed = await store.run(["site", "host", "list", "--json"])
        #expect(listed.status == 0)
        #expect(listed.out.contains("python3"), "\(listed.out)")
        let audited = await store.run(["audit", "--sites", "2"])
        #expect(audited.status == 0, "\(audited.err)")
        let summitLine = audited.out.split(separator: "\n").first { $0.contains("Summit (https://web-summit.sgit.ai") }.map(String.init) ?? ""
        #expect(summitLine.contains("the SiteKeep browser") && summitLine.contains("python3"), "\(audited.out)")
        let otherLine = audited.out.split(separator: "\n").first { $0.contains("Promptugal (https://promptugal.news") }.map(String.init) ?? ""
        #expect(otherLine.contains("the SiteKeep browser") && !otherLine.contains("python3"), "\(audited.out)")

        // Removed, it is refused again.
        #expect(await store.run(["site", "host", "remove", "https://web-summit.sgit.ai", Self.python, "--passphrase-file", store.passFile]).status == 0)
        let again = try Self.pythonHello(sock, origin: "https://web-summit.sgit.ai")
        #expect(Self.code(again) == "forbidden_host", "\(again)")
    }

    /// Adding a host widens who may act for a site: without the user's approval it is refused
    /// and nothing changes.
    @Test func addingAHostNeedsTheUsersApproval() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        let refused = await store.run(["site", "host", "add", "https://web-summit.sgit.ai", Self.python], stdin: [])
        #expect(refused.status != 0)
        let listed = await store.run(["site", "host", "list", "--json"])
        #expect(!listed.out.contains("python3"), "a host was added without approval: \(listed.out)")
    }
}
