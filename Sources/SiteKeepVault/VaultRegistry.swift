import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One registered vault: a name, the folder, public facts about it (no key), the site that
/// owns it, the signers trusted for it and its signature policy.
///
/// The owner, pins and policy are what bridge and read decisions rest on, so a record carries a
/// ``tag`` made by custody over ``taggedBytes`` (HMAC-SHA256 under a key derived from the master
/// key): a record edited without the master key fails authentication. Records written before
/// vaults had owners carry no tag; they are read as owned by no site (reachable from the CLI
/// only), without pins (pinned at their first use) and with signatures required.
public struct VaultRecord: Sendable, Equatable {
    /// The name the user gave at `vault add`.
    public let name: String
    /// The working-copy folder.
    public let path: String
    /// The vault id (public).
    public let vaultID: String
    /// Whether only a read key was given.
    public let readOnly: Bool
    /// The id of the site that owns the vault; nil: no site (the bridge never serves it).
    public var siteID: String?
    /// Serve unsigned commits and untrusted signers (`--allow-unsigned`).
    public var allowUnsigned: Bool
    /// The pinned signers; nil for a record written before pins (pinned at first use).
    public var signers: [SignerPin]?
    /// Custody's tag over ``taggedBytes``; nil for a record written before tags.
    public var tag: [UInt8]?

    public init(name: String, path: String, vaultID: String, readOnly: Bool, siteID: String? = nil,
                allowUnsigned: Bool = false, signers: [SignerPin]? = nil, tag: [UInt8]? = nil) {
        self.name = name
        self.path = path
        self.vaultID = vaultID
        self.readOnly = readOnly
        self.siteID = siteID
        self.allowUnsigned = allowUnsigned
        self.signers = signers
        self.tag = tag
    }

    /// `^[A-Za-z0-9_.-]{1,64}$`, not starting with '.'.
    public static func isValidName(_ name: String) -> Bool {
        let u = name.utf8
        return (1...64).contains(u.count) && u.first != UInt8(ascii: ".") && u.allSatisfy {
            (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || $0 == 0x5f || $0 == 0x2d || $0 == 0x2e
        }
    }

    /// Whether the record was written before owners, pins and tags (today's format minus them).
    public var isLegacy: Bool { tag == nil }

    /// What the tag covers: every field but the tag, in one canonical JSON form, after a
    /// domain label.
    public var taggedBytes: [UInt8] {
        Array("sitekeep.vault-record.v1\0".utf8) + JSONSerializer.bytes(json(withTag: false), style: .canonical)
    }

    func json(withTag: Bool) -> JSONValue {
        var m: [JSONMember] = [
            JSONMember(key: "name", value: .string(name)), JSONMember(key: "path", value: .string(path)),
            JSONMember(key: "vault_id", value: .string(vaultID)), JSONMember(key: "read_only", value: .bool(readOnly)),
        ]
        // A record written before tags keeps exactly today's form.
        guard tag != nil || !withTag else { return .object(m) }
        m.append(JSONMember(key: "site_id", value: .string(siteID)))
        m.append(JSONMember(key: "allow_unsigned", value: .bool(allowUnsigned)))
        m.append(JSONMember(key: "signers", value: .array((signers ?? []).map { p in
            .object([JSONMember(key: "key_id", value: .string(p.keyID)), JSONMember(key: "sha256", value: .string(p.fingerprint)),
                     JSONMember(key: "source", value: .string(p.source.rawValue))])
        })))
        if withTag, let tag { m.append(JSONMember(key: "tag", value: .string(Hex.encode(tag)))) }
        return .object(m)
    }

    static func parse(_ value: JSONValue, object: String) throws(VaultError) -> VaultRecord {
        let r = try Fields(value, object: object)
        var record = VaultRecord(name: try r.string("name"), path: try r.string("path"), vaultID: try r.string("vault_id"),
                                 readOnly: try r.bool("read_only", default: false))
        // Owner, pins and policy count only under a tag: without one they are ignored (old code
        // never wrote them, so they were written outside SiteKeep).
        guard let tagText = try r.optionalString("tag") else { return record }
        guard tagText.utf8.count == 64, tagText.utf8.allSatisfy(Identifiers.isLowerHex), let tag = try? Hex.decode(tagText) else {
            throw .malformed(object: object, reason: "tag is not 64 lower-case hex digits")
        }
        record.tag = tag
        record.siteID = try r.optionalString("site_id")
        record.allowUnsigned = try r.bool("allow_unsigned", default: false)
        var pins: [SignerPin] = []
        for (i, p) in try r.array("signers").enumerated() {
            let f = try Fields(p, object: "\(object) signer \(i)")
            let raw = try f.string("key_id")
            guard let key = Identifiers.keyID(raw) else { throw .invalidID(kind: "key id", value: raw, in: object) }
            let fingerprint = try f.string("sha256")
            guard SignerPin.isFingerprint(fingerprint) else { throw .malformed(object: object, reason: "signer \(i) sha256 is not 64 lower-case hex digits") }
            let sourceText = try f.string("source")
            guard let source = SignerPin.Source(rawValue: sourceText) else {
                throw .malformed(object: object, reason: "signer \(i) has unknown source \(VaultError.quoted(sourceText))")
            }
            pins.append(SignerPin(keyID: key, fingerprint: fingerprint, source: source))
        }
        record.signers = pins
        return record
    }
}

/// The list of registered vaults, one JSON file (mode 0600, replaced atomically).
/// It holds names, folders, vault ids, owners, pins and policies; keys live in a ``VaultKeyStore``.
///
/// The parsed records are kept with the file's ``FileStamp`` (taken before the read), so a
/// bridge call costs one `lstat`, not a read and a parse (in the daemon, whose library watches
/// the folder, one read of its inotify queue): another process's `vault add`
/// or `vault assign` replaces the file (a new inode), and the next call reads it again. A stamp
/// younger than the settle margin is not trusted (the file is read again), as HEAD's memo does.
/// The records are public facts (no key, no decrypted byte); authentication stays with the
/// caller (``VaultLibrary`` checks each record's tag).
public struct VaultRegistry: Sendable {
    /// The registry file.
    public let file: String
    private let memo = RecordsMemo()
    /// Told each time the file is read and parsed; none in production.
    private let observer: (any VaultObserver)?

