#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepSecureMemory
import SiteKeepSystem

/// This process's standard streams and its controlling terminal (`/dev/tty`), with libc only.
public struct ProcessTerminal: RunTerminal {
    public init() {}

    public func write(_ text: String) { Self.writeAll(1, Array(text.utf8)) }
    public func writeBytes(_ bytes: [UInt8]) { Self.writeAll(1, bytes) }
    public func writeError(_ text: String) { Self.writeAll(2, Array(text.utf8)) }

    /// Writes everything; a closed pipe (EPIPE) or a full disk drops the rest, as `print` does.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        try? FileIO.writeAll(fd, bytes)
    }

    public func readSecretInput(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        do throws(Errno) { return try FileIO.readFully(0, into: buffer) } catch {
            throw TerminalError("cannot read standard input: \(error)")
        }
    }

    public var outputIsTerminal: Bool { isatty(1) == 1 }
    public var errorIsTerminal: Bool { isatty(2) == 1 }
    public var canPrompt: Bool {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        if fd >= 0 { close(fd); return true }
        return false
    }

    public func promptLine(_ prompt: String) throws -> String {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw TerminalError("no terminal to ask on", remedy: "pass --yes to confirm without a terminal") }
        defer { close(fd) }
        try? FileIO.writeAll(fd, Array(prompt.utf8))
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0a { break }
            if line.count < 1024 { line.append(byte) }
        }
        return String(decoding: line, as: UTF8.self)
    }

    public func promptSecret(_ prompt: String, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard fd >= 0, let base = buffer.baseAddress else {
            if fd >= 0 { close(fd) }
            throw TerminalError("no terminal to prompt on", remedy: "pass the secret with a file option (or '-' for stdin)")
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
            try? FileIO.writeAll(fd, [0x0a])
        }
        try? FileIO.writeAll(fd, Array(prompt.utf8))
        // Byte by byte, straight into the caller's guarded buffer.
        var count = 0
        while count < buffer.count {
            let n = read(fd, base + count, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return count }
            if base.load(fromByteOffset: count, as: UInt8.self) == 0x0a {
                base.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
                return count
            }
            count += 1
        }
        // Too long: read the rest of the line, so none of it reaches the shell after we exit.
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0a { break }
        }
        withUnsafeMutableBytes(of: &byte) { SecureMemory.zero($0) }
        return count
    }
}
