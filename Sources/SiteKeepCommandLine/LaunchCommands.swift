import Foundation
internal import SiteKeepBridgeProtocol
internal import SiteKeepCrypto
internal import SiteKeepSocket
internal import SiteKeepSystem
internal import SiteKeepDaemon
#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// `open`, `browse` and `host run`: a site's host is a process the daemon started. These
/// commands ask the running daemon to start one (the control op `launch`), hand it this
/// terminal's standard streams, and wait for it; the daemon opens and checks the executable,
/// starts it with an environment it builds, and gives it connections bound to its sites. A
/// program started any other way binds no app-bound site.
enum LaunchCommands {
    static var all: [CommandSpec] { [open, browse, hostRun] }

    static let browserOptions: [OptionSpec] = [
        .option("--site", value: "SITE", "only this site's saved tabs (a name, id or origin); repeat for more"),
        .option("--size", value: "WxH", "the window's size, e.g. 1280x800"),
        .option("--kept-budget", value: "MB", "megabytes each site may keep for offline reading (256)"),
        .flag("--no-prefetch", "do not fetch reading-list articles in the background"),
        .option("--prefetch-timeout", value: "S", "seconds each prefetched page may take (30)"),
        .flag("--automation", "drive the browser through this command's standard input and output (tests, scripts); needs your approval (--passphrase-file)"),
    ]

    static let openDiscussion = """
    Asks the running daemon to start sitekeep-browser, the focused browser, and waits for it. The \
    daemon starts the browser itself, from the file beside it whose SHA-256 it pinned when it \
    started, with the display and session variables of this terminal and none that load other \
    code (LD_PRELOAD, GTK_MODULES, ...), and hands it connections bound to your app-bound sites: \
    a browser started any other way binds no site. Each site gets views of its own: its own \
    WebKit data store inside the site's folder and the bridge in the page bound to that site. \
    With SITE it opens that site's saved tabs (or its first page); with URLs, those pages; with \
    neither, every saved session. It needs a running daemon ('sitekeep unlock' starts one) and a \
    browser built beside it (tools/setup --browser).
    """

    static let open = CommandSpec(
        path: ["open"],
        summary: "Open the focused browser on your app-bound sites, started by the daemon",
        discussion: openDiscussion,
        arguments: [ArgumentSpec("SITE", "a site's name, id or origin, or URLs on app-bound sites", optional: true, variadic: true)],
        options: browserOptions,
        secretInputs: [.passphrase],
        examples: [CommandExample("sitekeep open", "restore the tabs you left on every site"),
                   CommandExample("sitekeep open https://promptugal.news", "open Promptugal's saved tabs (or its first page)")],
        printsData: false
    ) { inv in try openBrowser(inv) }

    static let browse = CommandSpec(
        path: ["browse"],
        summary: "The same as 'sitekeep open'",
        discussion: openDiscussion,
        arguments: [ArgumentSpec("SITE", "a site's name, id or origin, or URLs on app-bound sites", optional: true, variadic: true)],
        options: browserOptions,
        secretInputs: [.passphrase],
        examples: [CommandExample("sitekeep browse", "restore the tabs you left on every site")],
        printsData: false
    ) { inv in try openBrowser(inv) }

    static let hostRun = CommandSpec(
        path: ["host", "run"],
        summary: "Start a program you added as a site's host, bound to that site",
        discussion: """
        Asks the running daemon to start PROGRAM (a host you added with 'sitekeep site host add') \
        for SITE, and waits for it, with this terminal's standard streams. The daemon opens the \
        program's file, checks that it is still the file you added (its SHA-256), starts that very \
        file with this terminal's display, session and locale variables and none that load other \
        code, and gives it descriptor 3 (named by SITEKEEP_HOST_FD): its channel to the daemon, over \
        which it gets bridge connections bound to SITE (docs/web-view-host.md). The program's exit \
        status is this command's. Interrupting this command stops the program.
        """,
        arguments: [SiteCommands.siteArgument, ArgumentSpec("PROGRAM", "the host's executable, then its arguments (after --)", variadic: true)],
        examples: [CommandExample("sitekeep host run https://newsroom.sgit.ai -- /usr/local/bin/newsroom-host --verbose",
                                  "start your own host program for Newsroom")],
        printsData: false
    ) { inv in
        let site = try inv.requiredArgument("SITE")
        let program = inv.remainingArguments(from: "PROGRAM")
        guard let path = program.first else { throw UsageError("missing PROGRAM", command: inv.spec.commandLine) }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        try launch(inv, program: "host", site: site, hostPath: absolute, arguments: Array(program.dropFirst()), approve: false)
    }

