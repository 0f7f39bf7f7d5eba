import Foundation
internal import SiteKeepSocket
internal import SiteKeepSystem
#if canImport(Glibc)
@preconcurrency import Glibc
#endif

/// `browse [SITE]`: starts `sitekeep-browser`, the focused browser, on the running daemon's sites.
enum BrowseCommand {
    static var all: [CommandSpec] { [browse] }

    static let browse = CommandSpec(
        path: ["browse"],
        summary: "Open the focused browser (sitekeep-browser) on your app-bound sites",
        discussion: """
        Runs sitekeep-browser from beside this sitekeep (or from PATH) and waits for it. Each \
        app-bound site gets views of its own: its own WebKit data store inside the site's folder, and \
        the bridge in the page bound to that site. With SITE (a name, id or origin) it opens that site's \
        saved tabs, or its first page; with a URL, that page; with neither, every saved session. \
        It needs a running daemon ('sitekeep serve'); it is built where GTK 4 and WebKitGTK 6.0 are \
        installed (tools/setup --browser).
        """,
        arguments: [ArgumentSpec("SITE", "a site's name, id or origin, or a URL on an app-bound site", optional: true)],
        examples: [CommandExample("sitekeep browse", "restore the tabs you left on every site"),
                   CommandExample("sitekeep browse https://promptugal.news", "open Promptugal's saved tabs (or its first page)")],
        printsData: false
    ) { inv in
        let browser = try locate(environment: inv.environment)
        var args = [browser]
        if let site = inv.argument("SITE") {
            if let c = URLComponents(string: site), c.scheme != nil, !(c.path.isEmpty || c.path == "/") || c.query != nil {
                args.append(site)
            } else {
                args += ["--site", site]
            }
        }
        // A child, waited for (never exec: the command also runs inside other programs, the tests),
        // with this terminal's streams and in this process group (an interrupt reaches it).
        // The daemon binds a site only for a host that loads no code it does not name, so the
        // browser starts without the variables that would make it (LD_PRELOAD, GIO_EXTRA_MODULES, ...).
        let scrubbed = inv.environment.filter { PeerProcess.codeLoadingVariableNames.contains($0.key) && !$0.value.isEmpty }.keys.sorted()
        if !scrubbed.isEmpty {
            inv.note("note: the browser starts without \(scrubbed.joined(separator: ", ")) (the daemon refuses a host that loads code it does not name)")
        }
        let environment = inv.environment.filter { !PeerProcess.codeLoadingVariableNames.contains($0.key) }
        let child: ChildProcess
        do throws(SystemError) {
            child = try ChildProcess.spawn(browser, arguments: Array(args.dropFirst()), environment: environment.map { "\($0.key)=\($0.value)" },
                                           stdin: .inherit, stdout: .inherit, stderr: .inherit, ownProcessGroup: false)
        } catch {
            throw CommandFailure("cannot start \(browser): \(error.cause)", code: "not_found")
        }
        let code = child.wait().status
        guard code == 0 else { throw CommandFailure("sitekeep-browser stopped with status \(code) (its message is above)", code: "browser_failed") }
    }

    /// `sitekeep-browser` beside this executable, else on PATH.
    static func locate(environment: [String: String]) throws -> String {
        let fm = FileManager.default
        if let me = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let beside = (me as NSString).deletingLastPathComponent + "/sitekeep-browser"
            if fm.isExecutableFile(atPath: beside) { return beside }
        }
        for dir in (environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(dir)/sitekeep-browser"
            if fm.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw CommandFailure("sitekeep-browser is not installed",
                             remedy: "it is built where GTK 4 and WebKitGTK 6.0 are installed: tools/setup --browser, then SITEKEEP_BROWSER=1 swift build --product sitekeep-browser",
                             code: "not_found")
    }
}
