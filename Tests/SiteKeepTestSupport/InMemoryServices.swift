public import SiteKeepBridge
public import SiteKeepSocket
import SiteKeepWiring
public import SiteKeepCore
internal import SiteKeepJSON
public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepPartitions
import Synchronization
import Foundation
public import SiteKeepVocabulary

// In-memory services: the bridge's tests, its fuzz target, its benchmark and the test daemon run
// on these (test support only: no production target links this module). The daemon proper
// wires adapters to the partitions, custody and vault layers.

/// A fixed site table whose origins are canonicalised by the real ``Origin`` rule.
public struct InMemorySites: SiteResolver {
    public let sites: [BridgeSite]

    public init(_ sites: [BridgeSite]) {
        self.sites = sites.map { s in
            BridgeSite(id: s.id, name: s.name, origins: s.origins.compactMap(Self.canonical), isAppBound: s.isAppBound)
        }
    }

    public func site(forOrigin origin: Origin) async -> BridgeSite? {
        let c = origin.serialized
        return sites.first { $0.origins.contains(c) }
    }

    /// The table never changes: every site in it stays current.
    public func isCurrent(_ site: BridgeSite) -> Bool { sites.contains(site) }

    /// The real origin rule (``Origin``), serialised: the fake parses origins as production does.
    static func canonical(_ origin: String) -> String? { (try? Origin(parsing: origin))?.serialized }
}

/// Grants presence per use (site, op, key); a grant serves that use for 60 s (a presence
/// window). `deny` refuses. The in-memory services' stand-in for custody's gate: a service asks
/// it in the same call that uses its key, as the custody adapters ask the gate.
public final class InMemoryPresence: Sendable {
    public enum Mode: Sendable { case approve, deny, unanswered }
    struct Use: Hashable, Sendable {
        let site: String
        let op: String
        let keyID: String?
    }
    private let state: Mutex<(mode: Mode, granted: [Use: Int64], asked: Int)>

    public init(mode: Mode = .approve) { state = Mutex((mode, [:], 0)) }

    public func setMode(_ mode: Mode) { state.withLock { $0.mode = mode; $0.granted = [:] } }
    /// How many times the user would have been asked.
    public var prompts: Int { state.withLock { $0.asked } }
    /// Makes every grant of `site` `ageNanos` old (to test expiry).
    public func backdate(site: String, ageNanos: Int64) {
        state.withLock { s in for use in s.granted.keys where use.site == site { s.granted[use] = bootNanos() - ageNanos } }
    }

    /// A kept grant for this use (younger than 60 s), else (after `beforeAsking`) the user's answer.
    public func proof(for site: BridgeSite, op: String, keyID: String?,
                      beforeAsking: () throws(BridgeFailure) -> Void = {}) throws(BridgeFailure) -> PresenceProof {
        let use = Use(site: site.id, op: op, keyID: keyID)
        if let at = state.withLock({ $0.granted[use] }), bootNanos() - at <= 60_000_000_000 { return Self.proof(use, at) }
        try beforeAsking()
        let result: Result<PresenceProof, BridgeFailure> = state.withLock { s in
            s.asked += 1
            switch s.mode {
            case .approve:
                let now = bootNanos()
                s.granted[use] = now
                return .success(Self.proof(use, now))
            case .deny: return .failure(BridgeFailure(.presenceDenied, "the user refused \(op) for \(site.name)"))
            case .unanswered: return .failure(BridgeFailure(.presenceRequired, "no one answered the presence check for \(op)"))
            }
        }
        return try result.get()
    }

    static func proof(_ use: Use, _ at: Int64) -> PresenceProof {
        PresenceProof(client: client(use.site), op: try! OpName(parsing: use.op), keyID: use.keyID.map { try! KeyID(parsing: $0) },
                      method: .askpass, issuedAtNanoseconds: UInt64(max(0, at)))
    }

    /// The custody client of a bridge site (the in-memory sites' ids are all site identifiers).
    public static func client(_ siteID: String) -> KeyUseClient {
        guard let id = try? SiteID(parsing: siteID) else { preconditionFailure("a test site's id is not a site identifier: \(siteID)") }
        return .site(id)
    }
}

/// `localStorage`-like values per site, with a byte quota per site.
public final class InMemoryStorage: StorageService {
    private let data = Mutex<[String: [String: String]]>([:])
    public let quotaBytes: Int
    public init(quotaBytes: Int = 5 << 20) { self.quotaBytes = quotaBytes }

