public import SiteKeepCustody
import SiteKeepSystem
import SiteKeepCrypto
import SiteKeepJSON
import Synchronization

/// Size and depth bounds for everything read from a vault (all vault data is untrusted).
public struct VaultLimits: Sendable, Equatable {
    /// Largest stored blob (ciphertext) and largest plaintext a blob may inflate to.
    public var maxBlobBytes: Int = 1 << 30
    /// Largest stored tree.
    public var maxTreeBytes: Int = 16 << 20
    /// Largest stored commit.
    public var maxCommitBytes: Int = 1 << 20
    /// Largest ref, index, key, config file.
    public var maxSmallFileBytes: Int = 16 << 20
    /// Deepest folder nesting walked.
    public var maxTreeDepth: Int = 128
    /// Most entries one listing returns.
    public var maxListedEntries: Int = 1_000_000
    /// Most commits `log` and `verify` walk.
    public var maxCommits: Int = 1_000_000
    public init() {}
}

/// How a vault is opened.
public struct VaultOptions: Sendable, Equatable {
    /// Bounds on sizes and depths.
    public var limits = VaultLimits()
    /// Which commits reads serve (see ``VaultTrust``). The default refuses unsigned commits and
    /// signers the branch index does not list; registered vaults are read with their pins.
    public var trust = VaultTrust()
    /// The object cache's approximate budget in bytes.
    public var cacheBytes = 64 << 20
    public init() {}
}

/// One file of a listing.
public struct VaultEntry: Sendable, Equatable {
    /// The full path from the vault root.
    public let path: VaultPath
    /// The plaintext size recorded in the tree.
    public let size: Int
    /// The MIME type recorded by the writer, if any.
    public let contentType: String?
    /// The blob holding the content.
    public let blobID: ObjectID
    /// `hex(SHA-256(plaintext))[:12]` as recorded.
    public let contentHash: String?
    /// Whether the stored blob is over 4 MiB.
    public let large: Bool
}

/// What `status` reports.
public struct VaultStatus: Sendable, Equatable {
    /// The vault id.
    public let vaultID: String
    /// The HEAD commit, nil for a vault without commits.
    public let headCommit: ObjectID?
    /// The HEAD branch's name (`local` for a clone branch, `current` for the main named one).
    public let branchName: String
    /// The HEAD branch id; nil when the vault has no index.
    public let branchID: String?
    /// 1 (12-hex ids) or 2 (32-hex ids) for new objects.
    public let format: Int
    /// The index's feature list.
    public let features: [String]
    /// True when only the read key is held, or the folder is a read-only clone.
    public let isReadOnly: Bool
    /// The HEAD commit's signature status.
    public let headSignature: SignatureStatus?
    /// How HEAD stands under the trust rule.
    public let headTrust: CommitTrust?
    /// Whether reads serve HEAD (false: they answer ``VaultError/unverifiedCommit(commit:trust:vault:requiredByVault:)``).
    public let headServed: Bool
    /// Why HEAD is not served, when it is not.
    public let headRefusal: VaultError?
    /// The HEAD commit's time.
    public let headTimestampMs: Int64?
    /// The HEAD commit's message; nil when HEAD is not served (an untrusted commit's words are not shown).
    public let headMessage: String?
    /// Every key the branch index lists (without an index: HEAD's signer), and where it stands.
    public let signers: [SignerState]
    /// Whether the store allows unsigned commits and untrusted signers for this vault.
    public let allowUnsigned: Bool
    /// Whether signers are checked against pins (registered vaults always are).
    public let pinned: Bool
    /// The vault's own policy (`signatures-required`), and its `signed-since-` anchor.
    public let signaturesRequired: Bool
    public let signedSince: String?
}

