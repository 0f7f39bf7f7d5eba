import Foundation
internal import SiteKeepSystem
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepPartitions
import SiteKeepVocabulary
internal import SiteKeepDaemon

/// `site host add|remove|list`: which programs the daemon may start as a site's host (`sitekeep
/// host run`), and whether `sitekeep call` may act for it. The SiteKeep browser is every
/// app-bound site's host; these add others, one site at a time.
enum SiteHostCommands {
    static var all: [CommandSpec] { [add, remove, list] }

    static let pathArgument = ArgumentSpec("PATH", "the host program's executable (a path; symbolic links are resolved); omit it with --command-line", optional: true)

    /// The program that serves `sitekeep call` (and every other command): `sitekeep-main` beside
    /// this executable, else this executable itself.
    static func commandLineProgram() throws -> String {
        guard let me = ProcessEnvironment.executablePath() else {
            throw CommandFailure("cannot tell where this program is (/proc/self/exe)", remedy: "give the path of sitekeep-main instead", code: "invalid_host")
        }
        let main = (me as NSString).deletingLastPathComponent + "/sitekeep-main"
        return FileManager.default.isExecutableFile(atPath: main) ? main : me
    }

    static func hostJSON(_ h: SiteHost) -> JSONValue {
        .object([JSONMember(key: "path", value: .string(h.path)),
                 JSONMember(key: "sha256", value: h.sha256.map { .string($0) } ?? .null)])
    }

    static func describe(_ hosts: [SiteHost]) -> String {
        let commandLine = try? commandLineProgram()
        return (["the SiteKeep browser"] + hosts.map { $0.path == commandLine ? "the command line ('sitekeep call')" : $0.description }).joined(separator: ", ")
    }

    static let add = CommandSpec(
        path: ["site", "host", "add"],
        summary: "Let a program bind bridge connections to a site (besides the SiteKeep browser)",
        discussion: """
        A site's host is a program the daemon starts for it: the SiteKeep browser ('sitekeep \
        open') for every app-bound site, and the executables added here ('sitekeep host run SITE \
        -- PATH'). The daemon opens the file, checks that it is still the one you added (where \
        you can change the file, it or a folder above it being yours, its SHA-256 is kept and \
        must still match: after updating such a program, add it again), starts that very file \
        with an environment it builds (never LD_PRELOAD or another variable that loads other \
        code), and hands it connections bound to the site; a program started any other way \
        binds nothing. --command-line adds the command line itself (sitekeep-main), so that \
        'sitekeep call' may act for the site from your terminal: it is identified from the \
        kernel (/proc, under a pidfd), which is your explicit opt-in. Adding a host widens who \
        may act for the site, so it needs your approval (the presence prompt, the passphrase \
        typed again, or the current \
        secret given for this command); it is in the audit log.
        """,
        arguments: [SiteCommands.siteArgument, pathArgument],
        options: [.flag("--command-line", "add the command line itself (sitekeep-main), so 'sitekeep call' may act for the site"), UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site host add https://newsroom.sgit.ai --command-line --passphrase-file pass.txt",
                                  "let 'sitekeep call' act for the site (for your own host program: its path instead of --command-line)")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try SiteCommands.registry(store)
        let s = try SiteCommands.site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        guard s.isAppBound else {
            throw CommandFailure("\(s.displayName) is not app-bound: only app-bound sites use the bridge, so a host would do nothing",
                                 remedy: "a site is made app-bound when it is added (--app-bound)", code: "not_app_bound")
        }
        let typed: String
        switch (inv.argument("PATH"), inv.flag("--command-line")) {
        case (let path?, false): typed = path
        case (nil, true): typed = try commandLineProgram()
        default: throw UsageError("give either PATH or --command-line", command: inv.spec.commandLine)
        }
        let host: SiteHost
        do throws(PartitionError) { host = try SiteHost.adding(typed) } catch {
            throw CommandFailure(error.description, remedy: "give the path of the host program's executable", code: "invalid_host")
        }
        if let same = s.hosts.first(where: { $0 == host }) {
            inv.note("note: \(same.path) is already a host of \(s.displayName)")
            inv.emit(["site": .string(s.id.string), "hosts": .array(s.hosts.map(hostJSON))]) { "Nothing added; \(s.displayName)'s hosts: \(describe(s.hosts))." }
            return
        }
        let origin = s.origins.first?.serialized ?? s.id.string
        // Letting another program act for a site widens who may use it: the user approves it,
        // whichever process sent the command (as `site grant`).
        let proof = try Approval.approve(inv, store: store, op: .siteHost, keyID: nil,
                                         subject: "let \(host.path) act for \(s.displayName) (\(origin))")
        let now = try reg.updateHosts(forIdentifier: s.id) { hosts in hosts.filter { $0.path != host.path } + [host] }
        do {
            try store.custodian.auditLog.append(client: .site(s.id), op: .siteHost, key: nil, result: "ok", prompt: proof.promptID,
                                                detail: "added the host \(host.description) to \(origin)")
        } catch {
            // Unlogged, the host does not stand.
            _ = try? reg.updateHosts(forIdentifier: s.id) { hosts in hosts.filter { $0 != host } }
            throw error
        }
        inv.emit(["site": .string(s.id.string), "added": hostJSON(host), "hosts": .array(now.hosts.map(hostJSON))]) {
            "Added the host \(host.description) to \(s.displayName); its hosts: \(describe(now.hosts))."
        }
    }

