#if canImport(Glibc)
import Glibc
#endif
import CLinux
import SiteKeepCrypto
import SiteKeepSystem

/// A store's home folder, made private (0700), and its random, persisted store id.
///
/// The store id scopes every keyring item of the store, so two stores sharing one keyring
/// (two `SITEKEEP_HOME`s on one login keyring) never see each other's items, and a slot moved
/// from one store to another does not open.
struct StoreDirectory: Sendable, Equatable {
    /// The folder's absolute path.
    let path: String
    /// The store id: 32 lowercase hex characters, created on first use.
    let storeID: String

    /// Opens (creating if needed) the home folder at `path` with mode 0700 and reads or creates
    /// its store id (file `store-id`, 0600).
    /// - Throws: ``CustodyError/insecureHome(_:)`` when the folder is not a directory owned by
    ///   this user with no group or other permissions; ``CustodyError/io(_:)`` on other failures.
    init(path: String) throws(CustodyError) {
        guard path.hasPrefix("/") else { throw .insecureHome("'\(path)' is not an absolute path") }
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        try Files.ensurePrivateDirectory(trimmed)
        self.path = trimmed
        let idPath = trimmed + "/store-id"
        if let existing = try Files.readIfExists(idPath, limit: 128) {
            let text = String(decoding: existing, as: UTF8.self).trimmingSpaces()
            guard text.count == 32, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw .insecureHome("\(idPath) does not hold a SiteKeep store id; restore it or use another home")
            }
            storeID = text
        } else {
            let id = Hex.encode(SecureRandom.bytes(count: 16))
            try Files.writeAtomically(Array((id + "\n").utf8), to: idPath)
            storeID = id
        }
    }

    /// The path of a file in the home.
    func file(_ name: String) -> String { path + "/" + name }
}

extension String {
    func trimmingSpaces() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\n" || f == "\r" || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\n" || l == "\r" || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// Small, careful file helpers: private modes, atomic replacement, bounded reads (the last
/// two, and locking, are SiteKeepSystem's, with custody's error type).
enum Files {

    /// Creates `path` as a 0700 directory if missing; refuses one that is not a directory, not
    /// ours or open to group/others.
    static func ensurePrivateDirectory(_ path: String) throws(CustodyError) {
        var st = stat()
        if lstat(path, &st) != 0 {
            guard Errno.current == .noSuchFileOrDirectory else { throw .io("\(SystemError.current("inspect", path))") }
            // Create missing parents (0700 for the last component only matters).
            let parent = AtomicFile.folder(of: path)
            if parent != path, parent != "/", !exists(parent) {
                try ensurePrivateDirectory(parent)
            }
            do { try PrivateFolder.make(path) } catch { throw .io("\(error)") }
            guard lstat(path, &st) == 0 else { throw .io("\(SystemError.current("inspect", path))") }
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .insecureHome("\(path) is not a directory") }
        guard st.st_uid == getuid() else { throw .insecureHome("\(path) belongs to another user") }
        guard st.st_mode & 0o077 == 0 else {
            throw .insecureHome("\(path) is open to group or others (mode \(String(st.st_mode & 0o777, radix: 8))); run 'chmod 700 \(path)'")
        }
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Reads at most `limit` bytes of a regular file (never through a link, never blocking on a
    /// FIFO); nil when it does not exist.
    static func readIfExists(_ path: String, limit: Int) throws(CustodyError) -> [UInt8]? {
        do {
            switch try FileIO.readRegularFile(path, limit: limit) {
            case .bytes(let bytes): return bytes
            case .missing: return nil
            }
        } catch { throw .io("\(error)") }
    }

    /// Writes `bytes` to `path` (mode 0600) atomically: ``AtomicFile/replace(_:with:mode:)``.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws(CustodyError) {
        do { try AtomicFile.replace(path, with: bytes) } catch { throw .io("\(error)") }
    }

    /// Writes all of `bytes` to `fd`; the error number when a write fails.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(Errno) {
        try FileIO.writeAll(fd, bytes)
    }

    /// Runs `body` holding an exclusive `flock` on the lock file at `path` (created 0600 when
    /// missing, never removed), which serialises it with every other process and thread doing
    /// the same. The lock goes with the file descriptor, also when `body` throws or the process dies.
    static func withExclusiveLock<R: ~Copyable>(_ path: String, _ body: () throws(CustodyError) -> R) throws(CustodyError) -> R {
        do {
            return try FileLock.withLock(path, body)
        } catch {
            switch error {
            case .lock(let e): throw .io("\(e)")
            case .body(let e): throw e
            }
        }
    }

    static func fsyncDirectory(_ path: String) {
        try? FileIO.syncFolder(path)
    }
}
