import Foundation
import Glibc
import SiteKeepBrowserCore
import SiteKeepSystem

// sitekeep-browser: a focused browser for the app-bound sites of a running SiteKeep daemon.

// First: hold only what this process opens. A connection to the daemon opened by whoever
// started the browser, and kept across its execve, is then not the browser's, and the daemon
// refuses to bind a site for it (docs/web-view-host.md, "hosts").
InheritedDescriptors.closeAll()

let arguments = Array(CommandLine.arguments.dropFirst())

let usage = """
usage: sitekeep-browser [URL...] [--site NAME|ID|ORIGIN]... [--kept-budget MB] [--no-prefetch] [--prefetch-timeout S] [--size WxH] [--automation]

Opens your app-bound sites, each in views of its own: its own cookies, storage and cache (inside
the site's folder in the SiteKeep store), its bridge (window.webkit.messageHandlers.pt and
window.ptApp) bound to that site. With no URL it restores the tabs you left (tabs.get), each at
its scroll position, from the kept copy when there is one; it never reloads on its own (F5 does).
Every page it shows is kept for offline reading, and so are the articles on each open site's
reading list, fetched in the background from the site alone within --kept-budget (256 MB by
default, for each site: every site keeps its pages in its own folder, within its own budget),
each page within --prefetch-timeout (30 s), unless --no-prefetch.
Links to other sites open in your system browser (xdg-open).

Keys: Ctrl+L address, Alt+Left back, F5 reload, F9 reading list, Ctrl+Tab next tab, Ctrl+W close tab.
Needs a running daemon: 'sitekeep serve' (its socket: $SITEKEEP_SOCK, else $XDG_RUNTIME_DIR/sitekeep/bridge.sock).
"""

func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("sitekeep-browser: \(message)\n".utf8))
    exit(status)
}

var options = BrowserOptions()
var i = 0
while i < arguments.count {
    let a = arguments[i]
    func value() -> String {
        i += 1
        guard i < arguments.count else { fail("\(a) needs a value\n\(usage)", status: 64) }
        return arguments[i]
    }
    switch a {
    case "--help", "-h":
        print(usage)
        exit(0)
    case "--site": options.sites.append(value())
    case "--kept-budget":
        let v = value()
        guard let mb = Int64(v), mb >= 1, mb <= 1 << 20 else { fail("--kept-budget takes megabytes from 1 to 1048576, not \(v)", status: 64) }
        options.keptBudget = mb << 20
    case "--size":
        let v = value()
        let parts = v.split(separator: "x").compactMap { Int32($0) }
        guard parts.count == 2, parts.allSatisfy({ $0 >= 200 && $0 <= 8192 }) else { fail("--size takes WIDTHxHEIGHT, e.g. 1024x768, not \(v)", status: 64) }
        options.width = parts[0]
        options.height = parts[1]
    case "--automation": options.automation = true
    case "--no-prefetch": options.prefetch = false
    case "--prefetch-timeout":
        let v = value()
        guard let s = UInt32(v), s >= 1, s <= 600 else { fail("--prefetch-timeout takes seconds from 1 to 600, not \(v)", status: 64) }
        options.prefetchTimeout = s
    default:
        if a.hasPrefix("-") { fail("unknown option \(a)\n\(usage)", status: 64) }
        options.urls.append(a)
    }
    i += 1
}

let environment = ProcessInfo.processInfo.environment
if let problem = SandboxCheck.problem(environment: environment) { fail(problem, status: 69) }

let link: SocketDaemonLink
let sites: [BrowserSite]
do {
    link = try SocketDaemonLink(environment: environment)
    sites = try link.sites()
} catch {
    fail("\(error)", status: 69)
}
guard !sites.isEmpty else {
    fail("the daemon has no app-bound sites; add one with 'sitekeep site add NAME --origin https://… --app-bound'", status: 69)
}
for url in options.urls where NavigationPolicy(sites: sites).site(owning: url) == nil {
    fail("\(url) is not on an app-bound site (\(sites.map(\.name).joined(separator: ", "))); open it in your usual browser", status: 64)
}

let status = MainActor.assumeIsolated {
    let browser = Browser(link: link, sites: sites, options: options)
    return browser.run()
}
exit(status)
