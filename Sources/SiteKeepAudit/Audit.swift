public import Foundation
public import SiteKeepPartitions
import SiteKeepCore
import SiteKeepWiring
import SiteKeepCustody
public import SiteKeepJSON
import Synchronization
public import SiteKeepVocabulary

/// The result of one probe on one site.
public enum ProbeOutcome: Sendable, Equatable {
    /// Nothing reached another site's data.
    case pass
    /// Another site's data (or a look-alike's resolution) was reached: what happened.
    case leak(String)
    /// The probe could not run to a verdict (setup failed, wrong behaviour that is not a leak).
    case error(String)
}

/// One check the isolation audit runs for every site. Other layers (bridge, vault) add theirs
/// by passing them to ``IsolationAudit/run(in:sites:probes:)``.
public protocol Probe: Sendable {
    /// A short, stable name (a matrix column), e.g. `origin-lookalikes`.
    var name: String { get }
    /// One sentence: what the probe tries.
    var summary: String { get }
    /// Runs the probe with `subject` as the site under test.
    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome
}

/// The distinct values the audit plants in one site's namespaces.
public struct Canaries: Sendable, Hashable {
    /// A storage key only this site has, and its value.
    public let ownKey: String
    public let ownValue: String
    /// The value this site stores under the key every site uses (``AuditContext/sharedKey``).
    public let sharedValue: String
    /// The title of the one tab in this site's session.
    public let tabTitle: String
    /// An article only this site has marked part read.
    public let article: String
    /// A cached URL only this site has, and its body.
    public let cacheURL: String
    public let cacheBody: String

    /// Every canary string (to search any output for).
    public var all: [String] { [ownKey, ownValue, sharedValue, tabTitle, article, cacheURL, cacheBody] }
}

/// A site of the audit's store.
public struct AuditSite: Sendable, Hashable {
    /// Position in the matrix.
    public let index: Int
    public let id: SiteID
    public let origin: Origin
    public let canaries: Canaries
}

/// What probes work with: the store, its sites and their canaries.
public final class AuditContext: Sendable {
    /// The key every site stores its own value under.
    public static let sharedKey = "shared"
    /// The bridge ops the audit grants its last site (a site the user added).
    public static let grantedOps = ["schedule.get", "vault.list", "key.sign"]
    /// The registry of the audit's store.
    public let registry: SiteRegistry
    /// The audit's sites, in matrix order.
    public let sites: [AuditSite]

    init(registry: SiteRegistry, sites: [AuditSite]) {
        self.registry = registry
        self.sites = sites
    }

    /// The site after `site` (cyclic): the counterpart of pairwise probes.
    public func neighbour(of site: AuditSite) -> AuditSite { sites[(site.index + 1) % sites.count] }

    /// Every site but `site`.
    public func others(than site: AuditSite) -> [AuditSite] { sites.filter { $0.id != site.id } }

    /// The first canary of another site found in `text`, if any.
    public func foreignCanary(in text: String, subject: AuditSite) -> String? {
        for other in others(than: subject) {
            for c in other.canaries.all where text.contains(c) { return c }
        }
        return nil
    }

    /// Opens the site's partition for the length of `body`.
    public func withPartition<R>(_ site: AuditSite, _ body: (Partition) throws -> R) throws -> R {
        let p = try registry.openPartition(forIdentifier: site.id)
        defer { p.close() }
        return try body(p)
    }

    /// The folder of a site's partition.
    public func folder(of site: AuditSite) -> URL {
        registry.home.appendingPathComponent("sites").appendingPathComponent(site.id.string)
    }

    /// Plants the site's canaries (used at setup and to restore after destructive probes).
    func plant(_ site: AuditSite) throws {
        try withPartition(site) { p in
            let c = site.canaries
            try p.storage.setItems([(c.ownKey, c.ownValue), (Self.sharedKey, c.sharedValue)])
            try p.tabs.setSession(SessionState(tabs: [TabState(id: "tab-1", url: site.origin.serialized + "/", title: c.tabTitle, scrollY: 10)], lastTabID: "tab-1"))
            try p.reading.setState(.partRead(progress: 0.5), for: c.article)
            try p.cache.store(CachedResource(url: c.cacheURL, headers: [HeaderField(name: "X-Canary", value: c.cacheBody)], body: Array(c.cacheBody.utf8)))
        }
    }
}

/// One cell of the matrix.
public struct AuditResult: Sendable, Equatable {
    public let site: String
    public let probe: String
    /// `pass`, `LEAK` or `error`.
    public let outcome: String
    public let detail: String?
}

