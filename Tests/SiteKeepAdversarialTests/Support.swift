import Foundation
import Glibc
import Synchronization
import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCommandLine

// Shared helpers of the adversarial suite: the CLI in-process, child processes by posix_spawn
// (Foundation's Process hangs in this test runner), the leak-scan forms, and the knobs
// tools/attack turns (SITEKEEP_ATTACK_ROUNDS, SITEKEEP_ATTACK_THREADS).

/// How hard to push: tools/test runs the short defaults, tools/attack raises them.
enum Attack {
    static func knob(_ name: String, default value: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap(Int.init).map { max(1, $0) } ?? value
    }
    /// kill -9 rounds per crash loop.
    static var rounds: Int { knob("SITEKEEP_ATTACK_ROUNDS", default: 4) }
    /// Threads of the concurrency stress.
    static var threads: Int { knob("SITEKEEP_ATTACK_THREADS", default: 8) }
    /// Sites of the concurrency stress.
    static var sites: Int { knob("SITEKEEP_ATTACK_SITES", default: 12) }

    /// One line per part for tools/attack's table (`ATTACK <part>: <what was tried>`), also
    /// written to $SITEKEEP_ATTACK_REPORT when set.
    static func report(_ part: String, _ detail: String) {
        let line = "ATTACK \(part): \(detail)\n"
        FileHandle.standardError.write(Data(line.utf8))
        if let path = ProcessInfo.processInfo.environment["SITEKEEP_ATTACK_REPORT"] {
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            if fd >= 0 {
                _ = line.withCString { Glibc.write(fd, $0, strlen($0)) }
                close(fd)
            }
        }
    }
}

/// A private temporary folder (0700), removed on deinit.
final class TempFolder: @unchecked Sendable {
    let path: String
    init(_ name: String = "adv") throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/sitekeep-\(name)-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SpawnError("mkdtemp failed (errno \(errno))")
        }
        path = String(cString: made)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        chmod(p, 0o600)
        return p
    }
}

struct SpawnError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// One run of the CLI, in-process.
struct ToolRun: Sendable {
    let arguments: [String]
    let status: Int32
    let out: String
    let err: String
    let bytes: [UInt8]
}

/// Runs `sitekeep` in this process with captured streams.
func runTool(_ arguments: [String], stdin: [UInt8] = []) async -> ToolRun {
    let io = CapturedIO(standardInput: stdin)
    let status = await CommandLineTool.run(arguments: arguments, environment: ["HOME": "/nonexistent-home", "NO_COLOR": "1"], io: io)
    return ToolRun(arguments: arguments, status: status, out: io.output, err: io.errorOutput, bytes: io.outputBytes)
}

// MARK: - Executables beside the test binary

/// An executable product built beside the test bundle (`swift build` builds them all).
func builtExecutable(_ name: String) -> String? {
    guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
    let path = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}

/// The package root, from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The real sgit CLI: $SITEKEEP_TEST_SGIT, else .venv/bin/sgit under the package root.
func sgitPath() throws -> String {
    if let env = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], !env.isEmpty,
       FileManager.default.isExecutableFile(atPath: env) {
        return env
    }
    let local = packageRoot + "/.venv/bin/sgit"
    guard FileManager.default.isExecutableFile(atPath: local) else {
        throw SpawnError("the sgit CLI was not found ($SITEKEEP_TEST_SGIT or \(local)): run tools/setup")
    }
    return local
}

// MARK: - Child processes

/// A child started with posix_spawn; stdout and stderr go to files (no pipes to drain).
final class Child: @unchecked Sendable {
    let pid: pid_t
    let stdoutPath: String
    let stderrPath: String
    private(set) var exit: (code: Int32?, signal: Int32?)? = nil

    /// Starts `path` with `arguments`; stdin from `stdinPath` (or /dev/null).
    init(_ path: String, _ arguments: [String], stdoutPath: String, stderrPath: String,
         stdinPath: String = "/dev/null", stdinMode: Int32 = O_RDONLY, environment: [String: String] = [:], cwd: String? = nil) throws {
        self.stdoutPath = stdoutPath
        self.stderrPath = stderrPath
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath, stdinMode, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var env = ProcessInfo.processInfo.environment
        env["NO_COLOR"] = "1"
        env["SWIFT_BACKTRACE"] = "enable=no"
        env.merge(environment) { $1 }
        // A working folder through the shell (posix_spawn_file_actions_addchdir_np is not imported).
        let (program, words) = cwd.map { ("/bin/sh", ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", $0, path] + arguments) } ?? (path, [path] + arguments)
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, program, &actions, nil, argv, envp)
        guard rc == 0 else { throw SpawnError("posix_spawn \(path) failed: \(rc)") }
        pid = child
    }

    /// SIGKILL, then reap.
    func kill9() {
        _ = Glibc.kill(pid, SIGKILL)
        _ = wait()
    }

    /// Waits for the child (reaps it once); returns (exit code, signal).
    @discardableResult
    func wait() -> (code: Int32?, signal: Int32?) {
        if let exit { return exit }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WTERMSIG by hand (macros are not imported).
        let signal = status & 0x7f
        let result: (Int32?, Int32?) = signal == 0 ? ((status >> 8) & 0xff, nil) : (nil, signal)
        exit = result
        return result
    }

    /// Whether it has exited (non-blocking; reaps it if so).
    var hasExited: Bool {
        if exit != nil { return true }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        guard r == pid else { return false }
        let signal = status & 0x7f
        exit = signal == 0 ? ((status >> 8) & 0xff, nil) : (nil, signal)
        return true
    }

    var stdout: [UInt8] { (try? Array(Data(contentsOf: URL(fileURLWithPath: stdoutPath)))) ?? [] }
    var stderr: String { String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: stderrPath))) ?? Data(), as: UTF8.self) }

    /// Runs to completion with a time limit (killed and reported past it).
    static func run(_ path: String, _ arguments: [String], in folder: String, stdinPath: String = "/dev/null",
                    environment: [String: String] = [:], cwd: String? = nil, timeout: Double = 120) throws -> (code: Int32?, out: [UInt8], err: String) {
        let tag = UUID().uuidString.prefix(8)
        let c = try Child(path, arguments, stdoutPath: "\(folder)/out-\(tag)", stderrPath: "\(folder)/err-\(tag)",
                          stdinPath: stdinPath, environment: environment, cwd: cwd)
        let deadline = Date().addingTimeInterval(timeout)
        while !c.hasExited {
            if Date() > deadline { c.kill9(); throw SpawnError("\(path) \(arguments) ran past \(timeout) s") }
            usleep(5_000)
        }
        let r = c.wait()
        defer { unlink(c.stdoutPath); unlink(c.stderrPath) }
        return (r.code, c.stdout, c.stderr)
    }
}

// MARK: - Leak scan

/// Every regular file under `path` (recursively), and every folder.
func walk(_ path: String) -> (files: [String], folders: [String]) {
    var files: [String] = [], folders: [String] = []
    guard let e = FileManager.default.enumerator(atPath: path) else { return ([], []) }
    for case let rel as String in e {
        let full = path + "/" + rel
        var st = stat()
        guard lstat(full, &st) == 0 else { continue }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: folders.append(full)
        case S_IFREG: files.append(full)
        default: break
        }
    }
    return (files, folders)
}

/// The permission bits of a path.
func mode(_ path: String) -> mode_t {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0o7777
}