/// An sgit vault working copy opened for reading with keys held by custody.
///
/// Every object read from disk has its id checked against SHA-256 of its bytes, decrypts under
/// the read key handle and parses strictly before anything from it is used; commits have their
/// signatures checked. Verified trees, commits and small blobs are cached by id.
/// Refs and the index are mutable, so HEAD is re-read on every call.
///
/// The keys and the object cache live in ``LockBound``s of the keys' ``SgitKeys/lockScope``
/// (custody's, for keys custody unwrapped): after a lock the vault holds no key and no decrypted
/// byte, and every call throws ``VaultError/keysUnavailable(_:)``; the library opens a new one
/// after the next unlock.
public final class Vault: Sendable {
    /// The working-copy folder.
    public let root: String
    /// The vault id.
    public let vaultID: String
    let bare: String
    let local: String
    private let keyCell: LockBound<SgitKeys?>
    let options: VaultOptions
    let cache: ObjectCache
    /// The last HEAD resolved and the stamps of the files it was read from (see
    /// ``resolveHead()``); in the keys' lock scope, so a lock drops it with the keys.
    private let headMemo: LockBound<HeadMemo>
    /// The files HEAD is read from that do not depend on the branch: the clone's config and
    /// mode and the branch index. Names, not secrets (the index's name is an HMAC of the vault
    /// id, as on disk), computed once: a memo check stats them and computed the index's name
    /// with an HMAC on every read before.
    private let fixedHeadFiles: [String]
    /// Told when HEAD is resolved from its files and when the kept HEAD's files are stamped;
    /// none in production.
    private let observer: (any VaultObserver)?
    /// The library's watch on the folders HEAD is read from, when it keeps one (the daemon's).
    private let changeWatch = Mutex<ChangeWatch?>(nil)
    /// The trust rule in force, and the authenticated registry record it was read from (the
    /// library re-reads the record on every call and checks its tag again when it changed).
    private let trustState: Mutex<(trust: VaultTrust, record: VaultRecord?)>
    /// Where damaged fetched objects are fetched again from (``setRefetch(_:)``).
    let refetchSource = Mutex<ObjectRefetch?>(nil)
    /// The objects reachable from the remote's head as last seen, by that head
    /// (``isFetched(_:)``): walked once per head, on the first damaged read.
    let fetchedClosure = Mutex<(head: ObjectID, ids: Set<ObjectID>)?>(nil)

    /// The vault's keys, or ``VaultError/keysUnavailable(_:)`` once a lock has wiped them.
    var keys: SgitKeys {
        get throws(VaultError) {
            guard let k = keyCell.withLock({ $0 }) else { throw .keysUnavailable(CustodyError.locked.description) }
            return k
        }
    }

    /// The format version this client implements (for the `min_client` gate).
    public static let implementedClientVersion = [0, 26, 0]

    private init(root: String, keys: SgitKeys, options: VaultOptions, observer: (any VaultObserver)?) {
        self.root = root
        bare = root + "/.sg_vault/bare"
        local = root + "/.sg_vault/local"
        vaultID = keys.vaultID
        fixedHeadFiles = [local + "/config.json", local + "/clone_mode.json", bare + "/indexes/" + keys.branchIndexFileID]
        self.options = options
        keyCell = keys.lockScope.bound(nil)
        // Keys from before a lock are not kept: such a vault starts dead.
        _ = keyCell.withLock(ifNotClearedSince: keys.lockGeneration) { $0 = keys }
        self.observer = observer
        cache = ObjectCache(budget: options.cacheBytes, lockScope: keys.lockScope, since: keys.lockGeneration, observer: observer)
        headMemo = keys.lockScope.bound(HeadMemo(observer: observer))
        trustState = Mutex((options.trust, nil))
    }

    /// Whether a lock has wiped this vault's keys (it then serves nothing).
    public var isWiped: Bool { keyCell.withLock { $0 == nil } }

    /// Opens the vault in `path` (the folder holding `.sg_vault`) and checks that the keys
    /// open it and that HEAD may be served: HEAD is resolved, its commit read and judged by
    /// ``VaultOptions/trust``.
    /// - Throws: ``VaultError/notAVault(path:)``, ``VaultError/wrongKey(vaultID:)``,
    ///   ``VaultError/vaultIDMismatch(expected:found:)``, ``VaultError/unsupportedVault(reason:)``,
    ///   or a verification failure.
    /// - Parameters:
    ///   - observer: told what the vault does behind its calls (HEAD resolved, the object cache
    ///     hit or missed); nil, the default, in production.
    ///   - refetch: where damaged fetched objects are fetched again from (``setRefetch(_:)``),
    ///     from the first read on (HEAD's commit too).
    public static func open(path: String, keys: SgitKeys, options: VaultOptions = VaultOptions(),
                            observer: (any VaultObserver)? = nil, refetch: ObjectRefetch? = nil) throws(VaultError) -> Vault {
        let vault = try load(path: path, keys: keys, options: options, observer: observer, refetch: refetch)
        let head = try vault.resolveHead()
        if let id = head.commitID { _ = try vault.trustedCommit(id, head: head) }
        return vault
    }