    public func value(forKey key: String, site: BridgeSite) async throws(BridgeFailure) -> String? {
        data.withLock { $0[site.id]?[key] }
    }
    public func setValue(_ value: String, forKey key: String, site: BridgeSite) async throws(BridgeFailure) {
        let quota = quotaBytes
        let ok: Bool = data.withLock { d in
            var m = d[site.id] ?? [:]
            m[key] = value
            let used = m.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            guard used <= quota else { return false }
            d[site.id] = m
            return true
        }
        guard ok else { throw BridgeFailure(.quotaExceeded, "the site's storage quota of \(quota) bytes would be exceeded") }
    }
    public func removeValue(forKey key: String, site: BridgeSite) async throws(BridgeFailure) {
        _ = data.withLock { $0[site.id]?.removeValue(forKey: key) }
    }
    public func keys(site: BridgeSite) async throws(BridgeFailure) -> [String] {
        data.withLock { ($0[site.id] ?? [:]).keys.sorted() }
    }
    public func clear(site: BridgeSite) async throws(BridgeFailure) {
        data.withLock { $0[site.id] = nil }
    }
}

/// Session and reading state per site.
public final class InMemorySession: TabsService, ReadingService {
    private let sessions = Mutex<[String: TabSession]>([:])
    private let reading = Mutex<[String: [ArticleReading]]>([:])
    public init() {}

    public func session(site: BridgeSite) async throws(BridgeFailure) -> TabSession {
        sessions.withLock { $0[site.id] ?? TabSession() }
    }
    public func setSession(_ session: TabSession, site: BridgeSite) async throws(BridgeFailure) {
        sessions.withLock { $0[site.id] = session }
    }
    public func readingStates(site: BridgeSite) async throws(BridgeFailure) -> [ArticleReading] {
        reading.withLock { $0[site.id] ?? [] }
    }
    public func record(_ articles: [ArticleReading], site: BridgeSite) async throws(BridgeFailure) -> Int {
        reading.withLock { r in
            var list = r[site.id] ?? []
            for a in articles {
                if let i = list.firstIndex(where: { $0.id == a.id }) { list[i] = a } else { list.append(a) }
            }
            r[site.id] = list
            return articles.count
        }
    }
}

/// Schedules per site; reminders planned against an empty agenda (the fake has none).
public final class InMemorySchedule: ScheduleService, NotifyService {
    private let schedules = Mutex<[String: ScheduleDocument]>([:])
    public init() {}

    public func schedule(site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        schedules.withLock { $0[site.id] ?? ScheduleDocument() }
    }
    public func setSchedule(_ schedule: ScheduleDocument, site: BridgeSite) async throws(BridgeFailure) -> ScheduleDocument {
        schedules.withLock { $0[site.id] = schedule }
        return schedule
    }
    public func plan(leads: ReminderLeads, site: BridgeSite) async throws(BridgeFailure) -> [Reminder] {
        let s = schedules.withLock { $0[site.id] ?? ScheduleDocument() }
        return ReminderPlanner.plan(schedule: s, agenda: .empty, now: SystemClock().now())
    }
}

/// A fixed identity.
public struct InMemoryIdentity: IdentityService {
    public let identity: BridgeIdentity
    public init(_ identity: BridgeIdentity) { self.identity = identity }
    public func identity(site: BridgeSite) async throws(BridgeFailure) -> BridgeIdentity { identity }
}

/// One line of a signing audit log: time, site, op, key id, result, presence age. No secrets.
public struct SigningAuditEntry: Sendable, Equatable {
    public var site: String
    public var keyID: String
    public var ok: Bool
    public var presenceAgeMilliseconds: Int
}

/// A destination for audit lines. ``append(_:)`` returns once the line is written.
public protocol SigningAuditSink: Sendable {
    func append(_ entry: SigningAuditEntry) throws(BridgeFailure)
}

/// Keeps audit lines in memory.
public final class InMemoryAuditSink: SigningAuditSink {
    private let lines = Mutex<[SigningAuditEntry]>([])
    public init() {}
    public func append(_ entry: SigningAuditEntry) throws(BridgeFailure) { lines.withLock { $0.append(entry) } }
    public var entries: [SigningAuditEntry] { lines.withLock { $0 } }
}

/// Signs with custody key handles by id; writes the audit line before returning the signature.
public final class HandleSigningService: SigningService {
    private let keys: [String: SigningKeyHandle]
    private let audit: any SigningAuditSink
    /// Where each signature's approval comes from (custody's gate in production).
    public let presence: InMemoryPresence

