import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepTestSupport
import SiteKeepTPM
@testable import SiteKeepCustody

/// A keyring in memory, for tests: the same contract as the real backends.
final class InMemoryKeyring: KeyringBackend {
    let items = Mutex<[KeyringItemID: [UInt8]]>([:])
    var kind: KeyringKind { .file }
    var location: String { "memory" }

    func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) {
        items.withLock { $0[item] = blob }
    }
    func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        guard let b = items.withLock({ $0[item] }) else { throw .itemMissing(item) }
        return b
    }
    func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool {
        items.withLock { $0.removeValue(forKey: item) != nil }
    }
    func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        items.withLock { $0.keys.filter { $0.store == store && (kind == nil || $0.kind == kind) } }
    }
}

/// The backends the custody suite runs on: in memory, the file keyring, and (when tools/test
/// started a private Secret Service and set SITEKEEP_TEST_SECRET_SERVICE=1) the real one.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, file, secretService = "secret-service"
    var testDescription: String { rawValue }

    static var allCases: [Backend] {
        ProcessInfo.processInfo.environment["SITEKEEP_TEST_SECRET_SERVICE"] == "1" ? [.memory, .file, .secretService] : [.memory, .file]
    }
}

/// A backend wrapper for tests: can fail deletes (a crash between two writes) and list every
/// blob of every store it has seen (for the leak scan).
final class TestKeyring: KeyringBackend {
    let inner: any KeyringBackend
    let failDeletes = Mutex(false)
    let stores = Mutex<Set<String>>([])
    /// Items loaded so far (a test sees what custody had to read again).
    let loads = Mutex(0)
    init(_ inner: any KeyringBackend) { self.inner = inner }

    /// A fresh keyring of `backend` kind (the file keyring in its own private folder).
    convenience init(_ backend: Backend) throws {
        switch backend {
        case .memory: self.init(InMemoryKeyring())
        case .file: self.init(try FileKeyring(folder: temporaryFolder("keyring")))
        case .secretService: self.init(SecretServiceKeyring(timeout: 5))
        }
    }

    var kind: KeyringKind { inner.kind }
    var location: String { inner.location }
    func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) {
        _ = stores.withLock { $0.insert(item.store) }
        try inner.store(blob, for: item, label: label)
    }
    func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        loads.withLock { $0 += 1 }
        return try inner.load(item)
    }
    func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool {
        if failDeletes.withLock({ $0 }) { throw .io("simulated crash") }
        return try inner.delete(item)
    }
    func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] { try inner.list(store: store, kind: kind) }
    var allBlobs: [[UInt8]] {
        get throws {
            var out: [[UInt8]] = []
            for store in stores.withLock({ $0 }) {
                for item in try inner.list(store: store, kind: nil) { out.append(try inner.load(item)) }
            }
            return out
        }
    }
}

/// A settable clock for boot time and wall time.
final class TestClock: Sendable {
    let ns = Mutex<UInt64>(1_000_000_000_000)
    let wall = Mutex<Int64>(1_800_000_000)
    var boot: BootClock { BootClock { [self] in ns.withLock { $0 } } }
    var wallSeconds: @Sendable () -> Int64 { { [self] in wall.withLock { $0 } } }
    func advance(seconds: Double) {
        ns.withLock { $0 += UInt64(seconds * 1e9) }
        wall.withLock { $0 += Int64(seconds.rounded(.up)) }
    }
}

/// A fresh temporary folder per test.
func temporaryFolder(_ name: String = #function) throws -> String {
    let base = FileManager.default.temporaryDirectory.path + "/sitekeep-custody-tests"
    try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
    let path = base + "/" + String(name.prefix(30)).filter { $0.isLetter || $0.isNumber } + "-" + UUID().uuidString
    return path
}

func secret(_ s: String) throws -> SecretBytes { try SecretBytes(copying: Array(s.utf8)) }

func prfBytes(_ fill: UInt8) throws -> SecretBytes { try SecretBytes(copying: [UInt8](repeating: fill, count: 32)) }

struct Fixture {
    let home: StoreHome
    let keyring: TestKeyring
    let clock: TestClock
    let custodian: Custodian

    static let passphrase = "correct horse battery staple"

    init(_ backend: Backend = .memory, idle: Duration = .seconds(900), keyring: TestKeyring? = nil, tpm: TPMConnection? = nil) throws {
        self.home = StoreHome(path: try temporaryFolder())
        self.keyring = try keyring ?? TestKeyring(backend)
        clock = TestClock()
        var config = CustodianConfiguration(idleLifetime: idle, autoLockTimer: false, bootClock: clock.boot,
                                            wallClockSeconds: clock.wallSeconds)
        config.tpmConnection = tpm
        custodian = try Custodian(home: self.home, keyring: self.keyring, configuration: config)
    }

    /// Another custodian on the same home and keyring (a restart).
    func reopened() throws -> Custodian {
        try Custodian(home: StoreHome(path: home.path), keyring: keyring,
                      configuration: CustodianConfiguration(autoLockTimer: false, bootClock: clock.boot,
                                                            wallClockSeconds: clock.wallSeconds))
    }

    /// A key use the user approved just now (a presence proof on the fixture's clock): every
    /// team-key signature passes custody's gate with one.
    func approved(_ keyID: String, site: KeyUseClient = "test", op: OpName = .sign) -> KeyUseContext {
        KeyUseContext(client: site, op: op, presence: PresenceProof(client: site, op: op, keyID: KeyID(known: keyID), method: .askpass,
                                                                 issuedAtNanoseconds: clock.boot.nanoseconds()))
    }

    /// The store's current secret, which every change of who can unlock must give.
    func current() throws -> UnlockSecret { .passphrase(try secret(Self.passphrase)) }

    @discardableResult
    func initialize(recovery: Bool = true) throws -> InitializationResult {
        try custodian.initialize(passphrase: secret(Self.passphrase), parameters: .minimum, withRecoveryCode: recovery)
    }
}

/// A private copy of `Fixtures/legacy-store-0.1` (a store home made by sitekeep 0.1.0), with the
/// modes SiteKeep requires (git keeps none).
func legacyStore() throws -> String {
    let home = try temporaryFolder("legacy")
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let source = try Fixtures.directory().appendingPathComponent("legacy-store-0.1")
    for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
        try FileManager.default.copyItem(atPath: source.path + "/" + name, toPath: home + "/" + name)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: home + "/" + name)
    }
    return home
}
