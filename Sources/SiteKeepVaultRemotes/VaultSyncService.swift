public import SiteKeepCustody
public import SiteKeepVault
public import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One configured remote of a vault (public facts only; its token is in custody).
public struct VaultRemote: Sendable, Equatable {
    public enum Kind: String, Sendable { case api, folder, `static` }
    public let vault: String
    public let name: String
    public let url: String
    public let kind: Kind
    public let hasToken: Bool

    /// `https://…`/`http://127.0.0.1…` → api; `file://…` or `/…` → folder; `static+https://…` → static.
    public static func kind(of url: String) throws(VaultError) -> Kind {
        if url.hasPrefix("static+") { return .static }
        if url.hasPrefix("https://") || url.hasPrefix("http://") { return .api }
        if url.hasPrefix("file://") || url.hasPrefix("/") { return .folder }
        throw .invalidRemote("\(url) is neither an http(s) URL, a static+https URL, nor an absolute folder path")
    }
}

/// `vault-remotes.json` in the SiteKeep home: the remotes of every vault (no secret).
public struct VaultRemoteRegistry: Sendable {
    public let file: String
    public init(file: String) { self.file = file }

    public func all() throws(VaultError) -> [VaultRemote] {
        guard let bytes = try LocalFiles.read(file, object: file, limit: 4 << 20) else { return [] }
        guard let doc = try? JSONParser.parse(bytes, limits: .document) else { throw .malformed(object: file, reason: "not valid JSON") }
        return try (doc["remotes"]?.arrayValue ?? []).map { r throws(VaultError) in
            guard let v = r["vault"]?.stringValue, let n = r["name"]?.stringValue, let u = r["url"]?.stringValue,
                  let k = r["kind"]?.stringValue.flatMap(VaultRemote.Kind.init(rawValue:)) else {
                throw .malformed(object: file, reason: "a remote lacks vault, name, url or kind")
            }
            return VaultRemote(vault: v, name: n, url: u, kind: k, hasToken: r["token"]?.boolValue ?? false)
        }
    }

    func save(_ remotes: [VaultRemote]) throws(VaultError) {
        let doc = JSONValue.object([JSONMember(key: "remotes", value: .array(remotes.map { r in
            .object([JSONMember(key: "vault", value: .string(r.vault)), JSONMember(key: "name", value: .string(r.name)),
                     JSONMember(key: "url", value: .string(r.url)), JSONMember(key: "kind", value: .string(r.kind.rawValue)),
                     JSONMember(key: "token", value: .bool(r.hasToken))])
        }))])
        try Durable.write(JSONSerializer.bytes(doc, style: .pretty) + [0x0a], to: file)
    }
}

/// The durable push queue of one vault (`.sg_vault/local/sitekeep-push-queue.json`): which
/// remote still needs which head. The objects themselves are already durable in the vault, so
/// an entry is all a push needs to be retried after a kill -9 or a restart; a later push of the
/// same remote replaces it (it carries every earlier commit).
public struct PushQueue: Sendable {
    public struct Entry: Sendable, Equatable {
        public let remote: String
        public let head: String
        public let queuedAtMs: Int64
        public var attempts: Int
        public var nextAttemptMs: Int64
        public var lastError: String?
    }

    public let file: String
    public init(vaultRoot: String) { file = vaultRoot + "/.sg_vault/local/sitekeep-push-queue.json" }

    public func entries() throws(VaultError) -> [Entry] {
        guard let bytes = try LocalFiles.read(file, object: file, limit: 1 << 20) else { return [] }
        guard let doc = try? JSONParser.parse(bytes, limits: .document) else { throw .malformed(object: file, reason: "not valid JSON") }
        return (doc["pending"]?.arrayValue ?? []).compactMap { e in
            guard let r = e["remote"]?.stringValue, let h = e["head"]?.stringValue else { return nil }
            return Entry(remote: r, head: h, queuedAtMs: e["queued_at"]?.intValue ?? 0, attempts: Int(e["attempts"]?.intValue ?? 0),
                         nextAttemptMs: e["next_attempt_at"]?.intValue ?? 0, lastError: e["last_error"]?.stringValue)
        }
    }

