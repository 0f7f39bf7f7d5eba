#if canImport(Glibc)
@preconcurrency import Glibc
#endif
@_exported public import SiteKeepRunClient
internal import SiteKeepCrypto
internal import SiteKeepSystem
import Synchronization

/// Where a command reads and writes. The real process uses the standard streams; tests
/// capture them; a command run inside the daemon writes to its client's (`RemoteIO`). The
/// streams and prompts are ``RunTerminal``'s (what a daemon client relays); a command also
/// reads all of standard input for `-`.
public protocol ToolIO: RunTerminal {
    /// All of standard input (for `-` as a file name), for inputs that are not secrets.
    func readStandardInput(limit: Int) throws -> [UInt8]
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
