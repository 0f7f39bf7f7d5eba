#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepBridgeProtocol
internal import SiteKeepCrypto
internal import SiteKeepJSON
internal import SiteKeepSocket
internal import SiteKeepDaemon

/// The command line as a client of its store's daemon.
///
/// When a daemon (`sitekeep serve`) runs for the store a command opens, the command runs
/// **inside the daemon**: this process sends its command line over the control socket (`run`,
/// ``ControlWire``), relays standard output and error, answers the daemon's prompts on its own
/// terminal and feeds it standard input, and exits with the daemon's exit status. It never opens
/// the keyring and never holds a key: the daemon's unlocked custodian does the work, as
/// `ssh-agent` or `gpg-agent` do for their clients. With no daemon for the store, the command
/// runs here and unlocks for itself.
///
/// Commands that manage the daemon or need no store run here always: see ``runsHere``.
enum RemoteRun {
    /// Commands that never go through the daemon: those that start or talk to it themselves
    /// (`serve`, `unlock`, `lock`, `status`, `call`, `agent env`, `browse`), those that create
    /// the store (`init`), and those that need no store's keys (`version`, `doctor`, `ops`,
    /// `audit`, which builds its own scratch store, `team verify`, `completions`, `man`).
    static let runsHere: Set<[String]> = [
        ["version"], ["doctor"], ["init"], ["unlock"], ["lock"], ["status"], ["serve"], ["call"], ["ops"],
        ["audit"], ["agent", "env"], ["browse"], ["completions"], ["man"], ["team", "verify"],
    ]

    /// Option placeholders whose values are paths on this machine (made absolute before sending,
    /// since the daemon's working folder is not the client's).
    static let pathPlaceholders: Set<String> = ["PATH", "F", "FILE", "DIR"]
    /// Positional arguments that are a URL or a local path (a path is made absolute).
    static let pathOrURLArguments: Set<String> = ["URL", "SOURCE"]

    /// Runs `invocation` in its store's daemon when one serves that store; nil when none does
    /// (the caller then runs it here). Throws when a daemon listens but cannot be trusted.
    static func forward(_ arguments: [String], _ invocation: Invocation) throws -> Int32? {
        guard !runsHere.contains(invocation.spec.path), invocation.environment["SITEKEEP_NO_DAEMON"] != "1" else { return nil }
        guard let storeID = StoreContext.storeID(home: invocation.settings.home),
              let path = try? DaemonSockets.control(environment: invocation.environment) else { return nil }
        let fd: Int32
        do {
            guard let connected = try ControlClient.connect(path: path) else { return nil }
            fd = connected
        } catch {
            throw CommandFailure("refusing to talk to the daemon socket, nothing was sent: \(error)", code: "untrusted_socket")
        }
        defer { close(fd) }
        let cwd = FileManager.default.currentDirectoryPath
        var env: [JSONMember] = []
        for name in ["TERM", "NO_COLOR", "COLUMNS"] {
            if let v = invocation.environment[name] { env.append(JSONMember(key: name, value: .string(v))) }
        }
        let io = invocation.io
        let header = ControlClient.header(op: "run", store: storeID, extra: [
            JSONMember(key: "argv", value: .array(commandLine(arguments, invocation, cwd: cwd).map { .string($0) })),
            JSONMember(key: "cwd", value: .string(cwd)),
            JSONMember(key: "env", value: .object(env)),
            JSONMember(key: "tty", value: .object([
                JSONMember(key: "stdout", value: .bool(io.outputIsTerminal)),
                JSONMember(key: "stderr", value: .bool(io.errorIsTerminal)),
                JSONMember(key: "prompt", value: .bool(io.canPrompt)),
            ])),
        ])
        guard UnixSocket.writeAll(fd, header) else { return nil }
        // A refusal before the session is one JSON line ("{"); a session starts with a frame.
        var first: UInt8 = 0
        guard recv(fd, &first, 1, Int32(MSG_PEEK)) == 1 else { return nil }
        if first == UInt8(ascii: "{") {
            let reply = try ControlClient.readReply(fd)
            // Another store's daemon listens here: this store has none, so the command runs here.
            if reply["code"]?.stringValue == "wrong_store" { return nil }
            throw CommandFailure(reply["error"]?.stringValue ?? "the daemon refused the command", code: reply["code"]?.stringValue ?? "daemon")
        }
        return try session(fd, io: io)
    }

