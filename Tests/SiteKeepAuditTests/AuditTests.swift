import Foundation
import Testing
import SiteKeepJSON
import SiteKeepPartitions
import SiteKeepTestSupport
@testable import SiteKeepAudit

final class ScratchDir: Sendable {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-audit-\(UUID().uuidString.lowercased())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

/// A probe another layer might add.
struct AlwaysLeaks: Probe {
    let name = "extra-probe"
    let summary = "a probe added from outside the catalogue"
    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        subject.index == 0 ? .leak("deliberate") : .pass
    }
}

@Suite struct AuditTests {
    @Test func fiveSitesPassEveryProbe() throws {
        let dir = ScratchDir()
        let report = try IsolationAudit.run(in: dir.url, sites: 5)
        let failures = report.results.filter { $0.outcome != "pass" }
        #expect(failures.isEmpty, "\(report.renderText())")
        #expect(report.passed)
        #expect(!report.hasLeaks)
        #expect(report.sites.count == 5)
        #expect(report.probes.count == IsolationAudit.standardProbes.count)
        #expect(report.results.count == 5 * report.probes.count)
        let text = report.renderText()
        for p in report.probes { #expect(text.contains(p.name)) }
        #expect(text.contains("No leak"))
        let json = try JSONSerialization.jsonObject(with: report.jsonData()) as? [String: Any]
        #expect(json?["hasLeaks"] as? Bool == false)
        #expect((json?["results"] as? [Any])?.count == report.results.count)
    }

    /// `jsonData()` keeps the bytes Foundation's `JSONEncoder` (`[.prettyPrinted, .sortedKeys]`)
    /// wrote before the report moved to SiteKeepJSON (captured in Fixtures/stores/json-encoder):
    /// scripts compare them. `detail` is left out for a cell that passed, `/` is `\/`.
    @Test func theJSONIsWhatJSONEncoderWrote() throws {
        let report = AuditReport(
            sites: [.init(id: "2a436ddc-ce2a-4ed1-8012-a0e516e84c2d", origin: "https://newsroom.sgit.ai:443")],
            probes: [.init(name: "origin-lookalikes", summary: "Look-alike origins (\u{0430}pple) resolve to no site's data.")],
            results: [AuditResult(site: "2a436ddc", probe: "origin-lookalikes", outcome: "pass", detail: nil),
                      AuditResult(site: "2a436ddc", probe: "file-swap", outcome: "LEAK", detail: "read \"CANARY\" at /tmp/x\nline2\tTab")])
        #expect(report.jsonData() == (try Fixtures.data("stores/json-encoder/audit-report.json")))
        #expect(AuditReport(sites: [], probes: [], results: []).jsonData() == (try Fixtures.data("stores/json-encoder/audit-report-empty.json")))
        // The command line prints the same members in the same order in its own form.
        #expect(report.json.objectValue?.map(\.key) == ["hasLeaks", "passed", "probes", "results", "sites"])
        #expect(try JSONParser.parse(Array(report.jsonData())) == report.json)
    }

    // The fault switches exist only in debug builds (SITEKEEP_FAULTS); tests run there.
    #if SITEKEEP_FAULTS
    @Test func portBlindOriginCheckIsReportedAsLeak() throws {
        let dir = ScratchDir()
        let report = try IsolationAudit.run(in: dir.url, sites: 5, probes: IsolationAudit.standardProbes, faults: .originMatchIgnoresPort)
        #expect(report.hasLeaks)
        for s in report.sites { #expect(report.outcome(site: s.id, probe: "origin-lookalikes") == "LEAK") }
        #expect(report.renderText().contains("LEAK"))
    }

    @Test func unboundValuesAreReportedAsLeak() throws {
        let dir = ScratchDir()
        let report = try IsolationAudit.run(in: dir.url, sites: 5, probes: IsolationAudit.standardProbes, faults: .skipValueBinding)
        #expect(report.hasLeaks)
        for s in report.sites { #expect(report.outcome(site: s.id, probe: "row-move-in-site") == "LEAK") }
        // Other sites' keys still protect cross-site swaps.
        for s in report.sites { #expect(report.outcome(site: s.id, probe: "row-swap-sites") == "pass") }
    }
    #endif

    @Test func catalogueIsExtensible() throws {
        let dir = ScratchDir()
        let report = try IsolationAudit.run(in: dir.url, sites: 2, probes: [AlwaysLeaks()])
        #expect(report.probes.map(\.name) == ["extra-probe"])
        #expect(report.hasLeaks)
        #expect(report.results.filter { $0.outcome == "LEAK" }.count == 1)
    }

    @Test func tooFewSitesIsRefused() {
        let dir = ScratchDir()
        #expect(throws: PartitionError.invalidValue("the audit needs at least 2 sites, got 1")) {
            try IsolationAudit.run(in: dir.url, sites: 1)
        }
    }
}

@Suite struct VaultProbeTests {
    @Test func hostileVaultPathsAreRefusedOnEverySite() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-audit-vault-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let report = try IsolationAudit.run(in: dir, sites: 2, probes: [VaultPathProbe()])
        #expect(report.passed)
        #expect(report.results.count == 2)
        #expect(VaultPathProbe.hostile(for: "x").count >= 10)
    }
}

@Suite struct BridgeAuditProbeTests {
    @Test func bridgeRefusalsHoldOnEveryAuditSite() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-audit-bridge-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let report = try IsolationAudit.run(in: dir, sites: 3, probes: [BridgePolicyProbe(.foreignOps), BridgePolicyProbe(.originClaims)])
        #expect(report.passed, "\(report.renderText())")
        #expect(report.results.count == 6)
    }
}
