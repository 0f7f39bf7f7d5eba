#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import Synchronization
internal import SiteKeepBridge
internal import SiteKeepBridgeProtocol
internal import SiteKeepCrypto
internal import SiteKeepJSON
internal import SiteKeepSocket
internal import SiteKeepRunClient
internal import SiteKeepDaemon
internal import SiteKeepSystem
internal import SiteKeepCustody

/// The daemon's side of `run` (see ``RemoteRun``): one command line of a client, run in the
/// daemon against its store (its unlocked custodian, its registry, its vault library), with
/// standard streams, prompts and standard input relayed as ``ControlFrame``s.
enum RemoteSession {
    /// Runs the command `request` carries on `connection` and sends its exit status.
    static func serve(_ request: ControlServer.Request, _ connection: SocketConnection, hosted: StoreContext,
                      environment: [String: String]) {
        let header = request.header
        guard let argv = header["argv"]?.arrayValue?.compactMap(\.stringValue), !argv.isEmpty else {
            _ = connection.writer.send(JSONSerializer.bytes(["ok": false, "code": "bad_request", "error": "run needs argv"]))
            return
        }
        var clientEnvironment: [String: String] = [:]
        for member in header["env"]?.objectValue ?? [] where RunClient.forwardedEnvironment.contains(member.key) {
            if let v = member.value.stringValue { clientEnvironment[member.key] = v }
        }
        guard let cwd = header["cwd"]?.stringValue, cwd.hasPrefix("/") else {
            _ = connection.writer.send(JSONSerializer.bytes(["ok": false, "code": "bad_request", "error": "run needs the client's working folder (cwd, absolute)"]))
            return
        }
        let commandLine: [String]
        switch RemoteRun.commandLine(argv, cwd: cwd, clientEnvironment: clientEnvironment,
                                     serving: hosted.home.path, store: hosted.custodian.storeID) {
        case .success(let line): commandLine = line
        case .failure(let refusal):
            _ = connection.writer.send(JSONSerializer.bytes(["ok": false, "code": .string(refusal.code), "error": .string(refusal.message)]))
            return
        }
        let tty = header["tty"]
        let io = RemoteIO(connection: connection,
                          outputIsTerminal: tty?["stdout"]?.boolValue ?? false,
                          errorIsTerminal: tty?["stderr"]?.boolValue ?? false,
                          canPrompt: tty?["prompt"]?.boolValue ?? false)
        var env = environment
        for name in ["TERM", "NO_COLOR", "COLUMNS"] { env[name] = clientEnvironment[name] }
        let runEnvironment = env
        let client = connection.peer.map { ClientLabel.of(pid: $0.pid, uid: $0.uid) }
        let done = DispatchSemaphore(value: 0)
        let status = Mutex<Int32>(1)
        let run = { @Sendable in
            let s = await CommandLineTool.run(arguments: commandLine, environment: runEnvironment, io: io, hosted: hosted, client: client)
            status.withLock { $0 = s }
            done.signal()
        }
        Task { await run() }
        done.wait()
        io.send(.exit, ControlFrame.number(UInt32(bitPattern: status.withLock { $0 })))
    }
}

/// A client's standard streams and terminal, across the control socket.
final class RemoteIO: ToolIO, @unchecked Sendable {
    // @unchecked: writes go through the connection's serialised writer; reads happen only on
    // the one thread running the command (prompts and standard input are asked in turn).
    private let connection: SocketConnection
    let outputIsTerminal: Bool
    let errorIsTerminal: Bool
    let canPrompt: Bool

    init(connection: SocketConnection, outputIsTerminal: Bool, errorIsTerminal: Bool, canPrompt: Bool) {
        self.connection = connection
        self.outputIsTerminal = outputIsTerminal
        self.errorIsTerminal = errorIsTerminal
        self.canPrompt = canPrompt
    }

