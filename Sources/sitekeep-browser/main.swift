import Foundation
import Glibc
import SiteKeepBrowserCore
import SiteKeepSystem
import SiteKeepBridgeProtocol

// sitekeep-browser: a focused browser for the app-bound sites of a running SiteKeep daemon.

// A browser binds sites only when the daemon started it and gave it its channel (descriptor 3,
// named by SITEKEEP_HOST_FD). Started any other way (a desktop entry, a terminal), it asks the
// daemon to start it, through `sitekeep open` beside it, and becomes that command.
let arguments = Array(CommandLine.arguments.dropFirst())
let startedByDaemon = ProcessInfo.processInfo.environment[HostChannel.environmentVariable] != nil
// First: no other process of the user may trace this one or read its memory (non-dumpable), and
// it holds only what it opens (and, when the daemon started it, its channel).
TracingGuard.forbid()
InheritedDescriptors.closeAll(keeping: startedByDaemon ? [HostChannel.descriptor] : [])

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

Keys:
  Ctrl+T                      new tab on the site's front page, the address bar up
  Ctrl+click, middle-click    the link in a new tab
  Ctrl+W                      close the tab
  Ctrl+Shift+T                reopen the tab closed last
  Ctrl+Tab, Ctrl+Shift+Tab    next, previous tab (the page gets the keyboard)
  Ctrl+L                      address bar (Enter to go, Escape to close)
  Alt+Left                    back
  F5, Ctrl+R                  reload (nothing reloads on its own)
  F9                          the site's reading list
  Ctrl+Q                      quit, saving the tabs (closing the window does the same)
With SITE and URLs ('sitekeep open SITE URL...'), each URL opens in a tab of its own.
The daemon starts it ('sitekeep open'; run directly, it asks the daemon to through that command), so it needs a running daemon ('sitekeep unlock').
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
if !startedByDaemon {
    let me = ProcessEnvironment.executablePath() ?? CommandLine.arguments[0]
    let sitekeep = (me as NSString).deletingLastPathComponent + "/sitekeep"
    guard FileManager.default.isExecutableFile(atPath: sitekeep) else {
        FileHandle.standardError.write(Data("sitekeep-browser: the daemon starts the browser, through 'sitekeep open', and no sitekeep is beside this program (\(sitekeep)); install both in one folder\n".utf8))
        exit(69)
    }
    // `sitekeep open` takes the browser's own options, and URLs or sites as arguments.
    let cArgs = ([sitekeep, "open"] + arguments).map { strdup($0) } + [nil]
    execv(sitekeep, cArgs)
    FileHandle.standardError.write(Data("sitekeep-browser: cannot run \(sitekeep): \(String(cString: strerror(errno)))\n".utf8))
    exit(69)
}

let link: ChannelDaemonLink
let sites: [BrowserSite]
do {
    link = try ChannelDaemonLink(environment: environment)
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