    /// Opens the vault and checks that the keys open it (HEAD resolved, its commit read), without
    /// judging HEAD: every read judges it, and `status` reports it.
    static func load(path: String, keys: SgitKeys, options: VaultOptions, observer: (any VaultObserver)? = nil,
                     refetch: ObjectRefetch? = nil) throws(VaultError) -> Vault {
        var root = path
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        guard FileAccess.isDirectory(root + "/.sg_vault/bare") else { throw .notAVault(path: path) }
        let vault = Vault(root: root, keys: keys, options: options, observer: observer)
        vault.setRefetch(refetch)
        let head = try vault.resolveHead()
        if let id = head.commitID { _ = try vault.commit(id, index: head.index) }
        return vault
    }

    /// The trust rule reads are judged by.
    public var trust: VaultTrust { trustState.withLock { $0.trust } }

    /// Replaces the trust rule (the library does, from the vault's registry record).
    public func setTrust(_ trust: VaultTrust) { trustState.withLock { $0 = (trust, nil) } }

    /// Whether the current rule came from exactly this record (every field, the tag included).
    func trustCame(from record: VaultRecord) -> Bool {
        guard record.tag != nil else { return false }
        return trustState.withLock { $0.record == record }
    }

    /// Applies the rule of `record`, whose tag has been checked.
    func setTrust(_ trust: VaultTrust, fromAuthenticated record: VaultRecord) {
        trustState.withLock { $0 = (trust, record) }
    }

    // MARK: HEAD

    struct Head: Sendable {
        var index: BranchIndex?
        var branch: Branch?
        var branchName: String
        var refFile: String
        var commitID: ObjectID?
        var readOnlyClone: Bool
    }

    func readSmall(_ relative: String) throws(VaultError) -> [UInt8]? {
        switch try FileAccess.read(root + "/.sg_vault/" + relative, limit: options.limits.maxSmallFileBytes, object: relative) {
        case .bytes(let b): return b
        case .missing: return nil
        }
    }

    func decryptSmall(_ bytes: [UInt8], object: String) throws(VaultError) -> [UInt8] {
        let key = try keys.readKey
        do { return try Envelope.openV1(bytes, key: key) } catch { throw .decryptionFailed(object: object) }
    }

    /// A resolved HEAD and the stamps of every file it was read from, in the order
    /// ``headFiles(refFile:)`` lists them.
    struct HeadMemo: LockWipeable, Sendable {
        /// The vault's observer, told when a kept HEAD is wiped; none in production.
        let observer: (any VaultObserver)?
        var head: Head?
        /// Served while every file keeps its stamp ([]: not by stamps).
        var stamps: [FileStamp?] = []
        /// Served while the vault's ``ChangeWatch`` stays at this generation (taken before the
        /// files were read or stamped).
        var watched: UInt64?
        mutating func wipeForLock() {
            if head != nil { observer?.keptHeadDropped() }
            head = nil
            stamps = []
            watched = nil
        }
    }

    /// The files HEAD is resolved from: the clone's config and mode, the branch index and the
    /// head ref.
    private func headFiles(refFile: String) -> [String] {
        fixedHeadFiles + [root + "/.sg_vault/" + refFile]
    }

    /// HEAD: which branch, its index and its head commit (§5.3). Kept while none of the files
    /// it was read from changes (their ``FileStamp``s, taken before each file is read), so a
    /// daemon's repeated reads do not decrypt the index and ref again, and another process's
    /// commit, pull or checkout is seen at the next call.
    ///
    /// In the daemon the library watches the vault's folders (``watch(with:)``): while the
    /// watch's generation is the one the memo was taken at, HEAD is served with no look at the
    /// files at all (one read of the inotify queue instead of four `lstat`s).
    func resolveHead() throws(VaultError) -> Head {
        let watched = changeWatch.withLock { $0 }?.generation()
        if let watched, let kept = headMemo.withLock({ $0.watched == watched ? $0.head : nil }) { return kept }
        if let kept = headMemo.withLock({ $0.head.map { ($0, $0.refFile) } }) {
            observer?.keptHeadFilesStamped()
            let files = headFiles(refFile: kept.1)
            let stamps = files.map(FileStamp.of)
            let same = headMemo.withLock { m -> Bool in
                guard m.head?.refFile == kept.1, m.stamps == stamps else { return false }
                // Unchanged since the generation taken before these stamps: good as of it.
                if let watched { m.watched = watched }
                return true
            }
            if same { return kept.0 }
        }
        let generation = try keys.lockGeneration
        let fixed = fixedHeadFiles.map(FileStamp.of)
        var refStamp: FileStamp?
        observer?.headResolvedFromFiles()
        let head = try resolveHeadFromFiles { refFile in refStamp = FileStamp.of(root + "/.sg_vault/" + refFile) }
        let stamps = fixed + [refStamp]
        // A file changed in the last few milliseconds may change again with an equal stamp; the
        // watch, when there is one, reports such a change whatever the stamps say.
        let settled = stamps.allSatisfy { $0?.isSettled() ?? true }
        _ = headMemo.withLock(ifNotClearedSince: generation) { m in
            let keep = settled || watched != nil
            m.head = keep ? head : nil
            m.stamps = keep && settled ? stamps : []
            m.watched = keep ? watched : nil
        }
        return head
    }