    static let remove = CommandSpec(
        path: ["site", "host", "remove"],
        summary: "Stop a program binding bridge connections to a site",
        discussion: "Removes the executable from the site's hosts (the SiteKeep browser stays). Needs no approval: it only narrows who may act for the site; but SiteKeep unlocked, since the site's entry in sites.json is tagged again under the master key. Connections the program holds are closed at their next message. In the audit log.",
        arguments: [SiteCommands.siteArgument, pathArgument],
        options: [.flag("--command-line", "remove the command line (sitekeep-main)"), UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep site host remove https://newsroom.sgit.ai --command-line", "'sitekeep call' may no longer act for the site")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try SiteCommands.registry(store)
        let s = try SiteCommands.site(try inv.requiredArgument("SITE"), in: reg, command: inv.spec.commandLine)
        let typed: String
        switch (inv.argument("PATH"), inv.flag("--command-line")) {
        case (let path?, false): typed = path
        case (nil, true): typed = try commandLineProgram()
        default: throw UsageError("give either PATH or --command-line", command: inv.spec.commandLine)
        }
        let resolved = realpath(typed, nil).map { p -> String in defer { free(p) }; return String(cString: p) }
        let matching = s.hosts.filter { $0.path == typed || $0.path == resolved }
        guard !matching.isEmpty else {
            throw CommandFailure("\(typed) is not a host of \(s.displayName) (its hosts: \(describe(s.hosts)))",
                                 remedy: "'sitekeep site host list \(s.origins.first?.serialized ?? s.id.string)' shows them", code: "not_found")
        }
        // The entry is tagged again, which needs SiteKeep unlocked (not an approval).
        try store.unlockOneShot(inv)
        let now = try reg.updateHosts(forIdentifier: s.id) { hosts in hosts.filter { !matching.contains($0) } }
        try store.custodian.auditLog.append(client: .site(s.id), op: .siteHostRemove, key: nil, result: "ok",
                                            detail: "removed the host \(matching.map(\.path).joined(separator: " ")) from \(s.origins.first?.serialized ?? s.id.string)")
        inv.emit(["site": .string(s.id.string), "removed": .array(matching.map(hostJSON)), "hosts": .array(now.hosts.map(hostJSON))]) {
            "Removed \(matching.map(\.path).joined(separator: ", ")) from \(s.displayName)'s hosts; its hosts: \(describe(now.hosts))."
        }
    }

    static let list = CommandSpec(
        path: ["site", "host", "list"],
        summary: "List the programs that may bind bridge connections to each site",
        arguments: [ArgumentSpec("SITE", "one site (default: every app-bound site)", optional: true)],
        examples: [CommandExample("sitekeep site host list", "each app-bound site's hosts")]
    ) { inv in
        let store = try StoreContext.open(inv)
        let reg = try SiteCommands.registry(store)
        let sites = try inv.argument("SITE").map { [try SiteCommands.site($0, in: reg, command: inv.spec.commandLine)] } ?? reg.sites().filter(\.isAppBound)
        inv.emit(.array(sites.map { s in
            .object([JSONMember(key: "site", value: .string(s.id.string)), JSONMember(key: "name", value: .string(s.displayName)),
                     JSONMember(key: "browser", value: .bool(true)), JSONMember(key: "hosts", value: .array(s.hosts.map(hostJSON)))])
        })) {
            sites.isEmpty ? "No app-bound sites." :
            Table(headers: ["SITE", "HOSTS"], rows: sites.map { [$0.displayName, describe($0.hosts)] }).render { inv.style($0, .bold) }
        }
    }
}
