import Foundation
import Synchronization
import Testing
import SiteKeepJSON
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Real parts for the browser's process tests: a throw-away store made by the `sitekeep` CLI,
/// `sitekeep serve` unlocked through its control socket, two test sites served on loopback by
/// Python's http.server (ports differ), and `sitekeep-browser --automation` under
/// `dbus-run-session -- xvfb-run -a` with GTK_A11Y=none and private XDG_RUNTIME_DIR and
/// XDG_CACHE_HOME. Everything is started by pid and stopped by pid (each in its own process group).
final class BrowserRig {
    static let repo: URL = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        return dir
    }()

    /// A built executable of this package, or a failure that says how to get it.
    static func executable(_ name: String) throws -> String {
        let path = repo.appendingPathComponent(".build/debug/\(name)").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            if name == "sitekeep-browser" {
                throw RigError("sitekeep-browser was not built: it needs GTK 4 and WebKitGTK 6.0 (tools/setup --browser installs libwebkitgtk-6.0-dev, libgtk-4-dev, xvfb), then SITEKEEP_BROWSER=1 swift build")
            }
            throw RigError("\(path) was not built: run swift build first")
        }
        return path
    }

    let dir: URL
    let sitekeep: String
    let browser: String
    let home: String
    let sock: String
    let passFile: String
    let ports: [Int]
    var origins: [String] { ports.map { "http://127.0.0.1:\($0)" } }
    private var servers: [Int: Spawned] = [:]
    private var daemon: Spawned?
    let externalLog: String

    init() throws {
        sitekeep = try Self.executable("sitekeep")
        browser = try Self.executable("sitekeep-browser")
        dir = URL(fileURLWithPath: try mkdtempPath("sitekeep-browser-test"))
        home = dir.appendingPathComponent("home").path
        mkdir(dir.appendingPathComponent("run").path, 0o700)
        sock = dir.appendingPathComponent("run/bridge.sock").path
        passFile = dir.appendingPathComponent("pass").path
        try "browser test passphrase\n".write(toFile: passFile, atomically: true, encoding: .utf8)
        ports = try freePorts(2)
        externalLog = dir.appendingPathComponent("xdg-open.log").path
        // A stand-in for the system browser: it records what it was asked to open.
        let bin = dir.appendingPathComponent("bin")
        mkdir(bin.path, 0o700)
        let fake = bin.appendingPathComponent("xdg-open").path
        try "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '\(externalLog)'\n".write(toFile: fake, atomically: true, encoding: .utf8)
        chmod(fake, 0o700)
        for p in [ports[0], ports[1]] {
            mkdir(www(p), 0o700)
        }
    }

    deinit {
        for s in servers.values { s.stop() }
        daemon?.stop()
        if ProcessInfo.processInfo.environment["SITEKEEP_TEST_KEEP"] == nil { try? FileManager.default.removeItem(at: dir) }
    }

    func www(_ port: Int) -> String { dir.appendingPathComponent("www-\(port)").path }

    func write(_ port: Int, _ name: String, _ text: String) throws {
        try text.write(toFile: www(port) + "/" + name, atomically: true, encoding: .utf8)
    }

    var cliEnvironment: [String: String] {
        ["SITEKEEP_HOME": home, "SITEKEEP_SOCK": sock, "HOME": dir.path, "NO_COLOR": "1", "PATH": "/usr/bin:/bin"]
    }

    /// Runs the sitekeep CLI; its status and output.
    @discardableResult
    func cli(_ args: [String]) throws -> (status: Int32, out: String) {
        let r = try Spawned.run(sitekeep, args, env: cliEnvironment)
        return r
    }

    /// A store with a team key and two app-bound sites: "Site One" (Promptugal's origin and the
    /// first loopback origin, so schedule ops are allowed and key.sign is not) and "Site Two".
    /// The browser binds both as every site's host; `sitekeep call` (the built `sitekeep-main`),
    /// which the tests use to look into Site One through the daemon, is added as its host.
    func makeStore() throws {
        let caller = BuiltProducts.sitekeepMain ?? sitekeep
        for args in [["init", "--passphrase-file", passFile, "--argon2-iterations", "2", "--argon2-memory", "19", "--keyring", "file"],
                     ["team", "add", "summit", "--passphrase-file", passFile, "--keyring", "file"],
                     ["site", "add", "Site One", "--origin", "https://promptugal.news", "--origin", origins[0], "--app-bound", "--passphrase-file", passFile, "--host", caller, "--keyring", "file"],
                     ["site", "add", "Site Two", "--origin", origins[1], "--app-bound", "--passphrase-file", passFile, "--keyring", "file"]] {
            let r = try cli(args)
            guard r.status == 0 else { throw RigError("sitekeep \(args.joined(separator: " ")) failed: \(r.out)") }
        }
    }

    /// Starts `sitekeep serve` (with `extra` options, e.g. `--sync-every 2`) and unlocks it
    /// through the control socket.
    func startDaemon(unlock: Bool = true, extra: [String] = []) throws {
        let approve = dir.appendingPathComponent("approve.sh").path
        try "#!/bin/sh\nexit 0\n".write(toFile: approve, atomically: true, encoding: .utf8)
        chmod(approve, 0o700)
        var env = cliEnvironment
        env["SITEKEEP_ASKPASS"] = approve
        daemon = try Spawned(sitekeep, ["serve", "--keyring", "file"] + extra, env: env, log: dir.appendingPathComponent("serve.log").path)
        let control = dir.appendingPathComponent("run/control.sock").path
        #expect(ChildProcess.waitForPath(control), "the daemon's control socket did not appear")
        guard unlock else { return }
        let r = try cli(["unlock", "--passphrase-file", passFile, "--keyring", "file"])
        guard r.status == 0 else { throw RigError("sitekeep unlock failed: \(r.out)") }
    }

    /// Serves `www(port)` on 127.0.0.1:port (python3 -m http.server), waiting until it answers.
    func startServer(_ port: Int) throws {
        try serve(port, ["-m", "http.server", "--bind", "127.0.0.1", String(port), "--directory", www(port)], what: "the test HTTP server")
    }

    /// Starts python3 with `arguments` as the server of `port`, logging to `http-PORT.log`,
    /// and waits until the port answers.
    private func serve(_ port: Int, _ arguments: [String], what: String) throws {
        servers[port] = try Spawned("/usr/bin/python3", arguments, env: ["PATH": "/usr/bin:/bin"],
                                    log: dir.appendingPathComponent("http-\(port).log").path)
        for _ in 0..<100 {
            if canConnect(port: port) { return }
            usleep(50_000)
        }
        throw RigError("\(what) on port \(port) did not start")
    }

    /// Serves `www(port)` on 127.0.0.1:port as ``startServer(_:)`` does, and `/endless.html` as a
    /// page that never ends and `/away.html` as a redirect to `away` (``TestSites/endlessServer``).
    func startEndlessServer(_ port: Int, away: String) throws {
        try serve(port, ["-c", TestSites.endlessServer, String(port), www(port), away], what: "the endless test server")
    }

    /// Serves `www(port)` on 127.0.0.1:port with `no-cache` and ETags (``TestSites/revalidatingServer``).
    func startRevalidatingServer(_ port: Int) throws {
        try serve(port, ["-c", TestSites.revalidatingServer, String(port), www(port)], what: "the revalidating test server")
    }

    /// The requests the test server on `port` has logged so far ("GET /a.html", ...).
    func serverRequests(_ port: Int) -> [String] {
        serverLog(port).split(separator: "\n").compactMap { line in
            guard let open = line.firstIndex(of: "\""), let close = line[line.index(after: open)...].firstIndex(of: "\"") else { return nil }
            let words = line[line.index(after: open)..<close].split(separator: " ")
            return words.count >= 2 ? "\(words[0]) \(words[1])" : nil
        }
    }

    /// The colours of a screenshot (``png_colours.py``): quantized "r,g,b" → fraction of the image.
    static func colours(ofPNG path: String) throws -> [String: Double] {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("png_colours.py").path
        let r = ChildProcess.capture("/usr/bin/python3", [script, path])
        guard r.status == 0, let json = try? JSONParser.parse(r.out), let colours = json["colours"]?.objectValue else {
            throw RigError("could not read the colours of \(path): \(r.err)")
        }
        var out: [String: Double] = [:]
        for member in colours { out[member.key] = member.value.doubleValue }
        return out
    }

    /// Where ``screenshot(_:name:tab:)`` writes `name`.
    func screenshotPath(_ name: String) -> String {
        let target = ProcessInfo.processInfo.environment["SITEKEEP_BROWSER_SCREENSHOTS"] ?? dir.appendingPathComponent("shots").path
        return (target as NSString).appendingPathComponent(name)
    }

    /// Serves `www(port)` on 127.0.0.1:port as ``startServer(_:)`` does, and files that ask to
    /// be downloaded (``TestSites/downloadServer``).
    func startDownloadServer(_ port: Int) throws {
        try serve(port, ["-c", TestSites.downloadServer, String(port), www(port)], what: "the download test server")
    }

    /// Every file under the test's folder (the browser's HOME: the store with each site's
    /// folder, the XDG folders, `Downloads`) except what the test itself wrote (the served
    /// folders, the logs) that contains `marker` or whose name contains one of `names`: what a
    /// download would have written. Paths relative to ``dir``.
    func savedFiles(marker: String, names: [String]) -> [String] {
        guard let e = FileManager.default.enumerator(atPath: dir.path) else { return [] }
        var found: [String] = []
        for case let rel as String in e {
            if rel.hasPrefix("www-") || rel.hasSuffix(".log") { continue }
            let path = dir.path + "/" + rel
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue else { continue }
            let base = (rel as NSString).lastPathComponent
            if names.contains(where: { base.contains($0) }) { found.append(rel); continue }
            if BrowserRig.file(path, contains: marker) { found.append(rel) }
        }
        return found
    }

    /// Whether the file at `path` contains `text` as UTF-8.
    static func file(_ path: String, contains text: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path) else { return false }
        return data.range(of: Data(text.utf8)) != nil
    }

    /// What the test server on `port` logged.
    func serverLog(_ port: Int) -> String {
        (try? String(contentsOfFile: dir.appendingPathComponent("http-\(port).log").path, encoding: .utf8)) ?? ""
    }

    func stopServer(_ port: Int) {
        servers.removeValue(forKey: port)?.stop()
        for _ in 0..<50 where canConnect(port: port) { usleep(50_000) }
    }

    /// The environment the browser runs in.
    func browserEnvironment(extra: [String: String] = [:]) -> [String: String] {
        let xdg = dir.appendingPathComponent("xdg-run").path
        mkdir(xdg, 0o700)
        var env = ["SITEKEEP_SOCK": sock, "HOME": dir.path, "XDG_RUNTIME_DIR": xdg,
                   "XDG_CACHE_HOME": dir.appendingPathComponent("xdg-cache").path,
                   "XDG_CONFIG_HOME": dir.appendingPathComponent("xdg-config").path,
                   "XDG_DATA_HOME": dir.appendingPathComponent("xdg-data").path,
                   "GTK_A11Y": "none", "NO_AT_BRIDGE": "1", "GSK_RENDERER": "cairo",
                   "PATH": dir.appendingPathComponent("bin").path + ":/usr/bin:/bin"]
        for (k, v) in extra { env[k] = v }
        return env
    }

    /// Starts the browser under a private D-Bus and Xvfb, as the user does: `sitekeep open`
    /// asks the daemon to start it (the daemon binds sites only for a host it started), with
    /// `--automation` approved by the passphrase; the browser's events and commands then go
    /// through that command's standard output and input, which the daemon gave the browser.
    func launch(_ args: [String], extra: [String: String] = [:]) throws -> BrowserProcess {
        var env = browserEnvironment(extra: extra)
        env["SITEKEEP_HOME"] = home
        return try BrowserProcess(Spawned("/usr/bin/dbus-run-session", ["--", "xvfb-run", "-a", sitekeep, "open", "--automation", "--passphrase-file", passFile,
                                                                        "--size", "1024x700"] + args,
                                          env: env, log: nil, pipes: true))
    }

    /// The daemon's answer to the control op `sites` (what the browser learns its folders from).
    func controlSites() throws -> JSONValue {
        let path = dir.appendingPathComponent("run/control.sock").path
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw RigError("cannot connect to \(path)") }
        let req = Array(#"{"op":"sites","length":0}"#.utf8) + [0x0a]
        _ = req.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        var line: [UInt8] = []
        var b: UInt8 = 0
        while read(fd, &b, 1) == 1, b != 0x0a { line.append(b) }
        return try JSONParser.parse(line, limits: .document)
    }

    /// The web folder the daemon names for the site called `name`.
    func webFolder(of name: String) throws -> String {
        let sites = try controlSites()["sites"]?.arrayValue ?? []
        guard let folder = sites.first(where: { $0["name"]?.stringValue == name })?["webFolder"]?.stringValue else {
            throw RigError("the daemon names no web folder for \(name)")
        }
        return folder
    }

    /// Whether any file under `folder` contains `text` (as UTF-8 or UTF-16LE, as SQLite may store it).
    static func folder(_ folder: String, contains text: String) -> Bool {
        let needles = [Array(text.utf8), Array(text.utf16).flatMap { [UInt8($0 & 0xff), UInt8($0 >> 8)] }]
        guard let e = FileManager.default.enumerator(atPath: folder) else { return false }
        for case let rel as String in e {
            guard let data = FileManager.default.contents(atPath: folder + "/" + rel) else { continue }
            let bytes = [UInt8](data)
            for n in needles where bytes.count >= n.count {
                var i = 0
                while i <= bytes.count - n.count {
                    if bytes[i] == n[0] && Array(bytes[i..<i + n.count]) == n { return true }
                    i += 1
                }
            }
        }
        return false
    }

    /// Saves a screenshot of the window, showing tab `tab`, where SITEKEEP_BROWSER_SCREENSHOTS
    /// names (tools/test: .build/screenshots; tools/screenshots: docs/screenshots, the README's). The page must have painted: the
    /// shot is taken after two animation frames of the page, and again (up to 10 s) while it is
    /// no bigger than the window with a blank page in it (a PNG of about 6 KB).
    func screenshot(_ browser: BrowserProcess, name: String, tab: Int = 0) throws {
        let target = ProcessInfo.processInfo.environment["SITEKEEP_BROWSER_SCREENSHOTS"] ?? dir.appendingPathComponent("shots").path
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        let path = (target as NSString).appendingPathComponent(name)
        _ = try browser.eval(tab, "requestAnimationFrame(() => requestAnimationFrame(() => { window.__painted = true; })); 1")
        _ = try browser.evalUntil(tab, "window.__painted ? true : null", timeout: 15)
        var png: [UInt8] = []
        for _ in 0..<10 {
            usleep(1_000_000)   // the window composes the page's frame after the page drew it
            let r = try browser.command(["cmd": "screenshot", "path": .string(path)])
            #expect(r["ok"]?.boolValue == true, "the screenshot \(path) was not written")
            png = [UInt8](FileManager.default.contents(atPath: path) ?? Data())
            if png.count > 9000 { break }
        }
        // A PNG of the whole window (1024 wide, as launched), with the page in it.
        #expect(png.count > 9000 && png.starts(with: [0x89, 0x50, 0x4e, 0x47]), "\(path) is not a PNG of a painted page (\(png.count) bytes)")
        let width = png.count > 24 ? png[16..<20].reduce(0) { $0 << 8 | Int($1) } : 0
        #expect(width == 1024, "\(path) is \(width) pixels wide, not the window's 1024")
    }
}