    /// Sends one frame (header and payload in one write, so frames from two threads never mix).
    func send(_ kind: ControlFrame.Kind, _ payload: [UInt8]) {
        var offset = 0
        repeat {
            var end = min(payload.count, offset + ControlFrame.maximumPayload)
            // Text is decoded frame by frame: never cut a UTF-8 sequence (continuation bytes are 10xxxxxx).
            if kind != .stdoutBytes { while end < payload.count, end > offset + 1, payload[end] & 0xC0 == 0x80 { end -= 1 } }
            let part = payload[offset..<end]
            _ = connection.writer.send([kind.rawValue] + ControlFrame.number(UInt32(part.count)) + part, terminator: nil)
            offset = end
        } while offset < payload.count
    }

    func write(_ text: String) { send(.stdout, Array(text.utf8)) }
    func writeBytes(_ bytes: [UInt8]) { send(.stdoutBytes, bytes) }
    func writeError(_ text: String) { send(.stderr, Array(text.utf8)) }

    private static var gone: CommandFailure {
        CommandFailure("the client went away before the command finished", code: "cancelled")
    }

    /// Reads the client's answer to a prompt or stdin request straight into `buffer` (guarded
    /// memory the caller owns); the rest of a longer answer is read and dropped.
    private func receiveAnswer(_ kind: ControlFrame.Kind, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let fd = connection.fd
        while true {
            guard let (got, length) = ControlFrame.receiveHeader(fd) else { throw Self.gone }
            let kept = min(length, buffer.count)
            guard ControlFrame.receiveExactly(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<kept])) else { throw Self.gone }
            if length > kept {
                var rest = [UInt8](repeating: 0, count: length - kept)
                guard rest.withUnsafeMutableBytes({ ControlFrame.receiveExactly(fd, into: $0) }) else { throw Self.gone }
                SecureMemory.zero(&rest)
            }
            if got == .cancel { throw CommandFailure("interrupted", code: "cancelled") }
            if got == kind { return kept }
        }
    }

    func readStandardInput(limit: Int) throws -> [UInt8] {
        send(.stdin, ControlFrame.number(UInt32(min(limit + 1, Int(UInt32.max)))))
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: ControlFrame.maximumPayload)
        defer { SecureMemory.zero(&chunk) }
        while true {
            let n = try chunk.withUnsafeMutableBytes { try receiveAnswer(.stdin, into: $0) }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit {
                try drainStandardInput()
                throw CommandFailure("standard input is larger than \(limit) bytes")
            }
        }
        return out
    }

    private func drainStandardInput() throws {
        var scratch = [UInt8](repeating: 0, count: 4096)
        defer { SecureMemory.zero(&scratch) }
        while try scratch.withUnsafeMutableBytes({ try receiveAnswer(.stdin, into: $0) }) > 0 {}
    }

    func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        send(.stdin, ControlFrame.number(UInt32(buffer.count)))
        var filled = 0
        while true {
            let n = try receiveAnswer(.stdin, into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if n == 0 { return filled }
            filled += n
            if filled == buffer.count {
                try drainStandardInput()
                return filled
            }
        }
    }

    func promptLine(_ prompt: String) throws -> String {
        guard canPrompt else { throw CommandFailure("no terminal to ask on", remedy: "pass --yes to confirm without a terminal") }
        send(.prompt, JSONSerializer.bytes(["prompt": .string(prompt), "secret": false]))
        var line = [UInt8](repeating: 0, count: 1024)
        let n = try line.withUnsafeMutableBytes { try receiveAnswer(.prompt, into: $0) }
        return String(decoding: line[0..<n], as: UTF8.self)
    }

    func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard canPrompt else {
            throw CommandFailure("no terminal to prompt on", remedy: "pass the secret with a file option (or '-' for stdin)")
        }
        send(.prompt, JSONSerializer.bytes(["prompt": .string(prompt), "secret": true]))
        return try receiveAnswer(.prompt, into: buffer)
    }
}
