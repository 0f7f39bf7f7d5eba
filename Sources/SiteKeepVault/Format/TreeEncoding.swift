import SiteKeepCustody
import SiteKeepCrypto

/// The `*_enc` fields of a tree entry as stored (b64 of a deterministic envelope, §3.3/§3.4).
struct EncodedFields: Sendable, Equatable {
    var name: String
    var size: String? = nil
    var contentHash: String? = nil
    var contentType: String? = nil
}

/// What a file's tree entry records (SGIT-FORMAT.md §4.2, §5.2): one value of the flat map a
/// commit's tree is built from.
public struct FlatFile: Sendable, Equatable {
    /// The blob holding the content.
    public var blobID: ObjectID
    /// Plaintext length.
    public var size: Int
    /// `hex(SHA-256(plaintext))[:12]`.
    public var contentHash: String
    /// The MIME type recorded (see ``MimeTypes``).
    public var contentType: String
    /// Whether the stored blob is over 4 MiB.
    public var large: Bool
}

/// The encoder of tree objects (SGIT-FORMAT.md §3.3, §4.1, §4.2, §5.2), beside the reader's
/// decoder in `Vault.parseTree`. Trees are encrypted deterministically: the same entries give
/// the same bytes, so an unchanged folder keeps its tree id, and a tree built here from the
/// same files is byte-identical to the one sgit builds.
enum TreeEncoding {
    /// One entry ready to serialise.
    struct Entry {
        enum Target { case blob(ObjectID), tree(ObjectID) }
        let nameBytes: [UInt8]
        let target: Target
        let fields: EncodedFields
        let large: Bool
    }

    /// `b64(iv || AES-GCM(read key, iv, text))` with `iv = HMAC(read key, text)[:12]`.
    static func encryptField(_ text: String, key: SymmetricKeyHandle) throws(VaultError) -> String {
        try encryptFieldUntyped(text, key: key)
    }

    /// The field of `reuse` when given, else `text` encrypted.
    static func field(_ reuse: String?, _ text: String, key: SymmetricKeyHandle) throws(VaultError) -> String {
        if let reuse { return reuse }
        return try encryptField(text, key: key)
    }

    private static func encryptFieldUntyped(_ text: String, key: SymmetricKeyHandle) throws(VaultError) -> String {
        Base64.encode(try sealDeterministic(Array(text.utf8), key: key))
    }

    static func sealDeterministic(_ plaintext: [UInt8], key: SymmetricKeyHandle) throws(VaultError) -> [UInt8] {
        do {
            return try Envelope.sealV1(plaintext, key: key, iv: Envelope.deterministicIV(for: plaintext, key: key))
        } catch { throw .io(path: "tree", reason: "encryption failed: \(error)") }
    }

    /// A file entry; `reuse` (the previous entry's stored fields, when name and metadata are
    /// unchanged) saves re-encrypting them and keeps the bytes exactly as they were.
    static func fileEntry(name: String, file: FlatFile, reuse: EncodedFields?, key: SymmetricKeyHandle) throws(VaultError) -> Entry {
        let fields: EncodedFields
        if let reuse { fields = reuse } else {
            fields = EncodedFields(name: try encryptField(name, key: key), size: try encryptField(String(file.size), key: key),
                                   contentHash: try encryptField(file.contentHash, key: key),
                                   contentType: try encryptField(file.contentType, key: key))
        }
        return Entry(nameBytes: Array(name.utf8), target: .blob(file.blobID), fields: fields, large: file.large)
    }

    static func folderEntry(name: String, tree: ObjectID, reuseName: String?, key: SymmetricKeyHandle) throws(VaultError) -> Entry {
        let fields = EncodedFields(name: try field(reuseName, name, key: key))
        return Entry(nameBytes: Array(name.utf8), target: .tree(tree), fields: fields, large: false)
    }

