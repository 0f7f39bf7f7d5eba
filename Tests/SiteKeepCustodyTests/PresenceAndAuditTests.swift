import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
@testable import SiteKeepCustody

/// A verifier that approves and counts its prompts.
final class CountingVerifier: PresenceVerifier {
    let clock: BootClock
    let asked = Mutex(0)
    init(clock: BootClock) { self.clock = clock }
    func requestPresence(site: String, op: String, keyID: String?) throws(CustodyError) -> PresenceProof {
        asked.withLock { $0 += 1 }
        return PresenceProof(site: site, op: op, keyID: keyID, method: .askpass, issuedAtNanoseconds: clock.nanoseconds())
    }
}

func script(_ body: String) throws -> String {
    let dir = try temporaryFolder()
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let path = dir + "/askpass.sh"
    try ("#!/bin/sh\n" + body + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, 0o700)
    return path
}

@Suite struct PresenceTests {
    @Test func proofsExpireAfterSixtySecondsAndAreBoundToTheirSite() throws {
        let clock = TestClock()
        let proof = PresenceProof(site: "promptugal.news", op: "key.sign", keyID: "t", method: .askpass,
                                  issuedAtNanoseconds: clock.boot.nanoseconds())
        try proof.check(site: "promptugal.news", clock: clock.boot)
        #expect(throws: CustodyError.presenceWrongSite) { try proof.check(site: "newsroom.sgit.ai", clock: clock.boot) }
        clock.advance(seconds: 60)
        try proof.check(site: "promptugal.news", clock: clock.boot)
        clock.advance(seconds: 1)
        #expect(throws: CustodyError.presenceExpired(ageSeconds: 61)) { try proof.check(site: "promptugal.news", clock: clock.boot) }
        // Configuration can shorten the lifetime, never lengthen it.
        #expect(throws: CustodyError.presenceExpired(ageSeconds: 61)) {
            try proof.check(site: "promptugal.news", clock: clock.boot, lifetime: .seconds(3600))
        }
        let fresh = PresenceProof(site: "s", op: "o", keyID: nil, method: .askpass, issuedAtNanoseconds: clock.boot.nanoseconds())
        clock.advance(seconds: 11)
        #expect(throws: CustodyError.presenceExpired(ageSeconds: 11)) { try fresh.check(site: "s", clock: clock.boot, lifetime: .seconds(10)) }
        #expect(CustodianConfiguration(presenceLifetime: .seconds(600)).presenceLifetime == .seconds(60))
    }

    @Test(arguments: Backend.allCases) func signingChecksThePresenceProofAndLogsItsAge(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        let proof = PresenceProof(site: "site-a", op: "key.sign", keyID: "t", method: .askpass, issuedAtNanoseconds: f.clock.boot.nanoseconds())
        f.clock.advance(seconds: 2)
        _ = try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(site: "site-a", op: "key.sign", presence: proof))
        #expect(throws: CustodyError.presenceWrongSite) {
            try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(site: "site-b", op: "key.sign", presence: proof))
        }
        f.clock.advance(seconds: 59)
        #expect(throws: CustodyError.presenceExpired(ageSeconds: 61)) {
            try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(site: "site-a", op: "key.sign", presence: proof))
        }
        let entries = try AuditLog.entries(path: (f.home.path + "/" + "audit.log")).filter { $0.op == "key.sign" }
        #expect(entries.map(\.result) == ["ok", "presence-refused", "presence-refused"])
        #expect(entries.map(\.site) == ["site-a", "site-b", "site-a"])
        #expect(entries[0].presenceAgeMs == 2000 && entries[0].key == "t@v1")
    }

    @Test func presenceWindowReusesAProofForTheSameSiteOnly() throws {
        let clock = TestClock()
        let verifier = CountingVerifier(clock: clock.boot)
        let window = PresenceWindow(verifier: verifier, lifetime: .seconds(600), clock: clock.boot)
        #expect(window.lifetime == .seconds(60))
        let a1 = try window.proof(site: "a", op: "key.sign", keyID: "t")
        clock.advance(seconds: 30)
        #expect(try window.proof(site: "a", op: "key.sign", keyID: "t") == a1)
        #expect(verifier.asked.withLock { $0 } == 1)
        let b = try window.proof(site: "b", op: "key.sign", keyID: "t")
        #expect(b.site == "b" && verifier.asked.withLock { $0 } == 2)
        clock.advance(seconds: 31)
        let a2 = try window.proof(site: "a", op: "key.sign", keyID: "t")
        #expect(a2 != a1 && verifier.asked.withLock { $0 } == 3)
    }

    @Test func askpassApprovesDeniesAndTimesOut() throws {
        let approve = try script("""
        [ "$SITEKEEP_PRESENCE_SITE" = "promptugal.news" ] || exit 3
        [ "$SITEKEEP_PRESENCE_OP" = "key.sign" ] || exit 4
        [ "$SITEKEEP_PRESENCE_KEY" = "team1" ] || exit 5
        case "$1" in *promptugal.news*key.sign*team1*) exit 0;; esac
        exit 6
        """)
        let proof = try AskpassPresenceVerifier(program: approve).requestPresence(site: "promptugal.news", op: "key.sign", keyID: "team1")
        #expect(proof.site == "promptugal.news" && proof.method == .askpass)
        try proof.check(site: "promptugal.news")

        // From the bridge: the prompt and SITEKEEP_PRESENCE_SITE name the site by its name and
        // origin; SITEKEEP_PRESENCE_SITE_ID carries the id the proof is bound to.
        let labelled = try script("""
        [ "$SITEKEEP_PRESENCE_SITE" = "Newsroom (https://newsroom.sgit.ai)" ] || exit 3
        [ "$SITEKEEP_PRESENCE_SITE_ID" = "5f2d0c1e-site" ] || exit 4
        case "$1" in "SiteKeep: Newsroom (https://newsroom.sgit.ai) asks to key.sign with key team-nr. Allow?") exit 0;; esac
        exit 6
        """)
        let viaWindow = try PresenceWindow(verifier: AskpassPresenceVerifier(program: labelled))
            .proof(site: "5f2d0c1e-site", siteLabel: "Newsroom (https://newsroom.sgit.ai)", op: "key.sign", keyID: "team-nr")
        #expect(viaWindow.site == "5f2d0c1e-site")

        let deny = try script("exit 1")
        #expect(throws: CustodyError.presenceDenied) {
            try AskpassPresenceVerifier(program: deny).requestPresence(site: "s", op: "o", keyID: nil)
        }
        // No shell: a site name full of shell syntax reaches the program as plain text.
        let marker = try temporaryFolder() + "-pwned"
        let echo = try script("[ \"$SITEKEEP_PRESENCE_SITE\" = '$(touch \(marker))' ] && exit 0; exit 1")
        _ = try AskpassPresenceVerifier(program: echo).requestPresence(site: "$(touch \(marker))", op: "o", keyID: nil)
        #expect(!FileManager.default.fileExists(atPath: marker))

        let slow = try script("sleep 30")
        let start = ContinuousClock.now
        #expect(throws: CustodyError.presenceTimedOut(seconds: 0)) {
            try AskpassPresenceVerifier(program: slow, timeout: .milliseconds(300)).requestPresence(site: "s", op: "o", keyID: nil)
        }
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect { try AskpassPresenceVerifier(program: "askpass") } throws: { if case .presenceUnavailable = $0 as? CustodyError { true } else { false } }
        #expect { try AskpassPresenceVerifier.fromEnvironment([:]) } throws: { if case .presenceUnavailable = $0 as? CustodyError { true } else { false } }
        #expect(try AskpassPresenceVerifier.fromEnvironment(["SITEKEEP_ASKPASS": deny]).program == deny)
    }

    @Test(arguments: Backend.allCases) func passphraseReentryVerifiesAgainstAPassphraseSlot(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        let right = PassphrasePresenceVerifier(custodian: f.custodian, clock: f.clock.boot) { prompt throws(CustodyError) in
            #expect(prompt.contains("site-a") && prompt.contains("key.sign"))
            do { return try secret(Fixture.passphrase) } catch { throw .presenceDenied }
        }
        let proof = try right.requestPresence(site: "site-a", op: "key.sign", keyID: "t")
        #expect(proof.method == .passphrase && proof.site == "site-a")
        let wrong = PassphrasePresenceVerifier(custodian: f.custodian, clock: f.clock.boot) { _ throws(CustodyError) in
            do { return try secret("nope") } catch { throw .presenceDenied }
        }
        #expect(throws: CustodyError.presenceDenied) { try wrong.requestPresence(site: "site-a", op: "key.sign", keyID: "t") }
        #expect(f.custodian.isUnlocked)
    }
}

