import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepCrypto
import SiteKeepTestSupport

/// Runs every example that `--help` shows, against a prepared store, so the examples cannot
/// rot: each must parse (never a usage error), and each must succeed unless it needs
/// something the fixture cannot give (a terminal, an id that is random per store).
@Suite(.serialized) struct ExampleTests {
    /// Examples that cannot succeed in a fixture, and why. They must still not be usage errors.
    static let cannotSucceed: [String: String] = [
        "sitekeep call storage.get --site https://promptugal.news --args '{\"key\":\"nr.schedule.v1\"}'": "needs a running daemon (DaemonTests runs one)",
        "sitekeep call hello --site https://promptugal.news": "needs a running daemon (DaemonTests runs one)",
        "sitekeep site host remove https://newsroom.sgit.ai --command-line": "the fixture's sites have no hosts to remove (HostBindingTests add and remove one)",
        "sitekeep slot add tpm2 --passphrase-file pass.txt --new-pin-file pin.txt --pcrs 7": "needs a PIN file and a TPM (TPMCommandTests add a TPM slot through the swtpm tools/test starts)",
        "sitekeep slot add fido2 --passphrase-file pass.txt --pin-file key-pin.txt": "needs a security key (FIDO2CommandTests add a slot with the software authenticator)",
        "sitekeep team ssh enable summit --presence fido2 --passphrase-file pass.txt": "needs a security key (TouchPresenceDaemonTests use the software authenticator)",
        "sitekeep team presence summit fido2 --passphrase-file pass.txt": "needs a security key (FIDO2CommandTests use the software authenticator)",
        "sitekeep doctor": "run in-process, the test runner is not hardened (no PR_SET_DUMPABLE, which LeakSanitizer needs); the adversarial suite runs doctor as a child",
        "sitekeep doctor --keyring file --json": "as above",
        "sitekeep agent env": "the in-process runner sets no XDG_RUNTIME_DIR, so there is no default socket (the example with --socket runs)",
        "sitekeep init": "prompts on a terminal",
        "sitekeep door enable --server https://send.example --token-file token.txt --recovery-file recovery.txt --passphrase-file pass.txt": "needs a vault server (DoorCommandTests enables a door on the real one)",
        "sitekeep door status": "the fixture store has no door (DoorCommandTests shows one's status)",
        "sitekeep init --restore https://send.example --token-file token.txt --recovery-file recovery.txt": "needs a vault server holding a door, and a new home (DoorCommandTests restores from the real one)",
        "sitekeep inbox send --token-file brief.token --title 'Daily brief' --body-file brief.md": "needs a token file and a vault server (LaneCommandTests sends through the real one)",
        "sitekeep inbox lane open notes --passphrase-file pass.txt": "needs a remote the vault server serves (LaneCommandTests runs the lane commands against the real one)",
        "sitekeep inbox token add notes --label brief-bot --passphrase-file pass.txt": "as above",
        "sitekeep inbox token revoke notes --label brief-bot --passphrase-file pass.txt": "as above",
        "sitekeep inbox lane list notes --passphrase-file pass.txt": "as above",
        "sitekeep inbox lane show notes 1796666150730_e0aa44a4fdd6cb51f9ad89cc.enc --passphrase-file pass.txt": "as above",
        "sitekeep inbox lane mark notes all --passphrase-file pass.txt": "as above",
        "sitekeep inbox lane purge notes --passphrase-file pass.txt": "as above",
        "sitekeep vault push notes --prf-file prf.bin": "needs a remote the vault server serves (ServerInteropTests push through the real one)",
        "sitekeep vault pull notes --prf-file prf.bin": "needs a remote (VaultSyncCommandTests pull through one)",
        "sitekeep vault remote remove notes origin --prf-file prf.bin": "the fixture vault has no remote",
        "sitekeep vault resolve notes docs/a.txt --theirs --prf-file prf.bin": "needs a merge in progress (ServerInteropTests make one)",
        "sitekeep vault merge-abort notes --prf-file prf.bin": "needs a merge in progress",
        "sitekeep agenda load https://promptugal.news/api/v1/agenda.json --site https://promptugal.news": "needs the network (NotificationDeliveryTests and AgendaFetchTests load agendas from files and loopback)",
        "sitekeep unlock": "prompts on a terminal",
        "sitekeep remind remove r1": "the fixture has no reminder set by hand (AdHocReminderCommandTests set one and remove it)",
        "sitekeep slot remove 3f2a9c1d --prf-file prf.bin": "slot ids are random per store",
        "sitekeep slot passphrase 3f2a9c1d": "slot ids are random per store",
        "sitekeep prf salt 3f2a9c1d --json": "slot ids are random per store",
        "sitekeep vault trust notes key-rnd-imm-1a064d7bd08a7250 --prf-file prf.bin": "key ids are random per vault: the command must say the key is not a signer",
        "sitekeep team verify summit Nov7OopOh1x5qMj36WqrOm6yE+nEJAWFZRKYp/mIjbenOEVVdNSv+jR/uXRfRfIevIgluRkMix4OwVml7PeSBA== --message-file note.txt":
            "a sample signature made by another key: the command must say INVALID",
    ]

