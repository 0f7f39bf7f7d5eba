#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Bounded reads of vault files that never follow a symlink at the last component.
enum FileAccess {
    enum Outcome {
        case bytes([UInt8])
        case missing
    }

    /// Reads `path` if it is a regular file of at most `limit` bytes.
    static func read(_ path: String, limit: Int, object: String) throws(VaultError) -> Outcome {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            let e = errno
            if e == ENOENT || e == ENOTDIR { return .missing }
            if e == ELOOP { throw .io(path: object, reason: "is a symbolic link; refused") }
            throw .io(path: object, reason: String(cString: strerror(e)))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .io(path: object, reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .io(path: object, reason: "not a regular file") }
        let size = Int(st.st_size)
        guard size <= limit else { throw .tooLarge(object: object, size: size, limit: limit) }
        var buffer = [UInt8](repeating: 0, count: size)
        var done = 0
        while done < size {
            // size > 0 inside the loop, so the buffer has a base address.
            let n = buffer.withUnsafeMutableBytes { raw in Glibc.read(fd, raw.baseAddress! + done, size - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(path: object, reason: String(cString: strerror(errno)))
            }
            if n == 0 { break }
            done += n
        }
        guard done == size else { throw .io(path: object, reason: "changed size while being read") }
        return .bytes(buffer)
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether the folder holds at least one entry other than `.`/`..`.
    static func hasEntries(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let ent = readdir(dir) {
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { return true }
        }
        return false
    }
}