/// The audit's report: sites × probes with pass or LEAK.
public struct AuditReport: Sendable, Equatable {
    public struct SiteInfo: Sendable, Equatable { public let id: String; public let origin: String }
    public struct ProbeInfo: Sendable, Equatable { public let name: String; public let summary: String }
    public let sites: [SiteInfo]
    public let probes: [ProbeInfo]
    public let results: [AuditResult]

    /// Whether any cell is a LEAK.
    public var hasLeaks: Bool { results.contains { $0.outcome == "LEAK" } }
    /// Whether any probe could not reach a verdict.
    public var hasErrors: Bool { results.contains { $0.outcome == "error" } }
    /// No leaks and no errors (the CLI exits 0 only then).
    public var passed: Bool { !hasLeaks && !hasErrors }

    /// The outcome of `probe` on the site with identifier `site`.
    public func outcome(site: String, probe: String) -> String? {
        results.first { $0.site == site && $0.probe == probe }?.outcome
    }

    /// A text matrix (sites as rows, probes as numbered columns), the probe legend, then the
    /// details of every cell that did not pass.
    public func renderText() -> String {
        var out = "SiteKeep isolation audit: \(sites.count) sites × \(probes.count) probes\n\n"
        let siteWidth = max(4, sites.map { $0.id.prefix(8).count + 2 + $0.origin.count }.max() ?? 4)
        func pad(_ s: String, _ w: Int) -> String { s.count >= w ? s : s + String(repeating: " ", count: w - s.count) }
        var header = pad("site", siteWidth)
        for i in probes.indices { header += "  " + pad("P\(i + 1)", 5) }
        out += header + "\n"
        for s in sites {
            var line = pad("\(s.id.prefix(8))  \(s.origin)", siteWidth)
            for p in probes {
                let o = outcome(site: s.id, probe: p.name) ?? "-"
                line += "  " + pad(o, 5)
            }
            out += line + "\n"
        }
        out += "\nProbes:\n"
        for (i, p) in probes.enumerated() { out += "  P\(i + 1)  \(p.name): \(p.summary)\n" }
        let bad = results.filter { $0.outcome != "pass" }
        if !bad.isEmpty {
            out += "\nFindings:\n"
            for r in bad { out += "  \(r.outcome) \(r.probe) on \(r.site): \(r.detail ?? "")\n" }
        }
        let leaks = results.filter { $0.outcome == "LEAK" }.count
        let errors = results.filter { $0.outcome == "error" }.count
        out += "\n" + (passed ? "No leak: every probe passed on every site.\n"
                             : "\(leaks) LEAK(s), \(errors) error(s).\n")
        return out
    }

    /// The report as JSON, for `sitekeep audit --json`:
    /// `{"hasLeaks", "passed", "probes": [{"name", "summary"}], "results": [{"detail"?, "outcome",
    /// "probe", "site"}], "sites": [{"id", "origin"}]}`, keys sorted, `detail` only for a cell
    /// that did not pass. Scripts read and compare it, so it keeps the bytes Foundation's
    /// `JSONEncoder` (`[.prettyPrinted, .sortedKeys]`) wrote before in ``jsonData()``; the command
    /// line prints these members in this order in its own `--json` form.
    public var json: JSONValue {
        .object([
            JSONMember(key: "hasLeaks", value: .bool(hasLeaks)),
            JSONMember(key: "passed", value: .bool(passed)),
            JSONMember(key: "probes", value: .array(probes.map { .object(["name": .string($0.name), "summary": .string($0.summary)]) })),
            JSONMember(key: "results", value: .array(results.map { r in
                var members: [JSONMember] = []
                if let detail = r.detail { members.append(JSONMember(key: "detail", value: .string(detail))) }
                members += [JSONMember(key: "outcome", value: .string(r.outcome)), JSONMember(key: "probe", value: .string(r.probe)),
                            JSONMember(key: "site", value: .string(r.site))]
                return .object(members)
            })),
            JSONMember(key: "sites", value: .array(sites.map { .object(["id": .string($0.id), "origin": .string($0.origin)]) })),
        ])
    }

    /// ``json``'s bytes in the form described there.
    public func jsonData() -> Data { Data(JSONSerializer.bytes(json, style: .foundationPretty)) }
}

