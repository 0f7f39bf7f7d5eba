import Foundation
internal import SiteKeepDesktop
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepDaemon
internal import SiteKeepHardening
internal import SiteKeepJSON
internal import SiteKeepKeyring
internal import SiteKeepPartitions

/// `version` and `doctor`.
enum BasicCommands {
    static var all: [CommandSpec] { [version, doctor] }

    static let version = CommandSpec(
        path: ["version"],
        summary: "Print SiteKeep's version and the C libraries it links",
        examples: [CommandExample("sitekeep version", "print the version"),
                   CommandExample("sitekeep version --json", "the same, for scripts")]
    ) { inv in
        let libraries = LibraryVersions.all
        inv.emit(.object([
            JSONMember(key: "version", value: .string(SiteKeepVersion.current)),
            JSONMember(key: "libraries", value: .object(libraries.map { JSONMember(key: $0.name, value: .string($0.version)) })),
        ])) {
            "sitekeep \(SiteKeepVersion.current)\n" + libraries.map { "  \($0.name) \($0.version)" }.joined(separator: "\n")
        }
    }

    static let doctor = CommandSpec(
        path: ["doctor"],
        summary: "Check this machine: libraries, hardening, CPU features, keyring and store",
        discussion: """
        Reports which C libraries are linked, whether process hardening took effect (no core \
        dumps, not ptrace-able), which CPU features the crypto code uses, which keyring backend \
        --keyring selects and why, and the state of the store folder. Exits 1 if something \
        SiteKeep needs is missing.
        """,
        examples: [CommandExample("sitekeep doctor", "check the machine and the store"),
                   CommandExample("sitekeep doctor --keyring file --json", "the same for the file keyring, as JSON")]
    ) { inv in
        var checks: [DoctorCheck] = []
        for lib in LibraryVersions.all {
            checks.append(DoctorCheck(group: "libraries", name: lib.name, ok: true, detail: lib.version))
        }
        let hardening = ProcessHardening.current()
        checks.append(DoctorCheck(group: "hardening", name: "core dumps off", ok: hardening.coreDumpsDisabled,
                                  detail: hardening.coreDumpsDisabled ? "RLIMIT_CORE 0" : "RLIMIT_CORE is not 0"))
        checks.append(DoctorCheck(group: "hardening", name: "not dumpable", ok: !hardening.dumpable,
                                  detail: hardening.dumpable ? "PR_SET_DUMPABLE failed" : "PR_SET_DUMPABLE 0 (no ptrace, no /proc/pid/mem)"))
        checks.append(DoctorCheck(group: "hardening", name: "OpenSSL secure heap", ok: true,
                                  detail: hardening.secureHeap ? "on (P-256 keys in locked memory)" : "off", warning: !hardening.secureHeap))
        for feature in CPUFeatures.all {
            // A feature the CPU lacks is no failure, and no success either: a plain dash, not a ✓.
            checks.append(DoctorCheck(group: "cpu", name: feature.name, ok: true, detail: feature.present ? "yes" : "no", neutral: !feature.present))
        }
        let gcm = AES256GCM.automaticBackend == .libsodium ? "libsodium (AES-NI)" : "OpenSSL (portable)"
        checks.append(DoctorCheck(group: "cpu", name: "AES-256-GCM backend", ok: true, detail: gcm))
        checks += DoctorExtensions.checks(inv)

        let failed = checks.filter { !$0.ok }
        inv.emit(.object([
            JSONMember(key: "ok", value: .bool(failed.isEmpty)),
            JSONMember(key: "home", value: .string(inv.settings.home)),
            JSONMember(key: "checks", value: .array(checks.map(\.json))),
        ])) {
            var lines: [String] = []
            var group = ""
            for c in checks {
                if c.group != group { group = c.group; lines.append(inv.style(group, .bold)) }
                let mark = !c.ok ? inv.style("✗", .red) : (c.warning ? inv.style("!", .yellow) : (c.neutral ? "-" : inv.style("✓", .green)))
                lines.append("  \(mark) \(c.name): \(c.detail)")
            }
            return lines.joined(separator: "\n")
        }
        if !failed.isEmpty {
            throw CommandFailure("\(failed.count) check(s) failed: " + failed.map(\.name).joined(separator: ", "),
                                 remedy: failed.contains { $0.group == "keyring" }
                                     ? "start gnome-keyring-daemon (or another Secret Service) and unlock it, or use --keyring file"
                                     : "run tools/setup to install what is missing",
                                 code: "doctor_failed")
        }
    }
}

