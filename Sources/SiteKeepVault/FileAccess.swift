#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SiteKeepSystem

/// Bounded reads of vault files that never follow a symlink at the last component.
enum FileAccess {
    enum Outcome {
        case bytes([UInt8])
        case missing
    }

    /// Reads `path` if it is a regular file of at most `limit` bytes (no link at the last
    /// component; a FIFO or a device in its place is refused without blocking).
    static func read(_ path: String, limit: Int, object: String) throws(VaultError) -> Outcome {
        let opened: (fd: Int32, size: Int)?
        do { opened = try FileIO.openRegularFile(path) } catch { throw .io(path: object, reason: error.cause) }
        guard let (fd, size) = opened else { return .missing }
        defer { close(fd) }
        guard size <= limit else { throw .tooLarge(object: object, size: size, limit: limit) }
        do { return .bytes(try FileIO.readWhole(fd, size: size, path: object)) } catch { throw .io(path: object, reason: error.cause) }
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
