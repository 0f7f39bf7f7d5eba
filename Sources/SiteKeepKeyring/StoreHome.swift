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

    /// Resolves the home from environment variables.
    /// - Throws: ``KeyringError/io(_:)`` when none of the rules yields an absolute path.
    public static func resolve(environment: [String: String]) throws(KeyringError) -> StoreHome {
        if let explicit = environment["SITEKEEP_HOME"], !explicit.isEmpty {
            guard explicit.hasPrefix("/") else {
                throw .io("SITEKEEP_HOME must be an absolute path, not '\(explicit)'")
            }
            return StoreHome(path: trimmed(explicit), source: .explicit)
        }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return StoreHome(path: trimmed(xdg) + "/sitekeep", source: .xdgDataHome)
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return StoreHome(path: trimmed(home) + "/.local/share/sitekeep", source: .home)
        }
        throw .io("cannot find a home for the store: set SITEKEEP_HOME (or HOME) to an absolute path")
    }

    public var description: String { path }

    private static func trimmed(_ path: String) -> String {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}
