#if canImport(Glibc)
import Glibc
#endif
import CLinux
import Dispatch
import Synchronization
internal import SiteKeepSystem
public import SiteKeepCrypto
public import SiteKeepNames

/// A monotonic clock that counts time spent in suspend (`CLOCK_BOOTTIME`), in nanoseconds.
/// Tests inject their own.
public struct BootClock: Sendable {
    private let read: @Sendable () -> UInt64

    /// Wraps a nanosecond reader (for tests).
    package init(_ read: @escaping @Sendable () -> UInt64) { self.read = read }

    /// `CLOCK_BOOTTIME`, through SiteKeepSystem's ``Clocks/bootNanoseconds()``.
    public static let system = BootClock { Clocks.bootNanoseconds() }

    /// The current reading.
    public func nanoseconds() -> UInt64 { read() }
}

/// How presence was proved.
public enum PresenceMethod: String, Sendable {
    /// An askpass program (`SITEKEEP_ASKPASS`) approved.
    case askpass
    /// The user typed a passphrase that opens a passphrase slot.
    case passphrase
    /// The command gave a secret that opens a slot now (a passphrase, PRF bytes or a recovery
    /// code, typed or given for this command): whoever holds it could unlock anyway.
    case secret
    /// The user touched the FIDO2 security key that the key's policy names: hardware presence,
    /// asked for each use (no approval is kept for a key that needs a touch).
    case touch
}

/// Proof that the user approved one use (a client, an operation and a key) a moment ago.
///
/// Valid for at most ``maximumLifetime`` (60 s) on `CLOCK_BOOTTIME`, so a suspended laptop does
/// not keep an old approval alive; configuration may shorten that, never lengthen it. Bound to
/// what the user was shown: a proof serves only the same client (a site, the command line,
/// the ssh-agent), op and key (``check(client:op:keyID:clock:lifetime:)``), and custody refuses one issued before its last
/// unlock. Each carries the id of the prompt that made it, which the audit log records with
/// every use it approves. Only SiteKeep's modules can make one.
public struct PresenceProof: Sendable, Equatable {
    /// The hard upper bound of a proof's life.
    public static let maximumLifetime: Duration = .seconds(60)

    /// The client the user approved (a site, the command line, the ssh-agent).
    public let client: KeyUseClient
    /// The operation shown to the user.
    public let op: OpName
    /// The key shown to the user, if any.
    public let keyID: KeyID?
    /// How presence was proved.
    public let method: PresenceMethod
    /// When, on `CLOCK_BOOTTIME` (nanoseconds).
    public let issuedAtNanoseconds: UInt64
    /// The prompt's id (16 lower-case hex digits, random): shown to the user with the prompt
    /// and written to the audit log with each use this proof approves.
    public let promptID: String

    package init(client: KeyUseClient, op: OpName, keyID: KeyID?, method: PresenceMethod, issuedAtNanoseconds: UInt64,
                 promptID: String = PresenceProof.newPromptID()) {
        self.client = client
        self.op = op
        self.keyID = keyID
        self.method = method
        self.issuedAtNanoseconds = issuedAtNanoseconds
        self.promptID = promptID
    }

    /// A fresh prompt id: 8 random bytes in hex.
    package static func newPromptID() -> String { Hex.encode(SecureRandom.bytes(count: 8)) }

    /// The proof's age in milliseconds at `clock`'s current reading.
    public func ageMilliseconds(clock: BootClock = .system) -> Int {
        let now = clock.nanoseconds()
        return now <= issuedAtNanoseconds ? 0 : Int((now - issuedAtNanoseconds) / 1_000_000)
    }

