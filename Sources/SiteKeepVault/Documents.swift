import SiteKeepJSON
import SiteKeepCrypto

/// Typed access to a JSON object in the way sgit's schema layer reads it: unknown members are
/// ignored, absent members take their defaults, and a member of the wrong JSON type refuses
/// the whole document.
struct Fields {
    let members: [JSONMember]
    let object: String

    init(_ value: JSONValue, object: String) throws(VaultError) {
        guard case .object(let m) = value else { throw .malformed(object: object, reason: "not a JSON object") }
        members = m
        self.object = object
    }

    init(parsing bytes: [UInt8], object: String, limits: JSONLimits = .document) throws(VaultError) {
        let value: JSONValue
        do { value = try JSONParser.parse(bytes, limits: limits) } catch {
            throw .malformed(object: object, reason: "not valid JSON (\(error))")
        }
        try self.init(value, object: object)
    }

    func value(_ key: String) -> JSONValue? {
        members.last { $0.key.utf8.elementsEqual(key.utf8) }?.value
    }

    private func wrong(_ key: String, _ expected: String, _ v: JSONValue) -> VaultError {
        .malformed(object: object, reason: "field \(key) must be \(expected), found \(v.typeName)")
    }

    /// Absent or null → nil; a string → it; anything else refuses.
    func optionalString(_ key: String) throws(VaultError) -> String? {
        guard let v = value(key) else { return nil }
        switch v {
        case .null: return nil
        case .string(let s): return s
        default: throw wrong(key, "a string or null", v)
        }
    }

    func string(_ key: String) throws(VaultError) -> String {
        guard let s = try optionalString(key) else {
            throw .malformed(object: object, reason: "field \(key) is missing")
        }
        return s
    }

    func optionalInt(_ key: String) throws(VaultError) -> Int64? {
        guard let v = value(key) else { return nil }
        switch v {
        case .null: return nil
        case .int(let i): return i
        default: throw wrong(key, "an integer or null", v)
        }
    }

    func bool(_ key: String, default d: Bool) throws(VaultError) -> Bool {
        guard let v = value(key) else { return d }
        guard case .bool(let b) = v else { throw wrong(key, "a boolean", v) }
        return b
    }

    func array(_ key: String) throws(VaultError) -> [JSONValue] {
        guard let v = value(key) else { return [] }
        switch v {
        case .array(let a): return a
        case .null: return []
        default: throw wrong(key, "an array", v)
        }
    }

    func objectID(_ key: String, kind: String) throws(VaultError) -> ObjectID? {
        guard let s = try optionalString(key) else { return nil }
        guard let id = ObjectID(s) else { throw .invalidID(kind: kind, value: s, in: "\(object) field \(key)") }
        return id
    }
}

/// One decrypted tree entry. The decrypted fields are kept as bytes, which the object cache
/// can zero in place on lock (a `String`'s storage cannot be); the `String` forms are made when
/// asked for.
struct TreeEntry: Sendable {
    enum Kind: Sendable { case file(ObjectID), folder(ObjectID) }
    private(set) var nameBytes: [UInt8]
    let kind: Kind
    private(set) var size: Int?
    private var contentHashBytes: [UInt8]?
    private var contentTypeBytes: [UInt8]?
    let large: Bool

    init(nameBytes: [UInt8], kind: Kind, size: Int?, contentHash: String?, contentType: String?, large: Bool,
         encoded: EncodedFields? = nil) {
        self.encoded = encoded
        self.nameBytes = nameBytes
        self.kind = kind
        self.size = size
        contentHashBytes = contentHash.map { Array($0.utf8) }
        contentTypeBytes = contentType.map { Array($0.utf8) }
        self.large = large
    }

    var name: String { String(decoding: nameBytes, as: UTF8.self) }
    var contentHash: String? { contentHashBytes.map { String(decoding: $0, as: UTF8.self) } }
    var contentType: String? { contentTypeBytes.map { String(decoding: $0, as: UTF8.self) } }

    /// Zeroes the decrypted fields in their own storage.
    mutating func zeroInPlace() {
        SecureMemory.zero(&nameBytes)
        if var b = contentHashBytes { contentHashBytes = nil; SecureMemory.zero(&b); contentHashBytes = b }
        if var b = contentTypeBytes { contentTypeBytes = nil; SecureMemory.zero(&b); contentTypeBytes = b }
        size = size.map { _ in 0 }
    }
    /// The entry's stored `*_enc` fields, reused verbatim when a writer carries it over.
    var encoded: EncodedFields? = nil
}

/// A decrypted, parsed tree (§4.1, §4.2).
struct Tree: Sendable {
    let id: ObjectID
    private(set) var entries: [TreeEntry]
    /// Approximate memory held, for the cache.
    let cost: Int