    /// Adds the folders HEAD is read from (the clone's `local`, the branch indexes and the refs)
    /// to `watch`, and serves HEAD by it from now on; nothing changes when one cannot be watched.
    func watch(with watch: ChangeWatch) {
        let folders = [local, bare + "/indexes", bare + "/refs"]
        guard folders.allSatisfy({ watch.add($0, mask: ChangeWatch.everyChange) }) else { return }
        changeWatch.withLock { $0 = watch }
    }

    /// ``resolveHead()`` from the files; `beforeReadingRef` runs just before the head ref is read.
    private func resolveHeadFromFiles(beforeReadingRef: (String) -> Void) throws(VaultError) -> Head {
        // local/config.json: my_branch_id makes HEAD (§5.3).
        var myBranch: String?
        if let config = try readSmall("local/config.json") { myBranch = try DocumentEncoding.myBranchID(ofConfig: config) }
        var wantedName = "current"
        if let mode = try readSmall("local/clone_mode.json") {
            let f = try Fields(parsing: mode, object: "local/clone_mode.json")
            if let name = try f.optionalString("branch_name") {
                guard Identifiers.isBranchName(name) else { throw .invalidID(kind: "branch name", value: name, in: "local/clone_mode.json") }
                wantedName = name
            }
            if let id = try f.optionalString("vault_id"), id != vaultID {
                throw .vaultIDMismatch(expected: vaultID, found: id)
            }
        }
        let keys = try self.keys
        let indexFile = "bare/indexes/" + keys.branchIndexFileID
        guard let indexBytes = try readSmall(indexFile) else {
            // No index: a single branch `current` at the HMAC-derived named ref.
            if FileAccess.hasEntries(bare + "/indexes") { throw .wrongKey(vaultID: vaultID) }
            let refFile = "bare/refs/" + keys.namedRefFileID
            beforeReadingRef(refFile)
            let commit = try readRef(refFile)
            if commit == nil, FileAccess.hasEntries(bare + "/refs") { throw .wrongKey(vaultID: vaultID) }
            return Head(index: nil, branch: nil, branchName: "current", refFile: refFile, commitID: commit, readOnlyClone: myBranch == nil)
        }
        let index = try BranchIndex.parse(try decryptSmall(indexBytes, object: indexFile), object: indexFile)
        if let min = index.minClient, let v = SemVer.parse(min), v.lexicographicallyPrecedes(Self.implementedClientVersion) == false,
           v != Self.implementedClientVersion {
            throw .unsupportedVault(reason: "\(indexFile) asks for min_client \(VaultError.quoted(min)), a newer format than the sgit 0.26.0 format SiteKeep implements; read this vault with sgit, or update SiteKeep")
        }
        try VaultFeatures.check(index.features, object: indexFile)
        let found: Branch?
        if let myBranch {
            found = index.branches.first { $0.branchID == myBranch }
        } else {
            found = index.branches.first { $0.name.utf8.elementsEqual(wantedName.utf8) && $0.type == "named" }
                ?? index.branches.first { $0.name.utf8.elementsEqual(wantedName.utf8) }
        }
        guard let b = found else {
            let what = myBranch.map { "local/config.json names branch \($0), which the index does not list" } ?? "no branch named \(wantedName)"
            throw .malformed(object: indexFile, reason: what)
        }
        let refFile = "bare/refs/" + b.headRefID
        beforeReadingRef(refFile)
        return Head(index: index, branch: b, branchName: b.name, refFile: refFile, commitID: try readRef(refFile),
                    readOnlyClone: myBranch == nil)
    }

