#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux

/// The presence program (`SITEKEEP_ASKPASS`), checked before the daemon starts.
public enum Askpass {
    /// Refuses a `SITEKEEP_ASKPASS` that cannot work (relative, missing, not an executable file)
    /// at start, rather than at the first key use ("no presence service is configured").
    /// - Throws: ``DaemonError`` `bad_askpass`, naming the path (printable characters only).
    public static func check(_ environment: [String: String]) throws(DaemonError) {
        guard let program = environment["SITEKEEP_ASKPASS"], !program.isEmpty else { return }
        var info = stat()
        let why: String? = !program.hasPrefix("/") ? "is not an absolute path"
            : stat(program, &info) != 0 ? "does not exist"
            : info.st_mode & S_IFMT != S_IFREG ? "is not a regular file"
            : access(program, X_OK) != 0 ? "is not executable" : nil
        if let why {
            throw DaemonError("SITEKEEP_ASKPASS=\(String(String.UnicodeScalarView(program.unicodeScalars.prefix(200).filter { $0.value >= 0x20 && $0.value != 0x7f }))) \(why), so no key use could ever be approved",
                              remedy: "set SITEKEEP_ASKPASS to the absolute path of an executable program that asks the user (chmod +x it), or unset it", code: "bad_askpass")
        }
    }
}