    /// `arguments` with local paths made absolute and the store's folder named explicitly.
    static func commandLine(_ arguments: [String], _ invocation: Invocation, cwd: String) -> [String] {
        let spec = invocation.spec
        let known = spec.options + spec.secretInputs.map { OptionSpec.option($0.rawValue, value: "PATH", $0.help) } + CommandLineTool.globalOptions
        func absolute(_ p: String) -> String {
            p == "-" || p.isEmpty || p.hasPrefix("/") ? p : cwd + "/" + p
        }
        var out: [String] = []
        var positional = 0
        var onlyPositionals = false
        // The words naming the command are not positionals; global options may come before them
        // (`sitekeep --home DIR vault cat …`).
        var i = 0
        var words = 0
        while i < arguments.count {
            let a = arguments[i]
            i += 1
            if !onlyPositionals, positional == 0, words < spec.path.count, a == spec.path[words] {
                out.append(a)
                words += 1
                continue
            }
            if onlyPositionals || !a.hasPrefix("-") || a == "-" {
                let spec = positional < spec.arguments.count ? spec.arguments[positional] : spec.arguments.last
                positional += 1
                if let spec, pathOrURLArguments.contains(spec.name), !a.contains("://"), !a.hasPrefix("static+") {
                    out.append(absolute(a))
                } else {
                    out.append(a)
                }
                continue
            }
            if a == "--" { onlyPositionals = true; out.append(a); continue }
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                let name = String(a[..<eq])
                let value = String(a[a.index(after: eq)...])
                let option = known.first { $0.name == name }
                out.append(option?.value.map(pathPlaceholders.contains) == true ? name + "=" + absolute(value) : a)
                continue
            }
            out.append(a)
            if let option = known.first(where: { $0.name == a || $0.short == a }), let placeholder = option.value, i < arguments.count {
                out.append(pathPlaceholders.contains(placeholder) ? absolute(arguments[i]) : arguments[i])
                i += 1
            }
        }
        // The daemon's environment is not ours: name the store's folder (already absolute).
        let home = ["--home", invocation.settings.home]
        if let dashes = out.firstIndex(of: "--") { out.insert(contentsOf: home, at: dashes) } else { out += home }
        return out
    }

    /// Relays a `run` session until the daemon's `exit` frame; returns its status.
    private static func session(_ fd: Int32, io: any ToolIO) throws -> Int32 {
        while true {
            guard let (kind, length) = ControlFrame.receiveHeader(fd) else {
                throw CommandFailure("the daemon closed the connection before the command finished",
                                     remedy: "see the daemon's output; run the command again", code: "daemon")
            }
            switch kind {
            case .stdout, .stdoutBytes, .stderr:
                var payload = [UInt8](repeating: 0, count: length)
                guard payload.withUnsafeMutableBytes({ ControlFrame.receiveExactly(fd, into: $0) }) else { continue }
                switch kind {
                case .stdout: io.write(String(decoding: payload, as: UTF8.self))
                case .stdoutBytes: io.writeBytes(payload)
                default: io.writeError(String(decoding: payload, as: UTF8.self))
                }
            case .exit:
                var payload = [UInt8](repeating: 0, count: length)
                _ = payload.withUnsafeMutableBytes { ControlFrame.receiveExactly(fd, into: $0) }
                return Int32(bitPattern: ControlFrame(kind, payload).number ?? 1)
            case .prompt:
                var payload = [UInt8](repeating: 0, count: length)
                guard payload.withUnsafeMutableBytes({ ControlFrame.receiveExactly(fd, into: $0) }) else { continue }
                let request = try? JSONParser.parse(payload, limits: .message)
                let ask = request?["prompt"]?.stringValue ?? "Passphrase: "
                if request?["secret"] == .bool(false) {
                    // A confirmation ("type the site's name"), typed with echo; never a secret.
                    let line = (try? io.promptLine(ask)) ?? ""
                    _ = ControlFrame.send(fd, ControlFrame(.prompt, Array(line.utf8.prefix(1024))))
                } else {
                    try answerPrompt(fd, ask, io: io)
                }
            case .stdin:
                var payload = [UInt8](repeating: 0, count: length)
                guard payload.withUnsafeMutableBytes({ ControlFrame.receiveExactly(fd, into: $0) }) else { continue }
                let maximum = Int(ControlFrame(kind, payload).number ?? 0)
                try feedStandardInput(fd, maximum: maximum, io: io)
            case .cancel:
                continue
            }
        }
    }

    /// Asks on this terminal (echo off) into guarded memory and sends the answer; a failure to
    /// ask is sent as an empty answer (the daemon then reports no secret given).
    private static func answerPrompt(_ fd: Int32, _ prompt: String, io: any ToolIO) throws {
        _ = try SecretBytes(count: ControlWire.maximumSecretLength) { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            let count = (try? io.promptSecret(prompt, into: buffer)) ?? 0
            _ = ControlFrame.send(fd, .prompt, UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }

    /// Sends up to `maximum` bytes of standard input, then an empty frame. The chunks pass
    /// through guarded memory (they may be a secret read with `-`), wiped when freed.
    private static func feedStandardInput(_ fd: Int32, maximum: Int, io: any ToolIO) throws {
        var sent = 0
        while sent < maximum {
            let want = min(ControlFrame.maximumPayload, maximum - sent)
            var got = 0
            var failure: (any Error)?
            _ = try SecretBytes(count: want) { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                do { got = try io.readSecretInput(into: buffer) } catch { failure = error; return }
                if got > 0 { _ = ControlFrame.send(fd, .stdin, UnsafeRawBufferPointer(rebasing: buffer[0..<got])) }
            }
            if let failure {
                _ = ControlFrame.send(fd, ControlFrame(.stdin))
                throw failure
            }
            if got == 0 { break }
            sent += got
        }
        _ = ControlFrame.send(fd, ControlFrame(.stdin))
    }
}
