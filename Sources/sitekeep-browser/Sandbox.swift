import CWebKitGTK
import Foundation
import Glibc

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

    /// Runs `path` with `args`; its exit status and what it wrote to stderr.
    private static func run(_ path: String, _ args: [String]) -> (Int32, String) {
        var pid: pid_t = 0
        var errPipe: [Int32] = [0, 0]
        guard pipe(&errPipe) == 0 else { return (0, "") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        posix_spawn_file_actions_addclose(&actions, errPipe[0])
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + args).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        posix_spawn_file_actions_destroy(&actions)
        close(errPipe[1])
        defer { close(errPipe[0]) }
        guard rc == 0 else { return (rc, String(cString: strerror(rc))) }
        var output: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 512)
        while output.count < 4096 {
            let n = read(errPipe[0], &buf, buf.count)
            if n <= 0 { break }
            output += buf[0..<n]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7f) == 0
        return (exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), String(decoding: output, as: UTF8.self))
    }
}