    func save(_ list: [Entry]) throws(VaultError) {
        let doc = JSONValue.object([JSONMember(key: "pending", value: .array(list.map { e in
            .object([JSONMember(key: "remote", value: .string(e.remote)), JSONMember(key: "head", value: .string(e.head)),
                     JSONMember(key: "queued_at", value: .int(e.queuedAtMs)), JSONMember(key: "attempts", value: .integer(e.attempts)),
                     JSONMember(key: "next_attempt_at", value: .int(e.nextAttemptMs)), JSONMember(key: "last_error", value: .string(e.lastError))])
        }))])
        try Durable.write(JSONSerializer.bytes(doc, style: .pretty), to: file)
    }

    /// Records that `remote` needs `head` (durably, before any network traffic).
    public func enqueue(remote: String, head: ObjectID, nowMs: Int64) throws(VaultError) {
        var list = try entries()
        if let i = list.firstIndex(where: { $0.remote == remote }) {
            if list[i].head != head.rawValue { list[i] = Entry(remote: remote, head: head.rawValue, queuedAtMs: nowMs, attempts: list[i].attempts, nextAttemptMs: 0, lastError: list[i].lastError) }
        } else {
            list.append(Entry(remote: remote, head: head.rawValue, queuedAtMs: nowMs, attempts: 0, nextAttemptMs: 0, lastError: nil))
        }
        try save(list)
    }

    /// Drops the entry of `remote` once the remote holds `head`.
    public func done(remote: String, head: ObjectID) throws(VaultError) {
        var list = try entries()
        list.removeAll { $0.remote == remote && $0.head == head.rawValue }
        try save(list)
    }

    /// Records a failed attempt: back-off doubling from 5 s to 10 min, or the server's Retry-After.
    public func failed(remote: String, error: String, retryAfterMs: Int?, nowMs: Int64) throws(VaultError) {
        var list = try entries()
        guard let i = list.firstIndex(where: { $0.remote == remote }) else { return }
        list[i].attempts += 1
        let backoff = min(600_000, 5_000 << min(list[i].attempts - 1, 7))
        list[i].nextAttemptMs = nowMs + Int64(retryAfterMs ?? backoff)
        list[i].lastError = error
        try save(list)
    }
}

/// Durable small-file writes for this target: ``AtomicFile/replace(_:with:mode:temporaryFolder:syncFolder:)``
/// (unique O_EXCL temp file, fsync, rename, folder fsync).
enum Durable {
    static func write(_ bytes: [UInt8], to path: String) throws(VaultError) {
        do { try AtomicFile.replace(path, with: bytes) } catch { throw .io(path: path, reason: error.cause) }
    }
}

/// Credentials from custody: the remote's access token (kept wrapped as a vault secret
/// `token:<vault>:<remote>`) and the vault's write key (from its ``SgitKeys``).
public struct CustodyCredentials: RemoteCredentials {
    let custodian: Custodian
    let tokenItem: String?
    let keys: SgitKeys

    public func accessToken() throws(VaultError) -> String? {
        guard let tokenItem else { return nil }
        do {
            return try custodian.withVaultSecret(vaultID: tokenItem, context: KeyUseContext(op: .vaultRemote)) { (s: borrowing SecretBytes) throws(CustodyError) -> String in
                s.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            }
        } catch { throw .keysUnavailable("the remote's access token: \(error.description)") }
    }

    /// The token straight from custody's guarded memory into an array the request wipes, never
    /// a `String` (which cannot be wiped): what the remote sends.
    public func accessTokenBytes() throws(VaultError) -> [UInt8]? {
        guard let tokenItem else { return nil }
        do {
            return try custodian.withVaultSecret(vaultID: tokenItem, context: KeyUseContext(op: .vaultRemote)) { (s: borrowing SecretBytes) throws(CustodyError) -> [UInt8] in
                s.withUnsafeBytes { Array($0) }
            }
        } catch { throw .keysUnavailable("the remote's access token: \(error.description)") }
    }

