public import SiteKeepCustody
import SiteKeepVault
import SiteKeepCrypto
import SiteKeepHTTP
import SiteKeepJSON
import SiteKeepSystem

/// What a lane call presents to the vault server, each only where the server's route asks for
/// it (`Routes__Vault__Append.py`): the server's access token on every call (the self-hosted
/// server puts its whole API behind it), the vault's write key on `configure` and `purge`, the
/// enumeration key on `list`, `fetch` and `mark-processed`. `write` carries the append token in
/// its body and nothing of the vault.
public protocol AppendLaneCredentials: Sendable {
    /// The access token's bytes (the caller wipes them), nil when the server needs none.
    func accessTokenBytes() throws(AppendLaneError) -> [UInt8]?
    /// The vault's write key as 64 hex, nil when it is not known (a read-only vault, an agent).
    func writeKeyHex() throws(AppendLaneError) -> String?
    /// The enumeration key as 64 hex (``SgitKeys/appendEnumKeyHex()``), nil when not known.
    func enumKeyHex() throws(AppendLaneError) -> String?
}

/// Lane credentials from a vault's keys in custody and the vault remote's access token.
public struct VaultLaneCredentials: AppendLaneCredentials {
    let keys: SgitKeys?
    let server: (any RemoteCredentials)?

    /// - Parameters:
    ///   - keys: the vault's keys (nil for an agent that holds only an append token).
    ///   - server: the remote's credentials, for the access token (nil when the server needs none).
    public init(keys: SgitKeys?, server: (any RemoteCredentials)?) {
        self.keys = keys
        self.server = server
    }

    public func accessTokenBytes() throws(AppendLaneError) -> [UInt8]? {
        do { return try server?.accessTokenBytes() } catch {
            throw .unavailable(verb: "call", reason: "the access token cannot be read: \(error.description)", transient: false)
        }
    }
    public func writeKeyHex() throws(AppendLaneError) -> String? { keys?.writeKeyHex() }
    public func enumKeyHex() throws(AppendLaneError) -> String? { keys?.appendEnumKeyHex() }
}

/// One message waiting in a lane, as `list` names it.
public struct LaneEntry: Sendable, Equatable {
    /// The token folder it was written through (the append token's hex, which the owner minted).
    public let inbox: String
    /// The server's id: `<13-digit epoch ms>_<24 hex>.enc`.
    public let id: String
    /// When the server received it, in milliseconds since the epoch.
    public let receivedMs: Int64
}

/// One message's bytes, as `fetch` returns them (checked against the ids asked for).
public struct LaneMessage: Sendable, Equatable {
    public let inbox: String
    public let id: String
    public let bytes: [UInt8]
}

/// The vault server's append lanes (`/api/vault/append/*`, sgraph-ai-app-send 0.34.0): anyone
/// holding an append token `write`s a payload; the vault's owner `configure`s the accepted
/// tokens' hashes and the enumeration key's hash, and `list`s, `fetch`es, `markProcessed`es and
/// `purge`s.
///
/// Every request goes through ``HTTPClient`` (https, or plain http to loopback only; no
/// redirect; the answer bounded while it streams), with the credentials in guarded header
/// memory; every answer is checked against what was asked before anything is returned.
public struct AppendLane: Sendable {
    /// The server's largest payload: 5 MiB (`APPEND_MAX_PAYLOAD`).
    public static let maxPayloadBytes = 5 << 20
    /// Unread messages one token may leave before `write` answers 507 (`APPEND_MAX_FILES`).
    public static let maxPending = 1000
    /// Most ids in one `fetch`, `mark-processed` or `purge` (`APPEND_BATCH_MAX_FILE_IDS`).
    public static let maxBatch = 100
    /// Most entries one `list` answers (`APPEND_MAX_LIMIT`).
    public static let maxListLimit = 200
    /// Ids per `fetch` request: 16 payloads of 5 MiB in base64 stay under the answer's bound.
    static let fetchChunk = 16
    /// The answer bounds: a list page (200 short entries), a fetch request, anything else.
    static let maxListAnswerBytes = 1 << 20
    static let maxFetchAnswerBytes = 128 << 20
    static let maxSmallAnswerBytes = 1 << 20
    /// Most pages ``listAll(inbox:)`` reads (200 entries each): 100 tokens' full lanes.
    static let maxPages = 500

