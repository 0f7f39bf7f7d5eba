#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Synchronization
internal import CLinux
public import SiteKeepCrypto

/// A monotonic clock that counts time spent in suspend (`CLOCK_BOOTTIME`), in nanoseconds.
/// Tests inject their own.
public struct BootClock: Sendable {
    private let read: @Sendable () -> UInt64

    /// Wraps a nanosecond reader (for tests).
    package init(_ read: @escaping @Sendable () -> UInt64) { self.read = read }

    /// `CLOCK_BOOTTIME` through `sitekeep_boottime_ns()`.
    public static let system = BootClock { UInt64(max(0, sitekeep_boottime_ns())) }

    /// The current reading.
    public func nanoseconds() -> UInt64 { read() }
}

/// How presence was proved.
public enum PresenceMethod: String, Sendable, Codable {
    /// An askpass program (`SITEKEEP_ASKPASS`) approved.
    case askpass
    /// The user typed a passphrase that opens a passphrase slot.
    case passphrase
}

/// Proof that the user approved a use of a key for one site, a moment ago.
///
/// Valid for at most ``maximumLifetime`` (60 s) on `CLOCK_BOOTTIME`, so a suspended laptop does
/// not keep an old approval alive; configuration may shorten that, never lengthen it. Bound to
/// the site that asked: a proof for one site never serves another. Only SiteKeep's modules can
/// make one.
public struct PresenceProof: Sendable, Equatable {
    /// The hard upper bound of a proof's life.
    public static let maximumLifetime: Duration = .seconds(60)

    /// The site the user approved.
    public let site: String
    /// The operation shown to the user.
    public let op: String
    /// The key shown to the user, if any.
    public let keyID: String?
    /// How presence was proved.
    public let method: PresenceMethod
    /// When, on `CLOCK_BOOTTIME` (nanoseconds).
    public let issuedAtNanoseconds: UInt64

    package init(site: String, op: String, keyID: String?, method: PresenceMethod, issuedAtNanoseconds: UInt64) {
        self.site = site
        self.op = op
        self.keyID = keyID
        self.method = method
        self.issuedAtNanoseconds = issuedAtNanoseconds
    }

    /// The proof's age in milliseconds at `clock`'s current reading.
    public func ageMilliseconds(clock: BootClock = .system) -> Int {
        let now = clock.nanoseconds()
        return now <= issuedAtNanoseconds ? 0 : Int((now - issuedAtNanoseconds) / 1_000_000)
    }

    /// Checks that the proof is for `site` and younger than `lifetime` (clamped to
    /// ``maximumLifetime``).
    /// - Throws: ``CustodyError/presenceWrongSite`` or ``CustodyError/presenceExpired(ageSeconds:)``.
    public func check(site: String, clock: BootClock = .system, lifetime: Duration = PresenceProof.maximumLifetime) throws(CustodyError) {
        guard site == self.site else { throw .presenceWrongSite }
        let limitNs = Self.nanoseconds(min(lifetime, Self.maximumLifetime))
        let now = clock.nanoseconds()
        // A reading before the issue time means a different clock or a forged proof: refuse.
        guard now >= issuedAtNanoseconds else { throw .presenceExpired(ageSeconds: 0) }
        let age = now - issuedAtNanoseconds
        guard age <= limitNs else { throw .presenceExpired(ageSeconds: Int(age / 1_000_000_000)) }
    }

    static func nanoseconds(_ d: Duration) -> UInt64 {
        let c = d.components
        guard c.seconds >= 0 else { return 0 }
        return UInt64(c.seconds) * 1_000_000_000 + UInt64(max(0, c.attoseconds) / 1_000_000_000)
    }
}

/// A way of proving the user is present now.
public protocol PresenceVerifier: Sendable {
    /// Asks the user to approve `op` with `keyID` for `site`; blocks until they answer or the
    /// verifier's time limit passes.
    /// - Throws: ``CustodyError/presenceDenied``, ``CustodyError/presenceTimedOut(seconds:)``
    ///   or ``CustodyError/presenceUnavailable(_:)``.
    func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof

    /// The same, showing the user `siteLabel` (the site's name and origin) where it names the
    /// site; the proof is still bound to the site id `site`. The default shows `site`.
    func requestPresence(site: String, siteLabel: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof
}

extension PresenceVerifier {
    public func requestPresence(site: String, siteLabel: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        try requestPresence(site: site, op: op, keyID: keyID)
    }
}

/// Presence through an askpass program, as `SSH_ASKPASS` works for `ssh-add -c`.
///
/// The program (an absolute path, normally from `SITEKEEP_ASKPASS`) is run directly, never
/// through a shell, with one argument: a prompt naming the site (its name and origin when the
/// bridge asks), the operation and the key. The same facts are in `SITEKEEP_PRESENCE_SITE`,
/// `SITEKEEP_PRESENCE_OP` and `SITEKEEP_PRESENCE_KEY`, and the site's id in
/// `SITEKEEP_PRESENCE_SITE_ID`. Exit status 0 approves; anything else denies; no answer within
/// ``timeout`` is a time-out and the program is killed.
public struct AskpassPresenceVerifier: PresenceVerifier {
    /// The program's absolute path.
    public let program: String
    /// How long the program may take.
    public let timeout: Duration
    private let clock: BootClock

    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when `program` is not an absolute path
    ///   to an executable file.
    public init(program: String, timeout: Duration = .seconds(60), clock: BootClock = .system) throws(CustodyError) {
        guard program.hasPrefix("/") else {
            throw .presenceUnavailable("SITEKEEP_ASKPASS must be an absolute path to a program, got '\(program.prefix(200))'")
        }
        guard access(program, X_OK) == 0 else {
            throw .presenceUnavailable("the askpass program \(program) is not an executable file")
        }
        self.program = program
        self.timeout = timeout
        self.clock = clock
    }

    /// The verifier named by `SITEKEEP_ASKPASS`.
    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when it is unset or unusable.
    public static func fromEnvironment(_ environment: [String: String]? = nil,
                                       timeout: Duration = .seconds(60)) throws(CustodyError) -> AskpassPresenceVerifier {
        guard let program = (environment ?? ProcessInfo.processInfo.environment)["SITEKEEP_ASKPASS"], !program.isEmpty else {
            throw .presenceUnavailable("SITEKEEP_ASKPASS is not set; set it to a program that asks the user (as SSH_ASKPASS does)")
        }
        return try AskpassPresenceVerifier(program: program, timeout: timeout)
    }

    static func printable(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.prefix(200).filter { $0.value >= 0x20 && $0.value != 0x7f }))
    }

    /// Runs the askpass program and waits for its answer (at most ``timeout``).
    public func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        try requestPresence(site: site, siteLabel: site, op: op, keyID: keyID)
    }

    /// Runs the askpass program, naming the site by `siteLabel`, and waits for its answer.
    public func requestPresence(site: String, siteLabel: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        let s = Self.printable(siteLabel), o = Self.printable(op), k = keyID.map(Self.printable) ?? "-"
        var env = ProcessInfo.processInfo.environment
        env["SITEKEEP_PRESENCE_SITE"] = s
        env["SITEKEEP_PRESENCE_SITE_ID"] = Self.printable(site)
        env["SITEKEEP_PRESENCE_OP"] = o
        env["SITEKEEP_PRESENCE_KEY"] = k
        let argv = [program, "SiteKeep: \(s) asks to \(o) with key \(k). Allow?"]
        let status = try ChildProcess.run(program: program, arguments: argv,
                                          environment: env.map { "\($0.key)=\($0.value)" }, timeout: timeout)
        guard let status else { throw .presenceTimedOut(seconds: Int(PresenceProof.nanoseconds(timeout) / 1_000_000_000)) }
        guard status == 0 else { throw .presenceDenied }
        return PresenceProof(site: site, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: clock.nanoseconds())
    }
}

/// Presence by re-entering a passphrase that opens one of the store's passphrase slots.
///
/// `readPassphrase` asks the user (a terminal prompt, a pinentry); it receives a prompt text and
/// returns the typed bytes in guarded memory, or throws ``CustodyError/presenceDenied`` when
/// the user cancels. A wrong passphrase is ``CustodyError/presenceDenied`` and counts towards the
/// unlock back-off.
public struct PassphrasePresenceVerifier: PresenceVerifier {
    private let custodian: Custodian
    private let clock: BootClock
    private let readPassphrase: @Sendable (String) throws(CustodyError) -> SecretBytes

