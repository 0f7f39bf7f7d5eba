public import SiteKeepCustody
import SiteKeepCrypto
public import SiteKeepJSON

/// A file an agent attaches to a lane message.
public struct LaneAttachment: Sendable, Equatable {
    /// The file's name as the agent gave it (shown, never used as a path).
    public let name: String
    public let bytes: [UInt8]
    public init(name: String, bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }
}

/// What an agent sends through a vault's lane: a small JSON object (`v`, `title`, `from`,
/// `body` or `attachments`, `links`), sealed with libsodium's sealed box to the lane's public
/// key (``SgitKeys/appendLanePublicKey()``), so the server stores ciphertext only.
public struct LaneEnvelope: Sendable, Equatable {
    public static let version: Int64 = 1
    /// Bounds a reader holds a message to: longer fields are refused, not cut.
    public static let maxTitle = 200, maxFrom = 100, maxLinks = 20, maxLink = 2048, maxAttachments = 20

    public let title: String
    public let from: String
    public let body: String?
    public let attachments: [LaneAttachment]
    public let links: [String]

    /// - Throws: ``AppendLaneError/rejected(verb:detail:)`` naming the field out of bounds.
    public init(title: String, from: String, body: String?, attachments: [LaneAttachment] = [], links: [String] = []) throws(AppendLaneError) {
        func bad(_ what: String) -> AppendLaneError { .rejected(verb: "message", detail: what) }
        guard !title.isEmpty, title.count <= Self.maxTitle else { throw bad("the title must be 1-\(Self.maxTitle) characters") }
        guard from.count <= Self.maxFrom else { throw bad("the sender name must be at most \(Self.maxFrom) characters") }
        guard body != nil || !attachments.isEmpty else { throw bad("a message needs a body or an attachment") }
        guard links.count <= Self.maxLinks, links.allSatisfy({ !$0.isEmpty && $0.utf8.count <= Self.maxLink }) else {
            throw bad("at most \(Self.maxLinks) links of 1-\(Self.maxLink) bytes")
        }
        guard attachments.count <= Self.maxAttachments, attachments.allSatisfy({ !$0.name.isEmpty && $0.name.count <= 255 }) else {
            throw bad("at most \(Self.maxAttachments) attachments, each named (1-255 characters)")
        }
        self.title = title
        self.from = from
        self.body = body
        self.attachments = attachments
        self.links = links
    }

    /// The envelope's JSON (before sealing).
    public var json: JSONValue {
        var m = [JSONMember(key: "v", value: .int(Self.version)), JSONMember(key: "title", value: .string(title)),
                 JSONMember(key: "from", value: .string(from))]
        if let body { m.append(JSONMember(key: "body", value: .string(body))) }
        if !attachments.isEmpty {
            m.append(JSONMember(key: "attachments", value: .array(attachments.map {
                .object([JSONMember(key: "name", value: .string($0.name)), JSONMember(key: "dataBase64", value: .string(Base64.encode($0.bytes)))])
            })))
        }
        if !links.isEmpty { m.append(JSONMember(key: "links", value: .array(links.map { .string($0) }))) }
        return .object(m)
    }

    /// The envelope sealed to `laneKey` (32 bytes): the lane payload.
    /// - Throws: ``AppendLaneError/payloadTooLarge(bytes:)`` past the server's limit.
    public func sealed(to laneKey: [UInt8]) throws(AppendLaneError) -> [UInt8] {
        let plain = JSONSerializer.bytes(json)
        guard plain.count + SealedBox.overheadByteCount <= AppendLane.maxPayloadBytes else {
            throw .payloadTooLarge(bytes: plain.count + SealedBox.overheadByteCount)
        }
        do { return try SealedBox.seal(plain, to: laneKey) } catch {
            throw .rejected(verb: "message", detail: "the lane key is not a 32-byte X25519 public key (64 hex): take it from `sitekeep inbox token add`")
        }
    }

    /// Reads an opened envelope; nil when it is not one (a field missing, of the wrong type or
    /// out of bounds).
    public static func parse(_ plain: [UInt8]) -> LaneEnvelope? {
        guard let doc = try? JSONParser.parse(plain, limits: JSONLimits(maxBytes: AppendLane.maxPayloadBytes, maxDepth: 4, maxStringBytes: AppendLane.maxPayloadBytes, maxElements: 1_000)),
              doc["v"]?.intValue == version, let title = doc["title"]?.stringValue, let from = doc["from"]?.stringValue else { return nil }
        var attachments: [LaneAttachment] = []
        for a in doc["attachments"]?.arrayValue ?? [] {
            guard let name = a["name"]?.stringValue, let b64 = a["dataBase64"]?.stringValue, let bytes = try? Base64.decode(b64) else { return nil }
            attachments.append(LaneAttachment(name: name, bytes: bytes))
        }
        let links = (doc["links"]?.arrayValue ?? []).compactMap(\.stringValue)
        return try? LaneEnvelope(title: title, from: from, body: doc["body"]?.stringValue, attachments: attachments, links: links)
    }
}

/// What a lane message is, as SiteKeep shows it: never rendered as HTML or run.
public enum LaneContent: Sendable, Equatable {
    /// Sealed to this vault's lane key and opened: a SiteKeep envelope.
    case sealed(LaneEnvelope)
    /// Plain JSON, as the web client's apps write (unsealed: the server could read it).
    case plain(JSONValue)
    /// Anything else (sealed to another key, damaged, or not JSON): only its size is shown.
    case opaque(size: Int)

    /// Classifies `bytes` of a lane of the vault whose keys are `keys`.
    public static func read(_ bytes: [UInt8], keys: SgitKeys) -> LaneContent {
        if let doc = try? JSONParser.parse(bytes, limits: JSONLimits(maxBytes: AppendLane.maxPayloadBytes, maxDepth: 32, maxStringBytes: AppendLane.maxPayloadBytes, maxElements: 100_000)),
           doc.objectValue != nil {
            return .plain(doc)
        }
        if let opened = try? keys.openAppendLaneMessage(bytes), let e = LaneEnvelope.parse(opened) { return .sealed(e) }
        return .opaque(size: bytes.count)
    }

    /// The title to list: the envelope's, a plain object's `title` string, or nothing.
    public var title: String? {
        switch self {
        case .sealed(let e): e.title
        case .plain(let doc): doc["title"]?.stringValue
        case .opaque: nil
        }
    }
}