    public init(keys: [String: SigningKeyHandle], audit: any SigningAuditSink, presence: InMemoryPresence = InMemoryPresence()) {
        self.keys = keys
        self.audit = audit
        self.presence = presence
    }

    /// Fresh random team keys `team-ed` (Ed25519) and `team-p256` (P-256), for harnesses outside
    /// this package (the fuzz targets), which cannot make key handles themselves.
    public static func freshKeys(audit: any SigningAuditSink = InMemoryAuditSink()) throws -> HandleSigningService {
        HandleSigningService(keys: ["team-ed": SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: SecretBytes(randomCount: 32))),
                                    "team-p256": SigningKeyHandle(p256: try P256.Signing.PrivateKey())],
                             audit: audit)
    }

    /// As custody's gate: a malformed key id or a missing key is refused before any prompt;
    /// then a kept approval or the user's, then the signature.
    public func sign(_ data: [UInt8], keyID: String, site: BridgeSite) async throws(BridgeFailure) -> BridgeSignature {
        guard KeyID.isValid(keyID) else { throw BridgeFailure(.badRequest, "args.key must be a key id (\(KeyID.rule)); see `sitekeep team list`") }
        let proof = try presence.proof(for: site, op: "key.sign", keyID: keyID) { () throws(BridgeFailure) in
            guard keys[keyID] != nil else { throw BridgeFailure(.notFound, "no team key has the id \(FieldSchema.printable(keyID))") }
        }
        return try signNow(data, keyID: keyID, site: site, presence: proof)
    }

    /// The synchronous body of ``sign(_:keyID:site:presence:)``: the proof must be for this
    /// site, `key.sign` and this key (as custody checks it).
    public func signNow(_ data: [UInt8], keyID: String, site: BridgeSite, presence: PresenceProof) throws(BridgeFailure) -> BridgeSignature {
        let age = presence.ageMilliseconds()
        do throws(CustodyError) {
            guard let key = try? KeyID(parsing: keyID) else { throw .invalidKeyID(keyID) }
            try presence.check(client: InMemoryPresence.client(site.id), op: try! OpName(parsing: "key.sign"), keyID: key)
        } catch {
            try audit.append(SigningAuditEntry(site: site.id, keyID: keyID, ok: false, presenceAgeMilliseconds: age))
            throw BridgeFailure(custody: error)
        }
        guard let key = keys[keyID] else {
            try audit.append(SigningAuditEntry(site: site.id, keyID: keyID, ok: false, presenceAgeMilliseconds: age))
            throw BridgeFailure(.notFound, "no team key has the id \(FieldSchema.printable(keyID))")
        }
        guard let signature = try? key.sign(data) else {
            try audit.append(SigningAuditEntry(site: site.id, keyID: keyID, ok: false, presenceAgeMilliseconds: age))
            throw BridgeFailure(.internal, "signing failed")
        }
        try audit.append(SigningAuditEntry(site: site.id, keyID: keyID, ok: true, presenceAgeMilliseconds: age))
        return BridgeSignature(keyID: keyID, algorithm: BridgeSignature.Algorithm(key.algorithm), signature: signature)
    }
}

/// Files per site and vault name, with a fake commit counter.
public final class InMemoryVault: VaultService {
    private let files = Mutex<[String: [String: [UInt8]]]>([:])
    private let commits = Atomic<Int>(0)
    public init() {}

    private func key(_ vault: String?, _ site: BridgeSite) -> String { "\(site.id)/\(vault ?? "default")" }

    public func status(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultStatus {
        let count = files.withLock { $0[key(vault, site)]?.count ?? 0 }
        let c = commits.load(ordering: .relaxed)
        return BridgeVaultStatus(vault: vault ?? "default", state: .clean, head: c == 0 ? nil : "commit-\(c)", files: count)
    }
    public func list(vault: String?, path: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeVaultEntry] {
        let prefix = (path ?? "").isEmpty ? "" : path! + "/"
        let all = files.withLock { $0[key(vault, site)] ?? [:] }
        return all.filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }
            .map { BridgeVaultEntry(path: $0.key, kind: .file, size: $0.value.count) }
    }
    public func load(vault: String?, path: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8] {
        guard let content = files.withLock({ $0[key(vault, site)]?[path] }) else {
            throw BridgeFailure(.notFound, "the vault has no file \(FieldSchema.printable(path))")
        }
        return content
    }
    public func save(vault: String?, path: String, content: [UInt8], site: BridgeSite) async throws(BridgeFailure) -> BridgeVaultSaved {
        let changed = files.withLock { f -> Bool in
            defer { f[key(vault, site), default: [:]][path] = content }
            return f[key(vault, site)]?[path] != content
        }
        let n = changed ? commits.add(1, ordering: .relaxed).newValue : commits.load(ordering: .relaxed)
        return BridgeVaultSaved(vault: vault ?? "default", commit: "commit-\(n)", changed: changed)
    }
}

