#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// Whole-buffer reads and writes on file descriptors, with `EINTR` and short counts handled
/// once, here.
public enum FileIO {
    /// Writes every byte of `bytes` to `fd` (`write(2)`; `send(2)` with `MSG_NOSIGNAL` when
    /// `socket` is true, so a closed peer is an error rather than `SIGPIPE`).
    /// - Throws: the error number of the call that failed.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, socket: Bool = false) throws(Errno) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = socket ? send(fd, base + done, bytes.count - done, Int32(MSG_NOSIGNAL))
                           : write(fd, base + done, bytes.count - done)
            if n < 0 {
                let e = Errno.current
                if e == .interrupted { continue }
                throw e
            }
            done += n
        }
    }

    /// ``writeAll(_:_:socket:)`` for an array.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8], socket: Bool = false) throws(Errno) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try writeAll(fd, raw, socket: socket) } }
        try result.get()
    }

    /// Reads from `fd` into `buffer` until it is full or the file ends; returns the count read.
    public static func readFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = read(fd, base + done, buffer.count - done)
            if n < 0 {
                let e = Errno.current
                if e == .interrupted { continue }
                throw e
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// What ``readRegularFile(_:limit:)`` found.
    public enum ReadResult: Sendable, Equatable {
        /// The file's bytes.
        case bytes([UInt8])
        /// No file at the path (`ENOENT`, or a parent that is not a folder).
        case missing
    }

    /// Opens the regular file at `path` for reading, never following a symbolic link at its last
    /// component (unless `followLinks`, for a path a person typed) and never blocking: a FIFO, a
    /// device or a folder in its place is refused after a non-blocking open and `fstat`, before
    /// any read. Returns the descriptor (blocking again, the caller closes it) and the size, or
    /// nil when there is no file.
    /// - Throws: ``SystemError`` naming the path and what was wrong.
    public static func openRegularFile(_ path: String, followLinks: Bool = false) throws(SystemError) -> (fd: Int32, size: Int)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (followLinks ? 0 : O_NOFOLLOW))
        if fd < 0 {
            let e = Errno.current
            if e == .noSuchFileOrDirectory || e == .notDirectory { return nil }
            if e == .tooManySymbolicLinks { throw SystemError("read", path, reason: followLinks ? "it is a loop of symbolic links" : "it is a symbolic link; refused") }
            throw SystemError("open", path, errno: e)
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = Errno.current; close(fd); throw SystemError("inspect", path, errno: e) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            let what: String = switch st.st_mode & S_IFMT {
            case S_IFIFO: "it is a FIFO (named pipe), not a regular file"
            case S_IFCHR, S_IFBLK: "it is a device, not a regular file"
            case S_IFDIR: "it is a folder, not a regular file"
            case S_IFSOCK: "it is a socket, not a regular file"
            default: "it is not a regular file"
            }
            throw SystemError("read", path, reason: what)
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        return (fd, Int(st.st_size))
    }

    /// Reads the regular file at `path` whole (see ``openRegularFile(_:followLinks:)``: no link
    /// at its last component unless `followLinks`, and a FIFO or a device in its place is
    /// refused without blocking, so hostile folder contents cannot hang a reader), refusing
    /// anything larger than `limit` bytes.
    /// - Throws: ``SystemError`` naming the path and what was wrong.
    public static func readRegularFile(_ path: String, limit: Int, followLinks: Bool = false) throws(SystemError) -> ReadResult {
        guard let (fd, size) = try openRegularFile(path, followLinks: followLinks) else { return .missing }
        defer { close(fd) }
        guard size <= limit else { throw SystemError("read", path, reason: "it is larger than \(limit) bytes") }
        return .bytes(try readWhole(fd, size: size, path: path))
    }

    /// Reads exactly `size` bytes of the open file `fd` (named `path` in errors).
    /// - Throws: ``SystemError`` when a read fails or the file changed size meanwhile.
    public static func readWhole(_ fd: Int32, size: Int, path: String) throws(SystemError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size)
        let read = out.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try readFully(fd, into: raw) } }
        let got: Int
        switch read {
        case .success(let n): got = n
        case .failure(let e): throw SystemError("read", path, errno: e)
        }
        guard got == size else { throw SystemError("read", path, reason: "it changed size while being read") }
        return out
    }

    /// Reads a file a person named (an option's value: following links, so `/dev/fd/N` and
    /// `<(…)` work) into `buffer` until the input ends or the buffer is full; returns the count.
    ///
    /// A regular file, or (with `acceptPipes`) a pipe or FIFO that a program is writing to, is
    /// read. Nothing else can hang the reader: the file is opened `O_NONBLOCK`, a device, a
    /// folder or a socket is refused before any read, and a FIFO that no program has open for
    /// writing is refused at once (its first read finds the end) instead of waiting for one.
    /// A pipe whose writer is alive is waited on, as standard input is.
    /// - Throws: ``SystemError`` naming the path and what was wrong.
    public static func readNamedInput(_ path: String, into buffer: UnsafeMutableRawBufferPointer,
                                      acceptPipes: Bool = true) throws(SystemError) -> Int {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { throw .current("open", path) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .current("inspect", path) }
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            let flags = fcntl(fd, F_GETFL)
            if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
            do { return try readFully(fd, into: buffer) } catch { throw SystemError("read", path, errno: error) }
        case S_IFIFO where acceptPipes:
            guard let base = buffer.baseAddress else { return 0 }
            var done = 0
            while done < buffer.count {
                let n = read(fd, base + done, buffer.count - done)
                if n > 0 { done += n; continue }
                if n == 0 { break }
                let e = Errno.current
                if e == .interrupted { continue }
                guard e == .wouldBlock else { throw SystemError("read", path, errno: e) }
                // A writer is there and has not written yet: wait for it (rechecking each second).
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&p, 1, 1000)
            }
            if done == 0 {
                throw SystemError("read", path, reason: "it is a pipe that nothing was written to (no program has it open for writing)")
            }
            return done
        case S_IFIFO: throw SystemError("read", path, reason: "it is a FIFO (named pipe), not a regular file")
        case S_IFCHR, S_IFBLK: throw SystemError("read", path, reason: "it is a device, not a regular file")
        case S_IFDIR: throw SystemError("read", path, reason: "it is a folder, not a file")
        default: throw SystemError("read", path, reason: "it is not a regular file")
        }
    }

    /// `fsync` of the open file `fd`: its bytes written so far are on disk when this returns.
    /// How targets other than SiteKeepSystem fsync (`tools/check-plumbing` fails on a direct
    /// call elsewhere). `EINTR` is retried.
    /// - Throws: the error number of the failed `fsync`.
    public static func sync(_ fd: Int32) throws(Errno) {
        _ = try Errno.retryingOnInterrupt { fsync(fd) }
    }

    /// ``sync(_:)`` naming `path` in its error.
    /// - Throws: ``SystemError`` "cannot fsync `path`: …".
    public static func sync(_ fd: Int32, path: String) throws(SystemError) {
        do { try sync(fd) } catch { throw SystemError("fsync", path, errno: error) }
    }

    /// `rename(2)`: moves `from` to `to`, replacing what is there, atomically on one file system.
    /// How targets other than SiteKeepSystem rename (`tools/check-plumbing` fails on a direct
    /// call elsewhere); a durable replace of a file's content is ``AtomicFile/replace(_:with:mode:temporaryFolder:syncFolder:)``.
    /// - Throws: ``SystemError`` "cannot rename `from` to `to`: …".
    public static func rename(_ from: String, to: String) throws(SystemError) {
        guard Glibc.rename(from, to) == 0 else { throw .current("rename \(from) to", to) }
    }

    /// `fsync` of a folder, so a rename or a new entry in it survives a crash.
    public static func syncFolder(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .current("open the folder", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .current("fsync the folder", path) }
    }
}