/// The isolation audit: builds a scratch store of sites with distinct canaries in every
/// namespace, runs a catalogue of probes for every site, and reports the matrix.
///
/// ```swift
/// let report = try IsolationAudit.run(in: scratchDir, sites: 5)
/// print(report.renderText())
/// exit(report.passed ? 0 : 1)
/// ```
public enum IsolationAudit {
    /// The probes of the partitions layer, in matrix order.
    public static var standardProbes: [any Probe] {
        [ForeignAPIPathsProbe(), UnknownSiteProbe(), OriginLookalikeProbe(), SiteIDTraversalProbe(),
         RowKeyTraversalProbe(), SQLMetacharacterProbe(), RowSwapBetweenSitesProbe(), RowMoveWithinSiteProbe(),
         FileSwapProbe(), FolderSwapProbe(), ConcurrentWritersProbe()]
    }

    /// Runs the audit in a fresh store under `directory` (which must not hold a store yet).
    /// - Parameters:
    ///   - sites: how many sites (at least 5 are recommended; at least 2 are required).
    ///   - probes: the catalogue; ``standardProbes`` plus any a caller adds.
    public static func run(in directory: URL, sites: Int = 5, probes: [any Probe] = IsolationAudit.standardProbes) throws -> AuditReport {
        try run(in: directory, sites: sites, probes: probes, faults: [])
    }

    /// As ``run(in:sites:probes:)`` with checks switched off (to prove the audit notices).
    package static func run(in directory: URL, sites count: Int, probes: [any Probe], faults: AuditFaults) throws -> AuditReport {
        guard count >= 2 else { throw PartitionError.invalidValue("the audit needs at least 2 sites, got \(count)") }
        let registry = try SiteRegistry(home: directory.appendingPathComponent("audit-store"), keys: ScratchStoreKeys(), faults: faults)
        let origins = ["https://newsroom.sgit.ai", "https://web-summit.sgit.ai", "https://promptugal.news",
                       "http://127.0.0.1:8080", "http://localhost:8443"]
        var sites: [AuditSite] = []
        for i in 0..<count {
            let origin = i < origins.count ? origins[i] : "https://site\(i).sgit.ai"
            let site = try registry.add(displayName: "Audit site \(i)", origins: [origin], appBound: i < SiteRegistry.maximumAppBoundSites)
            let token = "\(i)-" + UUID().uuidString.lowercased().prefix(8)
            let canaries = Canaries(ownKey: "own-key-\(token)", ownValue: "CANARY-storage-\(token)", sharedValue: "CANARY-shared-\(token)",
                                    tabTitle: "CANARY-tab-\(token)", article: "CANARY-article-\(token)",
                                    cacheURL: "\(site.origins[0].serialized)/CANARY-page-\(token)", cacheBody: "CANARY-body-\(token)")
            sites.append(AuditSite(index: i, id: site.id, origin: site.origins[0], canaries: canaries))
        }
        // The last site is one the user added and granted ops the catalogue gives it not (as
        // `sitekeep site grant` does): the bridge probes check the grant reaches no other site.
        if let last = sites.last, last.index < SiteRegistry.maximumAppBoundSites {
            try registry.setGrants(AuditContext.grantedOps, forIdentifier: last.id)
        }
        let context = AuditContext(registry: registry, sites: sites)
        for s in sites { try context.plant(s) }

        var results: [AuditResult] = []
        for probe in probes {
            for s in sites {
                let outcome: ProbeOutcome
                do { outcome = try probe.run(subject: s, context: context) } catch { outcome = .error("\(error)") }
                switch outcome {
                case .pass: results.append(AuditResult(site: s.id.string, probe: probe.name, outcome: "pass", detail: nil))
                case .leak(let d): results.append(AuditResult(site: s.id.string, probe: probe.name, outcome: "LEAK", detail: d))
                case .error(let d): results.append(AuditResult(site: s.id.string, probe: probe.name, outcome: "error", detail: d))
                }
            }
        }
        return AuditReport(sites: sites.map { .init(id: $0.id.string, origin: $0.origin.serialized) },
                           probes: probes.map { .init(name: $0.name, summary: $0.summary) },
                           results: results)
    }
}

/// The audit's own storage keys for its scratch store: random, held only for the run and never
/// persisted, because the store is made for the audit and deleted after it (the audit must not
/// touch the user's keys). Not a stand-in: this is how the audit keeps its store apart.
final class ScratchStoreKeys: SiteStorageKeyProvider {
    private let keys = Mutex<[String: SymmetricKeyHandle]>([:])

    func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        try keys.withLock { k in
            if let h = k[siteID] { return h }
            let h = try SymmetricKeyHandle.random()
            k[siteID] = h
            return h
        }
    }

    func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        keys.withLock { _ = $0.removeValue(forKey: siteID) }
    }
}