    public func writeKeyHex() throws(VaultError) -> String? { keys.writeKeyHex() }
}

/// Clone, pull and push by vault name, with remotes and tokens from the store, commits signed
/// by the library's signer, and the durable push queue. (The daemon's periodic sync calls
/// ``sync(name:)``; issue 13 moves that wiring into SiteKeepDaemon.)
public final class VaultSyncService: Sendable {
    public let library: VaultLibrary
    public let remotes: VaultRemoteRegistry
    let custodian: Custodian

    public init(library: VaultLibrary, remotes: VaultRemoteRegistry, custodian: Custodian) {
        self.library = library
        self.remotes = remotes
        self.custodian = custodian
    }

    /// The signer rule for a pull of `vault` from `remote`: a signer the store has pinned with
    /// the same public key is admitted; a signer the branch index lists but the store has not
    /// pinned is admitted into the folder only (its commits and key file are stored, verified),
    /// never pinned: the merge judges the remote head by the vault's pins and answers
    /// `vault_unverified` naming the new signer, its fingerprint and `sitekeep vault trust`, so
    /// nothing it signed is served until the user trusts it (issue 32). Whoever controls the
    /// server's storage and holds the read key can list a signer in the index, so a pull is no
    /// proof that a write key was involved. Only a clone, the first look at the vault as
    /// `vault add` is, accepts the signers the index lists (the library pins them when it
    /// registers the clone).
    func trust(vault name: String?, remote: VaultRemote) -> LibrarySignerTrust {
        let record = name.flatMap { try? library.open($0).record }
        return LibrarySignerTrust(pins: record?.signers ?? [], allowUnsigned: record?.allowUnsigned ?? false)
    }

    static func tokenItem(vault: String, remote: String) -> String { "token:\(vault):\(remote)" }

    /// The store for a remote of `keys`' vault.
    public func store(for r: VaultRemote, keys: SgitKeys) throws(VaultError) -> any VaultObjectStore {
        try Self.store(for: r, keys: keys, custodian: custodian)
    }

    /// ``store(for:keys:)`` with the custodian that holds the remote's token.
    static func store(for r: VaultRemote, keys: SgitKeys, custodian: Custodian) throws(VaultError) -> any VaultObjectStore {
        switch r.kind {
        case .api:
            return try SGSendRemote(baseURL: r.url, vaultID: keys.vaultID,
                                    credentials: CustodyCredentials(custodian: custodian, tokenItem: r.hasToken ? Self.tokenItem(vault: r.vault, remote: r.name) : nil, keys: keys))
        case .folder: return FolderRemote(folder: r.url, vaultID: keys.vaultID)
        case .static: return try StaticHTTPRemote(baseURL: r.url)
        }
    }

    /// `vault remote add`: records the remote, its token (if any) wrapped in custody.
    public func addRemote(vault: String, name: String, url: String, token: consuming SecretBytes?) throws(VaultError) {
        _ = try library.registry.record(named: vault)
        guard VaultRecord.isValidName(name) else { throw .invalidRemote("remote names are 1-64 letters, digits, '.', '_' or '-'") }
        let kind = try VaultRemote.kind(of: url)
        var all = try remotes.all()
        guard !all.contains(where: { $0.vault == vault && $0.name == name }) else { throw .invalidRemote("vault \(vault) already has a remote named \(name); remove it first") }
        if kind == .api {
            _ = try SGSendRemote(baseURL: url, vaultID: "checkurl", credentials: NoCredentials())
            // The server would refuse every request of a vault whose id breaks its rule.
            let id = try library.registry.record(named: vault).vaultID
            guard ServerVaultID.isValid(id) else { throw .serverRefusesVaultID(id) }
        }
        var hasToken = false
        if let t = consume token {
            do { try custodian.storeVaultSecret(vaultID: Self.tokenItem(vault: vault, remote: name), secret: t) } catch {
                throw .keysUnavailable(error.description)
            }
            hasToken = true
        }
        all.append(VaultRemote(vault: vault, name: name, url: url, kind: kind, hasToken: hasToken))
        try remotes.save(all)
    }

