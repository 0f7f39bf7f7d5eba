import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepTestSupport

/// Runs `sitekeep` in-process with captured streams.
/// `promptAnswers` are the lines typed at terminal prompts; without them there is no terminal.
func runTool(_ arguments: [String], stdin: [UInt8] = [], promptAnswers: [[UInt8]]? = nil, environment: [String: String] = [:],
             commands: [CommandSpec] = CommandRegistry.all) async -> (status: Int32, out: String, err: String) {
    let io = CapturedIO(standardInput: stdin, promptAnswers: promptAnswers)
    var env = ["HOME": "/nonexistent-home", "NO_COLOR": "1"]
    env.merge(environment) { $1 }
    let status = await CommandLineTool.run(arguments: arguments, environment: env, io: io, commands: commands)
    return (status, io.output, io.errorOutput)
}

@Suite struct ConventionsTests {
    @Test func noCommandIsAUsageErrorOnStderr() async {
        let r = await runTool([])
        #expect(r.status == 64)
        #expect(r.out.isEmpty)
        #expect(r.err.contains("no command given"))
    }

    @Test func unknownCommandSuggestsTheNearest() async {
        let r = await runTool(["doctr"])
        #expect(r.status == 64)
        #expect(r.err.contains("did you mean 'doctor'"))
    }

    @Test func unknownOptionIsAUsageError() async {
        let r = await runTool(["version", "--frobnicate"])
        #expect(r.status == 64)
        #expect(r.err.contains("unknown option '--frobnicate'"))
    }

    @Test(arguments: ["--passphrase", "--password", "--prf", "--key", "--recovery-code"])
    func secretsAreNeverTakenFromArgv(_ option: String) async {
        let r = await runTool(["version", option, "hunter2"])
        #expect(r.status == 64)
        #expect(r.err.contains("never taken from the command line"))
        #expect(!r.err.contains("hunter2"))
    }

