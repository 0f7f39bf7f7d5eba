public import SiteKeepNames
import SiteKeepSystem

/// Who is at the other end of an agent connection, from `SO_PEERCRED`.
public struct AgentPeer: Sendable, Equatable {
    /// The peer's process id when it connected.
    public let pid: Int32
    /// The peer's user id.
    public let uid: UInt32
    /// The peer's command name (`/proc/PID/comm`), when it could be read.
    public let command: String?
    /// When the peer process started (`/proc/PID/stat` field 22, clock ticks after boot), read
    /// while a pidfd of the process that connected pinned it (``AgentSocketServer``): with the
    /// pid it names that process and no later one given the same pid. Nil when it could not be
    /// read; no approval is then kept for the peer.
    public let startTime: UInt64?

    public init(pid: Int32, uid: UInt32, command: String?, startTime: UInt64? = nil) {
        self.pid = pid
        self.uid = uid
        self.command = command
        self.startTime = startTime
    }

    /// `PID@START`: the one process an approval kept for this peer serves; nil when the start
    /// time is unknown (then none is kept).
    public var process: String? { startTime.map { "\(pid)@\($0)" } }

    /// `ssh (pid 4242)`: who asks, for the daemon's log (the command name is only a hint: a
    /// process chooses its own, so hidden characters in it are shown as `<U+XXXX>`).
    public var label: String { "\(command.map { PresenceText.escaped($0, limit: 32) } ?? "a process") (pid \(pid))" }
}

/// Where a key the agent offers comes from.
public enum AgentKeyOrigin: Sendable, Equatable {
    /// A SiteKeep team key whose SSH policy is on (`sitekeep team ssh enable`).
    case team
    /// A key the user added through the agent socket (`ssh-add`), with the comment it was
    /// given and whether each use is confirmed (`ssh-add -c`: no approval is kept).
    case added(comment: String, confirm: Bool)
}

/// A key the agent offers: a team key whose SSH policy is on, or a key added with `ssh-add`.
public struct AgentIdentity: Sendable, Equatable {
    /// The team key's id.
    public let keyID: String
    /// Its display name.
    public let name: String
    /// The version listed (the current, signing one).
    public let version: Int
    /// Its algorithm.
    public let algorithm: SigningAlgorithm
    /// The key in OpenSSH form.
    public let publicKey: SSHPublicKey
    /// What it may sign over SSH.
    public let policy: SSHAgentPolicy
    /// The key's wire blob (computed once: every sign request is looked up by it).
    public let blob: [UInt8]
    /// A team key, or one added with `ssh-add`.
    public let origin: AgentKeyOrigin

    public init(keyID: String, name: String, version: Int, algorithm: SigningAlgorithm, publicKey: SSHPublicKey, policy: SSHAgentPolicy,
                origin: AgentKeyOrigin = .team) {
        self.keyID = keyID
        self.name = name
        self.version = version
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.policy = policy
        self.blob = publicKey.blob
        self.origin = origin
    }

    /// The comment `ssh-add -L` shows: for a team key `sitekeep:ID` and the display name; for a
    /// key added with `ssh-add`, the comment it was added with (as ssh-agent shows it).
    public var comment: String {
        switch origin {
        case .team: Self.comment(keyID: keyID, name: name)
        case .added(let comment, _): comment
        }
    }

    /// `sitekeep:ID NAME` (just `sitekeep:ID` when the name is the id).
    public static func comment(keyID: String, name: String) -> String {
        name.isEmpty || name == keyID ? "sitekeep:\(keyID)" : "sitekeep:\(keyID) \(name)"
    }
}

/// What an agent client asks to have signed, as the agent understood the data.
public enum AgentSignPurpose: Sendable, Equatable {
    /// An SSH login (a user-authentication request) as `user`, to `destination`.
    case login(user: String, destination: AgentDestination)
    /// An SSHSIG signature in `namespace` (`git` for commits, `file` for `ssh-keygen -Y sign`).
    case sshsig(namespace: String)
    /// Anything else: `byteCount` bytes the agent cannot interpret.
    case other(byteCount: Int)

    /// What the presence prompt asks to allow, what the user must judge first: for a login the
    /// destination as the connection's session binding verified it, or `UNVERIFIED`, and the
    /// hosts it is forwarded through, then the user name; for an SSHSIG its namespace. The user
    /// name and the namespace are the peer's own words, so they come after SiteKeep's, quoted
    /// and bounded (``PresenceText/quoted(_:limit:)``).
    public var prompt: String {
        switch self {
        case let .login(user, destination): "an SSH login to \(destination.promptText), as user \(PresenceText.quoted(user))"
        case .sshsig(let ns):
            ns == "git" ? "a signature of a git commit or tag (SSHSIG namespace \"git\")" : "a signature in SSHSIG namespace \(PresenceText.quoted(ns))"
        case .other(let n): "a signature of \(n) bytes of data that is neither an SSH login nor an SSHSIG"
        }
    }

    /// The audit line's detail: the kind of data, the namespace, the bound host.
    public var auditDetail: String {
        switch self {
        case let .login(user, destination): "ssh user-auth as \(user) to \(destination.text)"
        case .sshsig(let ns): "sshsig namespace \(ns)"
        case .other(let n): "other data, \(n) bytes"
        }
    }

    /// What one presence approval covers: the same key for the same kind of use (the same user
    /// and verified destination for a login, the same namespace for an SSHSIG) within the
    /// window. Nil for a login whose destination the connection did not verify: every such
    /// login would share it, so an approval of one is kept for none.
    public var presenceScope: String? {
        switch self {
        case let .login(user, d):
            d.hostKeyFingerprint.map { "login\0\(user)\0\($0)\0\(d.forwardedThrough.joined(separator: ","))" }
        case .sshsig(let ns): "sshsig\0\(ns)"
        case .other: "other"
        }
    }
}