    /// The registry in `file`; `observer` (none in production) is told each time the file is
    /// read and parsed rather than served from the kept records.
    public init(file: String, observer: (any VaultObserver)? = nil) {
        self.file = file
        self.observer = observer
    }

    /// Every record, in the order added.
    public func records() throws(VaultError) -> [VaultRecord] {
        // With a watch (the daemon's library): one read of the inotify queue, no path lookup.
        let generation = memo.watchGeneration()
        if let generation, let kept = memo.records(ifGeneration: generation) { return kept }
        let stamp = FileStamp.of(file)
        if let stamp, let kept = memo.records(ifStamp: stamp, nowGoodAt: generation) { return kept }
        let bytes: [UInt8]
        switch try FileAccess.read(file, limit: 4 << 20, object: file) {
        case .missing:
            memo.parsed([], stamp: nil, generation: generation)
            observer?.registryParsed()
            return []
        case .bytes(let b): bytes = b
        }
        let f = try Fields(parsing: bytes, object: file)
        var out: [VaultRecord] = []
        for (i, v) in try f.array("vaults").enumerated() {
            out.append(try VaultRecord.parse(v, object: "\(file) vault \(i)"))
        }
        // Kept only when the file was settled before the read and unchanged after it.
        let keep = stamp.map { $0.isSettled() && FileStamp.of(file) == $0 } ?? false
        memo.parsed(out, stamp: keep ? stamp : nil, generation: generation)
        observer?.registryParsed()
        return out
    }

    /// Serves the records by `watch` (which must watch the registry file's folder): while its
    /// generation stays the same, nothing is looked up on disk.
    func follow(_ watch: ChangeWatch) { memo.follow(watch) }

    /// The record named `name`.
    public func record(named name: String) throws(VaultError) -> VaultRecord {
        guard let r = try records().first(where: { $0.name == name }) else { throw .unknownVault(name: name) }
        return r
    }

    func write(_ records: [VaultRecord]) throws(VaultError) {
        memo.clear()
        let doc = JSONValue.object([JSONMember(key: "vaults", value: .array(records.map { $0.json(withTag: true) }))])
        try FileAccess.writeDurably(JSONSerializer.bytes(doc, style: .pretty) + [0x0a], to: file)
    }

    /// Adds a record; refuses a name in use.
    public func add(_ record: VaultRecord) throws(VaultError) {
        guard VaultRecord.isValidName(record.name) else { throw .invalidVaultName(record.name) }
        var all = try records()
        if all.contains(where: { $0.name == record.name }) { throw .vaultExists(name: record.name) }
        all.append(record)
        try write(all)
    }

    /// Replaces the record of the same name; throws ``VaultError/unknownVault(name:)`` if absent.
    public func update(_ record: VaultRecord) throws(VaultError) {
        var all = try records()
        guard let i = all.firstIndex(where: { $0.name == record.name }) else { throw .unknownVault(name: record.name) }
        all[i] = record
        try write(all)
    }

    /// Removes a record; throws ``VaultError/unknownVault(name:)`` if absent.
    public func remove(named name: String) throws(VaultError) {
        var all = try records()
        guard all.contains(where: { $0.name == name }) else { throw .unknownVault(name: name) }
        all.removeAll { $0.name == name }
        try write(all)
    }
}

/// The last records parsed from a registry file, the stamp the file had before that read, and
/// the generation of the library's ``ChangeWatch`` it is known good for.
private final class RecordsMemo: Sendable {
    private struct State {
        var records: [VaultRecord] = []
        var stamp: FileStamp?
        var watched: UInt64?
        var watch: ChangeWatch?
    }
    private let state = Mutex(State())

    func follow(_ watch: ChangeWatch) { state.withLock { $0.watch = watch; $0.watched = nil } }

    /// The watch's generation (it drains first), nil without a watch.
    func watchGeneration() -> UInt64? { state.withLock { $0.watch }?.generation() }

    func records(ifGeneration generation: UInt64) -> [VaultRecord]? {
        state.withLock { $0.watched == generation ? $0.records : nil }
    }

    /// The records when the file still has `stamp`; they are then known good as of `generation`
    /// (taken before the stamp) too.
    func records(ifStamp stamp: FileStamp, nowGoodAt generation: UInt64?) -> [VaultRecord]? {
        state.withLock { s in
            guard s.stamp == stamp else { return nil }
            if let generation { s.watched = generation }
            return s.records
        }
    }

    /// Records what one read of the file parsed: served again while the file keeps `stamp`
    /// (nil: not by stamp), or while the watch stays at `generation` (taken before the read).
    func parsed(_ records: [VaultRecord], stamp: FileStamp?, generation: UInt64?) {
        state.withLock { s in
            s.records = stamp == nil && generation == nil ? [] : records
            s.stamp = stamp
            s.watched = generation
        }
    }

    func clear() { state.withLock { s in s.records = []; s.stamp = nil; s.watched = nil } }
}