/// The browser under automation: events come from stdout, commands go to stdin.
final class BrowserProcess {
    let process: Spawned
    private var nextID: Int64 = 1

    init(_ process: Spawned) { self.process = process }
    deinit { process.stop() }

    /// The events seen so far.
    var events: [JSONValue] { process.lines().filter { $0.hasPrefix("{\"event\"") }.compactMap { try? JSONParser.parse(Array($0.utf8), limits: .document) } }

    /// Waits until an event satisfies `match`; returns it.
    @discardableResult
    func waitFor(_ what: String, timeout: Double = 60, _ match: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let e = events.first(where: match) { return e }
            if process.exited { break }
            usleep(50_000)
        }
        throw RigError("the browser never reported \(what); it printed:\n\(process.lines().suffix(40).joined(separator: "\n"))\n\(process.errorText())")
    }

    /// Waits for `count` pages to have loaded.
    func waitForLoads(_ count: Int, timeout: Double = 60) throws -> [JSONValue] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let loads = events.filter { $0["event"]?.stringValue == "loaded" }
            if loads.count >= count { return loads }
            if process.exited { break }
            usleep(50_000)
        }
        throw RigError("\(count) pages did not load; the browser printed:\n\(process.lines().suffix(40).joined(separator: "\n"))\n\(process.errorText())")
    }

    /// Sends a command and waits for its result.
    @discardableResult
    func command(_ cmd: JSONValue, timeout: Double = 30) throws -> JSONValue {
        let id = nextID
        nextID += 1
        guard case .object(var members) = cmd else { throw RigError("a command is an object") }
        members.append(JSONMember(key: "id", value: .int(id)))
        process.send(JSONSerializer.string(.object(members), style: .compact) + "\n")
        return try waitFor("the result of \(JSONSerializer.string(cmd, style: .compact))", timeout: timeout) {
            $0["event"]?.stringValue == "result" && $0["id"]?.intValue == id
        }
    }

    /// Evaluates `js` in tab `tab`'s page and returns its value parsed as JSON.
    func eval(_ tab: Int, _ js: String) throws -> JSONValue? {
        let r = try command(["cmd": "eval", "tab": .int(Int64(tab)), "js": .string(js)])
        guard let text = r["value"]?.stringValue else { return nil }
        return try? JSONParser.parse(Array(text.utf8), limits: .document)
    }

    /// Evaluates until `js` gives a non-null value (a page's results are written asynchronously).
    func evalUntil(_ tab: Int, _ js: String, timeout: Double = 30) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let v = try eval(tab, js), !v.isNull { return v }
            usleep(200_000)
        }
        throw RigError("\(js) stayed null in tab \(tab)")
    }

    /// Asks for the window's `state` until it satisfies `match` (scroll reports reach the window
    /// a little after the page scrolls, a reading list after the daemon answers); returns it.
    @discardableResult
    func stateUntil(_ what: String, timeout: Double = 10, _ match: (JSONValue) -> Bool) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        var last: JSONValue = .null
        while Date() < deadline {
            last = try command(["cmd": "state"])
            if match(last) { return last }
            usleep(100_000)
        }
        throw RigError("\(what): the window's state stayed \(JSONSerializer.string(last, style: .compact))")
    }

    /// Quits through the window (the session is saved first) and waits for the process.
    func quit() throws {
        process.send("{\"cmd\":\"quit\"}\n")
        guard process.wait(timeout: 30) else { throw RigError("the browser did not quit within 30 s") }
    }
}