    public func listRemotes(vault: String) throws(VaultError) -> [VaultRemote] { try remotes.all().filter { $0.vault == vault } }

    public func removeRemote(vault: String, name: String) throws(VaultError) {
        var all = try remotes.all()
        guard let r = all.first(where: { $0.vault == vault && $0.name == name }) else { throw .invalidRemote("vault \(vault) has no remote named \(name)") }
        all.removeAll { $0 == r }
        try remotes.save(all)
        if r.hasToken { _ = try? custodian.deleteVaultSecret(vaultID: Self.tokenItem(vault: vault, remote: name)) }
    }

    func remote(_ vault: String, _ name: String?) throws(VaultError) -> VaultRemote {
        let mine = try listRemotes(vault: vault)
        if let name {
            guard let r = mine.first(where: { $0.name == name }) else { throw .invalidRemote("vault \(vault) has no remote named \(name); see `sitekeep vault remote list \(vault)`") }
            return r
        }
        guard let r = mine.first(where: { $0.name == "origin" }) ?? (mine.count == 1 ? mine.first : nil) else {
            throw .invalidRemote(mine.isEmpty ? "vault \(vault) has no remote; add one with `sitekeep vault remote add \(vault) origin URL`" : "vault \(vault) has several remotes; name one")
        }
        return r
    }

    /// Checks what `vault clone` is given, before any secret is asked for: the vault `name`
    /// (valid, not taken: the registry is read without unlocking), the `url`'s form, and the
    /// destination `path` (absent, or an empty folder).
    /// - Returns: the remote's kind.
    public func checkClone(url: String, name: String, path: String) throws(VaultError) -> VaultRemote.Kind {
        guard VaultRecord.isValidName(name) else { throw .invalidVaultName(name) }
        if try library.records().contains(where: { $0.name == name }) { throw .vaultExists(name: name) }
        let kind = try VaultRemote.kind(of: url)
        switch kind {
        case .api: _ = try SGSendRemote(baseURL: url, vaultID: "checkurl", credentials: NoCredentials())
        case .static: _ = try StaticHTTPRemote(baseURL: url)
        case .folder: break
        }
        var root = path
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        var st = stat()
        if lstat(root, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else { throw .cloneDestination(path: root, reason: "already exists and is not a folder") }
            guard Self.isEmptyFolder(root) else {
                throw .cloneDestination(path: root, reason: "already exists and is not empty")
            }
        }
        return kind
    }

