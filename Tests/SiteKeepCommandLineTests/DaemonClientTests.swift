import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
import SiteKeepDesktop
import SiteKeepBridgeProtocol
import SiteKeepSocket
import SiteKeepDaemon
import SiteKeepRunClient
#if canImport(Glibc)
import Glibc
#endif

/// The command line as a client of its store's daemon (issue 13, item 1): unlock once, then
/// key-using commands run inside the daemon with no secret and no terminal; after `lock` or the
/// idle lock each fails with a clear error; a daemon serves one store; a client that went
/// through the daemon never opened the keyring; a store that does not exist is an error.
@Suite(.serialized) struct DaemonClientTests {
    /// A store with a team key, a `when-unlocked` site holding a value and a vault of that site,
    /// plus the environment of a private daemon for it.
    final class Bed: PrivateDaemon, @unchecked Sendable {
        init() async throws {
            let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
            let store = try CLIStore()
            _ = try await store.initialize()
            try super.init(store: store)
            #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["site", "add", "Drafts", "--origin", "https://drafts.example", "--app-bound", "--passphrase-file", store.passFile,
                                     "--protection", "when-unlocked", "--passphrase-file", store.passFile]).status == 0)
            #expect(await store.run(["site", "storage", "set", "https://drafts.example", "greeting", "hello drafts",
                                     "--passphrase-file", store.passFile]).status == 0)
            let folder = store.dir.appendingPathComponent("notes").path
            #expect(makeVault(sgit, folder, keyText: "n pass:nvault01", file: "n.txt", contents: "vault text\n"))
            let key = try store.file("n.key", Array("n pass:nvault01".utf8))
            #expect(await store.run(["vault", "add", "notes", "--path", folder, "--key-file", key, "--site", "https://drafts.example",
                                     "--passphrase-file", store.passFile]).status == 0)
        }

        /// The daemon, its askpass approving every prompt.
        func serve(_ args: [String] = []) throws { try startDaemon(args) }

        /// Runs the real `sitekeep` under `strace`: its result and every program it became
        /// (each successful `execve`, in order).
        func traced(_ args: [String], extra: [String: String] = [:]) throws -> (status: Int32, out: String, err: String, programs: [String]) {
            let trace = store.dir.appendingPathComponent("exec-trace").path
            let r = ChildProcess.capture("/usr/bin/strace", ["-f", "-qq", "-e", "trace=execve", "-o", trace, sitekeep] + args,
                                         environment: env.merging(extra) { $1 })
            let calls = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
            let programs = calls.filter { $0.contains("execve(\"") && !$0.contains("= -1") }.compactMap { line -> String? in
                guard let open = line.range(of: "execve(\"") , let close = line[open.upperBound...].firstIndex(of: "\"") else { return nil }
                return String(line[open.upperBound..<close])
            }
            return (r.status, r.out, r.err, programs)
        }

        /// The three commands of the must-show, with no secret given and no terminal.
        func keyCommands() -> [(name: String, result: (status: Int32, out: String, err: String))] {
            let message = (try? store.file("m.txt", Array("sign me".utf8))) ?? ""
            return [("team sign", cli(["team", "sign", "summit", "--message-file", message])),
                    ("vault cat", cli(["vault", "cat", "notes", "n.txt"])),
                    ("site storage get", cli(["site", "storage", "get", "https://drafts.example", "greeting"]))]
        }
    }

    @Test func unlockOnceThenWorkWithNoSecretUntilLock() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        // Before unlock: a clear "locked" error, not a passphrase prompt that cannot be answered.
        for (name, r) in bed.keyCommands() {
            #expect(r.status == 1 && r.err.contains("the daemon serving this store is locked") && r.err.contains("sitekeep unlock"), "\(name): \(r.err)")
        }
        let unlocked = bed.cli(["unlock", "--passphrase-file", bed.store.passFile, "--json"])
        #expect(unlocked.status == 0, "\(unlocked.err)")
        #expect(try JSONParser.parse(unlocked.out)["daemon"] == .bool(true))
        let results = bed.keyCommands()
        for (name, r) in results { #expect(r.status == 0, "\(name): \(r.err)") }
        // No secret, but the signature was approved in the daemon's dialog, which named the
        // requesting process, the op and the key; the vault and storage reads asked nothing.
        #expect(bed.prompts.count == 1 && bed.prompts[0].contains("team.sign") && bed.prompts[0].contains("summit")
                && bed.prompts[0].contains("(pid "), "\(bed.prompts)")
        #expect(results[0].result.out.trimmingCharacters(in: .whitespacesAndNewlines).count == 88, "an Ed25519 signature in base64")
        #expect(results[1].result.out == "vault text\n")
        #expect(results[2].result.out == "hello drafts\n")
        // Output, errors and exit statuses come back as they would from a one-shot run.
        let missing = bed.cli(["vault", "cat", "notes", "nope.txt"])
        #expect(missing.status == 1 && missing.err.contains("nope.txt"), "\(missing.err)")
        let usage = bed.cli(["team", "sign"])
        #expect(usage.status == 64, "\(usage.err)")
        // Standard input reaches the command inside the daemon; relative paths are the client's.
        let fromStdin = bed.cli(["team", "sign", "summit", "--message-file", "-"], stdin: "sign me")
        #expect(fromStdin.status == 0 && fromStdin.out == results[0].result.out, "\(fromStdin.err)")
        let relative = ChildProcess.capture("/bin/sh", ["-c", "cd \"$1\" && \"$2\" team sign summit --message-file m.txt", "sh", bed.store.dir.path, bed.sitekeep],
                                            environment: bed.env)
        #expect(relative.status == 0 && relative.out == results[0].result.out, "\(relative.err)")
        // Global options before the command words: the words are not taken for positionals.
        let global = bed.cli(["--home", bed.store.home, "vault", "cat", "notes", "n.txt"])
        #expect(global.status == 0 && global.out == "vault text\n", "\(global.err)")

        #expect(bed.cli(["lock"]).status == 0)
        for (name, r) in bed.keyCommands() {
            #expect(r.status == 1 && r.err.contains("locked") && !r.out.contains("hello drafts"), "\(name) after lock: \(r.err)")
        }
    }

    /// A raw `run` of a command that manages the daemon (serve, init, unlock…) is refused inside
    /// it, before anything runs (`runs_here`: the client then runs it in its own process).
    @Test func commandsThatManageTheDaemonDoNotRunInsideIt() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        let storeID = try #require(StoreContext.storeID(home: bed.store.home))
        for argv in [["serve"], ["init"], ["unlock"], ["browse"]] {
            let fd = try #require(try ControlClient.connect(path: bed.run + "/control.sock"))
            defer { close(fd) }
            let header = ControlClient.header(op: "run", store: storeID, extra: [
                JSONMember(key: "argv", value: .array((argv + ["--home", bed.store.home]).map { .string($0) })),
                JSONMember(key: "cwd", value: "/")])
            #expect(UnixSocket.writeAll(fd, header))
            let reply = try ControlClient.readReply(fd)
            #expect(reply["code"] == "runs_here", "\(argv): \(reply)")
        }
        // A run without the client's working folder, or with a relative one, is refused before
        // anything runs: local paths could not be made absolute.
        for cwd in [nil, "relative/folder", ""] as [String?] {
            let fd = try #require(try ControlClient.connect(path: bed.run + "/control.sock"))
            defer { close(fd) }
            var extra = [JSONMember(key: "argv", value: .array(["vault", "cat", "notes", "n.txt"].map { .string($0) }))]
            if let cwd { extra.append(JSONMember(key: "cwd", value: .string(cwd))) }
            #expect(UnixSocket.writeAll(fd, ControlClient.header(op: "run", store: storeID, extra: extra)))
            let reply = try ControlClient.readReply(fd)
            #expect(reply["code"] == "bad_request" && reply["error"]?.stringValue?.contains("working folder") == true, "cwd \(cwd ?? "missing"): \(reply)")
        }
        // The daemon still serves.
        #expect(bed.cli(["status"]).status == 0)
    }

    /// What the daemon runs for a client: local paths (path options, a URL or SOURCE that is a
    /// folder) made absolute against the client's working folder, the command words left alone
    /// even after global options, URLs and `-` untouched, and its own store named last.
    @Test func localPathsAreMadeAbsoluteAndCommandWordsAreNot() throws {
        func line(_ args: [String]) throws -> [String] {
            let (spec, _, _) = try CommandLineTool.parse(args, environment: ["HOME": "/nonexistent-home"], io: CapturedIO(), commands: CommandRegistry.all)
            return RemoteRun.commandLine(args, spec: try #require(spec), cwd: "/work")
        }
        #expect(try line(["--home", "/h", "vault", "remote", "add", "notes", "rel/.sg_vault", "--token-file", "tok"])
                == ["--home", "/h", "vault", "remote", "add", "notes", "/work/rel/.sg_vault", "--token-file", "/work/tok"])
        #expect(try line(["vault", "remote", "add", "notes", "https://vault.example", "--token-file=-", "--home", "/h"])
                == ["vault", "remote", "add", "notes", "https://vault.example", "--token-file=-", "--home", "/h"])
        #expect(try line(["team", "sign", "summit", "--message-file", "m.txt", "--home", "rel/store"])
                == ["team", "sign", "summit", "--message-file", "/work/m.txt", "--home", "/work/rel/store"])
    }

    /// The daemon reads a client's command line as the client would: a relative --home or
    /// SITEKEEP_HOME against the client's folder, the store compared by id (two spellings of
    /// one folder agree), another store refused as `wrong_store`, a daemon-managing command as
    /// `runs_here`; help and usage errors run as typed.
    @Test func theDaemonReadsTheClientsCommandLineAndChecksTheStore() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sk-cl-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for (folder, id) in [("a", "store-a"), ("b", "store-b")] {
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
            try Array((id + "\n").utf8).write(to: root + "/" + folder + "/store-id")
        }
        let home = root + "/a"
        func run(_ args: [String], cwd: String = root, env: [String: String] = [:]) -> Result<[String], RemoteRun.Refusal> {
            RemoteRun.commandLine(args, cwd: cwd, clientEnvironment: env, serving: home, store: "store-a")
        }
        #expect(run(["team", "sign", "k", "--message-file", "m", "--home", "a"]) == .success(["team", "sign", "k", "--message-file", root + "/m", "--home", home, "--home", home]))
        #expect(run(["vault", "cat", "v", "f"], cwd: root + "/b", env: ["SITEKEEP_HOME": "../a/"]) == .success(["vault", "cat", "v", "f", "--home", home]))
        #expect(run(["vault", "cat", "v", "f", "--home", root + "/b"]).failureCode == "wrong_store")
        #expect(run(["vault", "cat", "v", "f"], env: ["SITEKEEP_HOME": root + "/b"]).failureCode == "wrong_store")
        #expect(run(["vault", "cat", "v", "f"], env: ["SITEKEEP_HOME": root + "/nothing"]).failureCode == "wrong_store")
        #expect(run(["unlock", "--home", home]).failureCode == "runs_here")
        #expect(run(["--home", home, "status"]).failureCode == "runs_here")
        #expect(run(["vault", "--help"]) == .success(["vault", "--help", "--home", home]))
        #expect(run(["no-such-command"]) == .success(["no-such-command", "--home", home]))
    }

    @Test func theIdleLockLocksTheDaemon() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve(["--idle-lock", "2s"])
        #expect(bed.cli(["unlock", "--passphrase-file", bed.store.passFile]).status == 0)
        #expect(bed.cli(["site", "storage", "get", "https://drafts.example", "greeting"]).status == 0)
        sleep(4)
        for (name, r) in bed.keyCommands() {
            #expect(r.status == 1 && r.err.contains("locked"), "\(name) after the idle lifetime: \(r.err)")
        }
    }

    /// A client that went through the daemon never opened the keyring file, let alone read keys.
    @Test func aDaemonClientNeverOpensTheKeyring() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/strace"), "strace is missing: run tools/setup")
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        #expect(bed.cli(["unlock", "--passphrase-file", bed.store.passFile]).status == 0)
        let trace = bed.store.dir.appendingPathComponent("trace").path
        let message = try bed.store.file("m.txt", Array("sign me".utf8))
        let traced = ChildProcess.capture("/usr/bin/strace", ["-f", "-e", "trace=open,openat,connect", "-o", trace,
                                                             bed.sitekeep, "team", "sign", "summit", "--message-file", message],
                                          environment: bed.env)
        #expect(traced.status == 0, "\(traced.err)")
        let calls = try String(contentsOfFile: trace, encoding: .utf8)
        #expect(calls.contains("control.sock"), "the client talked to the daemon")
        #expect(!calls.contains("keyring"), "the client opened the keyring:\n\(calls)")
        // The check can fail: the same command with no daemon opens the keyring itself.
        bed.stop()
        let oneShot = ChildProcess.capture("/usr/bin/strace", ["-f", "-e", "trace=open,openat", "-o", trace,
                                                              bed.sitekeep, "team", "sign", "summit", "--message-file", message,
                                                              "--passphrase-file", bed.store.passFile], environment: bed.env)
        #expect(oneShot.status == 0, "\(oneShot.err)")
        #expect(try String(contentsOfFile: trace, encoding: .utf8).contains("keyring.v1"))
    }

    /// `sitekeep`, the front end, runs a command through the daemon by itself: it never starts
    /// the whole tool (`sitekeep-main`) for it. With no daemon, or for a command that runs in
    /// its own process, it execs the whole tool, with the same pid and arguments.
    @Test func theFrontEndRunsThroughTheDaemonWithoutStartingTheWholeTool() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/strace"), "strace is missing: run tools/setup")
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        #expect(bed.cli(["unlock", "--passphrase-file", bed.store.passFile]).status == 0)
        func execs(_ args: [String]) throws -> (status: Int32, out: String, programs: [String]) {
            let r = try bed.traced(args)
            return (r.status, r.out, r.programs)
        }
        let through = try execs(["vault", "cat", "notes", "n.txt"])
        #expect(through.status == 0 && through.out == "vault text\n")
        #expect(through.programs == [bed.sitekeep], "\(through.programs)")
        // The check can fail: a command that runs in its own process execs the whole tool.
        let status = try execs(["status"])
        #expect(status.status == 0)
        #expect(status.programs.count == 2 && status.programs.last?.hasSuffix("/sitekeep-main") == true, "\(status.programs)")
        bed.stop()
        let alone = try execs(["vault", "cat", "notes", "n.txt", "--passphrase-file", bed.store.passFile])
        #expect(alone.status == 0 && alone.out == "vault text\n")
        #expect(alone.programs.last?.hasSuffix("/sitekeep-main") == true, "\(alone.programs)")
    }

    /// With no daemon, the plain one-shot `vault cat NAME PATH --prf-file F` runs in
    /// `sitekeep-read` (custody and the vault, no Foundation): the whole tool never starts.
    /// Every other form, and anything the reader would have to explain before it unlocks, goes
    /// to the whole tool, which words it as always; a failed unlock is reported by the reader
    /// itself, in the whole tool's words, and counted once.
    @Test func theOneShotVaultCatRunsWithoutTheWholeTool() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/strace"), "strace is missing: run tools/setup")
        let bed = try await Bed()
        defer { bed.stop() }
        let prf = try bed.store.file("prf.bin", (0..<32).map { UInt8($0 * 7 & 0xff) })
        #expect(await bed.store.run(["slot", "add", "prf", "--passphrase-file", bed.store.passFile, "--new-prf-file", prf,
                                     "--rp-id", "example.org", "--credential-id", "AAAA"]).status == 0)
        // The front end finds its siblings through /proc/self/exe, so by their real path.
        let folder = URL(fileURLWithPath: bed.sitekeep).resolvingSymlinksInPath().deletingLastPathComponent()
        let main = folder.appendingPathComponent("sitekeep-main").path
        let reader = folder.appendingPathComponent("sitekeep-read").path
        #expect(FileManager.default.isExecutableFile(atPath: reader), "build sitekeep-read beside sitekeep (swift build)")

        let plain = try bed.traced(["vault", "cat", "notes", "n.txt", "--prf-file", prf])
        #expect(plain.status == 0 && plain.out == "vault text\n" && plain.err.isEmpty, "\(plain)")
        #expect(plain.programs == [bed.sitekeep, reader], "\(plain.programs)")
        // Options in another order, `--home=` and a hex PRF file are the same plain form.
        let hex = try bed.store.file("prf.hex", Array(((0..<32).map { String(format: "%02X", $0 * 7 & 0xff) }.joined() + "\r\n").utf8))
        let reordered = try bed.traced(["vault", "cat", "--home=\(bed.store.home)", "--prf-file", hex, "notes", "n.txt"])
        #expect(reordered.status == 0 && reordered.out == "vault text\n" && reordered.programs == [bed.sitekeep, reader], "\(reordered)")

        // The check can fail: another form of the command line starts the whole tool, at once.
        let json = try bed.traced(["vault", "cat", "notes", "n.txt", "--prf-file", prf, "--json"])
        #expect(json.status == 0 && json.out.contains("\"dataBase64\"") && json.programs == [bed.sitekeep, main], "\(json)")
        // What the reader would have to explain before unlocking is the whole tool's to say.
        for (args, words) in [(["vault", "cat", "nope", "n.txt", "--prf-file", prf], "no vault named \"nope\""),
                              (["vault", "cat", "notes", "n.txt", "--prf-file", bed.store.dir.appendingPathComponent("missing").path], "cannot read the PRF output file"),
                              (["vault", "cat", "notes", "n.txt", "--prf-file", bed.store.passFile], "not 32 raw bytes or 64 hex characters")] {
            let r = try bed.traced(args)
            #expect(r.status == 1 && r.err.contains(words) && r.programs.last == main, "\(args): \(r)")
        }
        let mismatch = try bed.traced(["vault", "cat", "notes", "n.txt", "--prf-file", prf], extra: ["SITEKEEP_KEYRING": "secret-service"])
        #expect(mismatch.status == 1 && mismatch.err.contains("keyring") && mismatch.programs.last == main, "\(mismatch)")
        // A daemon's control socket is there (here one left behind by a daemon that died): the
        // reader never unlocks beside a daemon; the whole tool decides, and runs it alone.
        try FileManager.default.createDirectory(atPath: bed.run, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let left = ChildProcess.capture("/usr/bin/python3", ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", bed.run + "/control.sock"], environment: [:])
        try #require(left.status == 0, "could not leave a socket behind: \(left.err)")
        let beside = try bed.traced(["vault", "cat", "notes", "n.txt", "--prf-file", prf])
        #expect(beside.status == 0 && beside.out == "vault text\n" && beside.programs.last == main, "\(beside)")
        // The same socket in a folder others may enter: refused, nothing sent, said once.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bed.run)
        let open = bed.cli(["vault", "cat", "notes", "n.txt", "--prf-file", prf])
        #expect(open.status == 1 && open.out.isEmpty, "\(open)")
        #expect(open.err == "error: refusing to talk to the daemon socket \(bed.run)/control.sock: its folder \(bed.run) is open to other users (mode 755), so another user could have put a listener there; nothing was sent\nhint: \(ControlClient.remedy)\n", "\(open.err)")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: bed.run)
        try FileManager.default.removeItem(atPath: bed.run + "/control.sock")

        // A wrong PRF output: the reader reports it as the whole tool does, and tries it once.
        let wrong = try bed.store.file("wrong.bin", [UInt8](repeating: 0x5a, count: 32))
        let auditPath = bed.store.home + "/audit.log"
        func failedUnlocks() throws -> Int {
            try String(contentsOfFile: auditPath, encoding: .utf8).split(separator: "\n")
                .filter { $0.contains("\"op\":\"unlock\"") && !$0.contains("\"result\":\"ok\"") }.count
        }
        let before = try failedUnlocks()
        let refused = try bed.traced(["vault", "cat", "notes", "n.txt", "--prf-file", wrong])
        #expect(refused.status == 1 && refused.out.isEmpty && refused.programs == [bed.sitekeep, reader], "\(refused)")
        #expect(try failedUnlocks() == before + 1)
        let whole = ChildProcess.capture(main, ["vault", "cat", "notes", "n.txt", "--prf-file", wrong], environment: bed.env)
        #expect(whole.status == 1 && refused.err == whole.err && refused.err.hasPrefix("error: could not unlock"), "\(refused.err) / \(whole.err)")
        // Its audit lines are on disk and chained like the whole tool's.
        #expect(bed.cli(["log", "verify"]).status == 0)
    }

    /// The front end links no Foundation (its start-up is the point of it): no symbol of
    /// Foundation, FoundationEssentials or FoundationNetworking in the built executable.
    /// The front end's quick test for "runs in its own process" agrees with the command table:
    /// every such command (after global options) is caught, a key-using one is not, and a
    /// miss is only a round trip (the daemon answers `runs_here`).
    @Test func theFrontEndKnowsWhichCommandsRunInTheirOwnProcess() {
        for spec in CommandRegistry.all where RemoteRun.runsHere.contains(spec.path) {
            #expect(RunClient.runsHere(spec.path), "\(spec.path)")
            #expect(RunClient.runsHere(["--home", "/h", "--json"] + spec.path + ["--x"]), "\(spec.path)")
        }
        #expect(RunClient.runsHere([]) && RunClient.runsHere(["--help"]) && RunClient.runsHere(["help", "vault"]))
        for forwarded in [["vault", "cat", "v", "f"], ["--home=/h", "team", "sign", "k"], ["site", "storage", "get", "o", "k"], ["team", "show", "verify"]] {
            #expect(!RunClient.runsHere(forwarded), "\(forwarded)")
        }
    }

    @Test func theFrontEndLinksNoFoundation() throws {
        let front = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        func foundationSymbols(_ path: String) throws -> [Substring] {
            let symbols = ChildProcess.capture("/usr/bin/nm", [path], environment: [:])
            try #require(symbols.status == 0 && !symbols.out.isEmpty, "nm could not read \(path): \(symbols.err)")
            return symbols.out.split(separator: "\n").filter {
                $0.contains("10Foundation") || $0.contains("20FoundationEssentials") || $0.contains("20FoundationNetworking")
                    || $0.contains("32FoundationInternationalization")
            }
        }
        func needed(_ path: String) throws -> [Substring] {
            let dynamic = ChildProcess.capture("/usr/bin/readelf", ["-d", path], environment: [:])
            try #require(dynamic.status == 0, "readelf could not read \(path): \(dynamic.err)")
            return dynamic.out.split(separator: "\n").filter { $0.contains("(NEEDED)") && $0.contains("Foundation") }
        }
        let linked = try foundationSymbols(front)
        #expect(linked.isEmpty, "the front end links Foundation: \(linked.prefix(5))")
        // Nor does the one-shot reader, which a plain `vault cat` with no daemon runs instead
        // of the whole tool: neither its code nor a library it loads.
        let reader = URL(fileURLWithPath: front).deletingLastPathComponent().appendingPathComponent("sitekeep-read").path
        let readerLoads = try needed(reader)
        #expect(try foundationSymbols(reader).isEmpty && readerLoads.isEmpty, "sitekeep-read links Foundation: \(readerLoads)")
        // The check can fail: the whole tool does link it.
        let main = URL(fileURLWithPath: front).deletingLastPathComponent().appendingPathComponent("sitekeep-main").path
        #expect(try !foundationSymbols(main).isEmpty && !needed(main).isEmpty)
    }

    /// The front end loads no OpenSSL, zlib or SQLite: the dynamic loading of libcrypto alone
    /// was a third of its start-up, and it holds a relayed secret in libsodium's guarded memory
    /// only (BENCHMARKS.md, "The one-shot start-up").
    @Test func theFrontEndLoadsNoOpenSSL() throws {
        let front = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        func needed(_ path: String) throws -> [Substring] {
            let dynamic = ChildProcess.capture("/usr/bin/readelf", ["-d", path], environment: [:])
            try #require(dynamic.status == 0 && !dynamic.out.isEmpty, "readelf could not read \(path): \(dynamic.err)")
            return dynamic.out.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        }
        let heavy = ["libcrypto", "libssl", "libz.", "libsqlite3"]
        let loaded = try needed(front)
        #expect(loaded.contains { $0.contains("libsodium") }, "\(loaded)")
        #expect(!loaded.contains { line in heavy.contains { line.contains($0) } }, "the front end loads \(loaded)")
        // The check can fail: the whole tool does load OpenSSL.
        let main = URL(fileURLWithPath: front).deletingLastPathComponent().appendingPathComponent("sitekeep-main").path
        #expect(try needed(main).contains { $0.contains("libcrypto") })
    }

    /// A daemon serves one store: another store's unlock, status and lock never reach it.
    @Test func aDaemonServesOneStoreAndSaysWhich() async throws {
        let bed = try await Bed()
        defer { bed.stop() }
        try bed.serve()
        #expect(bed.cli(["unlock", "--passphrase-file", bed.store.passFile]).status == 0)
        let other = try CLIStore()
        _ = try await other.initialize()
        let home = ["--home", other.home]
        let unlockB = bed.cli(["unlock", "--passphrase-file", other.passFile] + home)
        #expect(unlockB.status == 1 && unlockB.err.contains("serves the store in \(bed.store.home)"), "\(unlockB.err)")
        let statusB = try JSONParser.parse(bed.cli(["status", "--json"] + home).out)
        #expect(statusB["daemon"] == .bool(false) && statusB["unlocked"] == .bool(false))
        #expect(statusB["otherStoreDaemon"] == .string(bed.store.home))
        #expect(bed.cli(["lock"] + home).out.contains("No daemon serves this store"))
        // Store A is still unlocked, and B's key commands run here, for themselves.
        #expect(try JSONParser.parse(bed.cli(["status", "--json"]).out)["unlocked"] == .bool(true))
        #expect(bed.cli(["team", "add", "b-key", "--passphrase-file", other.passFile] + home).status == 0)
        #expect(bed.cli(["team", "list"]).out.contains("b-key") == false, "B's key went into A's store")
    }

    /// `unlock` with no daemon starts one (detached), so a plain shell can unlock once and work.
    @Test func unlockStartsADaemonWhenNoneRuns() async throws {
        let bed = try await Bed()
        let r = bed.cli(["unlock", "--passphrase-file", bed.store.passFile, "--idle-lock", "5m"])
        #expect(r.status == 0, "\(r.err)")
        let status = try JSONParser.parse(bed.cli(["status", "--json"]).out)
        defer {
            if let pid = status["daemonPid"]?.intValue { kill(pid_t(pid), SIGTERM) }
        }
        #expect(status["daemon"] == .bool(true) && status["unlocked"] == .bool(true), "\(status)")
        #expect(status["daemonPid"]?.intValue != nil)
        #expect(bed.cli(["site", "storage", "get", "https://drafts.example", "greeting"]).out == "hello drafts\n")
        // --no-autostart only checks the secret.
        let quiet = try await Bed()
        let checked = quiet.cli(["unlock", "--passphrase-file", quiet.store.passFile, "--no-autostart", "--json"])
        #expect(checked.status == 0, "\(checked.err)")
        #expect(try JSONParser.parse(checked.out)["daemon"] == .bool(false))
        #expect(try JSONParser.parse(quiet.cli(["status", "--json"]).out)["daemon"] == .bool(false))
    }

    /// Every command but init refuses a folder with no store, and creates nothing there; a
    /// failed init leaves nothing behind.
    @Test func aStoreThatDoesNotExistIsAnErrorAndCreatesNothing() async throws {
        let dir = try Fixtures.temporaryDirectory("sk-nostore")
        defer { try? FileManager.default.removeItem(at: dir) }
        let typo = dir.appendingPathComponent("typo").path
        for args in [["site", "list"], ["site", "add", "X", "--origin", "https://x.example"], ["team", "list"], ["vault", "list"], ["status"]] {
            let r = await runTool(args + ["--home", typo, "--keyring", "file"])
            #expect(r.status == 1 && r.err.contains("no SiteKeep store in \(typo)") && r.err.contains("sitekeep init"), "\(args): \(r.err)")
            #expect(!FileManager.default.fileExists(atPath: typo), "\(args) created \(typo)")
        }
        let deep = dir.appendingPathComponent("new/a/b").path
        let failed = await runTool(["init", "--home", deep, "--keyring", "file", "--passphrase-file", dir.appendingPathComponent("missing").path])
        #expect(failed.status == 1)
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("new").path), "a failed init left its folder")
    }
}

