#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux

/// The controlling terminal of another process of the user, found from its pid, for a one-line
/// notice (the presence prompt tells a process that asked where the user answers; it never asks
/// there).
///
/// `/proc/PID/stat`'s `tty_nr` names the terminal's device number; a pseudo-terminal (majors
/// 136–143) is `/dev/pts/N`, a virtual console (major 4, minors 1–63) `/dev/ttyN`. The path is
/// given only when it names that very device, is a terminal, and belongs to this process's user:
/// a process cannot point the notice at a file or at another user's terminal.
public enum ControllingTerminal {
    /// The terminal `pid` runs on, as a `/dev/...` path; nil when it has none, it cannot be read,
    /// or the device is not the user's own terminal.
    public static func of(pid: Int32) -> String? {
        guard pid > 0, let nr = ttyNumber(pid: pid), nr != 0 else { return nil }
        let major = (nr >> 8) & 0xfff
        let minor = (nr & 0xff) | ((nr >> 12) & 0xfff00)
        let path: String
        switch major {
        case 136...143: path = "/dev/pts/\((major - 136) * 256 + minor)"
        case 4 where (1...63).contains(minor): path = "/dev/tty\(minor)"
        default: return nil
        }
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFCHR, st.st_uid == getuid(),
              UInt64(st.st_rdev) == makeDevice(major: major, minor: minor) else { return nil }
        return path
    }

    /// `/dev/pts/3` as `pts/3`: how a terminal is named to the user.
    public static func shortName(_ path: String) -> String {
        path.hasPrefix("/dev/") ? String(path.dropFirst("/dev/".count)) : path
    }

    /// Writes `line` (and a line end) to the terminal at `path`, never waiting (a terminal
    /// stopped by flow control drops it) and never making it this process's controlling
    /// terminal. Best effort: false when nothing was written.
    @discardableResult
    public static func notify(_ path: String, line: String) -> Bool {
        let fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard isatty(fd) == 1 else { return false }
        let bytes = Array(("\r\n" + line + "\r\n").utf8)
        return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } > 0
    }

    /// Field 7 of `/proc/PID/stat` (after the command name in parentheses, which may hold
    /// anything: the fields are counted from its last `)`).
    static func ttyNumber(pid: Int32) -> Int? {
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 2048)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let end = buffer[0..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(end + 1)..<n].split(separator: UInt8(ascii: " "))
        // state ppid pgrp session tty_nr
        guard fields.count > 4 else { return nil }
        return Int(String(decoding: fields[4], as: UTF8.self))
    }

    /// glibc's `makedev`.
    static func makeDevice(major: Int, minor: Int) -> UInt64 {
        let ma = UInt64(major), mi = UInt64(minor)
        return ((ma & 0xfffff000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffffff00) << 12) | (mi & 0xff)
    }
}