    /// Whether folder `path` holds nothing (false when it cannot be read).
    static func isEmptyFolder(_ path: String) -> Bool {
        guard let dir = opendir(path) else { return false }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { return false }
        }
        return true
    }

    /// `vault clone`: derives the keys (PBKDF2, once), clones into `path`, registers the vault
    /// and its remote `origin` (token wrapped in custody). Nothing secret is written in plain text.
    /// The arguments are checked first (``checkClone(url:name:path:)``); for a vault server, the
    /// key's vault id is checked against the server's rule (``ServerVaultID``) before the slow
    /// derivation.
    ///
    /// The clone is the first look at the vault (as `vault add` is): every commit's signature is
    /// verified, and the signers it verified under are pinned, those the branch index lists and
    /// those of HEAD's history it does not (the sites' web client rewrites the index to one
    /// unkeyed entry on every push). The latter are answered in
    /// ``CloneOutcome/pinnedFromHistory`` for the user to see. With `trustSigners`, a signer the
    /// index does not list must be one of them. Unsigned commits still need `allowUnsigned`;
    /// a bad signature, a missing key file and a key that differs from its file are refused.
    /// - Parameter trustSigners: key ids (`key-rnd-imm-…`, parsed by
    ///   ``SignerPin/keyID(parsing:)``) the user named with `--trust-signer`.
    public func clone(url: String, name: String, keyText: borrowing SecretBytes, token: consuming SecretBytes?, path: String,
                      siteID: String? = nil, allowUnsigned: Bool = false, trustSigners: [String] = []) throws(VaultError) -> CloneOutcome {
        let kind = try checkClone(url: url, name: name, path: path)
        if kind == .api {
            let id: String
            do { id = try SgitKeys.vaultID(ofKeyText: keyText) } catch { throw .key(error) }
            guard ServerVaultID.isValid(id) else { throw .serverRefusesVaultID(id) }
        }
        let keys: SgitKeys
        do { keys = try SgitKeys.derive(fromKeyText: keyText) } catch { throw .key(error) }
        let tokenItem = Self.tokenItem(vault: name, remote: "origin")
        var hasToken = false
        if let t = consume token {
            do { try custodian.storeVaultSecret(vaultID: tokenItem, secret: t) } catch { throw .keysUnavailable(error.description) }
            hasToken = true
        }
        let r = VaultRemote(vault: name, name: "origin", url: url, kind: kind, hasToken: hasToken)
        do throws(VaultError) {
            let (cloned, outcome) = try Vault.clone(from: try store(for: r, keys: keys), into: path, keys: keys,
                                                    signer: try library.commitSigner(for: name),
                                                    trust: FirstLookSignerTrust(allowUnsigned: allowUnsigned, named: Set(trustSigners)))
            Self.recordFetchedFrom(r.name, root: cloned.root)
            // The remote is recorded before the registration, which acknowledges the clone: a
            // clone killed between the two must not leave a registered vault with no remote to
            // fetch a damaged object again from (a remote left for a name never registered is
            // replaced by the next clone of that name).
            var all = try remotes.all()
            all.removeAll { $0.vault == name }
            all.append(r)
            try remotes.save(all)
            do throws(VaultError) {
                try library.register(name: name, path: path, keys: keys, siteID: siteID, allowUnsigned: allowUnsigned,
                                     source: kind == .api ? .authenticatedPull : .vaultAdd, pinHistory: true)
            } catch {
                if var left = try? remotes.all() { left.removeAll { $0.vault == name }; try? remotes.save(left) }
                throw error
            }
            return CloneOutcome(pull: outcome, pinnedFromHistory: pinnedFromHistory(name), vaultID: keys.vaultID)
        } catch {
            if hasToken { _ = try? custodian.deleteVaultSecret(vaultID: tokenItem) }
            throw error
        }
    }

    /// The signers the registration of `name` pinned from HEAD's history, not from the branch
    /// index: shown, never decided here (empty when they cannot be read; the clone stands).
    func pinnedFromHistory(_ name: String) -> [HistorySigner] {
        guard let pins = (try? library.open(name))?.record.signers,
              let found = try? library.vault(named: name).unlistedHistorySigners() else { return [] }
        return found.filter { s in pins.contains { $0.keyID == s.keyID && $0.fingerprint == s.fingerprint } }
    }

    /// `vault pull`: retries what the push queue holds, then pulls and merges.
    public func pull(name: String, remote: String? = nil) throws(VaultError) -> PullOutcome {
        let vault = try library.vault(named: name)
        let r = try self.remote(name, remote)
        let keys = try library.keys(named: name)
        _ = try? drainQueue(name: name, force: false)
        do {
            let outcome = try vault.pull(from: try store(for: r, keys: keys), signer: try library.commitSigner(for: name),
                                         trust: trust(vault: name, remote: r))
            if Self.lastFetchedRemote(root: vault.root) != r.name { Self.recordFetchedFrom(r.name, root: vault.root) }
            return outcome
        } catch .unverifiedCommit(let commit, let t, nil, let byVault) {
            // The fetch does not know the vault's name: give it, so the advice names the command.
            throw .unverifiedCommit(commit: commit, trust: t, vault: name, requiredByVault: byVault)
        }
    }

    /// `vault push`: queues the clone head for the remote durably, then tries it. A failure
    /// leaves the entry queued (retried with back-off on the next open, pull or push).
    public func push(name: String, remote: String? = nil) throws(VaultError) -> PushOutcome {
        let vault = try library.vault(named: name)
        let r = try self.remote(name, remote)
        guard let head = try vault.status().headCommit else { return PushOutcome(head: nil, objects: 0, upToDate: true) }
        let queue = PushQueue(vaultRoot: vault.root)
        try queue.enqueue(remote: r.name, head: head, nowMs: Clocks.wallMilliseconds())
        return try attempt(vault: vault, name: name, remote: r, head: head, queue: queue)
    }

    func attempt(vault: Vault, name: String, remote r: VaultRemote, head: ObjectID, queue: PushQueue) throws(VaultError) -> PushOutcome {
        let keys = try library.keys(named: name)
        do {
            let out = try vault.push(to: try store(for: r, keys: keys), signer: try library.commitSigner(for: name))
            try queue.done(remote: r.name, head: head)
            return out
        } catch {
            var after: Int?
            if case let .remote(_, _, _, retry) = error { after = retry }
            try? queue.failed(remote: r.name, error: error.description, retryAfterMs: after, nowMs: Clocks.wallMilliseconds())
            throw error
        }
    }

    /// Retries queued pushes that are due (all of them with `force`). Answers how many went.
    @discardableResult
    public func drainQueue(name: String, force: Bool) throws(VaultError) -> Int {
        let vault = try library.vault(named: name)
        let queue = PushQueue(vaultRoot: vault.root)
        var sent = 0
        for e in try queue.entries() where force || e.nextAttemptMs <= Clocks.wallMilliseconds() {
            guard let r = try? remote(name, e.remote), let head = try vault.status().headCommit else { continue }
            try queue.enqueue(remote: e.remote, head: head, nowMs: Clocks.wallMilliseconds())
            if (try? attempt(vault: vault, name: name, remote: r, head: head, queue: queue)) != nil { sent += 1 }
        }
        return sent
    }

    /// One sync round for the daemon (``VaultSyncScheduler``): due queued pushes, a pull of
    /// `origin`, then, unless the merge left conflicts, a push of this device's commits (the
    /// merge's, and what `vault.save` committed meanwhile; a failure stays queued), then the
    /// children of its declared mounts (``openMounts(parent:)``). Answers the pull.
    public func sync(name: String) throws(VaultError) -> PullOutcome {
        let pulled = try pull(name: name)
        if pulled.merge?.kind != .conflicts, try library.vault(named: name).mergeState() == nil { _ = try? push(name: name) }
        // The children of its declared mounts come with the parent (a new one is cloned); a
        // refused mount leaves the parent's sync standing (`vault mounts NAME --open` says why).
        _ = try? openMounts(parent: name)
        return pulled
    }
}

