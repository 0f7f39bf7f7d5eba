/// Where a SiteKeep store keeps its files (the file keyring among them).
///
/// Resolved once, at the edge (the CLI), from the environment: `$SITEKEEP_HOME` when set, else
/// `$XDG_DATA_HOME/sitekeep` when `XDG_DATA_HOME` is an absolute path, else
/// `$HOME/.local/share/sitekeep`. Relative values are ignored, as the XDG base directory
/// specification asks.
public struct StoreHome: Sendable, Equatable, CustomStringConvertible {
    /// Which rule chose the folder (reported by `sitekeep doctor`).
    public enum Source: String, Sendable, Equatable {
        /// `$SITEKEEP_HOME` or an explicit `--home`.
        case explicit
        /// `$XDG_DATA_HOME/sitekeep`.
        case xdgDataHome
        /// `$HOME/.local/share/sitekeep`.
        case home
    }

    /// The absolute folder path.
    public let path: String
    /// Which rule chose it.
    public let source: Source

    /// A home at an explicit folder (for `--home` and tests).
    public init(path: String) {
        self.path = path
        self.source = .explicit
    }

    private init(path: String, source: Source) {
        self.path = path
        self.source = source
    }

    /// Resolves the home: the one rule every SiteKeep program uses (the CLI's `--home`, the
    /// daemon, tests).
    ///
    /// In order: `explicit` (a `--home` value), `$SITEKEEP_HOME` when set and not empty,
    /// `$XDG_DATA_HOME/sitekeep` when `XDG_DATA_HOME` is absolute, `$HOME/.local/share/sitekeep`
    /// when `HOME` is absolute. A relative `explicit` or `$SITEKEEP_HOME` is taken relative to
    /// `workingDirectory`, and refused when none is given. Trailing slashes are dropped.
    /// - Throws: ``KeyringError/io(_:)`` naming the value that is unusable, or saying that none
    ///   of the rules yields a folder.
    public static func resolve(explicit: String? = nil, environment: [String: String],
                               workingDirectory: String? = nil) throws(KeyringError) -> StoreHome {
        func absolute(_ value: String, _ name: String) throws(KeyringError) -> String {
            guard !value.isEmpty, !value.contains("\0") else { throw .io("\(name) must be a folder path") }
            if value.hasPrefix("/") { return trimmed(value) }
            guard let cwd = workingDirectory, cwd.hasPrefix("/") else {
                throw .io("\(name) must be an absolute path, not '\(value)'")
            }
            return trimmed(trimmed(cwd) + "/" + value)
        }
        if let explicit { return StoreHome(path: try absolute(explicit, "--home"), source: .explicit) }
        if let value = environment["SITEKEEP_HOME"], !value.isEmpty {
            return StoreHome(path: try absolute(value, "SITEKEEP_HOME"), source: .explicit)
        }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return StoreHome(path: trimmed(xdg) + "/sitekeep", source: .xdgDataHome)
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return StoreHome(path: trimmed(home) + "/.local/share/sitekeep", source: .home)
        }
        throw .io("cannot find a home for the store: pass --home DIR or set SITEKEEP_HOME (or HOME) to an absolute path")
    }

    public var description: String { path }

    private static func trimmed(_ path: String) -> String {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}