    private static func openBrowser(_ inv: Invocation) throws {
        var args: [String] = []
        for text in inv.remainingArguments(from: "SITE") {
            if let c = URLComponents(string: text), c.scheme != nil, !(c.path.isEmpty || c.path == "/") || c.query != nil {
                args.append(text)
            } else {
                args += ["--site", text]
            }
        }
        for site in inv.options("--site") { args += ["--site", site] }
        for name in ["--size", "--kept-budget", "--prefetch-timeout"] {
            if let v = inv.option(name) { args += [name, v] }
        }
        if inv.flag("--no-prefetch") { args.append("--no-prefetch") }
        let automation = inv.flag("--automation")
        if automation {
            args.append("--automation")
            guard inv.option("--passphrase-file") != nil || inv.io.canPrompt else {
                throw CommandFailure("--automation lets this command drive the browser's pages, so it needs your approval",
                                     remedy: "give the passphrase with --passphrase-file F", code: "approval_required")
            }
        }
        try launch(inv, program: "browser", site: nil, hostPath: nil, arguments: args, approve: automation)
    }

    /// Asks the daemon to start the host and waits for it; `approve`: the passphrase goes with
    /// the request (what needs the user's approval: the browser's `--automation`).
    private static func launch(_ inv: Invocation, program: String, site: String?, hostPath: String?, arguments: [String], approve: Bool) throws {
        guard let store = StoreContext.storeID(home: inv.settings.home),
              let path = try? DaemonSockets.control(environment: inv.environment) else {
            throw CommandFailure("no daemon serves the store in \(inv.settings.home)",
                                 remedy: "start it with 'sitekeep unlock' (a host is started by the daemon)", code: "no_daemon")
        }
        let cwd = FileManager.default.currentDirectoryPath
        let started: LaunchedHost?
        do {
            if approve {
                let secret = try inv.secret(.passphrase, prompt: "Passphrase to let this command drive the browser:")
                started = try secret.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(BridgeError) -> LaunchedHost? in
                    try ControlClient.launch(path: path, store: store, program: program, site: site, hostPath: hostPath,
                                             arguments: arguments, environment: inv.environment, cwd: cwd, stdio: [0, 1, 2], passphrase: raw)
                }
            } else {
                started = try ControlClient.launch(path: path, store: store, program: program, site: site, hostPath: hostPath,
                                                   arguments: arguments, environment: inv.environment, cwd: cwd, stdio: [0, 1, 2])
            }
        } catch let e as BridgeError {
            if case let .daemonRefused(code, message) = e { throw CommandFailure(message, code: code) }
            throw CommandFailure(e.description, code: "no_daemon")
        }
        guard let host = started else {
            throw CommandFailure("no daemon serves the store in \(inv.settings.home)",
                                 remedy: "start it with 'sitekeep unlock' (a host is started by the daemon)", code: "no_daemon")
        }
        defer { host.close() }
        // Ctrl+C here ends this process, and so the host: the daemon sees this connection close.
        guard let status = host.waitForExit() else {
            throw CommandFailure("the daemon stopped while the host ran", code: "no_daemon")
        }
        guard status == 0 else {
            throw CommandFailure("\(program == "browser" ? "sitekeep-browser" : hostPath ?? "the host") stopped with status \(status) (its message is above)",
                                 code: program == "browser" ? "browser_failed" : "host_failed")
        }
    }
}