/// What `vault clone` did: the fetch and, for the user to see, the signers it pinned from HEAD's
/// history because the branch index did not list them.
public struct CloneOutcome: Sendable {
    /// The fetch from the remote and the new clone's head.
    public let pull: PullOutcome
    /// Signers pinned at first use from HEAD's history (key id, fingerprint, the commits they
    /// signed), not from the branch index.
    public let pinnedFromHistory: [HistorySigner]
    /// The vault id the key names (shown when the remote held nothing under it).
    public let vaultID: String
}

/// The first look's rule (`vault clone`): a signer whose signatures verified under its key file
/// enters when the branch index lists it, when the user named it (`--trust-signer`), or, when
/// the user named none, at first use (the registration then pins it, and the clone shows it);
/// with `allowUnsigned`, as a pull's rule (``LibrarySignerTrust``). It never admits an unsigned
/// commit without `allowUnsigned`: the fetch refuses those, and bad signatures and missing key
/// files, before asking.
struct FirstLookSignerTrust: SignerTrust {
    let allowUnsigned: Bool
    /// Key ids named with `--trust-signer`; empty: first use.
    let named: Set<String>

    func admits(keyID: String, publicKey: [UInt8], listedInIndex: Bool, vaultID: String) -> Bool {
        listedInIndex || allowUnsigned || named.isEmpty || named.contains(keyID)
    }

