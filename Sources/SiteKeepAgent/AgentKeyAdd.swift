public import SiteKeepNames
import SiteKeepSystem
import SiteKeepEncoding

/// A key an agent client adds (`SSH2_AGENTC_ADD_IDENTITY` / `ADD_ID_CONSTRAINED`, RFC 9987
/// §3.2): its public key, its private key, its comment and its constraints, as `ssh-add` sends
/// them. Only `ssh-ed25519` and `ecdsa-sha2-nistp256` are read; other types are refused by name
/// (``AgentRequest/addUnsupported(keyType:)``).
///
/// The private key is 32 bytes (the Ed25519 seed, or the P-256 scalar `d` padded to 32 bytes).
/// It is never shown: the description, debug description and mirror say `<redacted>`. The key
/// source copies it into custody and wipes ``privateKey`` (``wipe()``).
public struct AgentNewKey: Sendable, Equatable {
    /// The key's algorithm.
    public let algorithm: SigningAlgorithm
    /// The public key the client sent.
    public let publicKey: SSHPublicKey
    /// The private key's 32 bytes (see the type's note).
    public private(set) var privateKey: [UInt8]
    /// The comment (`ssh-add` sends the key file's comment, or its path).
    public let comment: String
    /// `ssh-add -c`: confirm each use.
    public let confirm: Bool
    /// `ssh-add -t`: seconds until the key is removed; nil: no lifetime.
    public let lifetimeSeconds: UInt32?

    public init(algorithm: SigningAlgorithm, publicKey: SSHPublicKey, privateKey: [UInt8], comment: String,
                confirm: Bool = false, lifetimeSeconds: UInt32? = nil) {
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.privateKey = privateKey
        self.comment = comment
        self.confirm = confirm
        self.lifetimeSeconds = lifetimeSeconds
    }

    /// Overwrites ``privateKey`` with zeros (this copy; the caller's own copies are its own).
    public mutating func wipe() {
        for i in privateKey.indices { privateKey[i] = 0 }
    }

    /// The constraint numbers of RFC 9987 §3.2.7.
    public enum Constraint {
        /// `SSH_AGENT_CONSTRAIN_LIFETIME`: a `uint32` of seconds.
        public static let lifetime: UInt8 = 1
        /// `SSH_AGENT_CONSTRAIN_CONFIRM`.
        public static let confirm: UInt8 = 2
        /// `SSH_AGENT_CONSTRAIN_EXTENSION`: a name and contents.
        public static let `extension`: UInt8 = 255
    }

    /// Reads the rest of an add request after its key type name: the key, the comment and (for
    /// `ADD_ID_CONSTRAINED`) the constraints. Nil when the type is not one SiteKeep holds.
    /// - Throws: ``SSHWireError`` for a malformed key, a private key that does not match its
    ///   public key's form, and any constraint but a lifetime and confirm (an extension is
    ///   refused as OpenSSH refuses one it does not know: SiteKeep implements none, so
    ///   `ssh-add -h` destination constraints are refused rather than dropped).
    static func decode(type: String, from r: inout SSHReader, constrained: Bool) throws(SSHWireError) -> AgentNewKey? {
        let algorithm: SigningAlgorithm
        let publicKey: SSHPublicKey
        let secret: [UInt8]
        switch type {
        case "ssh-ed25519":
            let pk = try r.string("Ed25519 public key", limit: 32)
            guard pk.count == 32 else { throw .invalid(field: "Ed25519 public key", reason: "\(pk.count) bytes, not 32") }
            var sk = try r.string("Ed25519 private key", limit: 64)
            defer { for i in sk.indices { sk[i] = 0 } }
            guard sk.count == 64, Array(sk[32...]) == pk else {
                throw .invalid(field: "Ed25519 private key", reason: "not the 64 bytes of seed and public key")
            }
            algorithm = .ed25519
            publicKey = .ed25519(pk)
            secret = Array(sk[..<32])
        case "ecdsa-sha2-nistp256":
            let curve = try r.name("curve name", limit: 32)
            guard curve == "nistp256" else { throw .invalid(field: "curve name", reason: "\(curve) for an ecdsa-sha2-nistp256 key") }
            let q = try r.string("ECDSA public key", limit: 65)
            guard q.count == 65, q.first == 0x04 else { throw .invalid(field: "ECDSA public key", reason: "not an uncompressed P-256 point") }
            var d = try r.mpint("ECDSA private key", limit: 33)
            defer { for i in d.indices { d[i] = 0 } }
            guard !d.isEmpty, d.count <= 32 else { throw .invalid(field: "ECDSA private key", reason: "not a P-256 scalar") }
            algorithm = .p256
            publicKey = .ecdsa(.p256, point: q)
            secret = [UInt8](repeating: 0, count: 32 - d.count) + d
        default:
            return nil
        }
        let comment = try r.utf8("comment", limit: 1024)
        var confirm = false
        var lifetime: UInt32? = nil
        while !r.isAtEnd {
            guard constrained else { throw .trailingBytes(after: "key of an unconstrained add") }
            switch try r.byte("constraint") {
            case Constraint.lifetime:
                let seconds = try r.uint32("lifetime")
                guard seconds > 0 else { throw .invalid(field: "lifetime", reason: "0 seconds") }
                lifetime = seconds
            case Constraint.confirm:
                confirm = true
            case Constraint.extension:
                let name = try r.name("constraint extension name", limit: 256)
                throw .invalid(field: "constraint", reason: "extension \(name) is not supported by SiteKeep's agent "
                    + "(add the key without it; 'ssh-add -h' destination constraints are not implemented)")
            case let other:
                throw .invalid(field: "constraint", reason: "constraint \(other) is not supported by SiteKeep's agent (only -c and -t are)")
            }
        }
        return AgentNewKey(algorithm: algorithm, publicKey: publicKey, privateKey: secret, comment: comment,
                           confirm: confirm, lifetimeSeconds: lifetime)
    }
}

extension AgentNewKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key's type and comment; never its private key.
    public var description: String { "\(publicKey.typeName) key \(PresenceText.quoted(comment, limit: 64)) <redacted>" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["algorithm": algorithm, "comment": comment, "privateKey": "<redacted>"]) }
}