    @Test func everyCommandHasHelpWithAnExample() async {
        for spec in CommandRegistry.all {
            let r = await runTool(spec.path + ["--help"])
            #expect(r.status == 0, "\(spec.commandLine) --help")
            #expect(r.out.contains("Usage: \(spec.commandLine)"))
            #expect(r.out.contains("Examples:"))
            #expect(!spec.examples.isEmpty, "\(spec.commandLine) has no example")
            for e in spec.examples { #expect(e.command.hasPrefix(spec.commandLine), "\(e.command) is not an example of \(spec.commandLine)") }
        }
    }

    @Test func versionPrintsJSON() async throws {
        let r = await runTool(["version", "--json"])
        #expect(r.status == 0)
        let v = try JSONParser.parse(r.out)
        #expect(v["version"]?.stringValue == SiteKeepVersion.current)
    }

    @Test func failuresExitOneWithProblemAndRemedy() async throws {
        let failing = CommandSpec(path: ["fail"], summary: "fails", examples: [CommandExample("sitekeep fail", "fails")]) { _ in
            throw CommandFailure("the vault is locked", remedy: "run 'sitekeep unlock'", code: "locked")
        }
        let r = await runTool(["fail"], commands: [failing])
        #expect(r.status == 1)
        #expect(r.err == "error: the vault is locked\nhint: run 'sitekeep unlock'\n")
        let j = await runTool(["fail", "--json"], commands: [failing])
        #expect(j.status == 1)
        #expect(try JSONParser.parse(j.err)["error"]?["code"] == .string("locked"))
    }

    @Test func secretsComeFromStdinOrAFileWithoutTheTrailingNewline() async throws {
        let echo = CommandSpec(path: ["echo-secret"], summary: "test", secretInputs: [.passphrase, .prf],
                               examples: [CommandExample("sitekeep echo-secret", "test")]) { inv in
            if inv.option("--prf-file") != nil {
                let prf = try inv.readPRF()
                inv.say("prf \(prf.count)")
            } else {
                let secret = try inv.readSecret(.passphrase, prompt: "Passphrase: ")
                inv.say("len \(secret.count)")
            }
        }
        let r = await runTool(["echo-secret", "--passphrase-file", "-"], stdin: Array("pass word\n".utf8), commands: [echo])
        #expect(r.status == 0)
        #expect(r.out == "len 9\n")
        let none = await runTool(["echo-secret"], commands: [echo])
        #expect(none.status == 1)
        #expect(none.err.contains("--passphrase-file"))

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let hex = dir.appendingPathComponent("prf.hex")
        try Data((String(repeating: "ab", count: 32) + "\n").utf8).write(to: hex)
        let p = await runTool(["echo-secret", "--prf-file", hex.path], commands: [echo])
        #expect(p.out == "prf 32\n")
        let bad = dir.appendingPathComponent("prf.bad")
        try Data(repeating: 1, count: 31).write(to: bad)
        let b = await runTool(["echo-secret", "--prf-file", bad.path], commands: [echo])
        #expect(b.status == 1)
        #expect(b.err.contains("not 32 raw bytes or 64 hex characters"))
    }

    @Test func jsonOnACommandThatPrintsNoDataIsRefused() async {
        let quiet = CommandSpec(path: ["quiet"], summary: "test", examples: [CommandExample("sitekeep quiet", "test")], printsData: false) { _ in }
        let r = await runTool(["quiet", "--json"], commands: [quiet])
        #expect(r.status == 64)
    }
}

@Suite struct DocumentationTests {
    @Test func bashCompletionsParseAndOfferEveryTopLevelCommand() async throws {
        let r = await runTool(["completions", "bash"])
        #expect(r.status == 0)
        for top in Set(CommandRegistry.all.map { $0.path[0] }) { #expect(r.out.contains(top), "\(top) missing") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-compl-\(UUID().uuidString).bash")
        try Data(r.out.utf8).write(to: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        // `bash -n` checks the syntax without running it.
        #expect(ChildProcess.run("/bin/bash", ["-n", dir.path]) == 0)
    }

    @Test func zshCompletionsListEveryCommand() async {
        let r = await runTool(["completions", "zsh"])
        #expect(r.status == 0)
        for spec in CommandRegistry.all { #expect(r.out.contains("'\(spec.path.joined(separator: " ")):"), "\(spec.commandLine)") }
        let bad = await runTool(["completions", "tcsh"])
        #expect(bad.status == 64 && bad.err.contains("bash, zsh or fish"), "\(bad.err)")
    }

    /// Issue 47: fish completions, with every command and option, completing in a real fish
    /// when one is installed; `completions --help` names where each shell's script goes.
    @Test func fishCompletionsOfferEveryCommandAndOption() async throws {
        let r = await runTool(["completions", "fish"])
        #expect(r.status == 0, "\(r.err)")
        for spec in CommandRegistry.all {
            #expect(r.out.contains("-a '\(spec.path.last ?? "")'"), "\(spec.commandLine)")
            for o in spec.options { #expect(r.out.contains(" -l \(o.name.dropFirst(2))"), "\(spec.commandLine) \(o.name)") }
        }
        let help = await runTool(["completions", "--help"])
        for place in ["~/.local/share/bash-completion/completions/sitekeep", "~/.zfunc/_sitekeep", "~/.config/fish/completions/sitekeep.fish"] {
            #expect(help.out.contains(place), "\(place): \(help.out)")
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/fish") else { return }
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("sk-compl-\(UUID().uuidString).fish")
        try Data(r.out.utf8).write(to: script)
        defer { try? FileManager.default.removeItem(at: script) }
        #expect(ChildProcess.run("/usr/bin/fish", ["-n", script.path]) == 0)
        let offered = ChildProcess.capture("/usr/bin/fish", ["-c", "source \(script.path); complete -C 'sitekeep remind '; complete -C 'sitekeep remind add --i'"],
                                           stdin: "", environment: ["HOME": FileManager.default.temporaryDirectory.path])
        #expect(offered.out.contains("plan\t") && offered.out.contains("--in\t"), "\(offered)")
    }

    @Test func theManPageCarriesEveryCommandAndExample() async {
        let r = await runTool(["man"])
        #expect(r.status == 0)
        #expect(r.out.hasPrefix(".TH SITEKEEP 1"))
        for spec in CommandRegistry.all {
            #expect(r.out.contains(ManPage.escape(spec.usage)), "\(spec.commandLine)")
            for e in spec.examples { #expect(r.out.contains(ManPage.escape(e.command)), "\(e.command)") }
        }
    }

    /// Issue 18, item 4: global options before the command words work, as `git -C` does.
    @Test func globalOptionsBeforeTheCommandWork() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let r = await runTool(["--home", store.home, "--keyring", "file", "--json", "status"])
        #expect(r.status == 0, "\(r.err)")
        #expect(try JSONParser.parse(r.out)["home"] == .string(store.home))
        let sub = await runTool(["--home=\(store.home)", "--keyring=file", "site", "list", "--json"])
        #expect(sub.status == 0 && (try? JSONParser.parse(sub.out)) == .array([]), "\(sub.err)")
        // The process hardening sees `serve` behind them too.
        #expect(CommandLineTool.leadingGlobalOptions(["--home", "/x", "--json", "serve", "--idle", "5"]).rest == ["serve", "--idle", "5"])
        let none = await runTool(["--home", store.home])
        #expect(none.status == 64 && none.err.contains("no command given"), "\(none.err)")
        let missing = await runTool(["--home"])
        #expect(missing.status == 64 && missing.err.contains("--home needs a value"), "\(missing.err)")
        let help = await runTool(["--home", store.home, "status", "--help"])
        #expect(help.status == 0 && help.out.contains("sitekeep status"))
    }
}

/// Issue 18, item 5: completions past the first word, driven through a real bash.
@Suite struct CompletionTests {
    /// What `_sitekeep` offers for `words` (the last one being completed), in bash, with the
    /// built `sitekeep` on PATH for the store's words.
    static func complete(_ words: [String], store: CLIStore) async throws -> [String] {
        let script = try store.file("completion.bash", Array(await runTool(["completions", "bash"]).out.utf8))
        let bin = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug").path
        let quoted = (["sitekeep"] + words).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let harness = "source '\(script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count); _sitekeep; printf '%s\\n' \"${COMPREPLY[@]}\" > '\(store.dir.path)/reply'"
        let status = ChildProcess.run("/bin/bash", ["-c", "PATH='\(bin)':$PATH; " + harness])
        #expect(status == 0)
        let reply = (try? String(contentsOfFile: store.dir.path + "/reply", encoding: .utf8)) ?? ""
        return reply.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesOptionValuesSitesKeysAndFilesWithSpaces() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "News", "--origin", "https://news.example"]).status == 0)
        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let home = ["--home", store.home, "--keyring", "file"]
        #expect(try await Self.complete(["team", "add", "k", "--algorithm", ""], store: store) == ["ed25519", "p256"])
        #expect(try await Self.complete(["site", "add", "N", "--protection", "w"], store: store) == ["when-unlocked"])
        #expect(try await Self.complete(["status", "--keyring", "s"], store: store) == ["secret-service"])
        #expect(try await Self.complete(["site", "remove"] + home + [""], store: store) == ["https://news.example:443"])
        #expect(try await Self.complete(["team", "delete"] + home + [""], store: store) == ["summit"])
        _ = try store.file("my pass.txt", Array("x\n".utf8))
        #expect(try await Self.complete(["unlock", "--passphrase-file", store.dir.path + "/my p"], store: store) == [store.dir.path + "/my pass.txt"])
        // Command words still complete, past options too.
        #expect(try await Self.complete(["site", "st"], store: store) == ["storage"])
    }

    @Test func zshCompletesValuesThroughTheStore() async {
        let r = await runTool(["completions", "zsh"])
        #expect(r.out.contains("\"team delete\"*)") && r.out.contains("first='store:keys'"))
        #expect(r.out.contains("'--protection=after-login,when-unlocked'") && r.out.contains("sitekeep completions words"))
    }
}