    init(id: ObjectID, entries: [TreeEntry], cost: Int) {
        self.id = id
        self.entries = entries
        self.cost = cost
    }

    func entry(named name: [UInt8]) -> TreeEntry? {
        entries.first { $0.nameBytes == name }
    }

    /// Zeroes every entry's decrypted fields in place.
    mutating func zeroInPlace() {
        for i in entries.indices { entries[i].zeroInPlace() }
    }
}

/// A parsed commit, normalised as §4.3 says (the ten fields, ids trimmed and lower-cased).
public struct Commit: Sendable, Equatable {
    /// The commit's object id.
    public let id: ObjectID
    /// The root tree.
    public let treeID: ObjectID
    /// Parent commits, first parent first.
    public let parents: [ObjectID]
    /// Milliseconds since the epoch.
    public let timestampMs: Int64
    /// The branch that wrote it (as stored; may be empty or nil).
    public let branchID: String?
    /// The key id that signed it, if any.
    public let authorKeyID: String?
    /// The decrypted message; nil when absent.
    public internal(set) var message: String?
    /// The signature check's outcome.
    public internal(set) var signature: SignatureStatus
    /// The key the signature was checked against (`author_key_id`, or for a legacy commit the
    /// public key of its branch in the index); nil when unsigned or no key is named.
    public internal(set) var signerKeyID: String? = nil
    /// Lower-case hex SHA-256 of that key's SPKI DER; nil when its key file is missing.
    public internal(set) var signerFingerprint: String? = nil
    /// How the commit stands under the vault's trust rule (set by ``Vault/log(limit:)``).
    public internal(set) var trust: CommitTrust? = nil

    // Kept for the signing bytes.
    let messageEnc: String?
    let rawSignature: String?
    let authorSignature: JSONValue
    let attestations: [JSONValue]
    let rawTreeID: String
    let rawParents: [String]
    let schema: String?

    /// The canonical signing bytes (§4.4): the normalised commit without `signature`, keys
    /// sorted, no whitespace (built by ``CommitEncoding``, as a writer signs them).
    var canonicalSigningBytes: [UInt8] {
        CommitEncoding.signingBytes(schema: schema, treeID: rawTreeID, messageEnc: messageEnc, branchID: branchID,
                                    authorKeyID: authorKeyID, authorSignature: authorSignature, parents: rawParents,
                                    timestampMs: timestampMs, attestations: attestations)
    }

    /// The legacy signing bytes (§4.4), for commits without `author_key_id`: Python's form, in
    /// written order, with `signature` null.
    var legacySigningBytes: [UInt8] {
        JSONSerializer.bytes(.object([
            JSONMember(key: "schema", value: .string(schema)),
            JSONMember(key: "tree_id", value: .string(rawTreeID)),
            JSONMember(key: "message_enc", value: .string(messageEnc)),
            JSONMember(key: "branch_id", value: .string(branchID)),
            JSONMember(key: "signature", value: .null),
            JSONMember(key: "author_key_id", value: .string(authorKeyID)),
            JSONMember(key: "author_signature", value: authorSignature),
            JSONMember(key: "parents", value: .array(rawParents.map { .string($0) })),
            JSONMember(key: "timestamp_ms", value: .int(timestampMs)),
            JSONMember(key: "attestations", value: .array(attestations)),
        ]), style: .python)
    }
}

/// The outcome of checking one commit's signature (§4.4).
public enum SignatureStatus: String, Sendable, Equatable {
    /// The signature verifies under the key the vault names.
    case verified
    /// A signature is present and does not verify.
    case bad
    /// No signature.
    case unsigned
    /// Signed, but the named key is unknown or its key file is missing.
    case noKey = "no-key"
}

/// A branch entry of the branch index (§4.6).
struct Branch: Sendable {
    let branchID: String
    let name: String
    let type: String
    let headRefID: String
    let publicKeyID: String?
}

/// The branch index (§4.6), the parts a reader needs.
struct BranchIndex: Sendable {
    let format: Int
    let minClient: String?
    let branches: [Branch]
    let features: [String]

    /// The vault's own policy: commits after the `signed-since-` anchor must be signed.
    var signaturesRequired: Bool { features.contains(VaultFeatures.signaturesRequired) }
    /// The `signed-since-` anchor: the hex prefix of the commit the policy starts after.
    var signedSince: String? { VaultFeatures.anchor(in: features) }

    /// Whether some branch lists `keyID` as its public key.
    func lists(_ keyID: String) -> Bool { branches.contains { $0.publicKeyID == keyID } }
}

/// Semantic-version comparison for the `min_client` gate; unparseable means no minimum.
enum SemVer {
    static func parse(_ s: String) -> [Int]? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var out: [Int] = []
        for p in parts {
            guard !p.isEmpty, p.count <= 9, p.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(p) else { return nil }
            out.append(n)
        }
        return out
    }
}
