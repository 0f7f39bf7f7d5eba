import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The browser as a real process under Xvfb, against a real `sitekeep serve` and two test sites on
/// loopback (ports differ). Serialized: each browser is a few hundred MB of web processes.
@Suite(.serialized) struct BrowserProcessTests {
    /// The page calls schedule.get, storage.set and key.sign (refused for its site) and the test
    /// reads the results back from the page; a cross-origin iframe finds no bridge; Site Two
    /// cannot read Site One's localStorage or IndexedDB, and each site's web data is on disk in
    /// its own web folder only.
    @Test func bridgeInThePageAndSitesApart() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "index.html", TestSites.bridgePage(frameOrigin: rig.origins[1]))
        try rig.write(rig.ports[0], "style.css", TestSites.style)
        try rig.write(rig.ports[0], "fig.svg", TestSites.figure)
        try rig.write(rig.ports[1], "frame.html", TestSites.framePage)
        try rig.write(rig.ports[1], "index.html", TestSites.isolationPage)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])

        let b = try rig.launch([rig.origins[0] + "/index.html"])
        _ = try b.waitForLoads(1)
        let r = try b.evalUntil(0, "window.__results && window.__results.done && window.__results.frame ? window.__results : null")
        // window.ptApp: the protocol version and the ops hello listed for Site One (hello itself left out).
        #expect(r["ptApp"]?["version"]?.intValue == 1)
        let ops = r["ptApp"]?["ops"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(ops.contains("schedule.get") && ops.contains("storage.set") && !ops.contains("key.sign") && !ops.contains("hello"))
        #expect(r["schedule"]?["ok"]?["v"]?.intValue == 1, "schedule.get: \(r["schedule"].map { JSONSerializer.string($0) } ?? "-")")
        #expect(r["schedule"]?["ok"]?["picks"]?.arrayValue?.isEmpty == true)
        #expect(r["set"]?["ok"] == .object([]), "storage.set: \(r["set"].map { JSONSerializer.string($0) } ?? "-")")
        #expect(r["get"]?["ok"]?["value"]?.stringValue == "dark")
        #expect(r["sign"]?["error"]?.stringValue == "not_allowed", "key.sign: \(r["sign"].map { JSONSerializer.string($0) } ?? "-")")
        #expect(r["hello"]?["error"]?.stringValue == "not_allowed", "a page may not send hello")
        // The cross-origin frame inside Site One's page: no window.webkit.messageHandlers.pt, no ptApp.
        #expect(r["frame"]?["pt"]?.boolValue == false)
        #expect(r["frame"]?["ptApp"]?.stringValue == "undefined")
        #expect(r["frame"]?["local"]?.isNull == true)
        // What the page stored went to Site One's partition, through the daemon.
        let stored = try rig.cli(["call", "storage.get", "--site", rig.origins[0], "--args", #"{"key":"theme"}"#, "--json"])
        #expect(stored.out.contains("dark"), "\(stored.out)")
        try rig.screenshot(b, name: "browser-bridge.png")

        // Site Two, in its own tab and network session.
        try b.command(["cmd": "address", "text": .string(rig.origins[1] + "/index.html")])
        _ = try b.waitForLoads(2)
        let two = try b.evalUntil(1, "window.__results && window.__results.done ? window.__results : null")
        #expect(two["local"]?.isNull == true, "Site Two read Site One's localStorage")
        #expect(two["idb"]?.isNull == true, "Site Two read Site One's IndexedDB")
        #expect(two["ptApp"]?["ops"]?.arrayValue?.contains(.string("schedule.get")) == false, "Site Two is not on schedule.get's list")
        try rig.screenshot(b, name: "browser-site-two.png", tab: 1)
        try b.quit()

        // On disk: each site's web data lives in its own folder, as the daemon named it.
        let one = try rig.webFolder(of: "Site One"), other = try rig.webFolder(of: "Site Two")
        #expect(one.hasPrefix(rig.home + "/sites/") && other.hasPrefix(rig.home + "/sites/") && one != other)
        #expect(BrowserRig.folder(one + "/data", contains: "site-one-local-7f3a"), "Site One's localStorage is not in its folder")
        #expect(!BrowserRig.folder(other, contains: "site-one-local-7f3a"), "Site One's localStorage is in Site Two's folder")
        #expect(!BrowserRig.folder(other, contains: "site-one-idb-7f3a"), "Site One's IndexedDB is in Site Two's folder")
        #expect(BrowserRig.folder(other + "/data", contains: "site-two-local-9c1e"), "Site Two's localStorage is not in its folder")
        #expect(!BrowserRig.folder(one, contains: "site-two-local-9c1e"), "Site Two's localStorage is in Site One's folder")
    }

    /// A daemon event (schedule.changed, caused by another tab's schedule.set) reaches the page
    /// as its own `nr:schedule` event.
    @Test func daemonEventsBecomePageEvents() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "index.html", TestSites.bridgePage(frameOrigin: rig.origins[1]))
        try rig.write(rig.ports[1], "frame.html", TestSites.framePage)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])
        let b = try rig.launch([rig.origins[0] + "/index.html", rig.origins[0] + "/index.html?second"])
        _ = try b.waitForLoads(2)
        _ = try b.evalUntil(1, "window.__results && window.__results.done ? true : null")
        _ = try b.evalUntil(0, "window.__results && window.__results.done ? true : null")
        _ = try b.eval(1, #"window.webkit.messageHandlers.pt.postMessage({op: "schedule.set", v: 1, picks: [{id: "talk-42", at: "2026-11-29T10:00:00Z"}]}).then(() => 1)"#)
        let events = try b.evalUntil(0, "window.__events.length ? window.__events : null")
        #expect(events.arrayValue?.first?["picks"]?.arrayValue?.first?["id"]?.stringValue == "talk-42")
        try b.quit()
    }

    /// `vault.changed` reaches the owning site's page as its own `nr:vault` event. The daemon
    /// raises it from its background sync alone (`--sync-every`, VaultSync.swift), when a pull
    /// moves a vault's head, and sends it to the connections of the site the vault is bound to;
    /// a write through the daemon (`vault.save`) or a pull by the command line raises nothing.
    /// So: the real `sgit` CLI pushes a commit to the real vault server, the daemon's next round
    /// pulls it, and Site One's page (the vault's site) gets the event with the daemon's detail,
    /// whose `head` is the head `vault.status` then reports to the page. Site Two's page, open at
    /// the same time in its own tab, gets nothing.
    @Test func aVaultPulledByTheDaemonBecomesTheOwningSitesPageEvent() throws {
        let env = ProcessInfo.processInfo.environment
        let server = try #require(env["SITEKEEP_TEST_VAULT_SERVER"], "run through tools/test: it starts the real vault server")
        let token = try #require(env["SITEKEEP_TEST_VAULT_TOKEN"], "run through tools/test: it exports the vault server's token")
        let sgit = try #require(env["SITEKEEP_TEST_SGIT"].flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil },
                                "the sgit CLI is missing (SITEKEEP_TEST_SGIT): run tools/setup, then tools/test")
        let rig = try BrowserRig()
        try rig.makeStore()
        // A vault made by sgit and pushed to the server, cloned into the store bound to Site One.
        let id = "skbrowser" + String(UUID().uuidString.lowercased().filter { $0.isHexDigit }.prefix(10))
        let keyText = "browser vault phrase \(UUID().uuidString.prefix(6)):\(id)"
        let work = rig.dir.appendingPathComponent("sgit-work").path
        func sg(_ args: [String]) -> (status: Int32, out: String, err: String) {
            ChildProcess.capture("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", work, sgit] + args, environment: ["HOME": rig.dir.path, "NO_COLOR": "1"])
        }
        func push(_ file: String, _ text: String) throws {
            try text.write(toFile: work + "/" + file, atomically: true, encoding: .utf8)
            let c = sg(["commit", "-m", file])
            #expect(c.status == 0, "sgit commit: \(c.err)")
            let p = sg(["push", "--base-url", server, "--token", token])
            #expect(p.status == 0, "sgit push: \(p.err)")
        }
        let initialized = ChildProcess.capture(sgit, ["init", work, "--vault-key", keyText], environment: ["HOME": rig.dir.path, "NO_COLOR": "1"])
        #expect(initialized.status == 0, "sgit init: \(initialized.err)")
        try push("hello.txt", "one\n")
        let keyFile = rig.dir.appendingPathComponent("vault.key").path, tokenFile = rig.dir.appendingPathComponent("token.txt").path
        try keyText.write(toFile: keyFile, atomically: true, encoding: .utf8)
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        let clone = try rig.cli(["vault", "clone", server, "mine", "--key-file", keyFile, "--token-file", tokenFile,
                                 "--site", rig.origins[0], "--passphrase-file", rig.passFile, "--keyring", "file"])
        #expect(clone.status == 0, "vault clone: \(clone.out)")

        let listener = """
            <!DOCTYPE html><title>Listening</title><h1>Listening for vault changes</h1>
            <script>
            window.__vault = []; window.__other = [];
            window.addEventListener("nr:vault", (e) => {
              window.__vault.push(e.detail);
              window.webkit.messageHandlers.pt.postMessage({op: "vault.status", vault: e.detail.vault})
                .then((s) => { window.__status = s; }, (x) => { window.__status = {error: x.code}; });
            });
            window.addEventListener("nr:schedule", (e) => window.__other.push(e.detail));
            </script>
            """
        try rig.write(rig.ports[0], "vault.html", listener)
        try rig.write(rig.ports[1], "vault.html", listener)
        try rig.startDaemon(extra: ["--sync-every", "2"])
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])
        let b = try rig.launch(["--no-prefetch", rig.origins[0] + "/vault.html", rig.origins[1] + "/vault.html"])
        _ = try b.waitForLoads(2)
        for tab in [0, 1] { _ = try b.evalUntil(tab, "Array.isArray(window.__vault) ? true : null") }
        // The clone is up to date: the rounds so far moved no head, and the page heard nothing.
        usleep(2_500_000)
        #expect(try b.eval(0, "window.__vault.length")?.intValue == 0, "an event before anything changed")

        // sgit pushes a commit; the daemon's next round pulls it and tells Site One's connections.
        try push("hello.txt", "two from sgit\n")
        let events = try b.evalUntil(0, "window.__vault.length ? window.__vault : null", timeout: 40)
        let detail = try #require(events.arrayValue?.first, "\(events)")
        #expect(events.arrayValue?.count == 1, "one pull, one event: \(JSONSerializer.string(events))")
        #expect(detail["vault"]?.stringValue == "mine" && detail["merge"]?.stringValue == "fast-forward", "\(JSONSerializer.string(detail))")
        #expect((detail["fetched"]?.intValue ?? 0) > 0 && detail["conflicts"] == .array([]), "\(JSONSerializer.string(detail))")
        let head = try #require(detail["head"]?.stringValue, "no head in \(JSONSerializer.string(detail))")
        // The page asked vault.status on the event: the head it names is the one the event carried.
        let status = try b.evalUntil(0, "window.__status || null")
        #expect(status["head"]?.stringValue == head && status["state"]?.stringValue == "clean", "vault.status: \(JSONSerializer.string(status))")
        #expect(try b.eval(0, "window.__other.length")?.intValue == 0)

        // Site Two's page, open all along, heard nothing: not now, nor after another round.
        usleep(3_000_000)
        #expect(try b.eval(1, "[window.__vault.length, window.__other.length]") == [0, 0], "Site Two's page received an event")
        try b.quit()
    }

    /// The sites' own web client (sg-vault v0.2.3, its shipped JS copied unmodified from the
    /// installed server package) runs in a registered site's page in `sitekeep-browser` and
    /// writes a file to the real vault server: an unsigned commit_v2 and the index rewrite of its
    /// push. The daemon's next round pulls it into the clone bound to that site (cloned with
    /// `--allow-unsigned`), the page gets `nr:vault`, and `sitekeep vault cat` serves the file.
    /// The one stand-in is the server's sign-in cookie (the self-hosted server wants its token on
    /// reads too): the page adds it to the client's requests, as tools/web-vault does.
    @Test func aFileTheWebClientWritesInTheBrowserReachesTheDaemonAndThePage() throws {
        let env = ProcessInfo.processInfo.environment
        let server = try #require(env["SITEKEEP_TEST_VAULT_SERVER"], "run through tools/test: it starts the real vault server")
        let token = try #require(env["SITEKEEP_TEST_VAULT_TOKEN"], "run through tools/test: it exports the vault server's token")
        let rig = try BrowserRig()
        try rig.makeStore()
        let tokenFile = rig.dir.appendingPathComponent("token.txt").path, passFile = rig.dir.appendingPathComponent("web.pass").path
        try (token + "\n").write(toFile: tokenFile, atomically: true, encoding: .utf8)
        try "a browser's vault \(UUID().uuidString.prefix(8))".write(toFile: passFile, atomically: true, encoding: .utf8)
        // The web client makes the vault (tools/web-vault runs the same JS under Node).
        let webVault = BrowserRig.repo.appendingPathComponent("tools/web-vault").path
        let made = ChildProcess.capture(webVault, ["create", "--server", server, "--token-file", tokenFile, "--passphrase-file", passFile,
                                                   "--name", "browser"], environment: ["NO_COLOR": "1"])
        #expect(made.status == 0, "web-vault create: \(made.err)")
        let vaultKey = try #require(try JSONParser.parse(made.out)["vaultKey"]?.stringValue, "no vault key in \(made.out)")
        let keyFile = rig.dir.appendingPathComponent("vault.key").path
        try vaultKey.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let clone = try rig.cli(["vault", "clone", server, "mine", "--key-file", keyFile, "--token-file", tokenFile, "--allow-unsigned",
                                 "--site", rig.origins[0], "--passphrase-file", rig.passFile, "--keyring", "file"])
        #expect(clone.status == 0, "vault clone: \(clone.out)")

        // The page: the client's scripts in the order its index.html loads them, then a listener.
        let ui = try #require(Self.webClientLibrary(), "the web client is not installed: run tools/setup")
        let files = ["sg-send/sg-send-crypto.js", "sg-send/sg-send.js", "sg-vault/sg-vault-crypto.js", "sg-vault/sg-vault-object-store.js",
                     "sg-vault/sg-vault-ref-manager.js", "sg-vault/sg-vault-commit.js", "sg-vault/sg-vault.js",
                     "sg-vault/sg-vault--file-ops.js", "sg-vault/sg-vault--folder-ops.js", "sg-vault/sg-vault--sync.js"]
        for f in files {
            let to = rig.www(rig.ports[0]) + "/lib/" + f
            try FileManager.default.createDirectory(atPath: (to as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: ui + "/" + f, toPath: to)
        }
        let page = """
            <!DOCTYPE html><title>The web client</title><h1>sg-vault in a site's page</h1>
            \(files.map { "<script src=\"lib/\($0)\"></script>" }.joined(separator: "\n"))
            <script>
            const plainFetch = window.fetch.bind(window);
            window.fetch = (url, init) => {
              init = Object.assign({}, init || {});
              if (String(url).startsWith(\(JSONSerializer.string(.string(server))))) {
                init.headers = Object.assign({}, init.headers || {}, {"x-sgraph-access-token": \(JSONSerializer.string(.string(token)))});
              }
              return plainFetch(url, init);
            };
            window.__vault = [];
            window.addEventListener("nr:vault", (e) => window.__vault.push(e.detail));
            window.__write = (key, name, text) => {
              window.__written = null;
              (async () => {
                const vault = await SGVault.open(new SGSend({endpoint: \(JSONSerializer.string(.string(server))), token: \(JSONSerializer.string(.string(token)))}), key);
                await vault.addFile("/", name, new TextEncoder().encode(text));
                await vault.push();
                return vault._headCommitId;
              })().then((head) => { window.__written = {head}; }, (e) => { window.__written = {error: String(e)}; });
              return 1;
            };
            </script>
            """
        try rig.write(rig.ports[0], "web.html", page)
        try rig.startDaemon(extra: ["--sync-every", "2"])
        try rig.startServer(rig.ports[0])
        let b = try rig.launch(["--no-prefetch", rig.origins[0] + "/web.html"])
        _ = try b.waitForLoads(1)
        _ = try b.evalUntil(0, "typeof SGVault === 'function' && Array.isArray(window.__vault) ? true : null")

        let text = "written by the web client in sitekeep-browser\n"
        _ = try b.eval(0, "window.__write(\(JSONSerializer.string(.string(vaultKey))), 'from-the-browser.txt', \(JSONSerializer.string(.string(text))))")
        try Self.expectTheDaemonPullsTheWrite(b, rig, file: "from-the-browser.txt", text: text)
        try b.quit()
    }

    /// After the page's write (its result in `window.__written`): the daemon's next round pulls
    /// the web's commit into vault `mine`, the page hears of it (`window.__vault`, with that head),
    /// and `sitekeep vault cat` serves `file` as `text`.
    static func expectTheDaemonPullsTheWrite(_ b: BrowserProcess, _ rig: BrowserRig, file: String, text: String) throws {
        let written = try b.evalUntil(0, "window.__written || null", timeout: 60)
        let head = try #require(written["head"]?.stringValue, "the page's write: \(JSONSerializer.string(written))")
        let events = try b.evalUntil(0, "window.__vault.length ? window.__vault : null", timeout: 40)
        let detail = try #require(events.arrayValue?.first, "\(events)")
        #expect(detail["vault"]?.stringValue == "mine" && detail["head"]?.stringValue == head, "\(JSONSerializer.string(detail))")
        let cat = try rig.cli(["vault", "cat", "mine", file, "--passphrase-file", rig.passFile, "--keyring", "file"])
        // (the rig's output is trimmed of its final newline)
        #expect(cat.status == 0 && cat.out == String(text.dropLast()), "vault cat: \(cat.out)")
    }

    /// The vault server's own page, open in `sitekeep-browser` for a registered site, writes a
    /// file: a vault server started with the web client it ships (sg-vault v0.2.3, as the
    /// server's image serves it at `/`), its origin added as an app-bound site; the user signs in
    /// on the server's login page (its cookie) and opens the vault by the server's own link form
    /// (`/#<vault key>`, which the page keeps and then opens in its app, `/en-gb/app`). The page's
    /// own client (its SGVault, loaded by the app's index.html) writes and pushes: an unsigned
    /// commit_v2 and the index rewrite of its push. The daemon's next round pulls it into the
    /// clone bound to that site (cloned with `--allow-unsigned`), the page gets `nr:vault`, and
    /// `sitekeep vault cat` serves the file.
    @Test func aFileTheServersVaultPageWritesReachesTheDaemonAndThePage() throws {
        let ui = try #require(Self.webClientLibrary(), "the web client is not installed: run tools/setup")
        let rig = try BrowserRig()
        try rig.makeStore()
        // A vault server of this test's own that serves the UI at `/` (stopped by its pid).
        let serverDir = rig.dir.appendingPathComponent("vault-server").path
        let vaultServer = BrowserRig.repo.appendingPathComponent("tools/vault-server").path
        let uiRoot = URL(fileURLWithPath: ui).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path   // v0.2.3/
        let started = ChildProcess.capture(vaultServer, ["start", serverDir], environment: ["SEND__VAULT_STATIC_DIR": uiRoot, "PATH": "/usr/bin:/bin"])
        #expect(started.status == 0, "tools/vault-server start: \(started.err)")
        let serverPid = (try? String(contentsOfFile: serverDir + "/server.pid", encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        defer {
            // The rig (whose folder holds the server's pid file) must outlive the stop: ARC may
            // release it after its last use, before this runs, and the script would then find no
            // pid to stop (the uvicorn left running after a whole run). And by pid, whatever the script did.
            withExtendedLifetime(rig) { _ = ChildProcess.capture(vaultServer, ["stop", serverDir], environment: ["PATH": "/usr/bin:/bin"]) }
            if let serverPid, serverPid > 0, let line = try? String(contentsOfFile: "/proc/\(serverPid)/cmdline", encoding: .utf8),
               line.contains("uvicorn") { kill(serverPid, SIGKILL) }
        }
        let server = try String(contentsOfFile: serverDir + "/url", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let tokenFile = serverDir + "/token"
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let site = try rig.cli(["site", "add", "Vault UI", "--origin", server, "--app-bound", "--passphrase-file", rig.passFile, "--keyring", "file"])
        #expect(site.status == 0, "site add: \(site.out)")

        // The web client makes the vault (tools/web-vault runs the same JS under Node).
        let passFile = rig.dir.appendingPathComponent("web.pass").path
        try "a browser's vault \(UUID().uuidString.prefix(8))".write(toFile: passFile, atomically: true, encoding: .utf8)
        let made = ChildProcess.capture(BrowserRig.repo.appendingPathComponent("tools/web-vault").path,
                                        ["create", "--server", server, "--token-file", tokenFile, "--passphrase-file", passFile, "--name", "browser"],
                                        environment: ["NO_COLOR": "1", "PATH": "/usr/bin:/bin"])
        #expect(made.status == 0, "web-vault create: \(made.err)")
        let vaultKey = try #require(try JSONParser.parse(made.out)["vaultKey"]?.stringValue, "no vault key in \(made.out)")
        let keyFile = rig.dir.appendingPathComponent("vault.key").path
        try vaultKey.write(toFile: keyFile, atomically: true, encoding: .utf8)
        let clone = try rig.cli(["vault", "clone", server, "mine", "--key-file", keyFile, "--token-file", tokenFile, "--allow-unsigned",
                                 "--site", server, "--passphrase-file", rig.passFile, "--keyring", "file"])
        #expect(clone.status == 0, "vault clone: \(clone.out)")

        try rig.startDaemon(extra: ["--sync-every", "2"])
        let b = try rig.launch(["--no-prefetch", server + "/auth/set-cookie-form"])
        _ = try b.waitForLoads(1)
        _ = try b.eval(0, "document.cookie = 'x-sgraph-access-token=' + \(JSONSerializer.string(.string(token))) + '; path=/; SameSite=Strict'; "
                          + "location.href = '/#' + encodeURIComponent(\(JSONSerializer.string(.string(vaultKey)))); 1")
        do {
            _ = try b.evalUntil(0, "location.pathname.startsWith('/en-gb/app') && typeof SGVault === 'function' && typeof SGSend === 'function' ? true : null", timeout: 60)
        } catch {
            let seen = try? b.eval(0, "location.href + ' | ' + document.title + ' | ' + document.body.innerText.slice(0, 200)")
            Issue.record("the server's vault app did not load its client: \(seen.map { JSONSerializer.string($0) } ?? "-")")
            throw error
        }
        _ = try b.eval(0, "window.__vault = []; window.addEventListener('nr:vault', (e) => window.__vault.push(e.detail)); 1")

        let text = "written by the server's vault page in sitekeep-browser\n"
        _ = try b.eval(0, """
            window.__written = null;
            (async () => {
              // The access token the user gave the page, as the app's own writes send it.
              const send = new SGSend({endpoint: location.origin, token: \(JSONSerializer.string(.string(token)))});
              const vault = await SGVault.open(send, \(JSONSerializer.string(.string(vaultKey))));
              await vault.addFile('/', 'from-the-vault-page.txt', new TextEncoder().encode(\(JSONSerializer.string(.string(text)))));
              await vault.push();
              return vault._headCommitId;
            })().then((head) => { window.__written = {head}; }, (e) => { window.__written = {error: String(e)}; });
            1
            """)
        try Self.expectTheDaemonPullsTheWrite(b, rig, file: "from-the-vault-page.txt", text: text)
        try b.quit()
    }

    /// The installed web client's `_common/js/lib` of v0.2.3, if tools/setup installed it.
    static func webClientLibrary() -> String? {
        let lib = BrowserRig.repo.appendingPathComponent(".venv-server/lib").path
        for python in ((try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []).sorted() where python.hasPrefix("python3") {
            let dir = lib + "/" + python + "/site-packages/sgraph_ai_app_send__ui__vault/v0/v0.2/v0.2.3/_common/js/lib"
            if FileManager.default.fileExists(atPath: dir + "/sg-vault/sg-vault.js") { return dir }
        }
        return nil
    }

    /// The design's own test: two tabs, scroll, go offline (server stopped), quit, relaunch: both
    /// tabs come back at their positions, shown from their kept copies at their real URLs. A third
    /// tab, not scrolled, makes the tab shown at quit the middle one: it is the one shown again.
    @Test func relaunchRestoresTabsFromKeptCopiesOffline() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        for name in ["a", "b", "c"] { try rig.write(rig.ports[0], "\(name).html", TestSites.article(name.uppercased())) }
        try rig.write(rig.ports[0], "style.css", TestSites.style)
        try rig.write(rig.ports[0], "fig.svg", TestSites.figure)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        let urls = [rig.origins[0] + "/a.html", rig.origins[0] + "/b.html"]
        let targets = [0.5, 0.25]
        let third = rig.origins[0] + "/c.html"
        let first = try rig.launch(urls + [third])
        _ = try first.waitForLoads(3)
        try first.waitFor("the kept copy of \(third)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == third }
        for (i, url) in urls.enumerated() {
            try first.waitFor("the kept copy of \(url)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == url }
            try first.command(["cmd": "select", "tab": .int(Int64(i))])
            _ = try first.evalUntil(i, "document.visibilityState === 'visible' ? true : null")
            _ = try first.eval(i, "window.scrollTo(0, (document.documentElement.scrollHeight - innerHeight) * \(targets[i])); 1")
            // The relay reports the position (debounced); the browser keeps it for tabs.set.
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let state = try first.command(["cmd": "state"])
                if let s = state["tabs"]?.arrayValue?[i]["scroll"]?.doubleValue, abs(s - targets[i]) < 0.02 { break }
                usleep(100_000)
            }
        }
        #expect(try first.command(["cmd": "state"])["active"]?.intValue == 1, "the second tab is not the one shown at quit")
        // Reading down hid the tab strip.
        #expect(first.events.contains { $0["event"]?.stringValue == "chrome" && $0["tabStrip"]?.stringValue == "hidden" },
                "the tab strip did not hide while reading down")
        rig.stopServer(rig.ports[0])
        try first.quit()
        let saved = try rig.cli(["call", "tabs.get", "--site", rig.origins[0], "--json"])
        #expect(saved.out.contains("a.html") && saved.out.contains("b.html") && saved.out.contains("c.html"), "tabs.get after quit: \(saved.out)")

        // Offline relaunch with no URL: the saved session comes back.
        #expect(!canConnect(port: rig.ports[0]), "the test site is still up")
        let second = try rig.launch([])
        let loads = try second.waitForLoads(3)
        // The tab shown at quit, neither the first nor the last, is the one shown again.
        let restored = try second.command(["cmd": "state"])
        #expect(restored["tabs"]?.arrayValue?.compactMap { $0["url"]?.stringValue } == urls + [third], "the tabs came back in another order")
        #expect(restored["active"]?.intValue == 1, "tab \(restored["active"].map { JSONSerializer.string($0) } ?? "-") is shown after the relaunch, not the one shown at quit (1)")
        _ = try second.evalUntil(1, "document.visibilityState === 'visible' ? true : null", timeout: 10)
        for (i, url) in urls.enumerated() {
            let load = try #require(loads.first { $0["url"]?.stringValue == url }, "\(url) was not restored")
            #expect(load["source"]?.stringValue == "kept", "\(url) was not shown from its kept copy")
            try second.command(["cmd": "select", "tab": .int(Int64(i))])
            let position = try second.evalUntil(i, """
                (() => { const room = document.documentElement.scrollHeight - innerHeight;
                         const f = room > 0 ? scrollY / room : 0;
                         return Math.abs(f - \(targets[i])) < 0.02 ? f : null; })()
                """, timeout: 15)
            #expect(abs((position.doubleValue ?? -1) - targets[i]) < 0.02, "tab \(i) at \(position), not \(targets[i])")
            let where_ = try second.eval(i, "[location.href, document.title, getComputedStyle(document.body).backgroundColor, document.images[0] && document.images[0].naturalWidth]")
            #expect(where_?.arrayValue?.first?.stringValue == url, "the kept copy is not shown at its real URL")
            #expect(where_?.arrayValue?[2].stringValue == "rgb(244, 241, 234)", "the kept copy lost its style sheet")
            #expect(where_?.arrayValue?[3].intValue == 160, "the kept copy lost its figure")
            if i == 1 {
                // The browser scrolled this tab to its restored position, the reader did not:
                // the tab strip stays shown (reading down and up: theTabStripHidesReadingDownAndComesBackReadingUp).
                #expect(try second.command(["cmd": "state"])["tabStrip"]?.stringValue == "shown")
                try rig.screenshot(second, name: "browser-offline-restored.png", tab: 1)
            }
        }
        // The kept copy still has its own origin: the bridge answers there.
        let bridge = try second.evalUntil(1, #"window.__r || (window.webkit.messageHandlers.pt.postMessage({op: "storage.set", key: "offline", value: "yes"}).then(v => window.__r = {ok: v}, e => window.__r = {error: e.code}), null)"#)
        #expect(bridge["ok"] == .object([]), "the bridge from a kept page: \(JSONSerializer.string(bridge))")
        try second.quit()
    }

    /// The window's keys, sent through the automation channel as the window's key handler gets
    /// them: Ctrl+L reveals the address bar with the focus in it and the page's address selected
    /// (Escape puts it away), F5 fetches the page again, Alt+Left goes back to the page before,
    /// and F9 shows the site's reading list, each article marked by its state (F9 again hides it).
    /// The daemon keeps no row for an unread article (`reading.get` lists read and part-read ones):
    /// the article the reader opened and the page then set unread shows as ○ unread from the
    /// site's kept pages (``ReadingList``), and so does the other page opened; the article set
    /// unread that was never opened is not there. Site Two, open in another tab, has kept pages
    /// of its own: Site One's list names none of them, Site Two's names only its own, and neither
    /// list is ever on screen over the other site's tab (on F9, and on a tab switch with the
    /// panel up).
    @Test func keysFocusTheAddressReloadGoBackAndShowTheReadingList() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "a.html", TestSites.countingPage("A"))
        try rig.write(rig.ports[0], "b.html", TestSites.countingPage("B"))
        try rig.write(rig.ports[1], "two.html", TestSites.countingPage("Two"))
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])
        let a = rig.origins[0] + "/a.html", other = rig.origins[0] + "/b.html"
        let list: JSONValue = ["articles": [
            ["id": .string(rig.origins[0] + "/done.html"), "state": "read"],
            ["id": .string(rig.origins[0] + "/half.html"), "state": "partial", "progress": 0.4],
            ["id": .string(rig.origins[0] + "/new.html"), "state": "unread"],
        ]]
        let set = try rig.cli(["call", "reading.set", "--site", rig.origins[0], "--args", JSONSerializer.string(list, style: .compact)])
        #expect(set.status == 0, "reading.set: \(set.out)")
        // No prefetching: the listed articles are not there, and the test is about the keys.
        let b = try rig.launch(["--no-prefetch", a])
        _ = try b.waitForLoads(1)
        #expect(try b.evalUntil(0, "sessionStorage.loads || null").stringValue == "1")

        // Ctrl+L: the address bar, holding the focus, with the whole address selected to type over.
        let before = try b.command(["cmd": "state"])
        #expect(before["address"]?["shown"]?.boolValue == false && before["address"]?["focused"]?.boolValue == false)
        try b.command(["cmd": "key", "name": "ctrl+l"])
        let bar = try b.command(["cmd": "state"])["address"]
        #expect(bar?["shown"]?.boolValue == true, "Ctrl+L did not reveal the address bar")
        #expect(bar?["focused"]?.boolValue == true, "Ctrl+L did not put the focus in the address bar")
        #expect(bar?["text"]?.stringValue == a)
        #expect(bar?["selection"] == [0, .int(Int64(a.count))], "the address is not selected whole: \(bar.map { JSONSerializer.string($0) } ?? "-")")
        try b.command(["cmd": "key", "name": "escape"])
        let away = try b.command(["cmd": "state"])["address"]
        #expect(away?["shown"]?.boolValue == false && away?["focused"]?.boolValue == false, "Escape left the address bar up")

        // F5: the page is asked of the server again and runs again in the same tab.
        func asked(_ path: String) -> Int { rig.serverLog(rig.ports[0]).components(separatedBy: "\"GET \(path) ").count - 1 }
        #expect(asked("/a.html") == 1)
        try b.command(["cmd": "key", "name": "F5"])
        #expect(try b.evalUntil(0, "sessionStorage.loads === '2' ? 2 : null", timeout: 15).intValue == 2, "F5 did not load the page again")
        #expect(asked("/a.html") == 2, "F5 did not ask the server for the page again")

        // Alt+Left: back to the page before, in the same tab.
        try b.command(["cmd": "address", "text": .string(other)])
        _ = try b.evalUntil(0, "location.href === \(JSONSerializer.string(.string(other))) && document.readyState === 'complete' ? true : null")
        try b.command(["cmd": "key", "name": "alt+left"])
        _ = try b.evalUntil(0, "location.href === \(JSONSerializer.string(.string(a))) ? true : null", timeout: 15)
        let back = try b.stateUntil("the tab's address after Alt+Left") { $0["tabs"]?.arrayValue?.first?["url"]?.stringValue == a }
        #expect(back["tabs"]?.arrayValue?.count == 1, "Alt+Left opened or closed a tab")

        // The article marks itself read, then unread, through the bridge: the daemon drops its row.
        _ = try b.eval(0, """
            (async () => { const pt = window.webkit.messageHandlers.pt;
              await pt.postMessage({op: "reading.set", articles: [{id: location.href, state: "read"}]});
              await pt.postMessage({op: "reading.set", articles: [{id: location.href, state: "unread"}]});
              window.__unread = true; })(); 1
            """)
        _ = try b.evalUntil(0, "window.__unread || null")
        let rows = try rig.cli(["call", "reading.get", "--site", rig.origins[0], "--json"])
        #expect(rows.status == 0 && !rows.out.contains("a.html") && rows.out.contains("done.html"), "reading.get: \(rows.out)")
        for url in [a, other] {
            try b.waitFor("the kept copy of \(url)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == url }
        }
        // Site Two in a tab of its own, its page kept in its own cache; then back to Site One's tab.
        let two = rig.origins[1] + "/two.html"
        try b.command(["cmd": "address", "text": .string(two)])
        try b.waitFor("the kept copy of \(two)") { $0["event"]?.stringValue == "kept" && $0["url"]?.stringValue == two }
        try b.command(["cmd": "select", "tab": 0])
        _ = try b.stateUntil("Site One's tab shown again") { $0["active"]?.intValue == 0 }

        // F9: the site's reading list, each article marked by its state.
        #expect(try b.command(["cmd": "state"])["readingList"]?["shown"]?.boolValue == false)
        try b.command(["cmd": "key", "name": "F9"])
        let shown = try b.stateUntil("the reading list after F9") { $0["readingList"]?["lines"]?.arrayValue?.first?.stringValue == "Site One: reading" }
        #expect(shown["readingList"]?["shown"]?.boolValue == true, "F9 did not reveal the reading list")
        let lines = shown["readingList"]?["lines"]?.arrayValue?.compactMap(\.stringValue) ?? []
        // Part read, then unread, then read. a.html and b.html are kept with no row: unread.
        // new.html, set unread, has no row and was never opened: not there.
        #expect(lines == [
            "Site One: reading",
            "◐ part read  \(rig.origins[0])/half.html  40%",
            "○ unread  \(a)",
            "○ unread  \(other)",
            "✓ read  \(rig.origins[0])/done.html",
        ], "the reading list shows \(lines)")
        #expect(!lines.contains { $0.contains(rig.origins[1]) }, "Site One's reading list shows Site Two's pages: \(lines)")
        try b.command(["cmd": "key", "name": "F9"])
        #expect(try b.command(["cmd": "state"])["readingList"]?["shown"]?.boolValue == false, "F9 again did not hide the reading list")

        // Site Two's list: its own page, none of Site One's. The panel shows nothing of Site
        // One's list (drawn last, then hidden) while Site Two's reply is on its way.
        func panel(_ state: JSONValue) -> [String] { state["readingList"]?["lines"]?.arrayValue?.compactMap(\.stringValue) ?? [] }
        try b.command(["cmd": "select", "tab": 1])
        _ = try b.stateUntil("Site Two's tab shown") { $0["active"]?.intValue == 1 }
        try b.command(["cmd": "key", "name": "F9"])
        let revealed = panel( try b.command(["cmd": "state"]))
        #expect(!revealed.contains { $0.contains(rig.origins[0]) || $0.hasPrefix("Site One") }, "Site One's list over Site Two's tab: \(revealed)")
        let theirs = try b.stateUntil("Site Two's reading list after F9") { !panel( $0).isEmpty }
        #expect(panel( theirs) == ["Site Two: reading", "○ unread  \(two)"], "Site Two's reading list shows \(panel( theirs))")
        // Back to Site One's tab with the panel up: it shows Site One's list again, not Site Two's.
        try b.command(["cmd": "select", "tab": 0])
        let mine = try b.stateUntil("Site One's reading list after the tab switch") { panel( $0).first == "Site One: reading" }
        #expect(panel( mine).count == 5 && !panel( mine).contains { $0.contains(rig.origins[1]) }, "after the switch: \(panel( mine))")
        try b.quit()
    }

    /// The tab strip hides while the reader scrolls down and comes back as soon as they scroll
    /// up, well before the top of the page. The page is scrolled for real (the page's own
    /// scrolling, reported by the relay as the reader's would be).
    @Test func theTabStripHidesReadingDownAndComesBackReadingUp() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "a.html", TestSites.article("A"))
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        let b = try rig.launch(["--no-prefetch", rig.origins[0] + "/a.html"])
        _ = try b.waitForLoads(1)
        _ = try b.evalUntil(0, "document.visibilityState === 'visible' && document.documentElement.scrollHeight > 3 * innerHeight ? true : null")
        #expect(try b.command(["cmd": "state"])["tabStrip"]?.stringValue == "shown")
        // Down, a screen at a time: the strip goes.
        for _ in 0..<3 { _ = try b.eval(0, "window.scrollBy(0, innerHeight); 1") }
        try b.stateUntil("the tab strip hidden while reading down") { $0["tabStrip"]?.stringValue == "hidden" }
        let down = try #require(try b.eval(0, "scrollY")?.doubleValue)
        // Up a little, nowhere near the top: the strip is back.
        _ = try b.eval(0, "window.scrollBy(0, -innerHeight / 2); 1")
        try b.stateUntil("the tab strip shown again on the way up") { $0["tabStrip"]?.stringValue == "shown" }
        let up = try #require(try b.eval(0, "scrollY")?.doubleValue)
        #expect(up > 0 && up < down, "the page is at \(up) after scrolling up from \(down)")
        let chrome = b.events.filter { $0["event"]?.stringValue == "chrome" }.compactMap { $0["tabStrip"]?.stringValue }
        #expect(chrome == ["hidden", "shown"], "the tab strip went \(chrome)")
        try b.quit()
    }

    /// The reading list is prefetched when online: two articles on Site One's list (part read on
    /// another device, say), never opened here, are fetched in the background and kept, without
    /// a visible view loading again; with the site's server stopped, opening them shows the kept
    /// copies, style sheet and figure inline. An entry naming Site Two's origin is refused and
    /// never fetched, and a read article is not fetched.
    @Test func readingListIsPrefetchedForOfflineReading() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        for name in ["c", "d", "read"] { try rig.write(rig.ports[0], "\(name).html", TestSites.article(name.uppercased())) }
        try rig.write(rig.ports[0], "index.html", TestSites.article("Index"))
        try rig.write(rig.ports[0], "style.css", TestSites.style)
        try rig.write(rig.ports[0], "fig.svg", TestSites.figure)
        try rig.write(rig.ports[1], "private.html", TestSites.isolationPage)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])
        let urls = [rig.origins[0] + "/c.html", rig.origins[0] + "/d.html"]
        let list: JSONValue = ["articles": [
            ["id": .string(urls[0]), "state": "partial", "progress": 0.4],
            ["id": .string(urls[1] + "#part-2"), "state": "partial", "progress": 0.1],
            ["id": .string(rig.origins[1] + "/private.html"), "state": "partial", "progress": 0.5],
            ["id": "/read.html", "state": "read"],
        ]]
        let set = try rig.cli(["call", "reading.set", "--site", rig.origins[0], "--args", JSONSerializer.string(list, style: .compact), "--json"])
        #expect(set.status == 0, "reading.set: \(set.out)")

        let b = try rig.launch([rig.origins[0] + "/index.html"])
        _ = try b.waitForLoads(1)
        let round = try b.waitFor("Site One's prefetch round") { $0["event"]?.stringValue == "prefetch" && $0["site"]?.stringValue == "Site One" }
        #expect(round["kept"]?.intValue == 2 && round["refused"]?.intValue == 1 && round["stopped"]?.isNull == true,
                "\(JSONSerializer.string(round))")
        let prefetched = Set(b.events.filter { $0["event"]?.stringValue == "prefetched" }.compactMap { $0["url"]?.stringValue })
        #expect(prefetched == Set(urls))
        #expect(b.events.contains { $0["event"]?.stringValue == "note" && $0["text"]?.stringValue?.contains("private.html") == true },
                "the refused entry was not named")
        // No visible view loaded again, and no tab opened.
        #expect(b.events.filter { $0["event"]?.stringValue == "loaded" }.count == 1)
        #expect(try b.command(["cmd": "state"])["tabs"]?.arrayValue?.count == 1)
        // Only Site One's own, unread pages were asked for.
        let one = (try? String(contentsOfFile: rig.dir.appendingPathComponent("http-\(rig.ports[0]).log").path, encoding: .utf8)) ?? ""
        let two = (try? String(contentsOfFile: rig.dir.appendingPathComponent("http-\(rig.ports[1]).log").path, encoding: .utf8)) ?? ""
        #expect(one.contains("GET /c.html") && one.contains("GET /d.html"), "\(one)")
        #expect(!one.contains("GET /read.html"), "a read article was fetched")
        #expect(!two.contains("private.html"), "an entry on another site's origin was fetched: \(two)")

        // Offline: the articles never opened are shown from their kept copies.
        rig.stopServer(rig.ports[0])
        #expect(!canConnect(port: rig.ports[0]), "the test site is still up")
        for (i, url) in urls.enumerated() {
            try b.command(["cmd": "address", "text": .string(url)])
            // The load fails (the site is down) and the kept copy is shown in its place.
            try b.waitFor("the kept copy of \(url) shown", timeout: 30) {
                $0["event"]?.stringValue == "loaded" && $0["url"]?.stringValue == url && $0["source"]?.stringValue == "kept"
            }
            let seen = try b.evalUntil(0, "location.href === \(JSONSerializer.string(.string(url))) && document.images[0] && document.images[0].complete ? [document.title, getComputedStyle(document.body).backgroundColor, document.images[0].naturalWidth, document.images[0].src.slice(0, 5)] : null")
            #expect(seen.arrayValue?.first?.stringValue == "Article \(i == 0 ? "C" : "D")")
            #expect(seen.arrayValue?[1].stringValue == "rgb(244, 241, 234)", "the kept copy lost its style sheet")
            #expect(seen.arrayValue?[2].intValue == 160 && seen.arrayValue?[3].stringValue == "data:", "the kept copy lost its figure")
        }
        try b.quit()
    }

    /// A listed page that never ends is stopped at the prefetch timeout and dropped (its
    /// connection closed); a listed page of the site that redirects to another site's origin is
    /// dropped before the redirect is followed; the round goes on to the next article.
    @Test func aListedPageThatNeverEndsOrLeavesTheSiteIsDropped() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "index.html", TestSites.article("Index"))
        try rig.write(rig.ports[0], "c.html", TestSites.article("C"))
        try rig.write(rig.ports[1], "private.html", TestSites.isolationPage)
        try rig.startDaemon()
        try rig.startEndlessServer(rig.ports[0], away: rig.origins[1] + "/private.html")
        try rig.startServer(rig.ports[1])
        let endless = rig.origins[0] + "/endless.html", article = rig.origins[0] + "/c.html", away = rig.origins[0] + "/away.html"
        let list: JSONValue = ["articles": [["id": .string(endless), "state": "partial", "progress": 0.2],
                                            ["id": .string(away), "state": "partial", "progress": 0.3],
                                            ["id": .string(article), "state": "partial", "progress": 0.1]]]
        #expect(try rig.cli(["call", "reading.set", "--site", rig.origins[0], "--args", JSONSerializer.string(list, style: .compact)]).status == 0)
        let b = try rig.launch(["--prefetch-timeout", "3", rig.origins[0] + "/index.html"])
        _ = try b.waitForLoads(1)
        let round = try b.waitFor("Site One's prefetch round", timeout: 60) { $0["event"]?.stringValue == "prefetch" && $0["site"]?.stringValue == "Site One" }
        #expect(round["kept"]?.intValue == 1 && round["skipped"]?.intValue == 2, "\(JSONSerializer.string(round))")
        #expect(b.events.filter { $0["event"]?.stringValue == "prefetched" }.compactMap { $0["url"]?.stringValue } == [article])
        #expect(b.events.contains { $0["event"]?.stringValue == "note" && $0["text"]?.stringValue?.contains("endless.html was not kept: it did not load within 3 s") == true })
        #expect(b.events.contains { $0["event"]?.stringValue == "note" && $0["text"]?.stringValue?.contains("away.html was not kept: it leads off Site One") == true })
        #expect(!rig.serverLog(rig.ports[1]).contains("private.html"), "the redirect to another site was followed")
        var gone = false
        for _ in 0..<100 where !gone { gone = rig.serverLog(rig.ports[0]).contains("endless: reader gone"); if !gone { usleep(100_000) } }
        #expect(gone, "the endless page was not stopped: \(rig.serverLog(rig.ports[0]).suffix(400))")
        try b.quit()
    }

    /// A page's own navigation to another origin (foreign or another app-bound site) does not
    /// move its view; what the reader types for a foreign site goes to the system browser, and
    /// another app-bound site opens in a tab of its own.
    @Test func navigationStaysOnTheSite() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        try rig.write(rig.ports[0], "a.html", TestSites.article("A"))
        try rig.write(rig.ports[0], "leave.html", TestSites.selfNavigatingPage)
        try rig.write(rig.ports[1], "index.html", TestSites.isolationPage)
        try rig.startDaemon()
        try rig.startServer(rig.ports[0])
        try rig.startServer(rig.ports[1])
        let foreign = "http://localhost:\(rig.ports[1])/index.html"
        let otherSite = rig.origins[1] + "/index.html"
        let b = try rig.launch([rig.origins[0] + "/a.html"])
        _ = try b.waitForLoads(1)
        for (n, target) in [foreign, otherSite].enumerated() {
            // A query of its own: the refused navigation never left the page, so the same page
            // with another fragment would only scroll, not load.
            let page = rig.origins[0] + "/leave.html?\(n)#" + (target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
            try b.command(["cmd": "address", "text": .string(page)])
            _ = try b.waitForLoads(2 + n)
            _ = try b.evalUntil(0, "window.__tried ? true : null")
            usleep(1_500_000)
            let state = try b.command(["cmd": "state"])
            #expect(state["tabs"]?.arrayValue?.count == 1, "the page opened a tab by itself (to \(target))")
            #expect(state["tabs"]?.arrayValue?.first?["url"]?.stringValue == page, "the page moved its view off its site (to \(target))")
        }
        #expect((try? String(contentsOfFile: rig.externalLog, encoding: .utf8)) == nil, "a page started the system browser by itself")

        // What the reader types: a foreign site goes to the system browser…
        try b.command(["cmd": "address", "text": .string("http://localhost:\(rig.ports[1])/typed")])
        try b.waitFor("the system browser") { $0["event"]?.stringValue == "external" }
        // The opener is a process of its own: wait for its whole line, not just for the file.
        let typed = "http://localhost:\(rig.ports[1])/typed"
        func logged() -> Bool { (try? String(contentsOfFile: rig.externalLog, encoding: .utf8))?.contains(typed) == true }
        for _ in 0..<200 where !logged() { usleep(100_000) }
        #expect(logged(), "the system browser was not asked to open \(typed)")
        // …and another app-bound site opens in a tab of its own, on its own session.
        try b.command(["cmd": "address", "text": .string(otherSite)])
        let two = try b.waitFor("Site Two's page") { $0["event"]?.stringValue == "loaded" && $0["site"]?.stringValue == "Site Two" }
        #expect(two["tab"]?.intValue == 1, "\(b.events.filter { $0["event"]?.stringValue == "loaded" })")
        try b.quit()
    }

    /// A link, a new-window link, a form, a script and a redirect to another host (issue 33):
    /// decided before any request, so the other host's server logs nothing from the site's
    /// session; the reader's own click goes to the system browser, the rest nowhere; the tab
    /// stays on its page and the saved session holds no foreign address, online or offline.
    @Test func foreignLinksAreNeverRequestedInTheSitesSession() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        // localhost is not 127.0.0.1: a foreign host, served (and logged) by the second server.
        let foreign = "http://localhost:\(rig.ports[1])"
        try rig.write(rig.ports[0], "links.html", TestSites.foreignLinksPage(foreign: foreign))
        for name in ["clicked", "blank", "form", "scripted", "redirected"] { try rig.write(rig.ports[1], "\(name).html", TestSites.article(name)) }
        try rig.startDaemon()
        try rig.startEndlessServer(rig.ports[0], away: foreign + "/redirected.html")
        try rig.startServer(rig.ports[1])
        let page = rig.origins[0] + "/links.html"
        let b = try rig.launch([page])
        _ = try b.waitForLoads(1)

        // The reader's click (the automation's eval runs as a user gesture): the system browser.
        _ = try b.eval(0, "document.getElementById('out').click(); 1")
        try b.waitFor("the system browser") { $0["event"]?.stringValue == "external" && $0["url"]?.stringValue == foreign + "/clicked.html" }
        usleep(2_100_000)  // the system browser opens at most once every two seconds
        _ = try b.eval(0, "document.getElementById('blank').click(); 1")
        try b.waitFor("the system browser, for a new window") { $0["event"]?.stringValue == "external" && $0["url"]?.stringValue == foreign + "/blank.html" }
        // Without a gesture: a form, a script and a redirect; none is opened, none is requested.
        _ = try b.eval(0, "setTimeout(() => document.getElementById('form').submit(), 10); 1")
        _ = try b.eval(0, "setTimeout(() => { location.href = '\(foreign)/scripted.html' }, 300); 1")
        _ = try b.eval(0, "setTimeout(() => { location.href = '/away.html' }, 600); 1")
        usleep(3_000_000)
        let log = rig.serverLog(rig.ports[1])
        for name in ["clicked", "blank", "form", "scripted", "redirected"] {
            #expect(!log.contains("/\(name).html"), "the site's session requested the foreign \(name).html: \(log)")
        }
        #expect(rig.serverLog(rig.ports[0]).contains("/away.html"), "the redirect was not tried: the test tried nothing")
        var state = try b.command(["cmd": "state"])
        #expect(state["tabs"]?.arrayValue?.count == 1 && state["tabs"]?.arrayValue?.first?["url"]?.stringValue == page, "\(state)")

        // Offline for the other host: the tab still never shows an error page at its address.
        rig.stopServer(rig.ports[1])
        usleep(2_100_000)
        _ = try b.eval(0, "document.getElementById('out').click(); 1")
        func clicks() -> Int { b.events.filter { $0["event"]?.stringValue == "external" && $0["url"]?.stringValue == foreign + "/clicked.html" }.count }
        for _ in 0..<100 where clicks() < 2 { usleep(100_000) }
        #expect(clicks() == 2, "the offline click did not go to the system browser")
        usleep(1_000_000)
        state = try b.command(["cmd": "state"])
        #expect(state["tabs"]?.arrayValue?.first?["url"]?.stringValue == page, "\(state)")
        try b.quit()
        let saved = try rig.cli(["call", "tabs.get", "--site", rig.origins[0], "--json"])
        #expect(saved.out.contains("links.html") && !saved.out.contains("localhost"), "tabs.get after quit: \(saved.out)")
    }

    /// Where WebKit's sandbox cannot run, the browser says why and stops; it never runs pages
    /// without it (and refuses the variable that would turn it off).
    @Test func sandboxProblemsStopTheBrowserWithAReason() throws {
        let rig = try BrowserRig()
        let off = try Spawned.run(rig.browser, ["--automation"], env: rig.browserEnvironment(extra: ["WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS": "1"]))
        #expect(off.status == 69)
        #expect(off.out.contains("does not run pages without WebKit's sandbox"), "\(off.out)")
        // A user namespace in which no further user namespace may be made: bubblewrap fails there.
        let script = "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" --automation"
        let blocked = try Spawned.run("/usr/bin/unshare", ["-U", "-r", "/bin/sh", "-c", script, rig.browser], env: rig.browserEnvironment())
        #expect(blocked.status == 69, "\(blocked.out)")
        #expect(blocked.out.contains("WebKit's sandbox cannot start here") && blocked.out.contains("never turns WebKit's sandbox off"), "\(blocked.out)")
    }

    /// The daemon's control op `sites` (how the browser learns where each site's web data goes):
    /// app-bound sites only, each with a private folder inside its own site folder; it carries
    /// no secret, names only entries whose tags verified, and answers while locked for those
    /// checked at an unlock.
    @Test func sitesControlOpNamesAWebFolderInsideEachSite() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        #expect(try rig.cli(["site", "add", "Plain", "--origin", "https://plain.example", "--keyring", "file"]).status == 0)
        try rig.startDaemon(unlock: false)
        // Before the first unlock no entry's tag could be checked: none is named.
        let before = try rig.controlSites()
        #expect(before["ok"]?.boolValue == true && before["sites"]?.arrayValue?.isEmpty == true, "\(before)")
        #expect(try rig.cli(["unlock", "--passphrase-file", rig.passFile, "--keyring", "file"]).status == 0)
        #expect(try rig.cli(["lock"]).status == 0)
        let answer = try rig.controlSites()
        #expect(answer["ok"]?.boolValue == true)
        let sites = answer["sites"]?.arrayValue ?? []
        #expect(sites.compactMap { $0["name"]?.stringValue }.sorted() == ["Site One", "Site Two"], "only app-bound sites")
        for s in sites {
            let id = s["id"]?.stringValue ?? "-"
            #expect(s["webFolder"]?.stringValue == rig.home + "/sites/" + id + "/web")
            var st = stat()
            #expect(stat(rig.home + "/sites/" + id + "/web", &st) == 0 && st.st_mode & 0o077 == 0, "the web folder is not private")
        }
        #expect(sites.first { $0["name"]?.stringValue == "Site One" }?["origins"]?.arrayValue?.contains(.string(rig.origins[0])) == true)
    }

    /// Without a daemon the browser says what to start: run directly, it asks the daemon to
    /// start it (through `sitekeep open`), and no daemon answers.
    @Test func noDaemonIsAClearError() throws {
        let rig = try BrowserRig()
        try rig.makeStore()
        var env = rig.browserEnvironment()
        env["SITEKEEP_HOME"] = rig.home
        let r = try Spawned.run(rig.browser, [], env: env)
        #expect(r.status != 0)
        #expect(r.out.contains("no daemon serves the store") && r.out.contains("sitekeep unlock"), "\(r.out)")
        let browse = try Spawned.run(rig.sitekeep, ["browse", "Site One"], env: env)
        #expect(browse.status == 1 && browse.out.contains("no daemon serves the store") && browse.out.contains("sitekeep unlock"), "\(browse.out)")
    }
}
