import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport

// The served daemon (test support's ServedDaemon), unlocked and locked through this target's
// command line, for the command suites that need one running.

extension ServedDaemon {
    /// `sitekeep serve` on `store`, its sockets in `run-TAG` of the store's folder.
    static func start(_ store: CLIStore, _ extra: [String], tag: String) throws -> ServedDaemon {
        try start(home: store.home, run: store.dir.appendingPathComponent("run-\(tag)").path, userHome: store.dir.path, extra: extra)
    }

    /// Unlocks this daemon, and checks it was this daemon that took the secret (not a one-shot
    /// check of the secret because no daemon answered).
    func unlock(_ pass: String) async {
        let r = await runTool(["unlock", "--passphrase-file", pass, "--home", home, "--json"], environment: ["SITEKEEP_SOCK": sock])
        #expect(r.status == 0, "unlock: \(r.err)")
        #expect((try? JSONParser.parse(r.out)["daemon"]) == .bool(true), "the unlock reached no daemon: \(r.out)")
    }

    func lock() async {
        #expect(await runTool(["lock", "--home", home], environment: ["SITEKEEP_SOCK": sock]).status == 0)
    }
}
