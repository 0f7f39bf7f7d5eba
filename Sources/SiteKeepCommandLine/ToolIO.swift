#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepCrypto
import Synchronization

/// Where a command reads and writes. The real process uses the standard streams; tests
/// capture them.
public protocol ToolIO: Sendable {
    func write(_ text: String)
    func writeError(_ text: String)
    /// All of standard input (for `-` as a file name).
    func readStandardInput(limit: Int) throws -> [UInt8]
    /// Whether standard output is a terminal (tables and colour for people).
    var outputIsTerminal: Bool { get }
    /// Whether standard error is a terminal (progress indicators).
    var errorIsTerminal: Bool { get }
    /// Whether a terminal is available to prompt on (`/dev/tty`).
    var canPrompt: Bool { get }
    /// Prompts on the terminal with echo off and returns the line's bytes (no newline).
    func promptSecret(_ prompt: String) throws -> [UInt8]
}

/// The process's real standard streams.
public struct StandardIO: ToolIO {
    public init() {
        setvbuf(stdout, nil, _IOLBF, 0)
    }
    public func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
    public func writeError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
    public func readStandardInput(limit: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CommandFailure("could not read standard input (errno \(errno))")
            }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw CommandFailure("standard input is larger than \(limit) bytes") }
        }
        SecureMemory.zero(&chunk)
        return out
    }
    public var outputIsTerminal: Bool { isatty(1) == 1 }
    public var errorIsTerminal: Bool { isatty(2) == 1 }
    public var canPrompt: Bool {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        if fd >= 0 { close(fd); return true }
        return false
    }

    public func promptSecret(_ prompt: String) throws -> [UInt8] {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else {
            throw CommandFailure("no terminal to prompt on", remedy: "pass the secret with a file option (or '-' for stdin)")
        }
        defer { close(fd) }
        var saved = termios()
        let haveTermios = tcgetattr(fd, &saved) == 0
        if haveTermios {
            var noEcho = saved
            noEcho.c_lflag &= ~tcflag_t(ECHO)
            noEcho.c_lflag |= tcflag_t(ICANON)
            _ = tcsetattr(fd, TCSAFLUSH, &noEcho)
        }
        defer {
            if haveTermios { var s = saved; _ = tcsetattr(fd, TCSAFLUSH, &s) }
            _ = Glibc.write(fd, "\n", 1)
        }
        _ = prompt.withCString { Glibc.write(fd, $0, strlen($0)) }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = Glibc.read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0a { break }
            line.append(byte)
            if line.count > 4096 { SecureMemory.zero(&line); throw CommandFailure("input line too long") }
        }
        return line
    }
}

/// Captured streams for tests.
public final class CapturedIO: ToolIO, @unchecked Sendable {
    // @unchecked: every field is behind `state`'s lock.
    private struct State { var out = ""; var err = ""; var stdin: [UInt8] = [] }
    private let state = Mutex(State())
    public init(standardInput: [UInt8] = []) { state.withLock { $0.stdin = standardInput } }
    public var output: String { state.withLock { $0.out } }
    public var errorOutput: String { state.withLock { $0.err } }
    public func write(_ text: String) { state.withLock { $0.out += text } }
    public func writeError(_ text: String) { state.withLock { $0.err += text } }
    public func readStandardInput(limit: Int) throws -> [UInt8] {
        let data = state.withLock { s -> [UInt8] in defer { s.stdin = [] }; return s.stdin }
        guard data.count <= limit else { throw CommandFailure("standard input is larger than \(limit) bytes") }
        return data
    }
    public var outputIsTerminal: Bool { false }
    public var errorIsTerminal: Bool { false }
    public var canPrompt: Bool { false }
    public func promptSecret(_ prompt: String) throws -> [UInt8] {
        throw CommandFailure("no terminal to prompt on", remedy: "pass the secret with a file option (or '-' for stdin)")
    }
}

