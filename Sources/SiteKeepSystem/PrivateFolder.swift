#if canImport(Glibc)
import Glibc
#endif

/// Folders only this user may enter: SiteKeep's store home, its sites' folders and its socket
/// folders.
///
/// The rule, everywhere: SiteKeep creates its folders with mode 0700 and never changes the mode
/// of a folder it did not create. An existing folder that is not a directory, belongs to another
/// user, or is open to group or others is refused with the fix named, so a socket path of
/// `/x.sock` can never make `/` private, and a listener another user planted cannot be trusted.
public enum PrivateFolder {
    /// Why a folder is not private.
    public enum Problem: Sendable, Equatable, CustomStringConvertible {
        /// It does not exist.
        case missing
        /// It is not a directory (a file, a symbolic link, ...).
        case notADirectory
        /// Another user owns it.
        case ownedByAnotherUser(uid: UInt32)
        /// Group or others have some permission on it.
        case openToOthers(mode: UInt32)

        public var description: String {
            switch self {
            case .missing: "it does not exist"
            case .notADirectory: "it is not a folder"
            case .ownedByAnotherUser(let uid): "it belongs to another user (uid \(uid))"
            case .openToOthers(let mode): "it is open to group or others (mode \(String(mode, radix: 8)))"
            }
        }
    }

    /// What is wrong with `path` as a private folder of this user, or nil when nothing is.
    /// Never follows a symbolic link at the last component.
    public static func problem(with path: String) -> Problem? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return .missing }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { return .notADirectory }
        guard st.st_uid == getuid() else { return .ownedByAnotherUser(uid: st.st_uid) }
        guard st.st_mode & 0o077 == 0 else { return .openToOthers(mode: UInt32(st.st_mode & 0o777)) }
        return nil
    }

    /// Creates `path` with mode 0700 when it is missing (and, with `createParents`, its missing
    /// parents, with the default mode), then checks it with ``problem(with:)``.
    /// - Throws: ``SystemError`` naming the folder, what is wrong and the fix.
    public static func ensure(_ path: String, createParents: Bool = false) throws(SystemError) {
        if problem(with: path) == .missing {
            if createParents {
                let parent = AtomicFile.folder(of: path)
                if parent != path, parent != "/", parent != ".", problem(with: parent) == .missing {
                    try ensureExists(parent)
                }
            }
            if mkdir(path, 0o700) != 0 && Errno.current != .fileExists { throw .current("create the folder", path) }
        }
        if let p = problem(with: path) {
            switch p {
            case .openToOthers:
                throw SystemError("use the folder", path, reason: "\(p); make it private with 'chmod 700 \(path)' or choose another folder")
            default:
                throw SystemError("use the folder", path, reason: "\(p); choose a folder of your own")
            }
        }
    }

    /// Creates `path` and its parents with the default mode when missing (no privacy check:
    /// for the parents of a private folder).
    static func ensureExists(_ path: String) throws(SystemError) {
        if problem(with: path) != .missing { return }
        let parent = AtomicFile.folder(of: path)
        if parent != path, parent != "/", parent != "." { try ensureExists(parent) }
        if mkdir(path, 0o755) != 0 && Errno.current != .fileExists { throw .current("create the folder", path) }
    }
}
