#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import SiteKeepSystem

/// The plain one-shot `sitekeep vault cat NAME PATH --prf-file F [--home DIR]`: what the front
/// end hands to `sitekeep-read` when no daemon runs the command, instead of the whole tool,
/// whose start-up alone takes longer than the read.
///
/// Only that form, in any order: the words `vault cat` first, two operands, one `--prf-file F`
/// (a file, not `-`), at most one `--home DIR`. Anything else (another option, `--json`,
/// `--help`, `--`, a repeated option, an operand that starts with `-`) is not this request,
/// and the whole tool runs the command.
public struct OneShotCatRequest: Sendable, Equatable {
    /// The vault's name.
    public var vault: String
    /// The file's path in the vault.
    public var path: String
    /// The file holding the PRF output (`--prf-file`).
    public var prfFile: String
    /// `--home`, when given.
    public var home: String?

    public init(vault: String, path: String, prfFile: String, home: String?) {
        self.vault = vault
        self.path = path
        self.prfFile = prfFile
        self.home = home
    }

    /// The request `arguments` (the command line after the program name) make, or nil when
    /// they are anything but the plain form.
    public init?(_ arguments: [String]) {
        guard arguments.count >= 4, arguments[0] == "vault", arguments[1] == "cat" else { return nil }
        var operands: [String] = []
        var prf: String?, home: String?
        var i = 2
        /// The value of option `name` at `i` (`name V` or `name=V`), advancing past it: nil when
        /// the argument is not that option, `.some(nil)` when its value is missing.
        func value(_ name: String) -> String?? {
            let a = arguments[i]
            if a == name {
                guard i + 1 < arguments.count else { return .some(nil) }
                i += 2
                return arguments[i - 1]
            }
            if a.hasPrefix(name + "=") { i += 1; return String(a.dropFirst(name.count + 1)) }
            return nil
        }
        while i < arguments.count {
            if let v = value("--prf-file") {
                guard let v, prf == nil else { return nil }
                prf = v
            } else if let v = value("--home") {
                guard let v, home == nil else { return nil }
                home = v
            } else {
                let a = arguments[i]
                guard !a.isEmpty, !a.hasPrefix("-") else { return nil }
                operands.append(a)
                i += 1
            }
        }
        guard operands.count == 2, let prf, !prf.isEmpty, prf != "-" else { return nil }
        self.init(vault: operands[0], path: operands[1], prfFile: prf, home: home)
    }
}

/// The executables that ship together in one folder (`sitekeep`, `sitekeep-read`,
/// `sitekeep-main`): replacing this process with one of them.
public enum SiblingExecutable {
    /// The path of `name` in this executable's folder.
    public static func path(_ name: String) -> String {
        let me = ProcessEnvironment.executablePath() ?? CommandLine.arguments[0]
        let folder = me.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(me[..<$0]) } ?? "."
        return folder + "/" + name
    }

    /// Whether `name` is there and executable.
    public static func exists(_ name: String) -> Bool {
        access(path(name), X_OK) == 0
    }

    /// Replaces this process with `name` (same arguments, environment and pid). Returns only
    /// when it cannot be run, with the reason.
    public static func exec(_ name: String, arguments: [String]) -> String {
        let program = path(name)
        let argv = ([CommandLine.arguments.first ?? "sitekeep"] + arguments).map { strdup($0) } + [nil]
        execv(program, argv)
        let why = String(cString: strerror(errno))
        for p in argv { free(p) }
        return why
    }

    /// Replaces this process with the whole tool, `sitekeep-main`; on failure prints what to do
    /// and exits 1. Never returns.
    public static func execWholeTool(_ arguments: [String]) -> Never {
        let why = exec("sitekeep-main", arguments: arguments)
        try? FileIO.writeAll(2, Array("error: cannot run \(path("sitekeep-main")): \(why)\nhint: install sitekeep-main beside sitekeep (they ship together), or reinstall SiteKeep\n".utf8))
        exit(1)
    }
}
