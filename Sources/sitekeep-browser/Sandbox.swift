import CWebKitGTK
import Foundation
import Glibc
import SiteKeepSystem

/// WebKit runs every web process in a bubblewrap sandbox, which needs unprivileged user
/// namespaces. Where the system blocks them (a sysctl, an AppArmor rule, a container without
/// them), WebKit aborts the whole app when its first page starts. The browser asks bubblewrap
/// first, with the namespaces WebKit asks it for, and stops with a message saying what is wrong;
/// it never turns the sandbox off.
enum SandboxCheck {
    static let bwrap = "/usr/bin/bwrap"

    /// Why the browser cannot start with WebKit's sandbox, or nil when it can.
    static func problem(environment: [String: String]) -> String? {
        if let v = environment["WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS"], !v.isEmpty {
            return """
            WEBKIT_DISABLE_SANDBOX_THIS_IS_DANGEROUS is set: sitekeep-browser does not run pages without \
            WebKit's sandbox. Unset it (if the sandbox fails, allow user namespaces instead).
            """
        }
        guard FileManager.default.isExecutableFile(atPath: bwrap) else {
            return "bubblewrap (\(bwrap)), which WebKit's sandbox runs pages in, is missing: install the bubblewrap package."
        }
        let (status, said) = run(bwrap, ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                                         "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"])
        guard status != 0 else { return nil }
        let reason = said.trimmingCharacters(in: .whitespacesAndNewlines)
        return """
        WebKit's sandbox cannot start here: bubblewrap cannot create the namespaces it runs pages in \
        (\(reason.isEmpty ? "bwrap exited with status \(status)" : reason)). This system blocks unprivileged \
        user namespaces, and SiteKeep never turns WebKit's sandbox off. Allow them (for example \
        'sysctl kernel.unprivileged_userns_clone=1' or 'sysctl user.max_user_namespaces=15000', or, on \
        Ubuntu 24.04 and later, an AppArmor profile granting 'userns' to sitekeep-browser), then start it again.
        """
    }

    /// Runs `path` with `args`; its exit status and what it wrote to stderr (at most 4 KiB).
    private static func run(_ path: String, _ args: [String]) -> (Int32, String) {
        do {
            let (ended, said) = try ChildProcess.capture(path, arguments: args, streams: .error, limit: 4096, ownProcessGroup: false)
            return (ended.status, String(decoding: said, as: UTF8.self))
        } catch {
            return (127, error.cause)
        }
    }
}
