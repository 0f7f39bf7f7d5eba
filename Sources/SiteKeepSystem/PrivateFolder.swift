#if canImport(Glibc)
import Glibc
#endif
import CLinux

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

    /// Creates the folder `path` with exactly `mode`, whatever the process umask or the parent's
    /// default ACL would make of the mode `mkdir` is given (a umask of 0177 would otherwise leave
    /// a folder its owner cannot enter).
    ///
    /// The mode is set through a descriptor opened with `O_NOFOLLOW`, so a link swapped in after
    /// the `mkdir` is never followed.
    /// - Returns: true when this call created the folder, false when something already existed
    ///   at `path` (its mode is left alone: SiteKeep never changes a folder it did not create).
    /// - Throws: ``SystemError`` naming the folder and the step that failed.
    @discardableResult
    public static func make(_ path: String, mode: UInt32 = 0o700) throws(SystemError) -> Bool {
        guard mkdir(path, mode_t(mode)) == 0 else {
            if Errno.current == .fileExists { return false }
            throw .current("create the folder", path)
        }
        try setMode(path, mode)
        return true
    }

    /// Creates every missing folder above `path` the way `mkdir -p` does: mode 0755 narrowed by
    /// the umask, but always with read, write and search for the owner.
    /// - Throws: ``SystemError`` naming the first folder that could not be made.
    public static func makeParents(of path: String) throws(SystemError) {
        let parent = AtomicFile.folder(of: path)
        guard parent != path, parent != "/", parent != ".", problem(with: parent) == .missing else { return }
        try makeParents(of: parent)
        guard mkdir(parent, 0o755) == 0 else {
            if Errno.current == .fileExists { return }
            throw .current("create the folder", parent)
        }
        var st = stat()
        if stat(parent, &st) == 0, st.st_mode & 0o700 != 0o700 { try setMode(parent, UInt32(st.st_mode & 0o7777) | 0o700) }
    }

    private static func setMode(_ path: String, _ mode: UInt32) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw .current("open the new folder", path) }
        defer { close(fd) }
        guard fchmod(fd, mode_t(mode)) == 0 else { throw .current("set the mode of", path) }
    }

    /// Creates `path` with mode 0700 when it is missing (and, with `createParents`, its missing
    /// parents, with the default mode), then checks it with ``problem(with:)``.
    /// - Throws: ``SystemError`` naming the folder, what is wrong and the fix.
    public static func ensure(_ path: String, createParents: Bool = false) throws(SystemError) {
        if problem(with: path) == .missing {
            if createParents { try makeParents(of: path) }
            try make(path)
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
}