    func readRef(_ refFile: String) throws(VaultError) -> ObjectID? {
        guard let bytes = try readSmall(refFile) else { return nil }
        return try DocumentEncoding.commitID(ofRef: try decryptSmall(bytes, object: refFile), object: refFile)
    }

    // MARK: objects

    /// Reads `bare/data/<id>` and checks its id against SHA-256 of the bytes. An object that is
    /// missing or fails the check and came from the remote (a cache entry, issue 50) is fetched
    /// again from it, transparently, with one line in the log; one written here and not pushed
    /// is ``VaultError/damagedLocalObject(vault:object:damage:)`` (see ``repairOnRead(_:limit:damage:)``).
    func readObject(_ id: ObjectID, limit: Int) throws(VaultError) -> [UInt8] {
        do { return try readStoredObject(id, limit: limit) } catch {
            guard let damage = Self.damage(error) else { throw error }
            return try repairOnRead(id, limit: limit, damage: damage)
        }
    }

    func decryptObject(_ stored: [UInt8], id: ObjectID, kind: String, inflateLimit: Int) throws(VaultError) -> [UInt8] {
        let key = try keys.readKey
        do {
            return try Envelope.open(stored, key: key, inflateLimit: inflateLimit)
        } catch .inflate(let why) {
            throw .malformed(object: "\(kind) \(id.fileID)", reason: "sgz1 content does not inflate: \(why)")
        } catch {
            throw .decryptionFailed(object: "\(kind) \(id.fileID)")
        }
    }

    /// Decrypts a `*_enc` field (b64 envelope) to UTF-8 text.
    func decryptField(_ b64: String, object: String, field: String) throws(VaultError) -> String {
        // Base64.decode refuses every character outside the alphabet itself.
        guard !b64.isEmpty, b64.utf8.count <= 1 << 20, let raw = try? Base64.decode(b64) else {
            throw .malformed(object: object, reason: "\(field) is not base64")
        }
        let plain: [UInt8]
        let key = try keys.readKey
        do { plain = try Envelope.openV1(raw, key: key) } catch {
            throw .decryptionFailed(object: "\(object) field \(field)")
        }
        guard let text = String(validating: plain, as: UTF8.self) else {
            throw .malformed(object: object, reason: "\(field) is not UTF-8")
        }
        return text
    }

    /// A verified, parsed tree (from the cache, or read, id-checked, decrypted and parsed).
    func tree(_ id: ObjectID, useCache: Bool = true) throws(VaultError) -> Tree {
        if useCache, case .tree(let t)? = cache.get(id.rawValue) { return t }
        let stored = try readObject(id, limit: options.limits.maxTreeBytes)
        let plain = try decryptObject(stored, id: id, kind: "tree", inflateLimit: options.limits.maxTreeBytes)
        let t = try parseTree(plain, id: id)
        cache.put(id.rawValue, .tree(t))
        return t
    }

    /// A commit decoded from its stored bytes: decrypted, parsed (``Commit/parse(_:id:)``, the one
    /// parse of a commit, for reads and for fetches alike) and its message decrypted; the
    /// signature is not yet checked.
    func decodeCommit(_ stored: [UInt8], id: ObjectID) throws(VaultError) -> Commit {
        let plain = try decryptObject(stored, id: id, kind: "commit", inflateLimit: options.limits.maxCommitBytes)
        var c = try Commit.parse(plain, id: id)
        if let enc = c.messageEnc, !enc.isEmpty {
            c.message = try decryptField(enc, object: "commit \(id.fileID)", field: "message_enc")
        }
        return c
    }

    /// A parsed commit with its signature status (not yet judged; see ``trustedCommit(_:head:)``).
    func commit(_ id: ObjectID, index: BranchIndex?, useCache: Bool = true) throws(VaultError) -> Commit {
        if useCache, case .commit(var c, let message)? = cache.get(id.rawValue) {
            c.message = message.map { String(decoding: $0, as: UTF8.self) }
            return c
        }
        var c = try decodeCommit(try readObject(id, limit: options.limits.maxCommitBytes), id: id)
        let (status, keyID, fingerprint) = try signatureStatus(of: c, index: index, useCache: useCache)
        c.signature = status
        c.signerKeyID = keyID
        c.signerFingerprint = fingerprint
        // A missing key may arrive later (a pull), and a legacy commit's key comes from the
        // index, so only settled outcomes of self-describing commits are cached.
        if c.signature == .unsigned || (c.signature == .verified && c.authorKeyID?.isEmpty == false) { cache.put(id.rawValue, .commit(c)) }
        return c
    }

