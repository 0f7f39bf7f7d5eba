#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import SiteKeepRunClient
internal import SiteKeepCrypto
internal import SiteKeepSystem
import Synchronization

/// Where a command reads and writes. The real process uses the standard streams; tests
/// capture them; a command run inside the daemon writes to its client's (`RemoteIO`).
public protocol ToolIO: Sendable {
    func write(_ text: String)
    /// Writes raw bytes to standard output (file contents, unchanged).
    func writeBytes(_ bytes: [UInt8])
    func writeError(_ text: String)
    /// All of standard input (for `-` as a file name), for inputs that are not secrets.
    func readStandardInput(limit: Int) throws -> [UInt8]
    /// Reads standard input into `buffer` (guarded memory the caller owns) until end of input
    /// or the buffer is full, and returns the byte count. For secrets: no other copy is made.
    func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Whether standard output is a terminal (tables and colour for people).
    var outputIsTerminal: Bool { get }
    /// Whether standard error is a terminal (progress indicators).
    var errorIsTerminal: Bool { get }
    /// Whether a terminal is available to prompt on (`/dev/tty`).
    var canPrompt: Bool { get }
    /// Prompts on the terminal with echo off and reads the line into `buffer` (guarded memory
    /// the caller owns), without its newline; returns the byte count, `buffer.count` when the
    /// line was that long or longer (the rest of a longer line is read and dropped).
    func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// Prompts on the terminal with echo on and returns the line typed, without its newline
    /// (at most 1024 bytes; for confirmations such as "type the site's name", never secrets).
    func promptLine(_ prompt: String) throws -> String
}

extension ToolIO {
    /// The default for a ``ToolIO`` without its own line prompt: the secret prompt (no echo).
    public func promptLine(_ prompt: String) throws -> String {
        var line = [UInt8](repeating: 0, count: 1024)
        let n = try line.withUnsafeMutableBytes { try promptSecret(prompt, into: $0) }
        return String(decoding: line[0..<min(n, line.count)], as: UTF8.self)
    }
}

/// A ``ToolIO`` as the terminal a command run in the daemon relays to (``RunClient``).
struct ToolIOTerminal: RunTerminal {
    let io: any ToolIO
    func write(_ text: String) { io.write(text) }
    func writeBytes(_ bytes: [UInt8]) { io.writeBytes(bytes) }
    func writeError(_ text: String) { io.writeError(text) }
    func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int { try io.readSecretInput(into: buffer) }
    var outputIsTerminal: Bool { io.outputIsTerminal }
    var errorIsTerminal: Bool { io.errorIsTerminal }
    var canPrompt: Bool { io.canPrompt }
    func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int { try io.promptSecret(prompt, into: buffer) }
    func promptLine(_ prompt: String) throws -> String { try io.promptLine(prompt) }
}

/// The process's real standard streams (``ProcessTerminal``, with the command line's errors).
public struct StandardIO: ToolIO {
    private let terminal = ProcessTerminal()

    public init() {
        setvbuf(stdout, nil, _IOLBF, 0)
    }
    public func write(_ text: String) { terminal.write(text) }
    public func writeError(_ text: String) { terminal.writeError(text) }
    public func writeBytes(_ bytes: [UInt8]) { terminal.writeBytes(bytes) }
    public func readStandardInput(limit: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        defer { SecureMemory.zero(&chunk) }
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                let e = Errno.current
                if e == .interrupted { continue }
                throw CommandFailure("could not read standard input: \(e)")
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw CommandFailure("standard input is larger than \(limit) bytes") }
        }
        return out
    }
    public func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        try SecretReader.readAll(0, into: buffer, what: "standard input")
    }
    public var outputIsTerminal: Bool { terminal.outputIsTerminal }
    public var errorIsTerminal: Bool { terminal.errorIsTerminal }
    public var canPrompt: Bool { terminal.canPrompt }

    public func promptLine(_ prompt: String) throws -> String {
        do { return try terminal.promptLine(prompt) } catch let e as TerminalError { throw CommandFailure(e.problem, remedy: e.remedy) }
    }

    public func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        do { return try terminal.promptSecret(prompt, into: buffer) } catch let e as TerminalError { throw CommandFailure(e.problem, remedy: e.remedy) }
    }
}

/// Captured streams for tests. `promptAnswers` are the lines a person would type at the
/// terminal prompts, in order; without them there is no terminal.
public final class CapturedIO: ToolIO, @unchecked Sendable {
    // @unchecked: every field is behind `state`'s lock.
    private struct State { var out = ""; var err = ""; var stdin: [UInt8] = []; var bytes: [UInt8] = []; var answers: [[UInt8]] = []; var prompts: [String] = [] }
    private let state = Mutex(State())
    private let hasTerminal: Bool
    public init(standardInput: [UInt8] = [], promptAnswers: [[UInt8]]? = nil) {
        hasTerminal = promptAnswers != nil
        state.withLock { $0.stdin = standardInput; $0.answers = promptAnswers ?? [] }
    }
    public var output: String { state.withLock { $0.out } }
    public var errorOutput: String { state.withLock { $0.err } }
    /// The prompts shown, in order.
    public var prompts: [String] { state.withLock { $0.prompts } }
    public func write(_ text: String) { state.withLock { $0.out += text } }
    public func writeError(_ text: String) { state.withLock { $0.err += text } }
    public func writeBytes(_ bytes: [UInt8]) { state.withLock { $0.bytes += bytes } }
    /// Everything written with ``writeBytes(_:)``.
    public var outputBytes: [UInt8] { state.withLock { $0.bytes } }
    public func readStandardInput(limit: Int) throws -> [UInt8] {
        let data = state.withLock { s -> [UInt8] in defer { s.stdin = [] }; return s.stdin }
        guard data.count <= limit else { throw CommandFailure("standard input is larger than \(limit) bytes") }
        return data
    }
    public func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        state.withLock { s -> Int in
            let n = min(s.stdin.count, buffer.count)
            buffer.copyBytes(from: s.stdin.prefix(n))
            s.stdin.removeFirst(n)
            return n
        }
    }
    public var outputIsTerminal: Bool { false }
    public var errorIsTerminal: Bool { false }
    public var canPrompt: Bool { hasTerminal }
    public func promptLine(_ prompt: String) throws -> String {
        let line: [UInt8]? = state.withLock { s in
            s.prompts.append(prompt)
            return s.answers.isEmpty ? nil : s.answers.removeFirst()
        }
        guard let line else { throw CommandFailure("no terminal to ask on", remedy: "pass --yes to confirm without a terminal") }
        return String(decoding: line, as: UTF8.self)
    }
    public func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let line: [UInt8]? = state.withLock { s in
            s.prompts.append(prompt)
            return s.answers.isEmpty ? nil : s.answers.removeFirst()
        }
        guard let line else {
            throw CommandFailure("no terminal to prompt on", remedy: "pass the secret with a file option (or '-' for stdin)")
        }
        let n = min(line.count, buffer.count)
        buffer.copyBytes(from: line.prefix(n))
        return n
    }
}