    /// The tree's plaintext exactly as sgit writes it: Python `json.dumps` form, file entries
    /// sorted by name (code point order = UTF-8 byte order), then folder entries sorted by name.
    static func plaintext(_ entries: [Entry]) -> [UInt8] {
        var files: [Entry] = [], folders: [Entry] = []
        for e in entries {
            if case .blob = e.target { files.append(e) } else { folders.append(e) }
        }
        files.sort { $0.nameBytes.lexicographicallyPrecedes($1.nameBytes) }
        folders.sort { $0.nameBytes.lexicographicallyPrecedes($1.nameBytes) }
        var out = Array(#"{"schema": "tree_v1", "entries": ["#.utf8)
        out.reserveCapacity(64 + entries.count * 420)
        for (i, e) in (files + folders).enumerated() {
            if i > 0 { out += Array(", ".utf8) }
            out += Array(#"{"blob_id": "#.utf8)
            if case .blob(let b) = e.target { quote(b.rawValue, &out) } else { out += Array("null".utf8) }
            out += Array(#", "tree_id": "#.utf8)
            if case .tree(let t) = e.target { quote(t.rawValue, &out) } else { out += Array("null".utf8) }
            out += Array(#", "name_enc": "#.utf8); quote(e.fields.name, &out)
            out += Array(#", "size_enc": "#.utf8); optional(e.fields.size, &out)
            out += Array(#", "content_hash_enc": "#.utf8); optional(e.fields.contentHash, &out)
            out += Array(#", "content_type_enc": "#.utf8); optional(e.fields.contentType, &out)
            out += Array(#", "large": "#.utf8); out += Array((e.large ? "true" : "false").utf8)
            out.append(UInt8(ascii: "}"))
        }
        out += Array("]}".utf8)
        return out
    }

    // Every value here is an id or base64: ASCII with nothing to escape.
    private static func quote(_ s: String, _ out: inout [UInt8]) {
        out.append(0x22); out += Array(s.utf8); out.append(0x22)
    }

    private static func optional(_ s: String?, _ out: inout [UInt8]) {
        if let s { quote(s, &out) } else { out += Array("null".utf8) }
    }

    /// The stored bytes of a tree: its plaintext sealed with the deterministic IV.
    static func seal(_ entries: [Entry], key: SymmetricKeyHandle) throws(VaultError) -> [UInt8] {
        try sealDeterministic(plaintext(entries), key: key)
    }
}

/// Object ids of stored bytes (SGIT-FORMAT.md §3.5).
enum ObjectIDs {
    /// `obj-cas-imm-` + the first `width` hex digits of SHA-256 of `stored`.
    static func of(_ stored: [UInt8], width: Int) -> ObjectID {
        // Always valid: 12 or 32 lowercase hex digits.
        ObjectID(ObjectID.prefix + String(Hex.encode(SHA256.hash(stored)).prefix(width)))!
    }

    /// `hex(SHA-256(plaintext))[:12]`, the `content_hash` of a tree entry.
    static func contentHash(_ plaintext: [UInt8]) -> String {
        String(Hex.encode(SHA256.hash(plaintext)).prefix(12))
    }
}

/// The encoder of blobs (§3.1, §3.2), beside `Envelope.open`.
enum BlobEncoding {
    /// v1 with a random IV, or on `blob-deflate` vaults sgz1 when zlib (level 6) saves more than
    /// the 5-byte marker.
    static func seal(_ plaintext: [UInt8], key: SymmetricKeyHandle, deflate: Bool) throws(VaultError) -> [UInt8] {
        do {
            if deflate {
                let packed = try Zlib.compress(plaintext, level: 6)
                if packed.count + 5 < plaintext.count {
                    return Envelope.sgz1Magic + (try Envelope.sealV1(packed, key: key, iv: SecureRandom.bytes(count: 12)))
                }
            }
            return try Envelope.sealV1(plaintext, key: key, iv: SecureRandom.bytes(count: 12))
        } catch { throw .io(path: "blob", reason: "encryption failed: \(error)") }
    }
}

/// The tree's decoder (§4.1, §4.2), beside its encoder: every `*_enc` field decrypted under the
/// read key; fields the web client omits (`content_type_enc`, `large`) read as none and false.
extension Vault {
    /// Parses a decrypted tree strictly: unsafe or duplicate names and fields of the wrong type
    /// refuse the whole tree.
    func parseTree(_ plain: [UInt8], id: ObjectID) throws(VaultError) -> Tree {
        let object = "tree \(id.fileID)"
        let f = try Fields(parsing: plain, object: object)
        let schema = try f.optionalString("schema")
        guard schema == "tree_v1" else {
            throw .malformed(object: object, reason: "schema is \(schema.map { VaultError.quoted($0) } ?? "absent"), which this SiteKeep cannot read; "
                             + "sgit and the sites' web client (sg-vault 0.1.x-0.2.3) write tree_v1: a newer writer made this tree, so update SiteKeep to read it")
        }
        var entries: [TreeEntry] = []
        var seen = Set<[UInt8]>()
        var cost = 128
        for (i, raw) in try f.array("entries").enumerated() {
            let e = try Fields(raw, object: "\(object) entry \(i)")
            let blob = try e.objectID("blob_id", kind: "blob id")
            let sub = try e.objectID("tree_id", kind: "tree id")
            guard let nameEnc = try e.optionalString("name_enc") else { continue }
            let sizeEnc = try e.optionalString("size_enc")
            let hashEnc = try e.optionalString("content_hash_enc")
            let typeEnc = try e.optionalString("content_type_enc")
            let large = try e.bool("large", default: false)
            let name = try decryptField(nameEnc, object: object, field: "name_enc")
            if name.isEmpty { continue }
            let nameBytes = Array(name.utf8)
            if nameBytes.contains(UInt8(ascii: "/")) || nameBytes.contains(0) || name == "." || name == ".." {
                throw .malformed(object: object, reason: "entry \(i) has an unsafe name \(VaultError.quoted(name))")
            }
            guard seen.insert(nameBytes).inserted else {
                throw .malformed(object: object, reason: "two entries are named \(VaultError.quoted(name))")
            }
            let kind: TreeEntry.Kind
            if let blob { kind = .file(blob) } else if let sub { kind = .folder(sub) } else { continue }
            var size: Int?
            if let sizeEnc, case .file = kind {
                let text = try decryptField(sizeEnc, object: object, field: "size_enc")
                guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let n = Int(text) else {
                    throw .malformed(object: object, reason: "entry \(VaultError.quoted(name)) has a size that is not a decimal number")
                }
                size = n
            }
            var hash: String?
            if let hashEnc, case .file = kind { hash = try decryptField(hashEnc, object: object, field: "content_hash_enc") }
            var type: String?
            if let typeEnc, case .file = kind { type = try decryptField(typeEnc, object: object, field: "content_type_enc") }
            cost += 160 + nameBytes.count + (type?.utf8.count ?? 0)
            entries.append(TreeEntry(nameBytes: nameBytes, kind: kind, size: size, contentHash: hash,
                                     contentType: type, large: large,
                                     encoded: EncodedFields(name: nameEnc, size: sizeEnc, contentHash: hashEnc, contentType: typeEnc)))
        }
        return Tree(id: id, entries: entries, cost: cost)
    }
}
