import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// Issue 47's smaller points and polish, each as its reader would expect: `-v`, one quoting
/// style in unknown-word errors, a dash (not a ✓) for a CPU feature the machine lacks, null (not
/// "-") for absent values in `log show --json`, `agent env` with the setting on and no daemon,
/// and `status` naming the agent socket and the daemon's log.
@Suite struct Issue47PolishTests {
    @Test func dashVPrintsTheVersionAsDashDashVersionDoes() async throws {
        let store = try CLIStore()
        let long = await store.run(["--version"])
        let short = await store.run(["-v"])
        #expect(long.status == 0 && short.status == 0 && short.out == long.out && long.out.hasPrefix("sitekeep "), "\(short.out) \(short.err)")
    }

    @Test func helpIsOneScreenAndHelpAllListsEveryCommand() async throws {
        let short = await runTool(["help"])
        #expect(short.status == 0 && short.out.contains("Everyday commands:") && short.out.contains("sitekeep help --all"), "\(short.out)")
        #expect(short.out.split(separator: "\n").count <= 40, "one screen: \(short.out.split(separator: "\n").count) lines")
        #expect(await runTool(["--help"]).out == short.out)
        let all = await runTool(["help", "--all"])
        #expect(all.status == 0 && all.out.contains("Commands:") && all.out.split(separator: "\n").count > 60, "\(all.out)")
        for spec in CommandRegistry.all where spec.path.count == 1 {
            #expect(all.out.contains("  \(spec.path[0]) "), "help --all lists \(spec.path[0])")
        }
    }

    @Test func unknownCommandsAndOptionsAreQuotedOneWay() async throws {
        let store = try CLIStore()
        let top = await store.run(["frob"])
        #expect(top.status == 64 && top.err.contains("unknown command 'frob'"), "\(top.err)")
        let sub = await store.run(["vault", "frob"])
        #expect(sub.status == 64 && sub.err.contains("unknown command 'frob' in 'sitekeep vault'"), "\(sub.err)")
        let before = await store.run(["--frob"])
        #expect(before.status == 64 && before.err.contains("unknown option '--frob' before a command"), "\(before.err)")
        let option = await store.run(["status", "--frob"])
        #expect(option.status == 64 && option.err.contains("unknown option '--frob'"), "\(option.err)")
    }

    /// A malformed origin is a malformed argument: exit 64, as every usage error, with the reason.
    @Test func aBadOriginIsAUsageError() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let r = await store.run(["site", "add", "X", "--origin", "https://news example", "--app-bound", "--passphrase-file", store.passFile])
        #expect(r.status == 64 && r.err.contains("invalid origin") && r.err.contains("U+0020"), "\(r.status) \(r.err)")
        let json = await store.run(["site", "add", "X", "--origin", "https://news example", "--app-bound", "--passphrase-file", store.passFile, "--json"])
        #expect(json.status == 64 && json.err.contains("\"invalid_origin\""), "\(json.err)")
    }

    @Test func aCPUFeatureTheMachineLacksIsADashNotACheckMark() async throws {
        let store = try CLIStore()
        let doctor = await store.run(["doctor"])
        let cpu = doctor.out.split(separator: "\n").filter { $0.contains("AVX") || $0.contains("AES-NI") || $0.contains("SSE4.1") || $0.contains("PCLMUL") }
        #expect(!cpu.isEmpty, "\(doctor.out)")
        for line in cpu {
            #expect(!(line.contains("✓") && line.hasSuffix(": no")), "a ✓ beside an absent feature: \(line)")
            if line.hasSuffix(": no") { #expect(line.contains("- "), "\(line)") }
        }
    }

    @Test func logShowJSONSaysNullWhereALineHasNoSiteOrKey() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        // A line of the command line's names no site (the file says "-").
        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let r = await store.run(["log", "show", "--json", "--limit", "1000"])
        let lines = try #require(try JSONParser.parse(r.out).arrayValue, "\(r.out)")
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(line["site"] != .string("-") && line["key"] != .string("-"), "\(line)")
        }
        #expect(lines.contains { $0["site"] == .null }, "a command-line line has no site: \(r.out)")
    }

    @Test func agentEnvWithTheSettingOnAndNoDaemonSaysToStartTheDaemon() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let run = store.dir.appendingPathComponent("run").path
        try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let env = ["XDG_RUNTIME_DIR": run, "SITEKEEP_AGENT_SOCK": ""]
        let off = await runTool(["agent", "env", "--home", store.home, "--keyring", "file"], environment: env)
        #expect(off.err.contains("turn the agent on with 'sitekeep config set ssh-agent on'"), "\(off.err)")
        #expect(await runTool(["config", "set", "ssh-agent", "on", "--passphrase-file", store.passFile, "--home", store.home, "--keyring", "file"], environment: env).status == 0)
        let on = await runTool(["agent", "env", "--home", store.home, "--keyring", "file"], environment: env)
        #expect(on.status == 0 && on.err.contains("no daemon runs; start it with 'sitekeep unlock'"), "\(on.err)")
        #expect(!on.err.contains("config set ssh-agent on"), "the setting is on: \(on.err)")

        // status names the socket the agent would serve, and that nothing answers there.
        let status = await runTool(["status", "--home", store.home, "--keyring", "file"], environment: env)
        #expect(status.out.contains("agent      on, not answering on \(run)/sitekeep/agent.sock: no daemon runs"), "\(status.out)")
        #expect(status.out.contains("log        "), "\(status.out)")
        let json = try JSONParser.parse(await runTool(["status", "--json", "--home", store.home, "--keyring", "file"], environment: env).out)
        #expect(json["agentSocket"] == .string(run + "/sitekeep/agent.sock") && json["agentAnswering"] == .bool(false), "\(json)")
    }
}