    /// A verifier checking typed passphrases against `custodian`'s passphrase slots.
    public init(custodian: Custodian, clock: BootClock = .system,
                readPassphrase: @escaping @Sendable (String) throws(CustodyError) -> SecretBytes) {
        self.custodian = custodian
        self.clock = clock
        self.readPassphrase = readPassphrase
    }

    /// Asks for the passphrase and checks it (one Argon2id derivation per passphrase slot).
    public func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        try requestPresence(site: site, siteLabel: site, op: op, keyID: keyID)
    }

    /// The same, naming the site by `siteLabel` in the prompt.
    public func requestPresence(site: String, siteLabel: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        let prompt = "SiteKeep: \(AskpassPresenceVerifier.printable(siteLabel)) asks to \(AskpassPresenceVerifier.printable(op))"
            + " with key \(keyID.map(AskpassPresenceVerifier.printable) ?? "-"). Passphrase to allow: "
        let typed = try readPassphrase(prompt)
        do {
            try custodian.verifyPassphrase(typed)
        } catch .unlockFailed {
            throw .presenceDenied
        }
        return PresenceProof(site: site, op: op, keyID: keyID, method: .passphrase, issuedAtNanoseconds: clock.nanoseconds())
    }
}

/// Remembers the last presence proof per site for the bridge: a still-valid proof for the same
/// site is reused; otherwise the verifier asks anew. The lifetime is at most 60 s.
public final class PresenceWindow: Sendable {
    /// The effective lifetime (the configured value clamped to ``PresenceProof/maximumLifetime``).
    public let lifetime: Duration
    private let verifier: any PresenceVerifier
    private let clock: BootClock
    private let proofs = Mutex<[String: PresenceProof]>([:])

    /// A window over `verifier`; `lifetime` is clamped to 0...60 s.
    public init(verifier: any PresenceVerifier, lifetime: Duration = PresenceProof.maximumLifetime, clock: BootClock = .system) {
        self.verifier = verifier
        self.lifetime = min(max(lifetime, .zero), PresenceProof.maximumLifetime)
        self.clock = clock
    }

    /// A valid proof for `site`: the cached one when still young enough, else a new one (the
    /// user is shown `siteLabel`, when given, rather than the site id).
    public func proof(site: String, siteLabel: String? = nil, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        if let cached = proofs.withLock({ $0[site] }) {
            do {
                try cached.check(site: site, clock: clock, lifetime: lifetime)
                return cached
            } catch {
                _ = proofs.withLock { $0.removeValue(forKey: site) }
            }
        }
        let fresh = try verifier.requestPresence(site: site, siteLabel: siteLabel ?? site, op: op, keyID: keyID)
        try fresh.check(site: site, clock: clock, lifetime: lifetime)
        proofs.withLock { $0[site] = fresh }
        return fresh
    }

    /// Forgets every cached proof (on lock).
    public func clear() { proofs.withLock { $0.removeAll() } }
}

/// Runs a program directly (no shell) in its own process group, with stdin/stdout/stderr on
/// /dev/null, and waits at most `timeout`. On time-out the whole group gets SIGTERM, then
/// SIGKILL a second later, so a script's children do not outlive it.
enum ChildProcess {
    /// The exit status (or 128 + signal), or nil on time-out.
    static func run(program: String, arguments: [String], environment: [String], timeout: Duration) throws(CustodyError) -> Int32? {
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attr, 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        func cStrings(_ list: [String]) -> [UnsafeMutablePointer<CChar>?] { list.map { strdup($0) } + [nil] }
        let argv = cStrings(arguments), envp = cStrings(environment)
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, program, &actions, &attr, argv, envp)
        guard rc == 0 else { throw .presenceUnavailable("cannot run the askpass program \(program): \(String(cString: strerror(rc)))") }

        let deadline = ContinuousClock.now + timeout
        var status: Int32 = 0
        while true {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { return decode(status) }
            if r < 0 && errno != EINTR { return 127 }
            if ContinuousClock.now >= deadline { break }
            usleep(5_000)
        }
        kill(-pid, SIGTERM)
        let killAt = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < killAt {
            if waitpid(pid, &status, WNOHANG) == pid { kill(-pid, SIGKILL); return nil }
            usleep(5_000)
        }
        kill(-pid, SIGKILL)
        _ = waitpid(pid, &status, 0)
        return nil
    }

    static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