extension AgentSignPurpose {
    /// A login for `user`, refused when the name holds a character a prompt cannot show as it is
    /// (a control, bidi or zero-width character, ``PresenceText/isHidden(_:)``): such a name can
    /// make the prompt read as another destination, and no real account is named so.
    /// - Throws: ``AgentRefusal/malformed(_:)`` naming the character.
    static func checkedLogin(user: String, destination: AgentDestination) throws(AgentRefusal) -> AgentSignPurpose {
        if let hidden = PresenceText.firstHidden(in: user) {
            throw .malformed("the login's user name holds \(PresenceText.name(hidden)), a control, bidi or zero-width character "
                + "that would change how the approval prompt reads; refused without a prompt (log in with a plain user name)")
        }
        return .login(user: user, destination: destination)
    }
}

/// One signature an agent client asks for, ready for the key source.
public struct AgentSignRequest: Sendable, Equatable {
    /// The key.
    public let identity: AgentIdentity
    /// The bytes to sign.
    public let data: [UInt8]
    /// What they are.
    public let purpose: AgentSignPurpose
    /// Who asks.
    public let peer: AgentPeer

    public init(identity: AgentIdentity, data: [UInt8], purpose: AgentSignPurpose, peer: AgentPeer) {
        self.identity = identity
        self.data = data
        self.purpose = purpose
        self.peer = peer
    }

    /// The kind of use an approval of this request is kept for (``AgentSignPurpose/presenceScope``)
    /// and the peer process that asked (``AgentPeer/process``), so that no other process rides
    /// it; nil when none is kept (a login to an unverified destination, or a peer whose start
    /// time is unknown).
    public var presenceScope: String? {
        guard let use = purpose.presenceScope, let process = peer.process else { return nil }
        return use + "\0process\0" + process
    }

    /// What the presence prompt says this request is for, after the key and the op (which
    /// custody's prompt puts first): ``AgentSignPurpose/prompt`` (the verified destination or
    /// `UNVERIFIED` and the hops, then the quoted user name; or the namespace), then who asks,
    /// by the peer's quoted, bounded command name and its pid, and what an approval serves:
    /// `this process only` (the same use by the same process, within the window) or `this
    /// signature only` (none is kept, ``presenceScope``).
    public var presenceLabel: String {
        let added: String
        if case .added(let comment, _) = identity.origin {
            added = " with your key added by ssh-add, \(PresenceText.quoted(comment, limit: 64)),"
        } else {
            added = ""
        }
        return "\(purpose.prompt);\(added) asked by \(PresenceText.quoted(peer.command ?? "?", limit: 32)) (pid \(peer.pid), "
            + (presenceScope == nil ? "this signature only" : "this process only") + ") on the SSH agent socket"
    }
}

/// Where the agent's keys come from, where they sign, and what checks what peers send: the seam
/// between the protocol and custody (Secretive's SecretAgentKit depends on a store protocol
/// only, never on a key store; so does this target). SiteKeepWiring's `CustodyAgentKeys` is the
/// one implementation over custody; the agent itself links no custody and no crypto library.
public protocol AgentKeySource: Sendable {
    /// What checks the host keys' signatures of a connection's session bindings and makes
    /// fingerprints (SiteKeepWiring's `CryptoSSHCryptography` on SiteKeep's crypto).
    var cryptography: any SSHCryptography { get }
    /// The keys to offer now (custody's lists them while locked too: a sign request then asks for the unlock).
    func identities() -> [AgentIdentity]
    /// Signs `request.data` with `request.identity` after its policy, presence and custody
    /// allow it; returns the SSH signature blob.
    func sign(_ request: AgentSignRequest) throws(AgentRefusal) -> [UInt8]
    /// Takes a key `ssh-add` gives (`SSH2_AGENTC_ADD_IDENTITY`) into custody, with its
    /// constraints; the source wipes the key's private bytes. The default refuses.
    func add(_ key: AgentNewKey, peer: AgentPeer) throws(AgentRefusal)
    /// Removes the added key with this blob (`ssh-add -d`); a team key is refused. The default refuses.
    func remove(blob: [UInt8], peer: AgentPeer) throws(AgentRefusal)
    /// Removes every added key (`ssh-add -D`), never a team key. The default refuses.
    func removeAll(peer: AgentPeer) throws(AgentRefusal)
    /// The keys of the other agent (`ssh-agent-upstream`), listed after this source's own. The
    /// default: none.
    /// - Throws: ``AgentRefusal/upstream(_:)`` when it is set and does not answer (the own keys
    ///   are listed all the same).
    func upstreamIdentities() throws(AgentRefusal) -> [AgentUpstreamKey]
    /// Has a signature with a key of the other agent approved (presence and the audit line),
    /// then forwards it there; returns the other agent's signature blob as it is. The default refuses.
    func signUpstream(_ request: AgentUpstreamSignRequest) throws(AgentRefusal) -> [UInt8]
}

extension AgentKeySource {
    public func add(_ key: AgentNewKey, peer: AgentPeer) throws(AgentRefusal) {
        throw .policy("this agent takes no keys from ssh-add")
    }
    public func remove(blob: [UInt8], peer: AgentPeer) throws(AgentRefusal) {
        throw .policy("this agent removes no keys")
    }
    public func removeAll(peer: AgentPeer) throws(AgentRefusal) {
        throw .policy("this agent removes no keys")
    }
    public func upstreamIdentities() throws(AgentRefusal) -> [AgentUpstreamKey] { [] }
    public func signUpstream(_ request: AgentUpstreamSignRequest) throws(AgentRefusal) -> [UInt8] { throw .unknownKey }
}
