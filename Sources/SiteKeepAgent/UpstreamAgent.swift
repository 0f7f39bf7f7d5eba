import SiteKeepSystem

/// A key another agent offers (the `ssh-agent-upstream` setting's socket), listed after
/// SiteKeep's own keys and used through it.
public struct AgentUpstreamKey: Sendable, Equatable {
    /// The key's wire blob, as the other agent listed it (any type it holds: SiteKeep reads none
    /// of it but the fingerprint).
    public let blob: [UInt8]
    /// The comment the other agent gave it.
    public let comment: String
    /// Its `SHA256:` fingerprint, as `ssh-add -l` prints it.
    public let fingerprint: String
    /// The other agent's socket.
    public let agentPath: String

    public init(blob: [UInt8], comment: String, fingerprint: String, agentPath: String) {
        self.blob = blob
        self.comment = comment
        self.fingerprint = fingerprint
        self.agentPath = agentPath
    }
}

/// One signature an agent client asks of a key of the other agent, ready for the key source:
/// the key source has it approved by custody's gate (presence and the audit line), then
/// forwards it to the other agent (``UpstreamAgent/sign(blob:data:flags:)``).
public struct AgentUpstreamSignRequest: Sendable, Equatable {
    /// The other agent's key.
    public let key: AgentUpstreamKey
    /// The bytes to sign.
    public let data: [UInt8]
    /// The flags the client sent (forwarded as they are: an RSA key of the other agent needs them).
    public let flags: UInt32
    /// What the bytes are.
    public let purpose: AgentSignPurpose
    /// Who asks.
    public let peer: AgentPeer

    public init(key: AgentUpstreamKey, data: [UInt8], flags: UInt32, purpose: AgentSignPurpose, peer: AgentPeer) {
        self.key = key
        self.data = data
        self.flags = flags
        self.purpose = purpose
        self.peer = peer
    }

    /// The kind of use and the process an approval is kept for, as for SiteKeep's own keys
    /// (``AgentSignRequest/presenceScope``); nil when none is kept.
    public var presenceScope: String? {
        guard let use = purpose.presenceScope, let process = peer.process else { return nil }
        return use + "\0upstream\0" + key.agentPath + "\0process\0" + process
    }

    /// What the prompt says: what is signed, then that the key is one of the other agent (its
    /// socket, the quoted comment and the fingerprint), then who asks.
    public var presenceLabel: String {
        "\(purpose.prompt); with a key of your other agent (\(PresenceText.quoted(key.agentPath, limit: 108))), "
            + "\(PresenceText.quoted(key.comment, limit: 64)) \(key.fingerprint), asked by "
            + "\(PresenceText.quoted(peer.command ?? "?", limit: 32)) (pid \(peer.pid), "
            + (presenceScope == nil ? "this signature only" : "this process only") + ") on the SSH agent socket"
    }
}

/// The client of the other agent (`config set ssh-agent-upstream PATH`): lists its keys and
/// forwards a sign request SiteKeep's gate approved, over its socket, with bounded I/O. The
/// connect, each write and each read wait at most ``listTimeout`` (``signTimeout`` for a
/// signature: the other agent may confirm with its own prompt); a reply over 256 KiB, a
/// malformed one or a refusal is an ``AgentRefusal/upstream(_:)`` naming the socket, never a
/// hang or a crash. The signature is returned as the other agent made it.
public struct UpstreamAgent: Sendable {
    /// The longest wait of a listing's connect, write or read.
    public static let listTimeout: Duration = .seconds(5)
    /// The longest wait of a signature's connect, write or read.
    public static let signTimeout: Duration = .seconds(60)

    /// The other agent's socket.
    public let path: String

    public init(path: String) { self.path = path }

    /// The other agent's keys, each with its comment and fingerprint.
    /// - Throws: ``AgentRefusal/upstream(_:)`` when it cannot be reached or answers otherwise.
    public func identities(cryptography: any SSHCryptography) throws(AgentRefusal) -> [AgentUpstreamKey] {
        do {
            let client = try AgentClient(path: path, timeout: Self.listTimeout)
            return try client.identities().map {
                AgentUpstreamKey(blob: $0.blob, comment: $0.comment,
                                 fingerprint: SSHPublicKey.fingerprint(ofBlob: $0.blob, using: cryptography), agentPath: path)
            }
        } catch {
            throw .upstream("the other agent at \(path) (ssh-agent-upstream) did not list its keys: \(error.description)")
        }
    }

    /// The other agent's signature of `data` with the key `blob`, as it made it.
    /// - Throws: ``AgentRefusal/upstream(_:)`` when it cannot be reached, refuses or answers otherwise.
    public func sign(blob: [UInt8], data: [UInt8], flags: UInt32) throws(AgentRefusal) -> [UInt8] {
        do {
            let client = try AgentClient(path: path, timeout: Self.signTimeout)
            return try client.sign(blob: blob, data: data, flags: flags)
        } catch {
            throw .upstream("the other agent at \(path) (ssh-agent-upstream) did not sign: \(error.description)")
        }
    }
}