struct RigError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A child process in its own process group, stopped (the whole group) by pid.
final class Spawned: @unchecked Sendable {
    // @unchecked: `output` is behind its Mutex; the rest is set once in init.
    let pid: pid_t
    private let stdinFD: Int32
    private let output = Mutex<(lines: [String], partial: [UInt8], err: [UInt8], done: Bool, errDone: Bool)>(([], [], [], false, false))
    private let status = Mutex<Int32?>(nil)

    init(_ path: String, _ args: [String], env: [String: String], log: String?, pipes: Bool = false) throws {
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if pipes {
            guard pipe(&inPipe) == 0, pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw RigError("pipe failed") }
            posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
            posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
            posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
            for fd in inPipe + outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, log ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attr, 0)
        var child: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }
        let rc = posix_spawn(&child, path, &actions, &attr, argv, envp)
        guard rc == 0 else { throw RigError("cannot start \(path): \(String(cString: strerror(rc)))") }
        pid = child
        if pipes {
            close(inPipe[0]); close(outPipe[1]); close(errPipe[1])
            stdinFD = inPipe[1]
            let out = outPipe[0], err = errPipe[0]
            Thread.detachNewThread { [self] in pump(out, isError: false) }
            Thread.detachNewThread { [self] in pump(err, isError: true) }
        } else {
            stdinFD = -1
        }
    }

    private func pump(_ fd: Int32, isError: Bool) {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            output.withLock { o in
                if isError { o.err += buf[0..<n]; if o.err.count > 1 << 20 { o.err.removeFirst(o.err.count - (1 << 20)) }; return }
                o.partial += buf[0..<n]
                while let nl = o.partial.firstIndex(of: 0x0a) {
                    let line = String(decoding: o.partial[..<nl], as: UTF8.self)
                    o.partial.removeSubrange(...nl)
                    o.lines.append(line)
                }
            }
        }
        close(fd)
        output.withLock { if isError { $0.errDone = true } else { $0.done = true } }
    }

    func lines() -> [String] { output.withLock { $0.lines } }
    func errorText() -> String { output.withLock { String(decoding: $0.err.suffix(6000), as: UTF8.self) } }

    func send(_ text: String) {
        guard stdinFD >= 0 else { return }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(stdinFD, $0.baseAddress, $0.count) }
    }

    var exited: Bool { reap(block: false) != nil }

    /// The exit status (or 128 + signal) once the process has ended.
    @discardableResult
    func reap(block: Bool) -> Int32? {
        if let s = status.withLock({ $0 }) { return s }
        var st: Int32 = 0
        let r = waitpid(pid, &st, block ? 0 : WNOHANG)
        guard r == pid else { return nil }
        let code = (st & 0x7f) == 0 ? (st >> 8) & 0xff : 128 + (st & 0x7f)
        status.withLock { $0 = code }
        return code
    }

    func wait(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if reap(block: false) != nil { return true }
            usleep(50_000)
        }
        return false
    }

    /// Stops the process group: SIGTERM, then SIGKILL after 5 s.
    func stop() {
        if stdinFD >= 0 { close(stdinFD) }
        guard reap(block: false) == nil else { kill(-pid, SIGKILL); return }
        kill(-pid, SIGTERM)
        if !wait(timeout: 5) { kill(-pid, SIGKILL); _ = reap(block: true) }
        kill(-pid, SIGKILL)
    }

    /// Runs a command to its end; its status and combined output.
    static func run(_ path: String, _ args: [String], env: [String: String]) throws -> (status: Int32, out: String) {
        let p = try Spawned(path, args, env: env, log: nil, pipes: true)
        p.send("")
        close(p.stdinFD)
        let code = p.reap(block: true) ?? -1
        // The output is whole once both pipes have ended, not after a pause sized for an idle
        // machine (a 20 ms pause lost a busy run's whole answer). A grandchild that keeps a pipe
        // open is not waited for past the deadline.
        let deadline = Date().addingTimeInterval(30)
        while !p.output.withLock({ $0.done && $0.errDone }) && Date() < deadline { usleep(10_000) }
        return (code, p.lines().joined(separator: "\n") + p.output.withLock { String(decoding: $0.partial + $0.err, as: UTF8.self) })
    }
}

func mkdtempPath(_ prefix: String) throws -> String {
    var template = Array("\(NSTemporaryDirectory())/\(prefix).XXXXXX".utf8CString)
    guard let p = mkdtemp(&template) else { throw RigError("mkdtemp failed") }
    return String(cString: p)
}

func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// `count` distinct free loopback ports.
func freePorts(_ count: Int) throws -> [Int] {
    var ports: [Int] = []
    var fds: [Int32] = []
    defer { fds.forEach { close($0) } }
    for _ in 0..<count {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw RigError("no free port") }
        fds.append(fd)
        ports.append(Int(UInt16(bigEndian: addr.sin_port)))
    }
    return ports
}
