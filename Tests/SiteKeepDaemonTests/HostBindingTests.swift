import Foundation
import Testing
import SiteKeepBridgeProtocol
import SiteKeepJSON
import SiteKeepTestSupport
import SiteKeepSocket
#if canImport(Glibc)
import Glibc
#endif

/// A site's host is a process the daemon started (issue 45), against the real `sitekeep serve`.
/// A process of the same user that the daemon did not start binds no app-bound site, whatever it
/// shows of itself: the test runner; Python, though it is an added host of the site; Python
/// with a preloaded library that renames its own `LD_PRELOAD` before it connects (the attack of
/// the review: `/proc/PID/environ` is the process's own memory). A host the daemon started
/// (`sitekeep host run`, the control op `launch`) binds its site and no other, runs without the
/// code-loading variables its caller had, and is not started once its file was rewritten in
/// place, even with the modification time set back.
@Suite(.serialized) struct HostBindingTests {
    static let python = TestHost.runner

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
        let r = ChildProcess.capture(python, ["-c", script, sock, origin], input: [],
                                     environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 }, inheritingEnvironment: false)
        return try JSONParser.parse(r.out)
    }

    static func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }
    static func message(_ reply: JSONValue) -> String { reply["error"]?["message"]?.stringValue ?? "" }

    /// A library whose constructor does what injected code would: it renames `LD_PRELOAD` in the
    /// process's own environment block (what `/proc/PID/environ` shows), then connects to the
    /// bridge socket and sends `hello` for a site, writing the reply to a file. When a host
    /// that loaded it runs, it also leaves a line saying so.
    static let preloadSource = """
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>
    #include <sys/socket.h>
    #include <sys/un.h>
    extern char **environ;
    __attribute__((constructor)) static void attack(void) {
        for (char **e = environ; *e; e++) if (strncmp(*e, "LD_PRELOAD=", 11) == 0) memcpy(*e, "XX", 2);
        const char *loaded = getenv("SK_ATTACK_LOADED");
        if (loaded) { FILE *f = fopen(loaded, "a"); if (f) { fprintf(f, "loaded in %d\\n", (int)getpid()); fclose(f); } }
        const char *sock = getenv("SK_ATTACK_SOCK"), *origin = getenv("SK_ATTACK_ORIGIN"), *out = getenv("SK_ATTACK_OUT");
        if (!sock || !origin || !out) return;
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
        strncpy(a.sun_path, sock, sizeof a.sun_path - 1);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return;
        char req[512];
        snprintf(req, sizeof req, "{\\"v\\":1,\\"id\\":1,\\"op\\":\\"hello\\",\\"args\\":{\\"origin\\":\\"%s\\"}}\\n", origin);
        if (write(fd, req, strlen(req)) < 0) return;
        char buf[4096]; ssize_t n = read(fd, buf, sizeof buf - 1);
        if (n <= 0) return;
        FILE *f = fopen(out, "w"); if (!f) return;
        fwrite(buf, 1, (size_t)n, f); fclose(f);
    }
    """

    /// The library above, built with the system's C compiler into `dir`.
    static func preloadLibrary(in dir: URL) throws -> String {
        let source = dir.appendingPathComponent("attack.c").path
        let library = dir.appendingPathComponent("libattack.so").path
        try preloadSource.write(toFile: source, atomically: true, encoding: .utf8)
        let cc = ChildProcess.capture("/usr/bin/cc", ["-shared", "-fPIC", "-o", library, source], input: [], environment: ["PATH": "/usr/bin:/bin"], inheritingEnvironment: false)
        try #require(cc.status == 0, "cc failed: \(cc.err)")
        return library
    }

    /// A daemon on a fresh store with two app-bound sites, Summit (Python added as its host)
    /// and Promptugal (no host of its own).
    struct Bed {
        let store: CLIStore
        let sock: String
        let agent: String
        let pid: Int32

        init(agent withAgent: Bool = false) async throws {
            let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
            store = try CLIStore()
            _ = try await store.initialize()
            #expect(await store.run(["site", "add", "Summit", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile, "--host", HostBindingTests.python]).status == 0)
            #expect(await store.run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
            let run = store.dir.appendingPathComponent("run")
            sock = run.appendingPathComponent("bridge.sock").path
            agent = run.appendingPathComponent("agent.sock").path
            let env = ["SITEKEEP_HOME=\(store.home)", "SITEKEEP_SOCK=\(sock)", "SITEKEEP_AGENT_SOCK=\(agent)", "HOME=\(store.dir.path)", "NO_COLOR=1"]
            pid = try #require(ChildProcess.spawn(sitekeep, ["serve", "--keyring", "file"] + (withAgent ? ["--ssh-agent"] : []), env: env))
            #expect(ChildProcess.waitForPath(run.appendingPathComponent("control.sock").path), "the daemon's control socket did not appear")
            // The sites' entries are checked against their tags at the first unlock; until then
            // they bind nothing.
            let unlocked = ChildProcess.capture(sitekeep, ["unlock", "--passphrase-file", store.passFile, "--keyring", "file"],
                                                environment: ["SITEKEEP_HOME": store.home, "SITEKEEP_SOCK": sock, "HOME": store.dir.path])
            #expect(unlocked.status == 0, "\(unlocked.err)")
        }

        func stop() { kill(pid, SIGKILL); var st: Int32 = 0; waitpid(pid, &st, 0) }
    }

    @Test func aProcessTheDaemonDidNotStartBindsNoSiteWhateverItShows() async throws {
        let bed = try await Bed()
        defer { bed.stop() }

        // The test runner: another program of the same user.
        let client = try BridgeClient.connect(path: bed.sock, timeout: .seconds(30))
        defer { client.close() }
        do {
            _ = try client.hello(origin: "https://web-summit.sgit.ai")
            Issue.record("the test runner bound a site the daemon did not start it for")
        } catch {
            #expect("\(error)".contains("forbidden_host"), "\(error)")
            #expect("\(error)".contains("was not started by the SiteKeep daemon") && "\(error)".contains("sitekeep host run"), "\(error)")
        }

        // Python is Summit's host, but this Python was not started by the daemon.
        let direct = try Self.pythonHello(bed.sock, origin: "https://web-summit.sgit.ai")
        #expect(Self.code(direct) == "forbidden_host", "\(direct)")
        #expect(Self.message(direct).contains("binds a site only when the SiteKeep daemon starts it"), "\(direct)")
        #expect(Self.message(direct).contains("sitekeep host run https://web-summit.sgit.ai") && Self.message(direct).contains("-- \(Self.python)"), "\(direct)")

        // The review's attack: preloaded code that renames LD_PRELOAD in the process's own
        // environment block (so /proc/PID/environ no longer names it), then connects.
        let dir = bed.store.dir
        let library = try Self.preloadLibrary(in: dir)
        let out = dir.appendingPathComponent("attack-reply").path
        let attack = ChildProcess.capture(Self.python, ["-c", "import time; time.sleep(0.2)"], input: [],
                                          environment: ["PATH": "/usr/bin:/bin", "LD_PRELOAD": library, "SK_ATTACK_SOCK": bed.sock,
                                                        "SK_ATTACK_ORIGIN": "https://web-summit.sgit.ai", "SK_ATTACK_OUT": out],
                                          inheritingEnvironment: false)
        #expect(attack.status == 0, "\(attack.err)")
        let reply = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: out))))
        #expect(Self.code(reply) == "forbidden_host", "the preloaded code bound the site: \(reply)")
    }

    @Test func aHostTheDaemonStartedBindsItsSiteAndNoOtherAndRunsWithoutCodeLoadingVariables() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let script = """
        import sys
        for origin in sys.argv[1:]:
            f = connect().makefile('rwb')
            f.write(('{"v":1,"id":1,"op":"hello","args":{"origin":"' + origin + '"}}\\n').encode()); f.flush()
            sys.stdout.write(f.readline().decode())
        maps = open('/proc/self/maps').read()
        env = open('/proc/self/environ', 'rb').read().split(b'\\0')
        print(json.dumps({"preloaded": 'libattack' in maps, "variables": sorted(e.split(b'=')[0].decode() for e in env if e)}))
        """
        let library = try Self.preloadLibrary(in: bed.store.dir)
        let loaded = bed.store.dir.appendingPathComponent("loaded").path
        let r = try TestHost.run(socket: bed.sock, site: "https://web-summit.sgit.ai", script: script,
                                 arguments: ["https://web-summit.sgit.ai", "https://promptugal.news"],
                                 environment: ["PATH": "/usr/bin:/bin", "LD_PRELOAD": library, "PYTHONPATH": "/nonexistent-sk",
                                               "SK_ATTACK_LOADED": loaded, "LANG": "C.UTF-8"])
        #expect(r.status == 0, "\(r.output)")
        let lines = r.output.split(separator: "\n").map(String.init)
        try #require(lines.count == 3, "\(r.output)")
        let summit = try JSONParser.parse(Array(lines[0].utf8))
        #expect(summit["ok"] == true && summit["result"]?["ops"]?.arrayValue?.isEmpty == false, "\(summit)")
        let other = try JSONParser.parse(Array(lines[1].utf8))
        #expect(Self.code(other) == "forbidden_host" && Self.message(other).contains("started for Summit"), "\(other)")
        let seen = try JSONParser.parse(Array(lines[2].utf8))
        #expect(seen["preloaded"] == false, "the started host loaded the caller's LD_PRELOAD: \(seen)")
        let variables = seen["variables"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(!variables.contains("LD_PRELOAD") && !variables.contains("PYTHONPATH") && !variables.contains("SK_ATTACK_LOADED"), "\(variables)")
        #expect(variables.contains("LANG") && variables.contains(HostChannel.environmentVariable), "\(variables)")
        #expect(!FileManager.default.fileExists(atPath: loaded), "the library was loaded in the host")

        // A site whose host it is not: no launch at all.
        do {
            _ = try TestHost.run(socket: bed.sock, site: "https://promptugal.news", script: "print('ran')")
            Issue.record("a program was started for a site it is not a host of")
        } catch {
            #expect("\(error)".contains("is not a host of Promptugal") && "\(error)".contains("sitekeep site host add"), "\(error)")
        }
        // Removed, it is started no more.
        #expect(await bed.store.run(["site", "host", "remove", "https://web-summit.sgit.ai", Self.python, "--passphrase-file", bed.store.passFile]).status == 0)
        #expect(throws: (any Error).self) { _ = try TestHost.run(socket: bed.sock, site: "https://web-summit.sgit.ai", script: "print('ran')") }
    }

    @Test func aHostRewrittenInPlaceWithItsTimeSetBackIsNotStarted() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        // A host the user can change (so its SHA-256 is kept): a script, started through the
        // descriptor the daemon checked.
        let host = bed.store.dir.appendingPathComponent("host.sh").path
        try "#!/bin/sh\necho started by the daemon\n".write(toFile: host, atomically: true, encoding: .utf8)
        chmod(host, 0o700)
        let setBack = { try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 1_700_000_000)], ofItemAtPath: host) }
        try setBack()
        let added = await bed.store.run(["site", "host", "add", "https://web-summit.sgit.ai", host, "--passphrase-file", bed.store.passFile])
        #expect(added.status == 0, "\(added.err)")
        let first = try TestHost.run(socket: bed.sock, site: "https://web-summit.sgit.ai", script: "", program: host)
        #expect(first.status == 0 && first.output == "started by the daemon\n", "\(first)")

        // The same size, other bytes, the modification time set back: only the change time,
        // which no unprivileged call sets, and the digest tell.
        let before = try #require(ExecutableIdentity(path: host))
        let fd = open(host, O_WRONLY)
        let rewritten = Array("#!/bin/sh\necho STARTED BY THE DAEMON\n".utf8)
        #expect(Int64(rewritten.count) == before.size)
        _ = rewritten.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        try setBack()
        let after = try #require(ExecutableIdentity(path: host))
        #expect(after.modifiedNanoseconds == before.modifiedNanoseconds && after.size == before.size && after.inode == before.inode)
        do {
            let r = try TestHost.run(socket: bed.sock, site: "https://web-summit.sgit.ai", script: "", program: host)
            Issue.record("the rewritten host was started: \(r)")
        } catch {
            #expect("\(error)".contains("changed since it was added") && "\(error)".contains("sitekeep site host add"), "\(error)")
        }
    }

    /// `sitekeep call` binds on the bridge socket only a site the user let the command line act
    /// for (`--command-line-host`, `site host add --command-line`): its explicit opt-in. Refused,
    /// it is told that and that one fix (issue 47: not "accepts no host", not how to start a
    /// host or add its own build by path); with no daemon, to run `sitekeep unlock`.
    @Test func theCommandLineBindsOnlyASiteThatLetsIt() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        let call = ["call", "storage.get", "--site", "https://promptugal.news", "--args", #"{"key":"k"}"#, "--home", bed.store.home, "--keyring", "file"]
        let refused = await runTool(call, environment: ["SITEKEEP_SOCK": bed.sock])
        #expect(refused.status != 0, "\(refused.out)")
        #expect(refused.err.contains("Promptugal does not let the command line ('sitekeep call') act for it")
                && refused.err.contains("sitekeep site host add https://promptugal.news") && refused.err.contains(" --command-line"), "\(refused.err)")
        #expect(!refused.err.contains("accepts no host") && !refused.err.contains("sitekeep host run"), "\(refused.err)")
        let none = await runTool(call, environment: ["SITEKEEP_SOCK": bed.store.dir.appendingPathComponent("none.sock").path])
        #expect(none.status != 0 && none.err.contains("sitekeep unlock") && !none.err.contains("sitekeep serve"), "\(none.err)")
        let added = await bed.store.run(["site", "host", "add", "https://promptugal.news", "--command-line", "--passphrase-file", bed.store.passFile])
        #expect(added.status == 0, "\(added.err)")
        let served = await runTool(call, environment: ["SITEKEEP_SOCK": bed.sock])
        #expect(served.status == 0, "\(served.err)")
    }

    /// The SiteKeep browser started by anyone but the daemon binds nothing: the review's attack
    /// run in the real browser's process (its preloaded constructor connects before `main`).
    @Test func theBrowserStartedByAnotherProcessBindsNothing() async throws {
        let browser = BuiltProducts.folder + "/sitekeep-browser"
        guard FileManager.default.isExecutableFile(atPath: browser) else { return }   // built where WebKitGTK is (tools/test builds it)
        let bed = try await Bed()
        defer { bed.stop() }
        let library = try Self.preloadLibrary(in: bed.store.dir)
        let out = bed.store.dir.appendingPathComponent("browser-attack-reply").path
        _ = ChildProcess.capture(browser, ["--help"], input: [],
                                 environment: ["PATH": "/usr/bin:/bin", "LD_PRELOAD": library, "SK_ATTACK_SOCK": bed.sock,
                                               "SK_ATTACK_ORIGIN": "https://promptugal.news", "SK_ATTACK_OUT": out],
                                 inheritingEnvironment: false)
        let reply = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: out))))
        #expect(Self.code(reply) == "forbidden_host", "code preloaded into the browser bound a site: \(reply)")
        #expect(Self.message(reply).contains("binds a site only when the SiteKeep daemon starts it") && Self.message(reply).contains("sitekeep open"), "\(reply)")
    }

    /// The ssh-agent socket serves signatures by the agent protocol and binds no site: a
    /// bridge `hello` sent there gets no answer of the bridge's.
    @Test func theAgentSocketBindsNoSite() async throws {
        let bed = try await Bed(agent: true)
        defer { bed.stop() }
        #expect(ChildProcess.waitForPath(bed.agent), "the agent socket did not appear")
        let fd = try UnixSocket.connectUnchecked(path: bed.agent)
        defer { close(fd) }
        #expect(UnixSocket.writeAll(fd, Array(#"{"v":1,"id":1,"op":"hello","args":{"origin":"https://web-summit.sgit.ai"}}"#.utf8) + [0x0a]))
        var reply = [UInt8](repeating: 0, count: 4096)
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&p, 1, 10_000)
        let n = reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        let text = n > 0 ? String(decoding: reply[0..<n], as: UTF8.self) : ""
        #expect(!text.contains("\"ok\"") && !text.contains("ops"), "the agent socket answered as the bridge: \(text)")
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