    /// HEAD's commit, if reads may serve it: judged by the trust rule (see ``VaultTrust``).
    func trustedCommit(_ id: ObjectID, head: Head) throws(VaultError) -> Commit {
        let c = try commit(id, index: head.index)
        try judge(c, index: head.index, exempt: headExempt(id, index: head.index, trust: trust))
        return c
    }

    /// Whether HEAD may be unsigned under the vault's own policy: only with `--allow-unsigned`,
    /// when HEAD is the `signed-since-` anchor itself (SiteKeep's own rule never exempts HEAD).
    func headExempt(_ id: ObjectID, index: BranchIndex?, trust: VaultTrust) -> Bool {
        guard trust.allowUnsigned, let anchor = index?.signedSince else { return false }
        return id.hex.hasPrefix(anchor)
    }

    /// How `c` stands under `trust`, given the branch index in force.
    func evaluate(_ c: Commit, index: BranchIndex?, trust: VaultTrust) -> CommitTrust {
        switch c.signature {
        case .unsigned: return .unsigned
        case .noKey: return .unknownKey(keyID: c.signerKeyID)
        case .bad: return .bad(keyID: c.signerKeyID)
        case .verified:
            guard let key = c.signerKeyID, let fingerprint = c.signerFingerprint else { return .unknownKey(keyID: c.signerKeyID) }
            let pin = trust.pin(for: key)
            if let pin, pin.fingerprint != fingerprint { return .keyChanged(keyID: key, fingerprint: fingerprint, pinned: pin.fingerprint) }
            // A pinned signer stands by its pin, whatever the branch index says: the index is
            // anyone's with the read key and the server's storage (the web client rewrites it
            // to one entry on every push), so it may neither add a signer nor drop one.
            if pin != nil || trust.ownKeys.contains(fingerprint) { return .trusted(keyID: key) }
            if let index, !index.lists(key) { return .notInIndex(keyID: key) }
            if case .pinned = trust.signers, pin == nil { return .newSigner(keyID: key, fingerprint: fingerprint) }
            return .trusted(keyID: key)
        }
    }

    /// Whether a commit standing as `t` is served. `exempt`: the commit is covered by the
    /// vault's `signed-since-` anchor (history from before the vault required signatures).
    /// - Returns: nil when served, else whether the refusal is the vault's own policy's
    ///   (`signatures-required`) rather than SiteKeep's.
    static func refusal(_ t: CommitTrust, index: BranchIndex?, trust: VaultTrust, exempt: Bool) -> Bool? {
        switch t {
        case .trusted: return nil
        case .bad, .keyChanged: return false
        case .newSigner, .notInIndex: return trust.allowUnsigned || exempt ? nil : false
        case .unsigned, .unknownKey:
            if exempt { return nil }
            guard trust.allowUnsigned else { return false }
            return index?.signaturesRequired == true ? true : nil
        }
    }

    /// Throws unless `c` is served: a bad signature always, anything else by ``refusal(_:index:trust:exempt:)``.
    func judge(_ c: Commit, index: BranchIndex?, exempt: Bool) throws(VaultError) {
        let trust = self.trust
        let t = evaluate(c, index: index, trust: trust)
        if case .bad = t {
            throw .badSignature(commit: c.id.fileID, reason: "its signature does not verify under key \(c.authorKeyID ?? "of its branch")")
        }
        if let byVault = Self.refusal(t, index: index, trust: trust, exempt: exempt) {
            throw .unverifiedCommit(commit: c.id.fileID, trust: t, vault: trust.vaultName, requiredByVault: byVault)
        }
    }

