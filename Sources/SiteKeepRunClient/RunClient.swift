#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepBridgeProtocol
import SiteKeepSecureMemory
internal import SiteKeepJSON
import SiteKeepSocket

/// A command line run inside its store's daemon, from the client's side: connect to the
/// control socket, send `run` (``ControlWire``) with the command line as typed and the working
/// folder, relay standard output and error, answer the daemon's prompts on this terminal, feed
/// it standard input, and return the daemon's exit status.
///
/// The daemon reads the command line with its command table: it makes local paths absolute
/// against `workingDirectory`, checks that the store the command names is the one it serves,
/// and refuses commands that run in their own process (``Outcome/notServed``). The client
/// never opens the keyring and never holds a key; secrets it relays (a prompt's answer, `-`
/// input) pass through guarded memory only.
public enum RunClient {
    /// How a run ended.
    public enum Outcome: Sendable, Equatable {
        /// The command ran in the daemon and exited with this status.
        case exited(Int32)
        /// No daemon serves this store here, or the command does not run inside one: run it
        /// in this process.
        case notServed
        /// The daemon refused the command before running it (locked, a bad request, another
        /// version): its code and message.
        case refused(code: String, message: String)
    }

    /// Commands that never go through the daemon: those that start or talk to it themselves
    /// (`serve`, `unlock`, `lock`, `status`, `stop`, `call`, `agent env`, `browse`), those that create
    /// the store (`init`), and those that need no store's keys (`version`, `doctor`, `ops`,
    /// `audit`, which builds its own scratch store, `team verify`, `completions`, `man`).
    /// The one list: the command line tool and the `sitekeep` front end both read it.
    public static let commandsRunHere: Set<[String]> = [
        ["version"], ["doctor"], ["init"], ["unlock"], ["lock"], ["status"], ["serve"], ["call"], ["ops"],
        ["audit"], ["agent", "env"], ["stop"], ["browse"], ["open"], ["host", "run"], ["completions"], ["man"], ["team", "verify"],
    ]

