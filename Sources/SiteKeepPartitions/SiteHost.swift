import SiteKeepSystem
import SiteKeepCrypto
#if canImport(Glibc)
import Glibc
#endif

/// An executable a site accepts as its host (`sitekeep site host add SITE PATH`): a process
/// running it may bind a bridge connection to the site. The SiteKeep browser is every site's
/// host without being listed.
///
/// Where the user can change the file at `path` (it, or a folder above it, is writable by this
/// user, as for a program in the home folder or a build folder), the file's SHA-256 when it was
/// added is kept and must still match, so another program of the user cannot put its own code
/// there. A path only root can change (`/usr/bin/...`) is trusted as a path, so a package
/// update keeps the host.
public struct SiteHost: Sendable, Hashable, CustomStringConvertible {
    /// The longest path kept.
    public static let maximumPathBytes = 4096

    /// The executable's absolute path, symbolic links resolved when it was added.
    public let path: String
    /// The SHA-256 (64 lower-case hex digits) of the file when it was added; nil when the path
    /// is trusted as a path.
    public let sha256: String?

    /// A host as stored; validates the form only.
    /// - Throws: ``PartitionError/invalidValue(_:)`` naming what is wrong.
    public init(path: String, sha256: String?) throws(PartitionError) {
        guard path.hasPrefix("/"), path.utf8.count <= Self.maximumPathBytes,
              !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalidValue("a host's path must be absolute, printable and at most \(Self.maximumPathBytes) bytes")
        }
        if let d = sha256 {
            guard d.utf8.count == 64, d.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                throw .invalidValue("a host's SHA-256 must be 64 lower-case hex digits")
            }
        }
        self.path = path
        self.sha256 = sha256
    }

    /// The host for the executable at `typed` as it is now: the path resolved (`realpath`), and
    /// its SHA-256 kept when this user could change it (see the type's discussion).
    /// - Throws: ``PartitionError/invalidValue(_:)`` when there is no executable regular file there.
    public static func adding(_ typed: String) throws(PartitionError) -> SiteHost {
        guard let resolved = realpath(typed, nil) else {
            throw .invalidValue("no file at \(Self.quoted(typed)): \(Errno.current); give the path of the host's executable")
        }
        let path = String(cString: resolved)
        free(resolved)
        var st = stat()
        guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw .invalidValue("\(Self.quoted(path)) is not a regular file; give the path of the host's executable")
        }
        guard access(path, X_OK) == 0 else {
            throw .invalidValue("\(Self.quoted(path)) is not executable; give the path of the host's executable")
        }
        guard changeableByThisUser(path) else { return try SiteHost(path: path, sha256: nil) }
        guard let digest = fileSHA256(path) else {
            throw .invalidValue("cannot read \(Self.quoted(path)) to record its SHA-256: \(Errno.current)")
        }
        return try SiteHost(path: path, sha256: digest)
    }

    /// Whether this user can change the file at `path` or replace it: the file or a folder
    /// above it is writable by this user (root can change everything).
    public static func changeableByThisUser(_ path: String) -> Bool {
        if getuid() == 0 { return true }
        var current = path
        while true {
            var st = stat()
            guard stat(current, &st) == 0 else { return true }
            if st.st_uid == getuid() || access(current, W_OK) == 0 { return true }
            guard let slash = current.lastIndex(of: "/"), current != "/" else { return false }
            current = slash == current.startIndex ? "/" : String(current[..<slash])
        }
    }

    /// The SHA-256 (lower-case hex) of the file at `path`, read in 1 MiB pieces; nil when it
    /// cannot be read.
    public static func fileSHA256(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var hasher = SHA256.Hasher()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { if errno == EINTR { continue }; return nil }
            if n == 0 { break }
            hasher.update(chunk[0..<n])
        }
        return Hex.encode(hasher.finalize())
    }

    private static func quoted(_ path: String) -> String { "\"" + DisplayText.escaped(path) + "\"" }

    public var description: String { sha256.map { "\(path) (SHA-256 \($0.prefix(12))…)" } ?? path }
}