    /// Splits an example like a shell would for plain words and '…' / "…" quoting.
    static func words(_ line: String) -> [String] {
        var out: [String] = [], current = "", quote: Character? = nil, inWord = false
        for c in line {
            if let q = quote {
                if c == q { quote = nil } else { current.append(c) }
            } else if c == "'" || c == "\"" {
                quote = c; inWord = true
            } else if c == " " {
                if inWord { out.append(current); current = ""; inWord = false }
            } else {
                current.append(c); inWord = true
            }
        }
        if inWord { out.append(current) }
        return out
    }

    /// A store with the state the examples name: passphrase pass.txt, PRF slot prf.bin, team key
    /// summit, sites promptugal.news (with keys nr.schedule.v1 and draft) and newsroom.sgit.ai,
    /// and, when the sgit CLI is installed, a vault named notes that belongs to promptugal.news.
    static func prepare(_ dir: URL) async throws -> Bool {
        let fm = FileManager.default
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        func write(_ name: String, _ bytes: [UInt8]) throws { try Data(bytes).write(to: dir.appendingPathComponent(name)) }
        try write("pass.txt", Array("correct horse battery\n".utf8))
        try write("prf.bin", SecureRandom.bytes(count: 32))
        try write("note.txt", Array("Meet at ten.\n".utf8))
        try write("link.txt", Array(("https://web-summit.sgit.ai/people/alice#key=" + Base64.encode(SecureRandom.bytes(count: 32), variant: .urlSafeNoPadding)).utf8))
        let home = dir.appendingPathComponent("home").path
        func run(_ args: [String]) async throws {
            let r = await runTool(args + ["--home", home, "--keyring", "file"])
            guard r.status == 0 else { throw CommandFailure("fixture step \(args) failed: \(r.err)") }
        }
        let pass = dir.appendingPathComponent("pass.txt").path, prf = dir.appendingPathComponent("prf.bin").path
        try await run(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19"])
        try await run(["slot", "add", "prf", "--passphrase-file", pass, "--new-prf-file", prf, "--rp-id", "newsroom.sgit.ai", "--credential-id", "AAAA"])
        try await run(["team", "add", "summit", "--prf-file", prf])
        // Its SSH formats (`team sign --ssh-namespace`) follow its SSH policy: any namespace.
        try await run(["team", "ssh", "enable", "summit", "--prf-file", prf])
        try await run(["site", "add", "Promptugal", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", pass])
        try await run(["site", "add", "Newsroom", "--origin", "https://newsroom.sgit.ai", "--app-bound", "--passphrase-file", pass])
        try await run(["site", "storage", "set", "https://promptugal.news", "nr.schedule.v1", "{\"v\":1,\"picks\":[]}"])
        try await run(["site", "storage", "set", "https://promptugal.news", "draft", "x"])
        guard let sgit = Interop.sgitPath else { return false }
        let notes = dir.appendingPathComponent("notes")
        guard ChildProcess.run(sgit, ["init", notes.path, "--vault-key", "notes pass phrase:notes123"]) == 0 else { return false }
        try fm.createDirectory(at: notes.appendingPathComponent("docs"), withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: notes.appendingPathComponent("docs/a.txt"))
        try fm.createDirectory(at: notes.appendingPathComponent("sitekeep/sites"), withIntermediateDirectories: true)
        try Data(#"{"schema": "sitekeep_partition_v1", "storage": {"nr.schedule.v1": "{}"}}"#.utf8)
            .write(to: notes.appendingPathComponent("sitekeep/sites/promptugal.news.json"))
        // A workflow, as an agent would propose it (the workflow examples run it).
        try fm.createDirectory(at: notes.appendingPathComponent("workflows"), withIntermediateDirectories: true)
        try Data(#"{"format": "sitekeep.workflow.v1", "name": "morning", "title": "Morning run", "steps": [{"page": "https://newsroom.sgit.ai/wires/"}, {"query": "articles.unread"}]}"#.utf8)
            .write(to: notes.appendingPathComponent("workflows/morning.json"))
        let commit = ChildProcess.run("/bin/sh", ["-c", "cd '\(notes.path)' && '\(sgit)' commit -m notes >/dev/null 2>&1"])
        guard commit == 0 else { return false }
        try write("notes.key", Array("notes pass phrase:notes123".utf8))
        try await run(["vault", "add", "notes", "--path", notes.path, "--key-file", dir.appendingPathComponent("notes.key").path, "--prf-file", prf,
                       "--site", "https://promptugal.news"])
        return true
    }

    /// Runs `example` of `spec` in its own copy (`run-<index>`) of the prepared fixture, with
    /// `extra` arguments after it; nil for the daemon and the browser, which are parsed only.
    static func run(_ example: CommandExample, of spec: CommandSpec, fixture: URL, index: Int,
                    extra: [String] = []) async throws -> (status: Int32, out: String, err: String)? {
        // Each example gets its own copy of the fixture (init examples an empty home).
        let work = fixture.appendingPathComponent("run-\(index)")
        try FileManager.default.copyItem(at: fixture.appendingPathComponent("base"), to: work)
        defer { try? FileManager.default.removeItem(at: work) }
        if spec.path == ["init"] { try FileManager.default.removeItem(at: work.appendingPathComponent("home")) }
        // An example that changes the vault folder gets the copy's own folder: `notes` is
        // registered again at the copy (the registry's entries are authenticated, so it
        // is not edited); every other example reads the base folder.
        // The inbox writes its read marks there, and schedule add|remove mirror the picks.
        let writesVault = (spec.path.first == "vault" && ["write", "rm", "mv", "resolve", "merge-abort", "pull", "push"].contains(spec.path.last ?? ""))
            || spec.path == ["inbox"] || spec.path == ["schedule", "add"] || spec.path == ["schedule", "remove"]
        if spec.path == ["vault", "add"] || writesVault {
            let home = work.appendingPathComponent("home").path, prf = work.appendingPathComponent("prf.bin").path
            let r = await runTool(["vault", "remove", "notes", "--prf-file", prf, "--home", home, "--keyring", "file"])
            #expect(r.status == 0, "\(r.err)")
            if writesVault {
                let added = await runTool(["vault", "add", "notes", "--path", work.appendingPathComponent("notes").path,
                                           "--key-file", work.appendingPathComponent("notes.key").path, "--site", "https://promptugal.news",
                                           "--prf-file", prf, "--home", home, "--keyring", "file"])
                #expect(added.status == 0, "\(added.err)")
            }
        }
        let known = ["pass.txt", "prf.bin", "note.txt", "link.txt", "notes.key", "picks.ics"]
        let args = Self.words(example.command).dropFirst().map { word -> String in
            if known.contains(word) { return work.appendingPathComponent(word).path }
            if word == "~/notes" { return work.appendingPathComponent("notes").path }
            return word
        }
        if spec.path == ["serve"] || spec.path == ["browse"] || spec.path == ["open"] || spec.path == ["host", "run"] {
            // The daemon runs until a signal (DaemonTests runs it as a process), the browser
            // until its window closes (BrowserProcessTests run it), a host until it ends
            // (HostBindingTests start hosts through a daemon): parse only.
            // (--home goes first: after `host run … --` it would be the program's argument.)
            let parsed = try CommandLineTool.parse(["--home", work.appendingPathComponent("home").path] + Array(args),
                                                   environment: [:], io: CapturedIO(), commands: CommandRegistry.all)
            #expect(parsed.0?.path == spec.path, "example '\(example.command)' does not parse")
            return nil
        }
        return await runTool(Array(args) + extra + ["--home", work.appendingPathComponent("home").path, "--keyring", "file"])
    }

    @Test func everyHelpExampleRuns() async throws {
        let fixture = FileManager.default.temporaryDirectory.appendingPathComponent("sk-examples-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: fixture) }
        let haveVault = try await Self.prepare(fixture.appendingPathComponent("base"))
        var ran = 0
        for spec in CommandRegistry.all {
            for example in spec.examples {
                if spec.path.first == "vault" && !haveVault {
                    Issue.record("the sgit CLI is missing, so vault examples cannot run: run tools/setup")
                    continue
                }
                defer { ran += 1 }
                guard let r = try await Self.run(example, of: spec, fixture: fixture, index: ran) else { continue }
                #expect(r.status != 64, "usage error in example '\(example.command)': \(r.err)")
                if Self.cannotSucceed[example.command] == nil {
                    #expect(r.status == 0, "example '\(example.command)' failed: \(r.err)")
                } else {
                    #expect(r.status == 1 && r.err.contains("error"), "'\(example.command)' should fail clearly: \(r.err)")
                }
            }
        }
        #expect(ran >= CommandRegistry.all.count)
    }
}

/// Where the reference sgit CLI is: `SITEKEEP_TEST_SGIT`, else `.venv/bin/sgit` in the package.
enum Interop {
    static var sgitPath: String? {
        if let p = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], FileManager.default.isExecutableFile(atPath: p) { return p }
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent(".venv/bin/sgit").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }
}
