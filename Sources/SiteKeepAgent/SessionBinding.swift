/// The data an SSH client asks its agent to sign to log in: an RFC 4252 §7 public-key
/// user-authentication request, with OpenSSH's host-bound variant
/// (`publickey-hostbound-v00@openssh.com`, which adds the server's host key).
public struct SSHUserAuthRequest: Sendable, Equatable {
    /// The SSH session identifier (the key exchange's hash).
    public let sessionID: [UInt8]
    /// The user logging in on the server.
    public let user: String
    /// `publickey` or `publickey-hostbound-v00@openssh.com`.
    public let method: String
    /// The public key algorithm named.
    public let algorithm: String
    /// The key blob the request is for.
    public let keyBlob: [UInt8]
    /// The server's host key blob, in the host-bound form.
    public let hostKeyBlob: [UInt8]?

    static let userAuthRequest: UInt8 = 50
    static let hostBoundMethod = "publickey-hostbound-v00@openssh.com"

    /// Reads `data` as a user-authentication request for a signature; nil when it is not
    /// exactly one (any other bytes are "other data" to the agent).
    public init?(parsing data: [UInt8]) {
        var r = SSHReader(data)
        guard let sid = try? r.string("session id", limit: 256), !sid.isEmpty,
              (try? r.byte("message type")) == Self.userAuthRequest,
              let user = try? r.utf8("user name", limit: 1024),
              (try? r.name("service", limit: 64)) == "ssh-connection",
              let method = try? r.name("method", limit: 64), method == "publickey" || method == Self.hostBoundMethod,
              (try? r.byte("signature follows")) == 1,
              let algorithm = try? r.name("algorithm", limit: 128),
              let key = try? r.string("public key", limit: SSHPublicKey.maximumBlobBytes) else { return nil }
        var host: [UInt8]? = nil
        if method == Self.hostBoundMethod {
            guard let h = try? r.string("host key", limit: SSHPublicKey.maximumBlobBytes) else { return nil }
            host = h
        }
        guard r.isAtEnd else { return nil }
        sessionID = sid
        self.user = user
        self.method = method
        self.algorithm = algorithm
        keyBlob = key
        hostKeyBlob = host
    }
}

/// Where a login signature goes, as the agent connection's session bindings show it.
public struct AgentDestination: Sendable, Equatable {
    /// The destination's host key fingerprint (`SHA256:...`), nil when the connection did not
    /// say (no binding, or a forwarded connection whose far client did not bind).
    public let hostKeyFingerprint: String?
    /// The destination host key's family (`ED25519`, `ECDSA`, `RSA`), when known.
    public let hostKeyFamily: String?
    /// The host keys of the hosts the agent connection is forwarded through, nearest first.
    public let forwardedThrough: [String]

    /// Whether the request comes over a forwarded agent connection.
    public var isForwarded: Bool { !forwardedThrough.isEmpty }

    /// For the presence prompt: `host SHA256:... (ED25519), verified by the connection's
    /// session binding, directly`; an unknown destination as `an UNVERIFIED host (...)`; then
    /// the hosts a forwarded connection came through. Only facts the bindings checked.
    public var promptText: String {
        let host = hostKeyFingerprint.map { "host \($0) (\(hostKeyFamily ?? "?")), verified by the connection's session binding" }
            ?? "an UNVERIFIED host (the connection did not identify it)"
        guard isForwarded else { return host + (hostKeyFingerprint == nil ? "" : ", directly") }
        return host + ", FORWARDED through " + forwardedThrough.joined(separator: " then ")
    }

    /// `the host SHA256:... (ED25519), directly` and the like, for the audit log.
    public var text: String {
        let host = hostKeyFingerprint.map { "host \($0) (\(hostKeyFamily ?? "?"))" } ?? "a host the connection did not identify"
        guard isForwarded else { return host + (hostKeyFingerprint == nil ? "" : ", directly") }
        return host + ", forwarded through " + forwardedThrough.joined(separator: " then ")
    }
}

/// Why an agent request was refused. Descriptions name no key material.
public enum AgentRefusal: Error, Sendable, Equatable {
    /// The request is malformed (`SSHWireError` text).
    case malformed(String)
    /// No offered key has this blob.
    case unknownKey
    /// A session binding or a login request is inconsistent (the reason).
    case binding(String)
    /// The key's SSH policy does not allow this use.
    case policy(String)
    /// SiteKeep is locked.
    case locked
    /// Presence was denied, timed out or is unavailable.
    case presence(String)
    /// Custody failed (its description).
    case custody(String)
    /// The other agent (`ssh-agent-upstream`) could not be reached, refused or answered
    /// otherwise (the reason, naming its socket).
    case upstream(String)
}

extension AgentRefusal: CustomStringConvertible {
    public var description: String {
        switch self {
        case .malformed(let why): "malformed request: \(why)"
        case .unknownKey: "no SSH-enabled team key has that public key"
        case .binding(let why): why
        case .policy(let why): why
        case .locked: "SiteKeep is locked; run 'sitekeep unlock'"
        case .presence(let why): "presence refused: \(why)"
        case .custody(let why): why
        case .upstream(let why): why
        }
    }
}