    /// Pins nothing itself: the registration pins the signers of the clone it finds.
    func pin(_ signers: [(keyID: String, publicKey: [UInt8])], vaultID: String) {}

    var allowsUnsigned: Bool { allowUnsigned }
}

struct NoCredentials: RemoteCredentials {
    func accessToken() throws(VaultError) -> String? { nil }
    func writeKeyHex() throws(VaultError) -> String? { nil }
}

/// ``VaultSyncService/trust(vault:remote:)``'s rule as a ``SignerTrust``: pinned signers with
/// their pinned key, and listed signers into the folder (not served until trusted); it pins
/// nothing.
struct LibrarySignerTrust: SignerTrust {
    let pins: [SignerPin]
    let allowUnsigned: Bool

    static func fingerprint(_ publicKey: [UInt8]) -> String { Hex.encode(SHA256.hash(publicKey)) }

    func admits(keyID: String, publicKey: [UInt8], listedInIndex: Bool, vaultID: String) -> Bool {
        // A pin decides, whatever the index says (the web client rewrites the index on every
        // push); a key that differs from its pin never enters, even with --allow-unsigned.
        if let pin = pins.first(where: { $0.keyID == keyID }) { return pin.fingerprint == Self.fingerprint(publicKey) }
        // An unpinned signer enters when the index lists it (served once trusted), or when the
        // vault allows unsigned commits (which serves what an unsigned commit would get).
        return listedInIndex || allowUnsigned
    }

    /// Pins nothing: new signers are pinned by `vault add` (or `vault clone`) and `vault trust` only.
    func pin(_ signers: [(keyID: String, publicKey: [UInt8])], vaultID: String) {}

    var allowsUnsigned: Bool { allowUnsigned }
}

// The op a remote's token is read under, in custody's audit log.
extension OpName {
    /// A vault remote's access token read.
    static let vaultRemote = OpName(known: "vault.remote")
}

extension VaultSyncService {
    /// Makes `library` fetch each vault's damaged fetched objects again from the remote they
    /// came from (issue 50): the remote the vault last pulled from (``lastFetchedRemote(root:)``),
    /// else `origin` or its only remote, with its token from custody and the vault's own keys.
    /// Each object fetched again is told to `log` in one line.
    public static func installRefetch(on library: VaultLibrary, remotes: VaultRemoteRegistry, custodian: Custodian,
                                      log: @escaping @Sendable (String) -> Void) {
        library.setRefetch { name in
            ObjectRefetch(open: { (keys: SgitKeys, root: String) throws(VaultError) -> (name: String, store: any VaultObjectStore) in
                let mine = try remotes.all().filter { $0.vault == name }
                let last = Self.lastFetchedRemote(root: root)
                guard let r = mine.first(where: { $0.name == last }) ?? mine.first(where: { $0.name == "origin" }) ?? (mine.count == 1 ? mine.first : nil) else {
                    throw .invalidRemote(mine.isEmpty ? "vault \(name) has no remote; add one with `sitekeep vault remote add \(name) origin URL`" : "vault \(name) has several remotes and none named origin")
                }
                return (r.name, try Self.store(for: r, keys: keys, custodian: custodian))
            }, log: log)
        }
    }

    /// The remote a vault's objects last came from (`.sg_vault/local/sitekeep-fetched-from`,
    /// written by each clone and pull), nil when none is recorded.
    static func lastFetchedRemote(root: String) -> String? {
        guard let bytes = try? LocalFiles.read(root + "/.sg_vault/local/sitekeep-fetched-from", object: "sitekeep-fetched-from", limit: 256),
              let text = String(validating: bytes, as: UTF8.self)?.split(separator: "\n").first.map(String.init),
              VaultRecord.isValidName(text) else { return nil }
        return text
    }

    /// Records `remote` as the one `vault`'s objects came from (a hint for the refetch; a
    /// plain write: losing it falls back to `origin`).
    static func recordFetchedFrom(_ remote: String, root: String) {
        _ = try? Durable.write(Array((remote + "\n").utf8), to: root + "/.sg_vault/local/sitekeep-fetched-from")
    }
}