/// The standard in-memory set-up: the design's three team sites (app-bound), one more app-bound
/// site on no explicit list, and one site that is not app-bound.
public enum InMemoryBridge {
    /// A site whose origin is in the canonical form the real ``Origin`` gives (`https://host:443`),
    /// as the daemon's registry hands sites to the bridge.
    static func site(_ id: String, _ name: String, _ origin: String, appBound: Bool) -> BridgeSite {
        BridgeSite(id: id, name: name, origins: [InMemorySites.canonical(origin) ?? origin], isAppBound: appBound)
    }
    public static let promptugal = site("00000000-0000-4000-8000-000000000001", "Promptugal", "https://promptugal.news", appBound: true)
    public static let webSummit = site("00000000-0000-4000-8000-000000000002", "Web Summit", "https://web-summit.sgit.ai", appBound: true)
    public static let newsroom = site("00000000-0000-4000-8000-000000000003", "Newsroom", "https://newsroom.sgit.ai", appBound: true)
    public static let reader = site("00000000-0000-4000-8000-000000000004", "Reader", "https://reader.example", appBound: true)
    public static let stranger = site("00000000-0000-4000-8000-000000000005", "Stranger", "https://stranger.example", appBound: false)
    public static let sites = [promptugal, webSummit, newsroom, reader, stranger]

    /// The registry of ``sites``, as the bridge sees it.
    public static var resolver: InMemorySites { InMemorySites(sites) }

    /// Modules backed by memory; pass `signing` / `sealed` / `vault` to include those ops, and
    /// `identity` to replace the in-memory identity.
    public static func modules(signing: (any SigningService)? = nil, sealed: (any SealedContentService)? = nil,
                               vault: (any VaultService)? = InMemoryVault(), identity: (any IdentityService)? = nil) -> [any BridgeModule] {
        let session = InMemorySession()
        let schedule = InMemorySchedule()
        var modules: [any BridgeModule] = [
            StorageModule(InMemoryStorage()), TabsModule(session), ReadingModule(session), ScheduleModule(schedule),
            NotifyModule(schedule),
            IdentityModule(identity ?? InMemoryIdentity(BridgeIdentity(teamID: "team-nr", displayName: "Reader Team"))),
            WorkflowModule(InMemoryWorkflows()), InboxModule(InMemoryInbox(), lanes: InMemoryLanes()),
        ]
        if let signing { modules.append(SigningModule(signing)) }
        if let vault { modules.append(VaultModule(vault)) }
        if let sealed { modules.append(SealedModule(sealed)) }
        return modules
    }

    /// A dispatcher on the bundled catalogue, ``resolver`` and ``modules(signing:sealed:vault:identity:)``.
    public static func dispatcher(signing: (any SigningService)? = nil,
                                  sealed: (any SealedContentService)? = nil, vault: (any VaultService)? = InMemoryVault(),
                                  identity: (any IdentityService)? = nil) throws -> BridgeDispatcher {
        try BridgeDispatcher(catalogue: .bundled(), sites: resolver,
                             modules: modules(signing: signing, sealed: sealed, vault: vault, identity: identity))
    }
}