    public let baseURL: String
    public let vaultID: String
    let credentials: any AppendLaneCredentials
    package var caFile: String?

    /// - Throws: ``AppendLaneError/invalidVaultID(_:)``, or
    ///   ``AppendLaneError/unavailable(verb:reason:transient:)`` for a URL SiteKeep does not send
    ///   credentials to (not https, or plain http off loopback).
    public init(baseURL: String, vaultID: String, credentials: any AppendLaneCredentials) throws(AppendLaneError) {
        var url = baseURL
        while url.hasSuffix("/") { url.removeLast() }
        guard (url.hasPrefix("https://") || url.hasPrefix("http://")) && HTTPClient.isAllowedURL(url) else {
            throw .unavailable(verb: "call", reason: "\(String(baseURL.prefix(200))) is refused: https://host, or plain http to loopback only, and no user@ in the URL", transient: false)
        }
        guard Self.isVaultID(vaultID) else { throw .invalidVaultID(vaultID) }
        self.baseURL = url
        self.vaultID = vaultID
        self.credentials = credentials
    }

    // MARK: the server's forms

    static func isVaultID(_ s: String) -> Bool {
        (8...24).contains(s.utf8.count) && s.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x7a).contains($0) }
    }
    static func isLowerHex(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) || (0x61...0x66).contains(b) }
    /// An append token (and so a token folder): 16-128 lowercase hex (`Safe_Str__Vault__Append_Token`).
    public static func isAppendToken(_ s: String) -> Bool { (16...128).contains(s.utf8.count) && s.utf8.allSatisfy(isLowerHex) }
    /// A message id: `^\d{13}_[0-9a-f]{24}\.enc$` (`Safe_Str__Vault__Append__File_Id`).
    public static func isMessageID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count == 13 + 1 + 24 + 4, b[13] == UInt8(ascii: "_"), Array(b[38...]) == Array(".enc".utf8) else { return false }
        return b[0..<13].allSatisfy { (0x30...0x39).contains($0) } && b[14..<38].allSatisfy(isLowerHex)
    }
    /// The anchor the server keeps for `token`: `hex(SHA-256(utf8(token)))`.
    public static func anchor(of token: String) -> String { Hex.encode(SHA256.hash(Array(token.utf8))) }

    // MARK: the six verbs

    /// Sets the lane's accepted anchors (when `anchors` is non-nil, replacing the list) and
    /// publishes the enumeration key's hash, so this vault's `list`/`fetch`/`mark` work. Owner:
    /// needs the write key (and the access token).
    public func configure(anchors: [String]?) throws(AppendLaneError) {
        if let anchors, let bad = anchors.first(where: { $0.utf8.count != 64 || !$0.utf8.allSatisfy(Self.isLowerHex) }) {
            throw .rejected(verb: "configure", detail: "'\(String(bad.prefix(20)))' is not an anchor (64 hex); nothing was sent")
        }
        guard let enumKey = try credentials.enumKeyHex() else { throw .readOnly }
        var members: [JSONMember] = []
        if let anchors { members.append(JSONMember(key: "append_anchors", value: .array(anchors.map { .string($0) }))) }
        members.append(JSONMember(key: "enum_key_hash", value: .string(Hex.encode(SHA256.hash(Array(enumKey.utf8))))))
        let doc = try call("configure", body: .object(members), key: .write, maxBytes: Self.maxSmallAnswerBytes)
        guard doc["status"]?.stringValue == "configured" else { throw .malformedAnswer(verb: "configure", reason: "no status 'configured'") }
    }

    /// Writes `payload` to the lane with `appendToken` and nothing of the vault.
    public func write(appendToken: String, payload: [UInt8]) throws(AppendLaneError) {
        guard Self.isAppendToken(appendToken) else { throw .invalidAppendToken }
        guard !payload.isEmpty else { throw .emptyPayload }
        guard payload.count <= Self.maxPayloadBytes else { throw .payloadTooLarge(bytes: payload.count) }
        let body: JSONValue = .object([JSONMember(key: "append_token", value: .string(appendToken)),
                                       JSONMember(key: "payload", value: .string(Base64.encode(payload)))])
        let doc = try call("write", body: body, key: nil, maxBytes: Self.maxSmallAnswerBytes)
        guard doc["ok"]?.boolValue == true else { throw .malformedAnswer(verb: "write", reason: "no ok") }
    }

    /// One page of pending messages (metadata only), oldest id first, after `after`.
    public func list(inbox: String? = nil, after: String? = nil, limit: Int = AppendLane.maxListLimit) throws(AppendLaneError) -> (entries: [LaneEntry], truncated: Bool) {
        if let inbox, !Self.isAppendToken(inbox) { throw .invalidAppendToken }
        if let after, !Self.isMessageID(after) { throw .invalidMessageID(after) }
        let limit = max(1, min(limit, Self.maxListLimit))
        var members = [JSONMember(key: "limit", value: .int(Int64(limit)))]
        if let inbox { members.append(JSONMember(key: "inbox", value: .string(inbox))) }
        if let after { members.append(JSONMember(key: "after_file_id", value: .string(after))) }
        let doc = try call("list", body: .object(members), key: .enumeration, maxBytes: Self.maxListAnswerBytes)
        guard doc["status"]?.stringValue == "ok", let raw = doc["entries"]?.arrayValue, raw.count <= limit,
              let truncated = doc["truncated"]?.boolValue else {
            throw .malformedAnswer(verb: "list", reason: "not a list of at most \(limit) entries")
        }
        var entries: [LaneEntry] = []
        var last = after ?? ""
        for e in raw {
            guard let folder = e["inbox"]?.stringValue, Self.isAppendToken(folder), inbox == nil || folder == inbox,
                  let id = e["file_id"]?.stringValue, Self.isMessageID(id), id > last,
                  let received = e["received"]?.intValue else {
                throw .malformedAnswer(verb: "list", reason: "an entry with a malformed or out-of-order id, or one not asked for")
            }
            last = id
            entries.append(LaneEntry(inbox: folder, id: id, receivedMs: received))
        }
        return (entries, truncated)
    }

    /// Every pending message, page by page (bounded at ``maxPages`` pages).
    public func listAll(inbox: String? = nil) throws(AppendLaneError) -> [LaneEntry] {
        var all: [LaneEntry] = []
        var after: String?
        for _ in 0..<Self.maxPages {
            let page = try list(inbox: inbox, after: after)
            all += page.entries
            guard page.truncated, let last = page.entries.last else { return all }
            after = last.id
        }
        throw .malformedAnswer(verb: "list", reason: "more than \(Self.maxPages) pages of messages")
    }

    /// The bytes of `ids` from token folder `inbox` (at most ``maxBatch``); the ids the server no
    /// longer holds come back in `missing`.
    public func fetch(inbox: String, ids: [String]) throws(AppendLaneError) -> (messages: [LaneMessage], missing: [String]) {
        try checkBatch(inbox: inbox, ids: ids)
        var messages: [LaneMessage] = [], missing: [String] = []
        for start in stride(from: 0, to: ids.count, by: Self.fetchChunk) {
            let chunk = Array(ids[start..<min(start + Self.fetchChunk, ids.count)])
            let doc = try call("fetch", body: Self.batchBody(inbox: inbox, ids: chunk), key: .enumeration, maxBytes: Self.maxFetchAnswerBytes)
            guard doc["status"]?.stringValue == "ok", let files = doc["files"]?.arrayValue,
                  let gone = doc["missing"]?.arrayValue?.compactMap(\.stringValue) else {
                throw .malformedAnswer(verb: "fetch", reason: "no files and missing lists")
            }
            var answered = Set<String>()
            for f in files {
                guard let id = f["file_id"]?.stringValue, chunk.contains(id), answered.insert(id).inserted,
                      let b64 = f["content"]?.stringValue, b64.utf8.count <= (Self.maxPayloadBytes / 3 + 1) * 4,
                      let bytes = try? Base64.decode(b64), bytes.count <= Self.maxPayloadBytes,
                      f["size"]?.intValue == Int64(bytes.count) else {
                    throw .malformedAnswer(verb: "fetch", reason: "a file not asked for, twice, over 5 MiB, or whose size is not its content's")
                }
                messages.append(LaneMessage(inbox: inbox, id: id, bytes: bytes))
            }
            guard gone.allSatisfy({ chunk.contains($0) && !answered.contains($0) }), answered.count + Set(gone).count == chunk.count else {
                throw .malformedAnswer(verb: "fetch", reason: "the ids answered are not the ids asked for")
            }
            missing += gone
        }
        return (messages, missing)
    }

    /// Moves `ids` of token folder `inbox` to the server's processed folder: read, for SiteKeep
    /// and for the web client alike. Returns the ids moved and those the server did not hold.
    public func markProcessed(inbox: String, ids: [String]) throws(AppendLaneError) -> (moved: [String], missing: [String]) {
        try checkBatch(inbox: inbox, ids: ids)
        let doc = try call("mark-processed", body: Self.batchBody(inbox: inbox, ids: ids), key: .enumeration, maxBytes: Self.maxSmallAnswerBytes)
        return try Self.split(doc, "moved", asked: ids, verb: "mark-processed")
    }

    /// Which folder ``purge(_:inbox:ids:)`` deletes from.
    public enum Folder: String, Sendable { case pending, processed }

    /// Deletes `ids` (or, for `.processed` with `ids` nil, every processed message) of token
    /// folder `inbox`. Owner: needs the write key.
    public func purge(_ folder: Folder, inbox: String, ids: [String]?) throws(AppendLaneError) -> (purged: [String], missing: [String]) {
        if let ids { try checkBatch(inbox: inbox, ids: ids) } else if !Self.isAppendToken(inbox) { throw .invalidAppendToken }
        if folder == .pending && ids == nil { return ([], []) }
        var members = [JSONMember(key: "folder", value: .string(folder.rawValue)), JSONMember(key: "inbox", value: .string(inbox))]
        if let ids { members.append(JSONMember(key: "file_ids", value: .array(ids.map { .string($0) }))) }
        let doc = try call("purge", body: .object(members), key: .write, maxBytes: Self.maxListAnswerBytes)
        if let ids { return try Self.split(doc, "purged", asked: ids, verb: "purge") }
        guard doc["status"]?.stringValue == "ok", let purged = doc["purged"]?.arrayValue?.compactMap(\.stringValue),
              purged.count <= Self.maxPending * 10, purged.allSatisfy(Self.isMessageID) else {
            throw .malformedAnswer(verb: "purge", reason: "no list of purged ids")
        }
        return (purged, [])
    }

    // MARK: requests

    func checkBatch(inbox: String, ids: [String]) throws(AppendLaneError) {
        guard Self.isAppendToken(inbox) else { throw .invalidAppendToken }
        guard !ids.isEmpty else { throw .rejected(verb: "batch", detail: "no message ids given; nothing was sent") }
        guard ids.count <= Self.maxBatch else { throw .tooManyIDs(ids.count) }
        if let bad = ids.first(where: { !Self.isMessageID($0) }) { throw .invalidMessageID(bad) }
    }

    static func batchBody(inbox: String, ids: [String]) -> JSONValue {
        .object([JSONMember(key: "inbox", value: .string(inbox)), JSONMember(key: "file_ids", value: .array(ids.map { .string($0) }))])
    }

    /// An answer's `key` list and `missing` list: together exactly the ids asked, once each.
    static func split(_ doc: JSONValue, _ key: String, asked: [String], verb: String) throws(AppendLaneError) -> ([String], [String]) {
        guard doc["status"]?.stringValue == "ok", let done = doc[key]?.arrayValue?.compactMap(\.stringValue),
              let missing = doc["missing"]?.arrayValue?.compactMap(\.stringValue),
              (done + missing).sorted() == Set(asked).sorted(), done.count + missing.count == Set(asked).count else {
            throw .malformedAnswer(verb: verb, reason: "the ids answered are not the ids asked for")
        }
        return (done, missing)
    }

    /// Which vault credential a verb's header carries.
    enum VaultKey { case write, enumeration }

    /// One POST to `/api/vault/append/VERB/VAULT`, its 2xx answer parsed; statuses mapped.
    func call(_ verb: String, body: JSONValue, key: VaultKey?, maxBytes: Int) throws(AppendLaneError) -> JSONValue {
        let headers = try secretHeaders(key)
        var request = HTTPRequest(method: "POST", url: "\(baseURL)/api/vault/append/\(verb)/\(vaultID)",
                                  headers: [("Content-Type", "application/json")], body: JSONSerializer.bytes(body),
                                  totalTimeoutMs: SGSendRemote.totalTimeoutMs(sending: 8 << 20), maxResponseBytes: maxBytes)
        request.caFile = caFile
        let r: HTTPResponse
        do { r = try HTTPClient.send(request, secretHeaders: headers) } catch {
            switch error.kind {
            case .tooLarge:
                throw .malformedAnswer(verb: verb, reason: "larger than \(SGSendRemote.size(maxBytes)), the most SiteKeep reads of it")
            default:
                throw .unavailable(verb: verb, reason: error.description, transient: error.isTransient)
            }
        }
        let detail = String(SGSendRemote.detail(r.body).dropFirst(2))
        switch r.status {
        case 200:
            guard let doc = try? JSONParser.parse(r.body, limits: JSONLimits(maxBytes: maxBytes, maxDepth: 6, maxStringBytes: 8 << 20, maxElements: 20_000)) else {
                throw .malformedAnswer(verb: verb, reason: "not JSON")
            }
            return doc
        case 400: throw .rejected(verb: verb, detail: detail)
        case 401: throw .accessTokenRefused
        case 403:
            switch key {
            case .none: throw .appendTokenRefused
            case .enumeration: throw .enumKeyRefused
            case .write: throw .writeKeyRefused
            }
        case 413: throw verb == "write" ? .payloadTooLarge(bytes: nil) : .malformedAnswer(verb: verb, reason: "413 from the server")
        case 507: throw .laneFull
        case 300...399: throw .unavailable(verb: verb, reason: "the server answered \(r.status), a redirect; SiteKeep follows none and sent nothing there: check the server's URL", transient: false)
        case 429, 502, 503, 504: throw .unavailable(verb: verb, reason: "the server answered \(r.status)", transient: true)
        default: throw .unavailable(verb: verb, reason: "unexpected status \(r.status)\(detail.isEmpty ? "" : ": " + detail)", transient: r.status >= 500)
        }
    }

    /// The access token (when there is one) and the verb's vault key, in guarded header memory.
    func secretHeaders(_ key: VaultKey?) throws(AppendLaneError) -> SecretHeaderBlock {
        var values: [[UInt8]] = [], names: [String] = []
        defer { for i in values.indices { SecureMemory.zero(&values[i]) } }
        if var t = try credentials.accessTokenBytes() {
            if !t.isEmpty { values.append(t.map { $0 }); names.append("x-sgraph-access-token") }
            SecureMemory.zero(&t)
        }
        switch key {
        case .write?:
            guard let w = try credentials.writeKeyHex() else { throw .readOnly }
            values.append(Array(w.utf8)); names.append("x-sgraph-vault-write-key")
        case .enumeration?:
            guard let e = try credentials.enumKeyHex() else { throw .readOnly }
            values.append(Array(e.utf8)); names.append("x-sgraph-vault-enum-key")
        case nil: break
        }
        let lines = names.indices.map { (name: names[$0], valueCount: values[$0].count) }
        do {
            return try SecretHeaderBlock(lines: lines) { (i: Int, buffer: UnsafeMutableRawBufferPointer) throws(HTTPTransportError) in
                values[i].withUnsafeBytes { buffer.copyMemory(from: $0) }
            }
        } catch {
            throw .unavailable(verb: "call", reason: "the credentials cannot be sent: \(error.description)", transient: false)
        }
    }
}
