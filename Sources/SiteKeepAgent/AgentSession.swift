import SiteKeepSystem

/// One agent connection's protocol state: turns each request into its reply over an
/// ``AgentKeySource``. Not thread-safe; its connection's thread owns it.
///
/// - `REQUEST_IDENTITIES` lists the keys the source offers (the SSH-enabled team keys; none
///   while locked), with comments naming each key and its display name.
/// - `SIGN_REQUEST` looks the key up by blob among those (re-reading the source once when a
///   blob is not among the last listing), classifies the data (an SSH login, an SSHSIG and its
///   namespace, or other), checks a login against the connection's session bindings, refuses a
///   login whose user name holds a control, bidi or zero-width character (it could make the
///   prompt read as another destination), and hands the rest to the source. Flags: the two the protocol defines are for RSA keys and so change
///   nothing here; any other bit is refused.
/// - Add (`ssh-add`, with `-c` and `-t`), remove (`-d`) and remove-all (`-D`) go to the source,
///   which keeps added keys in custody beside the team keys and never removes a team key; an
///   add of a type SiteKeep cannot hold (RSA, DSA, P-384, security keys, certificates) is
///   refused naming it. Smartcard, lock and unlock requests get `SSH_AGENT_FAILURE`.
/// - The other agent's keys (``AgentKeySource/upstreamIdentities()``) are listed after the
///   own ones (a blob the own list has is not listed twice); one that cannot be listed leaves
///   the own keys listed and is told as ``lastRefusal``. A sign request for one of its keys is
///   read as for an own key and handed to ``AgentKeySource/signUpstream(_:)``; remove requests
///   never reach the other agent.
/// - Extensions: `session-bind@openssh.com` (``SessionBindings``) and `query`; any other gets
///   `SSH_AGENT_EXTENSION_FAILURE`.
/// - Malformed requests and unknown message types get `SSH_AGENT_FAILURE`.
public final class AgentSession {
    /// The extensions this agent implements, as `query` lists them.
    public static let extensions = ["query", "session-bind@openssh.com"]

    private let keys: any AgentKeySource
    /// Who is connected.
    public let peer: AgentPeer
    /// The connection's session bindings (checked with the key source's ``AgentKeySource/cryptography``).
    public private(set) var bindings: SessionBindings
    private var listed: [AgentIdentity] = []
    /// The other agent's keys as last listed (after the own ones, without those the own list has).
    private var upstreamListed: [AgentUpstreamKey] = []
    /// Why the other agent could not be listed in the current request (logged, not refused).
    private var upstreamProblem: AgentRefusal?
    /// Why the last request was refused, for the daemon's log and for tests.
    public private(set) var lastRefusal: AgentRefusal?

    public init(keys: any AgentKeySource, peer: AgentPeer) {
        self.keys = keys
        self.peer = peer
        bindings = SessionBindings(cryptography: keys.cryptography)
    }

    /// The reply to one message's payload.
    public func reply(to payload: [UInt8]) -> AgentReply {
        lastRefusal = nil
        upstreamProblem = nil
        do {
            let reply = try answer(payload)
            lastRefusal = upstreamProblem
            return reply
        } catch {
            lastRefusal = error
            return .failure
        }
    }

