/// The message numbers of the SSH agent protocol (RFC 9987, formerly draft-miller-ssh-agent).
public enum AgentMessageType {
    public static let failure: UInt8 = 5
    public static let success: UInt8 = 6
    public static let requestIdentities: UInt8 = 11
    public static let identitiesAnswer: UInt8 = 12
    public static let signRequest: UInt8 = 13
    public static let signResponse: UInt8 = 14
    public static let addIdentity: UInt8 = 17
    public static let removeIdentity: UInt8 = 18
    public static let removeAllIdentities: UInt8 = 19
    public static let addSmartcardKey: UInt8 = 20
    public static let removeSmartcardKey: UInt8 = 21
    public static let lock: UInt8 = 22
    public static let unlock: UInt8 = 23
    public static let addIdentityConstrained: UInt8 = 25
    public static let addSmartcardKeyConstrained: UInt8 = 26
    public static let `extension`: UInt8 = 27
    public static let extensionFailure: UInt8 = 28
    public static let extensionResponse: UInt8 = 29
    /// `SSH_AGENTC_REMOVE_ALL_RSA_IDENTITIES` of SSH protocol 1, which `ssh-add -D` still sends
    /// before the protocol 2 request.
    public static let removeAllRSAIdentities: UInt8 = 9

    /// The requests that manage the agent in ways SiteKeep does not: smartcard keys, and
    /// locking (which is `sitekeep lock`). SiteKeep answers them with `SSH_AGENT_FAILURE`. Adding
    /// and removing keys (`ssh-add`, `-d`, `-D`) are requests of their own.
    public static let keyManagement: Set<UInt8> = [
        addSmartcardKey, removeSmartcardKey, lock, unlock, addSmartcardKeyConstrained,
    ]
}

/// The signature flags of `SSH_AGENTC_SIGN_REQUEST`.
public enum AgentSignFlags {
    /// `SSH_AGENT_RSA_SHA2_256`: for `ssh-rsa` keys only, so ignored for SiteKeep's keys.
    public static let rsaSHA2_256: UInt32 = 0x02
    /// `SSH_AGENT_RSA_SHA2_512`: the same.
    public static let rsaSHA2_512: UInt32 = 0x04
    /// Every flag the protocol defines; a request with any other bit set is refused, because
    /// SiteKeep cannot honour what it does not know.
    public static let known: UInt32 = rsaSHA2_256 | rsaSHA2_512
}

/// One decoded request from an agent client.
public enum AgentRequest: Sendable, Equatable {
    /// `SSH_AGENTC_REQUEST_IDENTITIES`.
    case requestIdentities
    /// `SSH_AGENTC_SIGN_REQUEST`: key blob, data, flags.
    case sign(keyBlob: [UInt8], data: [UInt8], flags: UInt32)
    /// A smartcard, lock or unlock request (its contents unread).
    case keyManagement(type: UInt8)
    /// `SSH2_AGENTC_ADD_IDENTITY` or `ADD_ID_CONSTRAINED` of a key SiteKeep can hold.
    case addIdentity(AgentNewKey)
    /// An add of a key of another type (RSA, DSA, other curves, security keys, certificates):
    /// its type name; the rest is unread.
    case addUnsupported(keyType: String)
    /// `SSH2_AGENTC_REMOVE_IDENTITY`: the key blob.
    case removeIdentity(keyBlob: [UInt8])
    /// `SSH2_AGENTC_REMOVE_ALL_IDENTITIES`.
    case removeAllIdentities
    /// `SSH_AGENTC_REMOVE_ALL_RSA_IDENTITIES` of protocol 1, which `ssh-add -D` sends after the
    /// protocol 2 request and whose answer it ignores: there are no protocol 1 keys to remove.
    case removeAllProtocol1
    /// `SSH_AGENTC_EXTENSION`: the extension's name and its contents (the rest of the message,
    /// as OpenSSH sends them).
    case `extension`(name: String, contents: [UInt8])
    /// A message type the protocol does not define for requests.
    case unknown(type: UInt8)

    /// The largest data a sign request may carry (the whole message is at most 256 KiB).
    public static let maximumSignData = AgentFrameReader.maximumMessageBytes

