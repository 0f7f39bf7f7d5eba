import Foundation
import Testing
import SiteKeepJSON
import SiteKeepTestSupport

// The command line, for the daemon's tests, as a process: the built `sitekeep-main` (this
// target does not link the command line). Its environment is what the command line's own
// tests give a command run in-process: HOME=/nonexistent-home, NO_COLOR=1, the caller's
// variables, and PATH; nothing else of the test runner's.

/// Runs the whole tool (`sitekeep-main`) with `arguments`, `stdin` as its standard input and no
/// terminal; its status and what it wrote.
func runTool(_ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:]) async -> (status: Int32, out: String, err: String) {
    guard let tool = BuiltProducts.sitekeepMain else {
        return (127, "", "build the sitekeep-main executable first (swift build)")
    }
    var env = ["HOME": "/nonexistent-home", "NO_COLOR": "1", "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
    env.merge(environment) { $1 }
    return ChildProcess.capture(tool, arguments, input: stdin, environment: env, inheritingEnvironment: false)
}

/// A throw-away store home with a passphrase file, driven through the built command line.
final class CLIStore: StoreFolder, @unchecked Sendable {
    init() throws { try super.init(label: "sk-daemon") }

    func run(_ args: [String], stdin: [UInt8] = []) async -> (status: Int32, out: String, err: String) {
        await runTool(args + ["--home", home, "--keyring", "file"], stdin: stdin)
    }

    /// `init` at the cheapest Argon2id parameters (tests are not about the cost).
    func initialize() async throws -> JSONValue {
        let r = await run(["init", "--passphrase-file", passFile, "--argon2-iterations", "2", "--argon2-memory", "19", "--json"])
        #expect(r.status == 0, "init failed: \(r.err)")
        return try JSONParser.parse(r.out)
    }
}

/// The real vault server tools/test started (disk mode), by environment.
enum VaultServerEnvironment {
    static var server: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_SERVER"] }
    static var token: String? { ProcessInfo.processInfo.environment["SITEKEEP_TEST_VAULT_TOKEN"] }
}

enum Base64Text { static let hello = "aGVsbG8=" }

/// This target's command line (the built `sitekeep-main`) as a served daemon is unlocked and
/// locked with (test support's ``ServedDaemon``).
let daemonTool: ServedDaemon.Tool = { arguments, environment in await runTool(arguments, environment: environment) }