/// The `session-bind@openssh.com` bindings of one agent connection, checked as OpenSSH's agent
/// checks them (OpenSSH `PROTOCOL.agent` §1).
///
/// A binding names the SSH server's host key, the session identifier and the host key's
/// signature of it, and whether the connection is being forwarded. The signature must verify;
/// a session identifier over 128 bytes, a session identifier seen before with another host key,
/// a 17th binding, and any binding after one made for authentication (not forwarding) are
/// refused. Once a bind has failed, the connection signs nothing.
public struct SessionBindings: Sendable {
    /// One recorded binding.
    public struct Binding: Sendable, Equatable {
        public let hostKey: SSHPublicKey
        public let sessionID: [UInt8]
        public let forwarding: Bool
    }

    /// The longest session identifier accepted (OpenSSH's `AGENT_MAX_SID_LEN`).
    public static let maximumSessionIDBytes = 128
    /// The most bindings one connection holds (OpenSSH's `AGENT_MAX_SESSION_IDS`).
    public static let maximumBindings = 16

    /// The bindings, oldest first.
    public private(set) var bindings: [Binding] = []
    /// Whether a bind was ever attempted on this connection.
    public private(set) var attempted = false
    /// What checks the host keys' signatures and makes their fingerprints.
    public let cryptography: any SSHCryptography

    /// No bindings yet; signatures checked and fingerprints made by `cryptography`.
    public init(cryptography: any SSHCryptography) {
        self.cryptography = cryptography
    }

    /// Whether a bind was attempted and none succeeded: such a connection signs nothing.
    public var bindFailed: Bool { attempted && bindings.isEmpty }

    /// Records a binding from the extension's contents.
    /// - Throws: ``AgentRefusal/malformed(_:)`` or ``AgentRefusal/binding(_:)``.
    public mutating func bind(_ contents: [UInt8]) throws(AgentRefusal) {
        attempted = true
        var r = SSHReader(contents)
        let hostKey: SSHPublicKey, sid: [UInt8], signature: [UInt8], forwarding: Bool
        do {
            hostKey = try SSHPublicKey(blob: try r.string("host key", limit: SSHPublicKey.maximumBlobBytes), acceptingCertificates: true)
            sid = try r.string("session id", limit: 4096)
            signature = try r.string("host key signature", limit: 4096)
            forwarding = try r.boolean("forwarding flag")
            try r.expectEnd("session-bind request")
        } catch {
            throw .malformed(error.description)
        }
        guard !sid.isEmpty, sid.count <= Self.maximumSessionIDBytes else {
            throw .binding("a session identifier of \(sid.count) bytes (at most \(Self.maximumSessionIDBytes))")
        }
        guard hostKey.isValidSignature(signature, for: sid, using: cryptography) else {
            throw .binding("the host key's signature of the session identifier does not verify (\(hostKey.typeName) \(hostKey.fingerprint(using: cryptography)))")
        }
        for b in bindings {
            guard b.forwarding else { throw .binding("the connection was already bound for authentication") }
            if b.sessionID == sid {
                guard b.hostKey == hostKey else { throw .binding("the session identifier was bound to another host key") }
                return   // already recorded
            }
        }
        guard bindings.count < Self.maximumBindings else { throw .binding("too many session bindings on one connection") }
        bindings.append(Binding(hostKey: hostKey, sessionID: sid, forwarding: forwarding))
    }

    /// Where a login request goes, checked against the bindings: on a bound connection the
    /// request must be for the last bound session (and, in the host-bound form, name its host
    /// key); a request through a forwarded connection whose far end did not bind has an unknown
    /// destination; any other session is refused.
    /// - Throws: ``AgentRefusal/binding(_:)``.
    public func destination(of request: SSHUserAuthRequest) throws(AgentRefusal) -> AgentDestination {
        guard let last = bindings.last else {
            return AgentDestination(hostKeyFingerprint: nil, hostKeyFamily: nil, forwardedThrough: [])
        }
        if !last.forwarding {
            guard request.sessionID == last.sessionID else {
                throw .binding("the login request is for another SSH session than the one this connection is bound to")
            }
            if let blob = request.hostKeyBlob {
                guard let named = try? SSHPublicKey(blob: blob, acceptingCertificates: true), named == last.hostKey else {
                    throw .binding("the login request names another host key than the bound session's")
                }
            }
            return AgentDestination(hostKeyFingerprint: last.hostKey.fingerprint(using: cryptography), hostKeyFamily: last.hostKey.family,
                                    forwardedThrough: bindings.dropLast().map { $0.hostKey.fingerprint(using: cryptography) })
        }
        guard !bindings.contains(where: { $0.sessionID == request.sessionID }) else {
            throw .binding("the login request is for a session this connection forwards, not one beyond it")
        }
        return AgentDestination(hostKeyFingerprint: nil, hostKeyFamily: nil, forwardedThrough: bindings.map { $0.hostKey.fingerprint(using: cryptography) })
    }
}
