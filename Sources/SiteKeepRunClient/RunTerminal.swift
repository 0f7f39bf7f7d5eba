/// The streams and terminal a command run inside the daemon writes to and asks on, seen from
/// the client that relays them (``RunClient``). The command line's `ToolIO` refines it; the
/// `sitekeep` daemon client uses ``ProcessTerminal``.
public protocol RunTerminal: Sendable {
    /// Writes text to standard output.
    func write(_ text: String)
    /// Writes raw bytes to standard output (file contents, unchanged).
    func writeBytes(_ bytes: [UInt8])
    /// Writes text to standard error.
    func writeError(_ text: String)
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

extension RunTerminal {
    /// The default for a terminal without its own line prompt: the secret prompt (no echo).
    public func promptLine(_ prompt: String) throws -> String {
        var line = [UInt8](repeating: 0, count: 1024)
        let n = try line.withUnsafeMutableBytes { try promptSecret(prompt, into: $0) }
        return String(decoding: line[0..<min(n, line.count)], as: UTF8.self)
    }
}

/// Why the terminal could not be used: what was wrong and what to do.
public struct TerminalError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public let problem: String
    /// What to do about it, when there is something.
    public let remedy: String?

    public init(_ problem: String, remedy: String? = nil) {
        self.problem = problem
        self.remedy = remedy
    }

    public var description: String { problem }
}