/// One workflow ("morning": two pages) and its run positions.
public final class InMemoryWorkflows: WorkflowService, WorkflowSource {
    private let positions = Mutex<[String: Int]>([:])
    public init() {}
    public func files() throws(CoreFileError) -> [(name: String, bytes: [UInt8])] {
        [("morning", Array(#"{"format":"sitekeep.workflow.v1","name":"morning","title":"Morning run","steps":[{"page":"https://newsroom.sgit.ai/wires/"},{"query":"articles.unread"}]}"#.utf8))]
    }
    public func catalogue(site: BridgeSite) async throws(BridgeFailure) -> WorkflowCatalogue {
        do { return try WorkflowCatalogue(source: self) } catch { throw BridgeFailure(.internal, error.description) }
    }
    func named(_ name: String, site: BridgeSite) async throws(BridgeFailure) -> Workflow {
        guard let w = try await catalogue(site: site).workflow(named: name) else { throw BridgeFailure(.notFound, "no workflow \(name)") }
        return w
    }
    public func run(_ name: String, restart: Bool, site: BridgeSite) async throws(BridgeFailure) -> WorkflowRun {
        let w = try await named(name, site: site)
        return WorkflowRun(w, position: restart ? 0 : positions.withLock { $0[name] ?? 0 })
    }
    public func next(_ name: String, site: BridgeSite) async throws(BridgeFailure) -> (run: WorkflowRun, moved: Bool) {
        let w = try await named(name, site: site)
        return positions.withLock { p in
            var run = WorkflowRun(w, position: p[name] ?? 0)
            let moved = run.next()
            p[name] = run.position
            return (run, moved)
        }
    }
}

/// A fixed inbox of two unread items (a brief and a review), with each site's read marks in
/// memory, marked by the core's own rule.
public final class InMemoryInbox: InboxService {
    public static let listing = [VaultListingEntry(path: "inbox/briefs/today.md", version: "v1", size: 12),
                                 VaultListingEntry(path: "inbox/reviews/draft.md", version: "v7", size: 40)]
    private let marks = Mutex<[String: InboxReadMarks]>([:])
    public init() {}
    public func items(site: BridgeSite) async throws(BridgeFailure) -> [InboxItem] {
        Inbox.items(current: Self.listing, lastLooked: nil, marks: marks.withLock { $0[site.id] } ?? InboxReadMarks())
    }
    public func markRead(_ paths: [String], site: BridgeSite) async throws(BridgeFailure) -> Int {
        if let bad = Inbox.firstNonItem(paths, in: Self.listing) { throw .notInInbox(bad) }
        return marks.withLock { all in all[site.id, default: InboxReadMarks()].markRead(paths, in: Self.listing, at: Instant(milliseconds: 1_793_000_000_000)!) }
    }
}

/// Lane messages in memory: two unread in Promptugal's vault `notes`, one in Web Summit's vault
/// `summit`, each site served its own vaults' only, another site's vault refused as the vault
/// ops refuse it (`not_found`, naming nothing), marks all or none.
public final class InMemoryLanes: LaneInboxService {
    public static let notesIDs = ["1796666150730_e0aa44a4fdd6cb51f9ad89cc.enc", "1796666150731_e0aa44a4fdd6cb51f9ad89cd.enc"]
    public static let summitID = "1796666150732_e0aa44a4fdd6cb51f9ad89ce.enc"
    private let unread = Mutex<[BridgeLaneMessage]>([
        BridgeLaneMessage(vault: "notes", id: notesIDs[0], receivedMs: 1_796_666_150_730, sender: "brief-bot", title: "Daily brief", kind: .sealed, size: 300),
        BridgeLaneMessage(vault: "notes", id: notesIDs[1], receivedMs: 1_796_666_150_731, sender: "review-bot", title: nil, kind: .opaque, size: 9),
        BridgeLaneMessage(vault: "summit", id: summitID, receivedMs: 1_796_666_150_732, sender: "summit-bot", title: "Summit only", kind: .plain, size: 20),
    ])
    static let owners = ["notes": InMemoryBridge.promptugal.id, "summit": InMemoryBridge.webSummit.id]
    public init() {}

    public func messages(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeLaneMessage] {
        if let vault, Self.owners[vault] != site.id {
            throw BridgeFailure(.notFound, "args.vault names no vault of this site; `sitekeep vault list` shows each vault's site")
        }
        return unread.withLock { $0 }.filter { Self.owners[$0.vault] == site.id && (vault == nil || $0.vault == vault) }
    }

    public func prepareMark(_ ids: [String], site: BridgeSite) async throws(BridgeFailure) -> LaneMarking {
        let mine = Set(try await messages(vault: nil, site: site).map(\.id))
        if let bad = ids.first(where: { !mine.contains($0) }) {
            throw BridgeFailure(.notFound, "args.ids: \"\(bad)\" is not an unread message of this site's lanes; nothing was marked")
        }
        let wanted = Set(ids)
        return LaneMarking(count: wanted.count) { [self] () async throws(BridgeFailure) -> Int in remove(wanted) }
    }

    private func remove(_ wanted: Set<String>) -> Int {
        unread.withLock { all in
            let before = all.count
            all.removeAll { wanted.contains($0.id) }
            return before - all.count
        }
    }
}

/// A host authority that lets every process of this user bind any site: for the bridge's own
/// process tests (the test daemon, whose clients are the test runner and `curl`-like peers),
/// never for a daemon whose host binding is under test.
public struct AnyProcessIsAHost: HostAuthority {
    public init() {}
    public func refusal(of process: PeerProcess, for site: BridgeSite) -> String? { nil }
}