    /// Checks that the proof is for `client`, `op` and `keyID` (nil: an op that names no key) and
    /// younger than `lifetime` (clamped to ``maximumLifetime``).
    /// - Throws: ``CustodyError/presenceWrongSite``, ``CustodyError/presenceWrongUse`` or
    ///   ``CustodyError/presenceExpired(ageSeconds:)``.
    public func check(client: KeyUseClient, op: OpName, keyID: KeyID?, clock: BootClock = .system,
                      lifetime: Duration = PresenceProof.maximumLifetime) throws(CustodyError) {
        guard client == self.client else { throw .presenceWrongSite }
        guard op == self.op, keyID == self.keyID else { throw .presenceWrongUse }
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
    /// Asks the user to approve `op` with `keyID` for `client`; blocks until they answer or the
    /// verifier's time limit passes.
    /// - Throws: ``CustodyError/presenceDenied``, ``CustodyError/presenceTimedOut(seconds:)``
    ///   or ``CustodyError/presenceUnavailable(_:)``.
    func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof

    /// The same, showing the user `siteLabel` (the site's name and origin, or who asks on the
    /// command line or the agent socket) where it names the client; the proof is still bound to
    /// `client`. The default shows the client's ``KeyUseClient/auditName``.
    func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof

    /// The same, for a request from the process `askerPID` (the ssh-agent's peer), whose own
    /// terminal a verifier may tell where the user answers (never asking there). The default
    /// ignores the pid.
    func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?, askerPID: Int32?) throws(CustodyError) -> PresenceProof
}

extension PresenceVerifier {
    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, op: op, keyID: keyID)
    }

    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?, askerPID: Int32?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: siteLabel, op: op, keyID: keyID)
    }
}

/// Presence through an askpass program, as `SSH_ASKPASS` works for `ssh-add -c`.
///
/// The program (an absolute path, normally from `SITEKEEP_ASKPASS`) is run directly, never
/// through a shell, with one argument: a prompt naming the key, the operation and what it is
/// for (the site's quoted name and origin when the bridge asks; the destination, then the user
/// or namespace and who asks, when the ssh-agent does), saying that an approval covers only that
/// site, op and key for at most 60 s, and giving the prompt's id (the audit log records it with
/// each use the approval serves); hidden characters are shown as `<U+XXXX>` (``PresenceText``).
/// With `dialog` (every askpass the daemon chooses, `SITEKEEP_ASKPASS` included) the argument is
/// ``PresenceText/dialog(siteLabel:op:keyID:promptID:)``'s title and lines, one fact a line, and
/// the caller sets `SSH_ASKPASS_PROMPT=confirm` so an ssh-askpass shows no passphrase field.
/// The same facts are in `SITEKEEP_PRESENCE_SITE`, `SITEKEEP_PRESENCE_OP`,
/// `SITEKEEP_PRESENCE_KEY` (`-` for none) and `SITEKEEP_PRESENCE_PROMPT`, and the site's id in
/// `SITEKEEP_PRESENCE_SITE_ID`. Exit status 0 approves; anything else denies; no answer within
/// ``timeout`` is a time-out and the program is killed.
public struct AskpassPresenceVerifier: PresenceVerifier {
    /// The program's absolute path.
    public let program: String
    /// How long the program may take.
    public let timeout: Duration
    private let clock: BootClock
    private let baseEnvironment: [String: String]?
    private let dialog: Bool

    /// - Parameters:
    ///   - environment: the program's environment (nil: this process's), to which the
    ///     `SITEKEEP_PRESENCE_*` facts are added.
    ///   - dialog: lay the argument out for a dialog (``PresenceText/dialog(siteLabel:op:keyID:promptID:)``:
    ///     a title line, then one fact a line), as `SSH_ASKPASS` shows it; else the one line
    ///     `SITEKEEP_ASKPASS` programs have always been given.
    /// - Throws: ``CustodyError/presenceUnavailable(_:)`` when `program` is not an absolute path
    ///   to an executable file.
    public init(program: String, timeout: Duration = .seconds(60), clock: BootClock = .system,
                environment: [String: String]? = nil, dialog: Bool = false) throws(CustodyError) {
        self.baseEnvironment = environment
        self.dialog = dialog
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
        guard let program = (environment ?? ProcessEnvironment.current())["SITEKEEP_ASKPASS"], !program.isEmpty else {
            throw .presenceUnavailable("SITEKEEP_ASKPASS is not set; set it to a program that asks the user (as SSH_ASKPASS does)")
        }
        return try AskpassPresenceVerifier(program: program, timeout: timeout)
    }