    private func answer(_ payload: [UInt8]) throws(AgentRefusal) -> AgentReply {
        let request: AgentRequest
        do { request = try AgentRequest.decode(payload) } catch { throw .malformed(error.description) }
        switch request {
        case .requestIdentities:
            listed = keys.identities()
            listUpstream()
            return .identities(listed.map { ($0.blob, $0.comment) } + upstreamListed.map { ($0.blob, $0.comment) })
        case let .sign(blob, data, flags):
            return .signature(try sign(blob: blob, data: data, flags: flags))
        case .keyManagement:
            throw .policy("SiteKeep's agent holds no smartcard keys and is not locked through ssh-add; lock it with 'sitekeep lock'")
        case .addIdentity(var key):
            defer { key.wipe() }
            try keys.add(key, peer: peer)
            listed = []
            return .success
        case .addUnsupported(let type):
            throw .policy("a \(PresenceText.quoted(type, limit: 64)) key was not added: SiteKeep's agent holds ssh-ed25519 and "
                + "ecdsa-sha2-nistp256 keys only (make one with 'ssh-keygen -t ed25519')")
        case .removeIdentity(let blob):
            try keys.remove(blob: blob, peer: peer)
            listed = []
            return .success
        case .removeAllIdentities:
            try keys.removeAll(peer: peer)
            listed = []
            return .success
        case .removeAllProtocol1:
            return .success
        case let .extension(name, contents):
            switch name {
            case "session-bind@openssh.com":
                try bindings.bind(contents)
                return .success
            case "query":
                var w = SSHWriter()
                for e in Self.extensions { w.string(e) }
                return .extensionResponse(name: "query", contents: w.bytes)
            default:
                return .extensionFailure
            }
        case .unknown(let type):
            throw .malformed("message type \(type) is not an agent request")
        }
    }

    private func sign(blob: [UInt8], data: [UInt8], flags: UInt32) throws(AgentRefusal) -> [UInt8] {
        guard !bindings.bindFailed else { throw .binding("a session bind failed on this connection, so it signs nothing") }
        guard flags & ~AgentSignFlags.known == 0 else { throw .malformed("unknown signature flags 0x\(String(flags, radix: 16))") }
        guard let identity = identity(for: blob) else {
            // A key of the other agent: the same reading of the data, then the source has it
            // approved by custody's gate before it is forwarded.
            guard let key = upstreamKey(for: blob) else { throw .unknownKey }
            let purpose = try readPurpose(of: data, blob: blob, algorithm: nil)
            return try keys.signUpstream(AgentUpstreamSignRequest(key: key, data: data, flags: flags, purpose: purpose, peer: peer))
        }
        let purpose = try readPurpose(of: data, blob: blob, algorithm: identity.publicKey.typeName)
        return try keys.sign(AgentSignRequest(identity: identity, data: data, purpose: purpose, peer: peer))
    }

    /// What `data` is: an SSHSIG and its namespace, a login (for the key `blob`, and when
    /// `algorithm` is given, signed with it) to the destination the bindings verified, or other.
    private func readPurpose(of data: [UInt8], blob: [UInt8], algorithm: String?) throws(AgentRefusal) -> AgentSignPurpose {
        let sshsig: SSHSIG.SignedData?
        do { sshsig = try SSHSIG.SignedData(parsing: data) } catch { throw .malformed(error.description) }
        if let sshsig { return .sshsig(namespace: sshsig.namespace) }
        guard let login = SSHUserAuthRequest(parsing: data) else { return .other(byteCount: data.count) }
        guard login.keyBlob == blob, algorithm == nil || login.algorithm == algorithm else {
            throw .malformed("the login request is for another key than the one asked to sign it")
        }
        return try .checkedLogin(user: login.user, destination: try bindings.destination(of: login))
    }

    /// Lists the other agent's keys, leaving out those the own list has (own keys come first).
    private func listUpstream() {
        do {
            let own = Set(listed.map(\.blob))
            upstreamListed = try keys.upstreamIdentities().filter { !own.contains($0.blob) }
        } catch {
            upstreamListed = []
            upstreamProblem = error
        }
    }

    private func upstreamKey(for blob: [UInt8]) -> AgentUpstreamKey? {
        if let hit = upstreamListed.first(where: { $0.blob == blob }) { return hit }
        listUpstream()
        return upstreamListed.first { $0.blob == blob }
    }

    private func identity(for blob: [UInt8]) -> AgentIdentity? {
        if let hit = listed.first(where: { $0.blob == blob }) { return hit }
        listed = keys.identities()
        return listed.first { $0.blob == blob }
    }
}
