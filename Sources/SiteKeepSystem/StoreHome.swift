/// Where a SiteKeep store keeps its files (the file keyring among them).
///
/// Resolved once, at the edge (the CLI, and the `sitekeep` daemon client that links no more than
/// this target), from the environment: `$SITEKEEP_HOME` when set, else
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
    /// - Throws: ``StoreHomeError`` naming the value that is unusable, or saying that none of
    ///   the rules yields a folder.
    public static func resolve(explicit: String? = nil, environment: [String: String],
                               workingDirectory: String? = nil) throws(StoreHomeError) -> StoreHome {
        func absolute(_ value: String, _ name: String) throws(StoreHomeError) -> String {
            guard !value.isEmpty, !value.contains("\0") else { throw StoreHomeError("\(name) must be a folder path") }
            if value.hasPrefix("/") { return trimmed(value) }
            guard let cwd = workingDirectory, cwd.hasPrefix("/") else {
                throw StoreHomeError("\(name) must be an absolute path, not '\(value)'")
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
        throw StoreHomeError("cannot find a home for the store: pass --home DIR or set SITEKEEP_HOME (or HOME) to an absolute path")
    }

    public var description: String { path }

    /// The store's id (its `store-id` file, written by `init`), nil when the folder holds no
    /// store. What a daemon client names in every control request.
    public func storeID() -> String? { Self.storeID(at: path) }

    /// ``storeID()`` for the store in `folder`.
    public static func storeID(at folder: String) -> String? {
        guard case .bytes(let bytes)? = try? FileIO.readRegularFile(folder + "/store-id", limit: 4096) else { return nil }
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0a || b == 0x0d || b == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return nil }
        let id = String(decoding: bytes[first...last], as: UTF8.self)
        return id.isEmpty ? nil : id
    }

    private static func trimmed(_ path: String) -> String {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        return path
    }
}

/// Why no store home could be resolved: the message names the value and the fix.
public struct StoreHomeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was wrong and what to do.
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