    /// Runs the askpass program and waits for its answer (at most ``timeout``).
    public func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }

    /// Runs the askpass program, naming the client by `siteLabel`, and waits for its answer.
    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        let promptID = PresenceProof.newPromptID()
        var env = baseEnvironment ?? ProcessEnvironment.current()
        env["SITEKEEP_TTY"] = nil
        env["SITEKEEP_PRESENCE_SITE"] = PresenceText.escaped(siteLabel, limit: PresenceText.labelLimit)
        env["SITEKEEP_PRESENCE_SITE_ID"] = client.auditName
        env["SITEKEEP_PRESENCE_OP"] = op.string
        env["SITEKEEP_PRESENCE_KEY"] = keyID?.string ?? "-"
        env["SITEKEEP_PRESENCE_PROMPT"] = promptID
        let prompt: String
        if dialog {
            let text = PresenceText.dialog(siteLabel: siteLabel, op: op, keyID: keyID, promptID: promptID)
            prompt = text.title + "\n" + text.body
        } else {
            prompt = Self.promptText(siteLabel: siteLabel, op: op, keyID: keyID, promptID: promptID, ending: "Allow?")
        }
        // Directly (no shell), in its own process group, stdin/stdout/stderr on /dev/null; on
        // time-out the whole group gets SIGTERM, then SIGKILL a second later.
        let ended: ChildProcess.Termination?
        do {
            ended = try ChildProcess.run(program, arguments: [prompt], environment: env.map { "\($0.key)=\($0.value)" }, timeout: timeout)
        } catch {
            throw .presenceUnavailable("cannot run the askpass program \(program): \(error.cause)")
        }
        guard let status = ended?.status else { throw .presenceTimedOut(seconds: Int(PresenceProof.nanoseconds(timeout) / 1_000_000_000)) }
        guard status == 0 else { throw .presenceDenied }
        return PresenceProof(client: client, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: clock.nanoseconds(),
                             promptID: promptID)
    }

    /// What the user is asked, in the order they judge it (issue 32): the key, the op, then
    /// what it is for (`siteLabel`: the site's quoted name and origin from the bridge; from the
    /// ssh-agent, the verified destination or "UNVERIFIED", the forwarding hops, then the
    /// quoted user name or namespace and who asks), what an approval covers (this site, this op
    /// and this key, for at most 60 s), and the prompt's id as the audit log shows it. The one
    /// function that lays the prompt out; callers bound and quote each string a peer chose
    /// (``PresenceText/quoted(_:limit:)``), and every hidden character left is shown as
    /// `<U+XXXX>` here. Nothing is cut after the label, so what comes last is never hidden by
    /// what a peer put first.
    static func promptText(siteLabel: String, op: OpName, keyID: KeyID?, promptID: String, ending: String) -> String {
        let s = PresenceText.escaped(siteLabel, limit: PresenceText.labelLimit)
        // Typed: printable ASCII, at most 64 bytes, shown as they are.
        let o = op.string
        guard let k = keyID?.string else {
            return "SiteKeep: \(o), for \(s). Approval covers only this site and \(o), for at most 60 s (prompt \(promptID)). \(ending)"
        }
        return "SiteKeep: key \(k), \(o), for \(s). Approval covers only this site, \(o) and key \(k), "
            + "for at most 60 s (prompt \(promptID)). \(ending)"
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
    public func requestPresence(client: KeyUseClient, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        try requestPresence(client: client, siteLabel: client.auditName, op: op, keyID: keyID)
    }

    /// The same, naming the client by `siteLabel` in the prompt.
    public func requestPresence(client: KeyUseClient, siteLabel: String, op: OpName, keyID: KeyID?) throws(CustodyError) -> PresenceProof {
        let promptID = PresenceProof.newPromptID()
        let prompt = AskpassPresenceVerifier.promptText(siteLabel: siteLabel, op: op, keyID: keyID, promptID: promptID,
                                                        ending: "Passphrase to allow: ")
        let typed = try readPassphrase(prompt)
        do {
            try custodian.verifyPassphrase(typed)
        } catch .unlockFailed {
            throw .presenceDenied
        }
        return PresenceProof(client: client, op: op, keyID: keyID, method: .passphrase, issuedAtNanoseconds: clock.nanoseconds(),
                             promptID: promptID)
    }
}

