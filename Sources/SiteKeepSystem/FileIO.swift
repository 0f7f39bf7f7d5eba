#if canImport(Glibc)
import Glibc
#endif

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

    /// Reads the regular file at `path` whole, never following a symbolic link at its last
    /// component, refusing anything larger than `limit` bytes or not a regular file. A FIFO or
    /// a device in its place is refused without blocking (the file is opened `O_NONBLOCK` and
    /// checked before any read), so hostile folder contents cannot hang a reader.
    /// - Throws: ``SystemError`` naming the path and what was wrong.
    public static func readRegularFile(_ path: String, limit: Int) throws(SystemError) -> ReadResult {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        if fd < 0 {
            let e = Errno.current
            if e == .noSuchFileOrDirectory || e == .notDirectory { return .missing }
            if e == .tooManySymbolicLinks { throw SystemError("read", path, reason: "it is a symbolic link; refused") }
            throw SystemError("open", path, errno: e)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .current("inspect", path) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw SystemError("read", path, reason: "it is not a regular file") }
        let size = Int(st.st_size)
        guard size <= limit else { throw SystemError("read", path, reason: "it is larger than \(limit) bytes") }
        var out = [UInt8](repeating: 0, count: size)
        let read = out.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try readFully(fd, into: raw) } }
        let got: Int
        switch read {
        case .success(let n): got = n
        case .failure(let e): throw SystemError("read", path, errno: e)
        }
        guard got == size else { throw SystemError("read", path, reason: "it changed size while being read") }
        return .bytes(out)
    }

    /// `fsync` of a folder, so a rename or a new entry in it survives a crash.
    public static func syncFolder(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .current("open the folder", path) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .current("fsync the folder", path) }
    }
}