/// The daemon locks when the login session locks (issue 13): the screensaver's
/// `ActiveChanged(true)` on the session bus, sent here by `gdbus emit` on the private bus
/// tools/test starts.
@Suite(.serialized) struct SessionLockTests {
    static var sessionBus: String? { ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] }

    @Test func theScreensaverLockingLocksTheDaemon() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/gdbus"), "gdbus is missing: run tools/setup")
        try #require(Self.sessionBus != nil, "no session bus: run the tests through tools/test, which starts a private one")
        let bed = try await DaemonClientTests.Bed()
        defer { bed.stop() }
        let bus = try #require(Self.sessionBus)
        let envList = bed.env.merging(["DBUS_SESSION_BUS_ADDRESS": bus, "SITEKEEP_ASKPASS": ""]) { $1 }.map { "\($0.key)=\($0.value)" }
        bed.daemon = try #require(ChildProcess.spawn(bed.sitekeep, ["serve"], env: envList))
        #expect(ChildProcess.waitForPath(bed.run + "/control.sock"), "the daemon's control socket did not appear")
        #expect(bed.cli(["unlock", "--passphrase-file", bed.store.passFile]).status == 0)
        #expect(try JSONParser.parse(bed.cli(["status", "--json"]).out)["unlocked"] == .bool(true))
        // The screensaver turning off (false) is not a lock.
        let emit = ["emit", "--session", "--object-path", "/org/freedesktop/ScreenSaver", "--signal", "org.freedesktop.ScreenSaver.ActiveChanged"]
        #expect(ChildProcess.run("/usr/bin/gdbus", emit + ["false"], environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus)"]) == 0)
        usleep(500_000)
        #expect(try JSONParser.parse(bed.cli(["status", "--json"]).out)["unlocked"] == .bool(true))
        #expect(ChildProcess.run("/usr/bin/gdbus", emit + ["true"], environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus)"]) == 0)
        var unlocked = true
        for _ in 0..<40 where unlocked {
            usleep(100_000)
            unlocked = try JSONParser.parse(bed.cli(["status", "--json"]).out)["unlocked"] == .bool(true)
        }
        #expect(!unlocked, "the daemon stayed unlocked after the session locked")
        let r = bed.cli(["site", "storage", "get", "https://drafts.example", "greeting"])
        #expect(r.status == 1 && r.err.contains("locked"), "\(r.err)")
    }

    @Test func logindSessionPathsAreEscapedAsSdBusDoes() {
        #expect(SessionLockWatcher.logindSessionPath("c2") == "/org/freedesktop/login1/session/c2")
        #expect(SessionLockWatcher.logindSessionPath("2") == "/org/freedesktop/login1/session/_32")
        #expect(SessionLockWatcher.logindSessionPath("a-b") == "/org/freedesktop/login1/session/a_2db")
    }
}

extension Result where Failure == RemoteRun.Refusal {
    var failureCode: String? {
        if case .failure(let refusal) = self { return refusal.code }
        return nil
    }
}

extension Array where Element == UInt8 {
    fileprivate func write(to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(self)) else { throw CocoaError(.fileWriteUnknown) }
    }
}