    /// The signature outcome, the key it was checked against, and that key's fingerprint.
    func signatureStatus(of c: Commit, index: BranchIndex?, useCache: Bool) throws(VaultError) -> (SignatureStatus, String?, String?) {
        guard let sigText = c.rawSignature, !sigText.isEmpty else { return (.unsigned, nil, nil) }
        let message: [UInt8]
        let keyID: String?
        if let author = c.authorKeyID, !author.isEmpty {
            message = c.canonicalSigningBytes
            keyID = Identifiers.keyID(author)
        } else {
            message = c.legacySigningBytes
            keyID = index?.branches.first { $0.branchID == c.branchID }?.publicKeyID
        }
        guard let keyID, let publicKey = try publicKey(keyID, useCache: useCache) else { return (.noKey, keyID, nil) }
        let fingerprint = Self.fingerprint(publicKey)
        guard let sig = try? Base64.decode(sigText), sig.count == 64 else { return (.bad, keyID, fingerprint) }
        let ok = SignatureVerifier.isValid(sig, for: message, publicKey: publicKey, algorithm: .p256)
        return (ok ? .verified : .bad, keyID, fingerprint)
    }

    /// Lower-case hex SHA-256 of a public key's SPKI DER.
    static func fingerprint(_ der: [UInt8]) -> String { Hex.encode(SHA256.hash(der)) }

    /// The SPKI DER of `bare/keys/<keyID>`, nil when the file is absent.
    func publicKey(_ keyID: String, useCache: Bool) throws(VaultError) -> [UInt8]? {
        let cacheKey = "key:" + keyID
        if useCache, case .publicKey(let k)? = cache.get(cacheKey) { return k }
        let file = "bare/keys/" + keyID
        guard let bytes = try readSmall(file) else { return nil }
        let f = try Fields(parsing: try decryptSmall(bytes, object: file), object: file)
        guard try f.optionalString("type") == "public", let pem = try f.optionalString("pem") else {
            throw .malformed(object: file, reason: "not a public key file")
        }
        let der: [UInt8]
        do { der = try P256.Signing.PublicKey(pemRepresentation: pem).derRepresentation } catch {
            throw .malformed(object: file, reason: "pem is not a P-256 public key (\(error))")
        }
        cache.put(cacheKey, .publicKey(der))
        return der
    }

    /// The plaintext of a blob, checked against the entry's size and content hash. A cached
    /// blob keeps the SHA-256 of its plaintext, so a hit checks the entry against it without
    /// hashing the bytes again (the same check: the bytes are the ones that were hashed).
    func blob(_ id: ObjectID, size: Int?, contentHash: String?, path: VaultPath, useCache: Bool = true) throws(VaultError) -> [UInt8] {
        if useCache, case .blob(let b, let digest)? = cache.get(id.rawValue) {
            try checkContent(count: b.count, digest: digest, id: id, size: size, contentHash: contentHash, path: path)
            return b
        }
        let limit = options.limits.maxBlobBytes
        if let size, size > limit { throw .tooLarge(object: id.fileID, size: size, limit: limit) }
        let stored = try readObject(id, limit: limit + 64)
        let plain = try decryptObject(stored, id: id, kind: "blob", inflateLimit: size ?? limit)
        let digest = SHA256.hash(plain)
        try checkContent(count: plain.count, digest: digest, id: id, size: size, contentHash: contentHash, path: path)
        if plain.count <= 256 << 10 { cache.put(id.rawValue, .blob(plain, digest: digest)) }
        return plain
    }

    /// Checks a plaintext of `count` bytes whose SHA-256 is `digest` against the size and
    /// content hash (`hex(SHA-256)[:12]`) the tree records.
    func checkContent(count: Int, digest: [UInt8], id: ObjectID, size: Int?, contentHash: String?, path: VaultPath) throws(VaultError) {
        if let size, size != count {
            throw .contentMismatch(path: path.string, object: id.fileID, reason: "the tree records \(size) bytes, the blob holds \(count)")
        }
        if let contentHash, !contentHash.isEmpty {
            let actual = String(Hex.encode(digest).prefix(12))
            guard actual.utf8.elementsEqual(contentHash.lowercased().utf8) else {
                throw .contentMismatch(path: path.string, object: id.fileID, reason: "the tree records content hash \(contentHash), the blob hashes to \(actual)")
            }
        }
    }

    /// What the object cache holds: entries and their approximate bytes. (Its hits and misses
    /// go to the ``VaultObserver`` the vault was opened with.)
    public var cacheStatistics: (entries: Int, bytes: Int) { cache.statistics }
}

extension Vault: LockWipeable {
    /// Nothing to overwrite here: the vault's keys and object cache are lock-bound themselves
    /// and are wiped by the same clear; a holder that drops the vault drops the rest.
    public func wipeForLock() {}
}
