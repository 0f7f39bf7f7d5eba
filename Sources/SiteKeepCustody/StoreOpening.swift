#if canImport(Glibc)
import Glibc
#endif
import CLinux
public import SiteKeepKeyring
public import SiteKeepSystem

/// Why a store could not be opened: the problem, what to do about it, and a stable code
/// (`no_store`, `keyring_mismatch`, `keyring`).
public struct StoreOpenError: Error, Sendable, Equatable, CustomStringConvertible {
    public let problem: String
    public let remedy: String?
    public let code: String

    public init(_ problem: String, remedy: String?, code: String) {
        self.problem = problem
        self.remedy = remedy
        self.code = code
    }

    public var description: String { problem }
}

/// Opening one store's custody: the home, the keyring its keys live in, and the custodian over
/// them. What the daemon's `OpenStore` and the command line's one-shot readers share (no
/// Foundation, so a small executable can open a store too).
///
/// The keyring backend a store was created with is recorded in the home (`keyring-backend`),
/// so `auto` keeps using it: a Secret Service that appears later does not hide a file
/// keyring's items, and a store made on the Secret Service never falls back to an empty file.
public enum StoreOpening {
    /// The file in the home that records the keyring backend.
    public static let markerName = "keyring-backend"

    /// What ``open(home:keyring:configuration:creating:)`` returns.
    public struct Opened: Sendable {
        public let home: StoreHome
        public let keyring: any KeyringBackend
        /// Why this keyring was chosen (for `doctor` and `status`).
        public let keyringReason: String
        public let custodian: Custodian
    }

    /// Whether `home` holds a store made by `init` (a store id and a keyring or audit trail of
    /// its initialisation), as opposed to nothing or the half folder old builds left behind.
    public static func exists(home: String) -> Bool {
        guard StoreHome.storeID(at: home) != nil else { return false }
        var st = stat()
        if stat(home + "/keyring-state", &st) == 0 { return true }
        return stat(home + "/audit.log", &st) == 0 && st.st_size > 0
    }

    /// Opens the store in `home` with the keyring `choice` (`auto` follows what the store recorded).
    /// - Parameter creating: true only to create a store; otherwise a folder that holds no
    ///   store is refused and nothing is created there.
    /// - Throws: ``StoreOpenError`` (`no_store`, `keyring_mismatch`, `keyring`), or the keyring's
    ///   or custody's error.
    public static func open(home path: String, keyring choice: KeyringChoice = .auto,
                            configuration: CustodianConfiguration = CustodianConfiguration(), creating: Bool = false) throws -> Opened {
        if !creating, !exists(home: path) {
            throw StoreOpenError("there is no SiteKeep store in \(path)",
                                 remedy: "create one with 'sitekeep init --home \(path)', or point --home (or SITEKEEP_HOME) at your store",
                                 code: "no_store")
        }
        let home = StoreHome(path: path)
        let marker = home.path + "/" + markerName
        let recorded: String?
        if case .bytes(let bytes)? = try? FileIO.readRegularFile(marker, limit: 4096) {
            recorded = trimmed(bytes)
        } else {
            recorded = nil
        }
        var choice = choice
        if let recorded, let kind = KeyringKind(rawValue: recorded) {
            switch (choice, kind) {
            case (.auto, .file): choice = .file
            case (.auto, .secretService): choice = .secretService
            case (.file, .secretService), (.secretService, .file):
                throw StoreOpenError("this store keeps its keys in the \(kind.rawValue) keyring, not \(choice.rawValue)",
                                     remedy: "pass --keyring \(kind.rawValue) (or leave --keyring at auto)", code: "keyring_mismatch")
            default: break
            }
        }
        let opened: Keyring.Opened
        do {
            opened = try Keyring.open(choice: choice, home: home)
        } catch {
            if recorded == KeyringKind.secretService.rawValue {
                throw StoreOpenError("this store keeps its keys in the Secret Service, which is not available: \(error)",
                                     remedy: "start and unlock your Secret Service (gnome-keyring-daemon), then retry", code: "keyring")
            }
            throw error
        }
        let custodian = try Custodian(home: home, keyring: opened.backend, configuration: configuration)
        if recorded == nil {
            // Record the backend the first time the store is opened (creation).
            try? AtomicFile.replace(marker, with: Array((opened.backend.kind.rawValue + "\n").utf8))
        }
        return Opened(home: home, keyring: opened.backend, keyringReason: opened.reason, custodian: custodian)
    }

    /// `bytes` as text without leading and trailing white space (spaces, tabs, line endings).
    static func trimmed(_ bytes: [UInt8]) -> String {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d || b == 0x0b || b == 0x0c }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