    /// Whether `arguments` (a command line without the program name) certainly runs in its own
    /// process: help, no command, or one of ``commandsRunHere`` after the leading global
    /// options. A front end skips the daemon for these; false is only a "maybe" (the daemon
    /// reads the command line with its command table and answers `runs_here` when it is).
    public static func runsHere(_ arguments: [String]) -> Bool {
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--home" || a == "--keyring" { i += 2; continue }
            if a.hasPrefix("--home=") || a.hasPrefix("--keyring=") || a == "--json" || a == "--no-color" { i += 1; continue }
            break
        }
        let words = Array(arguments[min(i, arguments.count)...])
        guard let first = words.first, first != "help", !first.hasPrefix("-") else { return true }
        return commandsRunHere.contains { words.starts(with: $0) }
    }

    /// The environment variables a run carries: those that shape output (`TERM`, `NO_COLOR`,
    /// `COLUMNS`) and those the store's folder is resolved from (`SITEKEEP_HOME`,
    /// `XDG_DATA_HOME`, `HOME`), so the daemon can check the command means its store.
    public static let forwardedEnvironment = ["TERM", "NO_COLOR", "COLUMNS", "SITEKEEP_HOME", "XDG_DATA_HOME", "HOME"]

    /// Runs `arguments` (without the program name) in the daemon listening on `socket`, for the
    /// store whose id is `store`.
    /// - Throws: ``RunClientError``: the socket failed the client's checks (nothing was sent),
    ///   the daemon went away mid-command, or standard input could not be read.
    public static func run(_ arguments: [String], workingDirectory: String, environment: [String: String],
                           store: String, socket: String, terminal: any RunTerminal) throws(RunClientError) -> Outcome {
        let fd: Int32
        do {
            guard let connected = try ControlClient.connect(path: socket) else { return .notServed }
            fd = connected
        } catch {
            // The socket's path and why, once: the remedy is the error's own (printed as the hint).
            guard case let .untrustedSocket(path, reason) = error else { throw .untrustedSocket("\(socket): \(error)") }
            let suffix = "; " + ControlClient.remedy
            throw .untrustedSocket("\(path): " + (reason.hasSuffix(suffix) ? String(reason.dropLast(suffix.count)) : reason))
        }
        defer { close(fd) }
        var env: [JSONMember] = []
        for name in forwardedEnvironment {
            if let v = environment[name] { env.append(JSONMember(key: name, value: .string(v))) }
        }
        let header = ControlClient.header(op: "run", store: store, extra: [
            JSONMember(key: "argv", value: .array(arguments.map { .string($0) })),
            JSONMember(key: "cwd", value: .string(workingDirectory)),
            JSONMember(key: "env", value: .object(env)),
            JSONMember(key: "tty", value: .object([
                JSONMember(key: "stdout", value: .bool(terminal.outputIsTerminal)),
                JSONMember(key: "stderr", value: .bool(terminal.errorIsTerminal)),
                JSONMember(key: "prompt", value: .bool(terminal.canPrompt)),
            ])),
        ])
        let sent = UnixSocket.writeAll(fd, header)
        // A refusal before the session is one JSON line ("{"); a session starts with a frame.
        var first: UInt8 = 0
        guard recv(fd, &first, 1, Int32(MSG_PEEK)) == 1 else { return .notServed }
        if first == UInt8(ascii: "{") {
            guard let reply = try? ControlClient.readReply(fd) else { return .notServed }
            let code = reply["code"]?.stringValue ?? "daemon"
            // Another store's daemon listens here, or the command runs in its own process.
            if code == "wrong_store" || code == "runs_here" { return .notServed }
            return .refused(code: code, message: reply["error"]?.stringValue ?? "the daemon refused the command")
        }
        guard sent else { return .notServed }
        return .exited(try session(fd, terminal))
    }

    /// Relays a `run` session until the daemon's `exit` frame; returns its status.
    private static func session(_ fd: Int32, _ terminal: any RunTerminal) throws(RunClientError) -> Int32 {
        while true {
            guard let (kind, length) = ControlFrame.receiveHeader(fd) else { throw .connectionLost }
            var payload = [UInt8](repeating: 0, count: length)
            guard payload.withUnsafeMutableBytes({ ControlFrame.receiveExactly(fd, into: $0) }) else { throw .connectionLost }
            switch kind {
            case .stdout: terminal.write(String(decoding: payload, as: UTF8.self))
            case .stdoutBytes: terminal.writeBytes(payload)
            case .stderr: terminal.writeError(String(decoding: payload, as: UTF8.self))
            case .exit: return Int32(bitPattern: ControlFrame(kind, payload).number ?? 1)
            case .prompt:
                let request = try? JSONParser.parse(payload, limits: .message)
                let ask = request?["prompt"]?.stringValue ?? "Passphrase: "
                if request?["secret"] == .bool(false) {
                    // A confirmation ("type the site's name"), typed with echo; never a secret.
                    let line = (try? terminal.promptLine(ask)) ?? ""
                    _ = ControlFrame.send(fd, ControlFrame(.prompt, Array(line.utf8.prefix(1024))))
                } else {
                    answerPrompt(fd, ask, terminal)
                }
            case .stdin:
                try feedStandardInput(fd, maximum: Int(ControlFrame(kind, payload).number ?? 0), terminal)
            case .cancel:
                continue
            }
        }
    }

    /// Asks on this terminal (echo off) into guarded memory and sends the answer; a failure to
    /// ask is sent as an empty answer (the daemon then reports no secret given).
    private static func answerPrompt(_ fd: Int32, _ prompt: String, _ terminal: any RunTerminal) {
        let answered = try? SecretBytes(count: ControlWire.maximumSecretLength) { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let count = (try? terminal.promptSecret(prompt, into: buffer)) ?? 0
            _ = ControlFrame.send(fd, .prompt, UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
        if answered == nil { _ = ControlFrame.send(fd, ControlFrame(.prompt)) }
    }

    /// Sends up to `maximum` bytes of standard input, then an empty frame. The chunks pass
    /// through guarded memory (they may be a secret read with `-`), wiped when freed.
    private static func feedStandardInput(_ fd: Int32, maximum: Int, _ terminal: any RunTerminal) throws(RunClientError) {
        var sent = 0
        while sent < maximum {
            let want = min(ControlFrame.maximumPayload, maximum - sent)
            var got = 0
            var failure: String?
            do {
                _ = try SecretBytes(count: want) { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    do { got = try terminal.readSecretInput(into: buffer) } catch { failure = "\(error)"; return }
                    if got > 0 { _ = ControlFrame.send(fd, .stdin, UnsafeRawBufferPointer(rebasing: buffer[0..<got])) }
                }
            } catch {
                failure = "no guarded memory for standard input: \(error)"
            }
            if let failure {
                _ = ControlFrame.send(fd, ControlFrame(.stdin))
                throw .input(failure)
            }
            if got == 0 { break }
            sent += got
        }
        _ = ControlFrame.send(fd, ControlFrame(.stdin))
    }
}

/// Why a run through the daemon failed on the client's side.
public enum RunClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The control socket failed the client's checks; nothing was sent. The text is the
    /// socket's path and what is wrong with it (``remedy`` says what to do).
    case untrustedSocket(String)
    /// The daemon closed the connection before the command finished.
    case connectionLost
    /// Standard input could not be read for the daemon.
    case input(String)

    public var description: String {
        switch self {
        case .untrustedSocket(let why): "refusing to talk to the daemon socket \(why); nothing was sent"
        case .connectionLost: "the daemon closed the connection before the command finished"
        case .input(let why): why
        }
    }

    /// What to do about it.
    public var remedy: String? {
        switch self {
        case .untrustedSocket: ControlClient.remedy
        case .connectionLost: "see the daemon's output; run the command again"
        case .input: nil
        }
    }

    /// The error code the command line reports.
    public var code: String {
        switch self {
        case .untrustedSocket: "untrusted_socket"
        case .connectionLost: "daemon"
        case .input: "no_secret"
        }
    }
}