/// One line of `sitekeep doctor`.
struct DoctorCheck: Sendable {
    var group: String
    var name: String
    var ok: Bool
    var detail: String
    var warning = false
    /// Neither good nor bad (a CPU feature this machine lacks): shown with a dash.
    var neutral = false

    var json: JSONValue {
        .object([JSONMember(key: "group", value: .string(group)), JSONMember(key: "name", value: .string(name)),
                 JSONMember(key: "ok", value: .bool(ok)), JSONMember(key: "warning", value: .bool(warning)),
                 JSONMember(key: "detail", value: .string(detail))])
    }
}

/// Checks that later layers add (keyring, store); kept apart so each layer adds its own.
enum DoctorExtensions {
    static func checks(_ inv: Invocation) -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        var info = stat()
        if stat(inv.settings.home, &info) == 0 {
            let loose = info.st_mode & 0o077 != 0
            checks.append(DoctorCheck(group: "store", name: "home", ok: !loose,
                                      detail: loose ? "\(inv.settings.home) is readable by others; run chmod 700 on it" : "\(inv.settings.home) (0700)"))
        } else {
            checks.append(DoctorCheck(group: "store", name: "home", ok: true, detail: "\(inv.settings.home) (no store yet; 'sitekeep init' creates it, and no other command does)"))
        }
        checks += keyringChecks(inv)
        checks += fido2SlotChecks(inv)
        if let sites = siteTagCheck(home: inv.settings.home) { checks.append(sites) }
        checks.append(sessionLockCheck(inv))
        // The stored `prompt` setting, as every start of the daemon reads it; a settings file
        // that cannot be read is its own finding (the daemon would refuse to start on it).
        do {
            let settings = try DaemonSettings.load(home: inv.settings.home)
            checks.append(promptCheck(environment: inv.environment, setting: settings.untagged.contains(.prompt) ? nil : settings[.prompt]))
            checks.append(settingsTagCheck(settings))
        } catch {
            checks.append(DoctorCheck(group: "daemon", name: "settings", ok: false, detail: "\(error)"))
            checks.append(promptCheck(environment: inv.environment, setting: nil))
        }
        return checks
    }

    /// Whether every value of daemon.json that widens trust carries its tag. Told without the
    /// master key: a value with no tag is ignored whatever the key says; a tag that is there is
    /// checked by the daemon at unlock, and its log names one that does not verify.
    static func settingsTagCheck(_ settings: DaemonSettings) -> DoctorCheck {
        let untagged = settings.untagged
        guard untagged.isEmpty else {
            return DoctorCheck(group: "daemon", name: "settings tags", ok: true, detail: untagged.map(settings.ignoredMessage).joined(separator: "; "), warning: true)
        }
        return DoctorCheck(group: "daemon", name: "settings tags", ok: true,
                           detail: "every value beyond its default carries a tag (the daemon checks them at unlock; its log names one that does not verify)")
    }

    /// Whether every entry of sites.json that claims something (app-bound, hosts, grants)
    /// carries its tag; told without the master key, as ``settingsTagCheck(_:)``.
    static func siteTagCheck(home: String) -> DoctorCheck? {
        guard let sites = try? SiteRegistry.sites(inHome: URL(fileURLWithPath: home)), !sites.isEmpty else { return nil }
        let untagged = sites.filter { $0.tag == nil && ($0.isAppBound || !$0.hosts.isEmpty || !$0.grants.isEmpty) }
        guard untagged.isEmpty else {
            return DoctorCheck(group: "store", name: "site entries", ok: true,
                               detail: untagged.compactMap { SiteRecordStanding.untagged.problem(of: $0) }.joined(separator: "; "), warning: true)
        }
        return DoctorCheck(group: "store", name: "site entries", ok: true,
                           detail: "every app-bound entry of sites.json carries a tag (the daemon checks them at unlock; its log names one that does not verify)")
    }

    /// Which prompt the daemon would ask for presence through, for the `prompt` setting
    /// `setting` (nil: auto) and this terminal and display (what `sitekeep unlock` from here
    /// points the daemon at), and whether it can be shown now. A prompt that cannot be shown
    /// is a warning, not a failure: the agent then refuses signatures, saying this.
    static func promptCheck(environment: [String: String], setting: String?) -> DoctorCheck {
        var env = environment
        if isatty(0) == 1, let name = ttyname(0) { env["SITEKEEP_TTY"] = String(cString: name) }
        else if let gpg = env["GPG_TTY"], gpg.hasPrefix("/dev/") { env["SITEKEEP_TTY"] = gpg }
        let plan = PromptPlan.current(setting: setting, environment: env)
        guard let problem = plan.problem else {
            return DoctorCheck(group: "daemon", name: "presence prompt", ok: true, detail: "\(plan); it can be shown now")
        }
        return DoctorCheck(group: "daemon", name: "presence prompt", ok: true,
                           detail: "\(plan): cannot be shown now: \(problem); \(plan.remedy ?? "see docs/ssh-and-git-signing.md")",
                           warning: true)
    }

    /// What the daemon watches to lock with the login session (`ActiveChanged`, logind `Lock`).
    static func sessionLockCheck(_ inv: Invocation) -> DoctorCheck {
        guard let watcher = SessionLockWatcher.start(environment: inv.environment, onLock: { _ in }) else {
            return DoctorCheck(group: "daemon", name: "session lock", ok: true,
                               detail: "nothing to watch here (no session bus screensaver and no logind); the daemon locks on 'sitekeep lock' and its idle lock only")
        }
        defer { watcher.stop() }
        return DoctorCheck(group: "daemon", name: "session lock", ok: true,
                           detail: "the daemon locks when the session locks: it watches " + watcher.sources.joined(separator: " and "))
    }

    /// Which keyring `--keyring` selects here, and what that means at rest. Probes only: it
    /// creates nothing.
    static func keyringChecks(_ inv: Invocation) -> [DoctorCheck] {
        var checks: [DoctorCheck] = []
        let probe = SecretServiceKeyring.probe(timeout: 1)
        let serviceDetail: String
        var serviceUsable = false
        switch probe {
        case .available(let locked):
            serviceUsable = !locked
            serviceDetail = locked ? "answers, but its default collection is locked" : "answers on the session bus, default collection unlocked"
        case .noDefaultCollection:
            serviceDetail = "answers, but has no default collection"
        case .unavailable(let error):
            serviceDetail = "not available (\(error))"
        }
        checks.append(DoctorCheck(group: "keyring", name: "Secret Service", ok: true, detail: serviceDetail, warning: !serviceUsable))
        let fileExists = FileKeyring.exists(in: StoreHome(path: inv.settings.home))
        let selected: String
        switch inv.settings.keyring {
        case "file": selected = "file"
        case "secret-service": selected = "secret-service"
        default:
            if fileExists { selected = "file" } else if case .available = probe { selected = "secret-service" } else { selected = "file" }
        }
        let why = inv.settings.keyring == "auto"
            ? (fileExists ? "auto keeps the existing file keyring" : (selected == "secret-service" ? "auto: the Secret Service answered" : "auto: no usable Secret Service"))
            : "chosen with --keyring \(inv.settings.keyring)"
        let ok = !(inv.settings.keyring == "secret-service" && !serviceUsable)
        checks.append(DoctorCheck(group: "keyring", name: "backend", ok: ok, detail: "\(selected) (\(why))"))
        if selected == "file" {
            checks.append(DoctorCheck(
                group: "keyring", name: "protection at rest", ok: true,
                detail: "file keyring: 'after-login' site keys are protected only by file permissions; use the 'when-unlocked' class for private data",
                warning: true))
        } else {
            checks.append(DoctorCheck(group: "keyring", name: "protection at rest", ok: true,
                                      detail: "Secret Service: wrapped keys, and 'after-login' site keys under the login keyring's encryption"))
        }
        return checks
    }
}