@Suite struct AuditLogTests {
    func makeLog(lines: Int) throws -> (AuditLog, String) {
        let dir = try temporaryFolder()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let log = try AuditLog(path: dir + "/audit.log", genesis: AuditLog.genesis(storeID: "s"))
        for i in 0..<lines {
            try log.append(site: "site-\(i % 3)", op: "sign", key: "k\(i)", result: "ok", presenceAgeMs: i)
        }
        log.flush()
        return (log, dir + "/audit.log")
    }

    func rewrite(_ path: String, _ edit: (inout [String]) -> Void) throws {
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        edit(&lines)
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: false, encoding: .utf8)
    }

    @Test func intactLogVerifiesAndContinuesAcrossReopen() throws {
        let (log, path) = try makeLog(lines: 5)
        #expect(try log.verify() == AuditVerification(lineCount: 5, firstBadLine: nil, reason: nil))
        let reopened = try AuditLog(path: path, genesis: log.genesis)
        try reopened.append(site: nil, op: "lock", key: nil, result: "ok")
        #expect(try reopened.verify().isIntact && reopened.verify().lineCount == 6)
        let entries = try AuditLog.entries(path: path)
        #expect(entries.map(\.seq) == [1, 2, 3, 4, 5, 6])
        #expect(entries[5].site == "-" && entries[0].presenceAgeMs == 0)
        #expect(entries[0].prev == log.genesis)
        let mode = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        // A log from another store does not verify against this store's genesis.
        #expect(try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "other")).firstBadLine == 1)
    }

    @Test func timesAreISO8601UTCWithMilliseconds() throws {
        let (log, _) = try makeLog(lines: 3)
        for entry in try log.entries() {
            // YYYY-MM-DDTHH:MM:SS.mmmZ, exactly.
            #expect(entry.time.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(entry.time)")
        }
    }

    @Test func editedRemovedAndReorderedLinesAreDetected() throws {
        var (_, path) = try makeLog(lines: 6)
        try rewrite(path) { $0[2] = $0[2].replacingOccurrences(of: "\"result\":\"ok\"", with: "\"result\":\"no\"") }
        #expect(try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "s")).firstBadLine == 4)

        (_, path) = try makeLog(lines: 6)
        try rewrite(path) { $0.remove(at: 3) }
        let removed = try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "s"))
        #expect(removed.firstBadLine == 4 && removed.reason?.contains("sequence") == true)

        (_, path) = try makeLog(lines: 6)
        try rewrite(path) { $0.swapAt(1, 2) }
        #expect(try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "s")).firstBadLine == 2)

        (_, path) = try makeLog(lines: 6)
        try rewrite(path) { $0[0] = "not json" }
        #expect(try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "s")).firstBadLine == 1)

        // Renumbering after a removal does not help: the chain still breaks.
        (_, path) = try makeLog(lines: 6)
        try rewrite(path) { lines in
            lines.remove(at: 2)
            for i in 2..<lines.count { lines[i] = lines[i].replacingOccurrences(of: "\"seq\":\(i + 2),", with: "\"seq\":\(i + 1),") }
        }
        #expect(try AuditLog.verify(path: path, genesis: AuditLog.genesis(storeID: "s")).firstBadLine == 3)
    }

    @Test func fieldsAreEscapedAndBounded() throws {
        let (log, path) = try makeLog(lines: 0)
        try log.append(site: "evil\"site\n{\"seq\":99}", op: String(repeating: "x", count: 1000), key: "k", result: "ok")
        #expect(try log.verify().isIntact)
        let e = try #require(try AuditLog.entries(path: path).first)
        #expect(e.site == "evil\"site\n{\"seq\":99}" && e.op.count == AuditLog.maximumFieldLength)
    }

    @Test func appendsAreFastEnoughForTheBridge() throws {
        let (log, _) = try makeLog(lines: 0)
        let start = ContinuousClock.now
        for i in 0..<5000 { try log.append(site: "s", op: "key.sign", key: "k", result: "ok", presenceAgeMs: i) }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(5), "5000 appends took \(elapsed)")
        #expect(try log.verify().lineCount == 5000)
    }
}

@Suite struct AuditLogSharingTests {
    /// A daemon and a one-shot command append to the same log: the chain stays whole.
    @Test func twoWritersOnOneFileKeepOneChain() throws {
        let dir = try temporaryFolder()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let genesis = AuditLog.genesis(storeID: "s")
        let a = try AuditLog(path: dir + "/audit.log", genesis: genesis)
        let b = try AuditLog(path: dir + "/audit.log", genesis: genesis)
        DispatchQueue.concurrentPerform(iterations: 2) { w in
            for i in 0..<300 { try? (w == 0 ? a : b).append(site: "w\(w)", op: "sign", key: "k\(i)", result: "ok") }
        }
        let v = try a.verify()
        #expect(v.isIntact && v.lineCount == 600, "\(v)")
        #expect(try a.entries().count == 600)
    }
}
