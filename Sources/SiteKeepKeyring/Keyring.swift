#if canImport(Glibc)
import Glibc
#endif
public import SiteKeepSystem

/// Opens the keyring backend a `--keyring` choice asks for.
public enum Keyring: Sendable {
    /// An opened backend and why it was chosen (shown by `sitekeep doctor`).
    public struct Opened: Sendable {
        /// The backend to use.
        public let backend: any KeyringBackend
        /// One line saying why this backend was chosen.
        public let reason: String
    }

    /// Opens the backend for `choice`.
    ///
    /// - `file`: the file keyring in `home`.
    /// - `secret-service`: the Secret Service, or an error when none answers within
    ///   `probeTimeout` seconds.
    /// - `auto`: a file keyring that already exists in `home` is kept (so the items a store
    ///   wrote never vanish because a Secret Service appeared later); otherwise the Secret
    ///   Service when it answers within `probeTimeout` seconds and has a default collection,
    ///   else the file keyring.
    ///
    /// - Parameters:
    ///   - timeout: the time limit of every Secret Service operation.
    ///   - probeTimeout: how long to wait for the Secret Service to answer the probe.
    public static func open(
        choice: KeyringChoice, home: StoreHome, timeout: Double = 5, probeTimeout: Double = 1
    ) throws(KeyringError) -> Opened {
        switch choice {
        case .file:
            let file = try FileKeyring(home: home)
            return Opened(backend: file, reason: "file keyring chosen with --keyring file (\(file.path))")
        case .secretService:
            switch SecretServiceKeyring.probe(timeout: probeTimeout) {
            case .available(let locked):
                return Opened(backend: SecretServiceKeyring(timeout: timeout),
                              reason: "Secret Service chosen with --keyring secret-service" + (locked ? " (its default collection is locked)" : ""))
            case .noDefaultCollection:
                throw .backend("the Secret Service has no default collection; create a login keyring (for example with seahorse) or use --keyring file")
            case .unavailable(let error):
                throw error
            }
        case .auto:
            if FileKeyring.exists(in: home) {
                let file = try FileKeyring(home: home)
                return Opened(backend: file, reason: "auto: keeping the existing file keyring \(file.path)")
            }
            let why: String
            switch SecretServiceKeyring.probe(timeout: probeTimeout) {
            case .available(let locked):
                return Opened(backend: SecretServiceKeyring(timeout: timeout),
                              reason: "auto: the Secret Service answered on the session bus" + (locked ? " (its default collection is locked)" : ""))
            case .noDefaultCollection:
                why = "the Secret Service has no default collection"
            case .unavailable(let error):
                why = error.description
            }
            let file = try FileKeyring(home: home)
            return Opened(backend: file, reason: "auto: file keyring \(file.path), because \(why)")
        }
    }
}

extension FileKeyring {
    /// Whether a file keyring (possibly empty) exists in `home`.
    public static func exists(in home: StoreHome) -> Bool {
        var info = stat()
        return lstat(home.path + "/" + fileName, &info) == 0
    }
}