/// The approvals custody's gate keeps, and the verifier that asks for new ones: the last
/// proof of each use (client, op, key and kind of use), reused only for that same use while it
/// passes the gate's one check (``Custodian/admit(_:keyID:unlockedAtNs:beforeAsking:)``); the
/// window itself checks nothing. The lifetime is at most 60 s.
///
/// The proofs live in a ``LockBound`` of the custodian's ``LockScope``, so lock, auto-lock and
/// unlock all forget them; a proof whose prompt returns after one of those serves its own call
/// only and is not kept.
public final class PresenceWindow: Sendable {
    /// What one proof may serve.
    struct Use: Hashable, Sendable {
        let client: KeyUseClient
        let op: OpName
        let keyID: KeyID?
        /// The kind of use (the ssh-agent's destination or namespace), nil for any.
        let scope: String?
    }

    /// The most uses remembered; past it every kept approval is dropped (the next use asks).
    static let maximumUses = 256

    /// The effective lifetime (the configured value clamped to ``PresenceProof/maximumLifetime``).
    public let lifetime: Duration
    /// The verifier that asks (custody's unlock on use asks it for the secret too).
    let verifier: any PresenceVerifier
    private let proofs: LockBound<[Use: PresenceProof]>

    /// A window over `verifier` whose proofs `lockScope` clears (the custodian's
    /// ``Custodian/lockScope``); `lifetime` is clamped to 0...60 s.
    public init(verifier: any PresenceVerifier, lockScope: LockScope, lifetime: Duration = PresenceProof.maximumLifetime) {
        self.verifier = verifier
        self.lifetime = min(max(lifetime, .zero), PresenceProof.maximumLifetime)
        proofs = lockScope.cache()
    }

    /// The lock scope's generation now: a proof asked for after it is kept only if no lock or
    /// unlock came in between.
    var generation: LockScope.Generation { proofs.scope.generation }

    /// The proof kept for `use`, unchecked (the gate checks it).
    func kept(_ use: Use) -> PresenceProof? { proofs.withLock { $0[use] } }

    /// Forgets the proof kept for `use`.
    func forget(_ use: Use) { _ = proofs.withLock { $0.removeValue(forKey: use) } }

    /// Asks the user to approve `use`, showing `label`, for the process `askerPID` when known.
    func ask(_ use: Use, label: String, askerPID: Int32? = nil) throws(CustodyError) -> PresenceProof {
        try verifier.requestPresence(client: use.client, siteLabel: label, op: use.op, keyID: use.keyID, askerPID: askerPID)
    }

    /// Keeps `proof` for `use` unless a lock or unlock happened since `generation`.
    func keep(_ proof: PresenceProof, for use: Use, ifNotClearedSince generation: LockScope.Generation) {
        _ = proofs.withLock(ifNotClearedSince: generation) { p in
            if p.count >= Self.maximumUses { p.removeAll() }
            p[use] = proof
        }
    }

    /// Forgets every cached proof (lock does this through the scope).
    public func clear() { proofs.withLock { $0.removeAll() } }
}