    /// Decodes one message's payload (its type byte and contents, without the length).
    /// - Throws: ``SSHWireError`` for an empty message or a malformed known request.
    public static func decode(_ payload: [UInt8]) throws(SSHWireError) -> AgentRequest {
        var r = SSHReader(payload)
        let type = try r.byte("message type")
        switch type {
        case AgentMessageType.requestIdentities:
            try r.expectEnd("identities request")
            return .requestIdentities
        case AgentMessageType.signRequest:
            let blob = try r.string("key blob", limit: SSHPublicKey.maximumBlobBytes)
            let data = try r.string("data to sign", limit: maximumSignData)
            let flags = try r.uint32("flags")
            try r.expectEnd("sign request")
            return .sign(keyBlob: blob, data: data, flags: flags)
        case AgentMessageType.addIdentity, AgentMessageType.addIdentityConstrained:
            let keyType = try r.name("key type", limit: 256)
            guard let key = try AgentNewKey.decode(type: keyType, from: &r, constrained: type == AgentMessageType.addIdentityConstrained) else {
                return .addUnsupported(keyType: keyType)
            }
            return .addIdentity(key)
        case AgentMessageType.removeIdentity:
            let blob = try r.string("key blob", limit: SSHPublicKey.maximumBlobBytes)
            try r.expectEnd("remove request")
            return .removeIdentity(keyBlob: blob)
        case AgentMessageType.removeAllIdentities:
            try r.expectEnd("remove-all request")
            return .removeAllIdentities
        case AgentMessageType.removeAllRSAIdentities:
            return .removeAllProtocol1
        case AgentMessageType.extension:
            let name = try r.name("extension name", limit: 256)
            return .extension(name: name, contents: r.rest())
        case let t where AgentMessageType.keyManagement.contains(t):
            return .keyManagement(type: t)
        default:
            return .unknown(type: type)
        }
    }
}

/// One reply to an agent client.
public enum AgentReply: Sendable, Equatable {
    /// `SSH_AGENT_FAILURE`.
    case failure
    /// `SSH_AGENT_SUCCESS`.
    case success
    /// `SSH_AGENT_IDENTITIES_ANSWER`: key blobs and comments.
    case identities([(blob: [UInt8], comment: String)])
    /// `SSH_AGENT_SIGN_RESPONSE`: an SSH signature blob.
    case signature([UInt8])
    /// `SSH_AGENT_EXTENSION_FAILURE`: the extension is not supported.
    case extensionFailure
    /// `SSH_AGENT_EXTENSION_RESPONSE`: the extension's name and its response contents.
    case extensionResponse(name: String, contents: [UInt8])

    public static func == (a: AgentReply, b: AgentReply) -> Bool { a.payload == b.payload }

    /// The payload: type byte and contents.
    public var payload: [UInt8] {
        var w = SSHWriter(capacity: 128)
        switch self {
        case .failure: w.byte(AgentMessageType.failure)
        case .success: w.byte(AgentMessageType.success)
        case .identities(let keys):
            w.byte(AgentMessageType.identitiesAnswer)
            w.uint32(UInt32(keys.count))
            for k in keys {
                w.string(k.blob)
                w.string(k.comment)
            }
        case .signature(let blob):
            w.byte(AgentMessageType.signResponse)
            w.string(blob)
        case .extensionFailure: w.byte(AgentMessageType.extensionFailure)
        case let .extensionResponse(name, contents):
            w.byte(AgentMessageType.extensionResponse)
            w.string(name)
            w.raw(contents)
        }
        return w.bytes
    }

    /// The payload with its `uint32` length in front, ready to write.
    public var framed: [UInt8] { AgentFrameReader.frame(payload) }
}

/// Splits an agent byte stream into messages: a `uint32` length, then that many bytes.
///
/// A length over ``maximumMessageBytes`` (256 KiB, OpenSSH's limit) is reported once as
/// ``Event/tooLong(_:)``, after which the reader yields nothing: the connection is to be closed,
/// since the stream cannot be resynchronised.
public struct AgentFrameReader: Sendable {
    /// What ``feed(_:)`` found.
    public enum Event: Sendable, Equatable {
        /// A whole message's payload.
        case message([UInt8])
        /// A length over the limit.
        case tooLong(UInt32)
    }

    /// The longest message accepted: 256 KiB.
    public static let maximumMessageBytes = 256 * 1024

    private var buffer: [UInt8] = []
    private var broken = false

    public init() {}

    /// Whether bytes of an unfinished message are buffered (at end of stream: truncated).
    public var hasPartialMessage: Bool { !buffer.isEmpty && !broken }

    /// Adds bytes read from the stream; returns the messages they complete.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> [Event] {
        guard !broken else { return [] }
        buffer.append(contentsOf: bytes)
        var out: [Event] = []
        var start = 0
        while buffer.count - start >= 4 {
            let n = UInt32(buffer[start]) << 24 | UInt32(buffer[start + 1]) << 16 | UInt32(buffer[start + 2]) << 8 | UInt32(buffer[start + 3])
            guard n <= UInt32(Self.maximumMessageBytes) else {
                broken = true
                buffer.removeAll()
                out.append(.tooLong(n))
                return out
            }
            guard buffer.count - start - 4 >= Int(n) else { break }
            out.append(.message(Array(buffer[(start + 4)..<(start + 4 + Int(n))])))
            start += 4 + Int(n)
        }
        if start > 0 { buffer.removeFirst(start) }
        return out
    }

    /// `payload` with its big-endian `uint32` length in front.
    public static func frame(_ payload: [UInt8]) -> [UInt8] {
        var w = SSHWriter(capacity: payload.count + 4)
        w.uint32(UInt32(payload.count))
        w.raw(payload)
        return w.bytes
    }
}
