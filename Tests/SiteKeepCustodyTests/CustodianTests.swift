import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepTestSupport
@testable import SiteKeepCustody

@Suite struct CustodianTests {
    @Test(arguments: Backend.allCases) func backoffGrowsIsNamedInTheErrorAndSurvivesARestart(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.addPRFSlot(prfOutput: prfBytes(5), relyingPartyID: "example.org", credentialID: "AA", prfEvalInput: "AA", current: f.current())
        f.custodian.lock()
        // Three free failures, then 1 s.
        for _ in 0..<4 {
            #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.prf(prfBytes(6))) }
        }
        #expect(throws: CustodyError.backingOff(secondsRemaining: 1)) { try f.custodian.unlock(.prf(prfBytes(5))) }
        #expect(CustodyError.backingOff(secondsRemaining: 1).description.contains("wait 1 s"))
        // A new custodian on the same home (a restart) still waits.
        let restarted = try f.reopened()
        #expect(throws: CustodyError.backingOff(secondsRemaining: 1)) { try restarted.unlock(.prf(prfBytes(5))) }
        #expect(try restarted.status().unlockBackoffSeconds == 1)
        // The count is a keyring item; the home holds only the lock file (0600) and the marker.
        #expect(try f.keyring.list(store: f.custodian.storeID, kind: UnlockBackoff.itemKind).count == 1)
        #expect(!FileManager.default.fileExists(atPath: f.home.path + "/unlock-backoff"))
        let lock = try #require(FileManager.default.attributesOfItem(atPath: f.home.path + "/" + UnlockBackoff.lockFileName)[.posixPermissions] as? Int)
        #expect(lock == 0o600)
        // After the wait, a failure doubles it.
        f.clock.advance(seconds: 1)
        #expect(throws: CustodyError.unlockFailed) { try restarted.unlock(.prf(prfBytes(6))) }
        #expect(throws: CustodyError.backingOff(secondsRemaining: 2)) { try restarted.unlock(.prf(prfBytes(5))) }
        // A success resets it.
        f.clock.advance(seconds: 2)
        try restarted.unlock(.prf(prfBytes(5)))
        restarted.lock()
        #expect(throws: CustodyError.unlockFailed) { try restarted.unlock(.prf(prfBytes(6))) }
        try restarted.unlock(.prf(prfBytes(5)))
        #expect(UnlockBackoff.delay(afterFailures: 3) == 0)
        #expect(UnlockBackoff.delay(afterFailures: 6) == 4)
        #expect(UnlockBackoff.delay(afterFailures: 40) == 300)
    }

    /// Issue 12: deleting the back-off's files in the home used to reset the count to zero.
    @Test(arguments: Backend.allCases) func deletingTheBackoffFilesInTheHomeDoesNotResetIt(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        f.custodian.lock()
        for _ in 0..<4 { #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret("wrong"))) } }
        for name in ["unlock-backoff", UnlockBackoff.lockFileName, KeyringStateMarker.fileName] {
            unlink(f.home.path + "/" + name)
        }
        let restarted = try f.reopened()
        #expect(throws: CustodyError.backingOff(secondsRemaining: 1)) { try restarted.unlock(.passphrase(secret(Fixture.passphrase))) }
        #expect(try restarted.status().unlockBackoffSeconds == 1)
        #expect(try restarted.backoff.load(now: f.clock.wallSeconds(), repair: false).failures == 4)
    }

    /// A removed or unreadable record counts as the maximum: 64 failures and a full wait.
    @Test(arguments: Backend.allCases) func aMissingOrDamagedRecordCountsAsTheMaximum(backend: Backend) throws {
        for damage in ["delete", "garbage", "negative"] {
            let f = try Fixture(backend)
            try f.initialize(recovery: false)
            f.custodian.lock()
            let item = KeyringItemID(store: f.custodian.storeID, kind: UnlockBackoff.itemKind, id: "state")
            switch damage {
            case "delete": _ = try f.keyring.delete(item)
            case "garbage": try f.keyring.store([0xff, 0x00, 0x41], for: item, label: "x")
            default: try f.keyring.store(Array("sitekeep-backoff 2 -5 0\n".utf8), for: item, label: "x")
            }
            #expect(try f.custodian.status().unlockBackoffSeconds == 300, "\(damage)")
            #expect(throws: CustodyError.backingOff(secondsRemaining: 300), "\(damage)") {
                try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
            }
            // The wait was written back when found: it runs from then, and a restart keeps it.
            f.clock.advance(seconds: 100)
            #expect(throws: CustodyError.backingOff(secondsRemaining: 200)) { try f.reopened().unlock(.passphrase(secret(Fixture.passphrase))) }
            f.clock.advance(seconds: 200)
            #expect(throws: CustodyError.unlockFailed) { try f.custodian.unlock(.passphrase(secret("wrong"))) }
            #expect(throws: CustodyError.backingOff(secondsRemaining: 300)) { try f.custodian.unlock(.passphrase(secret(Fixture.passphrase))) }
            f.clock.advance(seconds: 300)
            try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
            #expect(try f.custodian.backoff.load(now: f.clock.wallSeconds(), repair: false) == .zero)
        }
    }

    /// Two custodians (two processes' worth: separate file descriptors, so separate `flock`s)
    /// trying wrong passphrases at once both count; neither takes an attempt the other used.
    @Test(arguments: Backend.allCases) func twoCustodiansRacingUnlockCountBothFailures(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        f.custodian.lock()
        let custodians = [f.custodian, try f.reopened()]
        for round in 1...2 {
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                _ = try? custodians[i].unlock(.passphrase(secret("wrong \(i)")))
            }
            #expect(try f.custodian.backoff.load(now: f.clock.wallSeconds(), repair: false).failures == 2 * round, "round \(round)")
        }
        // The 4th failure started a wait; a racing 5th attempt is refused, not taken.
        #expect(throws: CustodyError.backingOff(secondsRemaining: 1)) { try custodians[1].unlock(.passphrase(secret(Fixture.passphrase))) }
    }

    /// A store made by 0.1.0 (Fixtures/legacy-store-0.1: five failures in its plain file) keeps
    /// its count, now in the keyring, and unlocks.
    @Test func aStoreFromBeforeTheKeyringRecordIsMigratedFromItsPlainFile() throws {
        let home = try legacyStore()
        let keyring = try FileKeyring(folder: home)
        let custodian = try Custodian(home: StoreHome(path: home), keyring: keyring)
        #expect(!FileManager.default.fileExists(atPath: home + "/unlock-backoff"), "the plain file was not migrated")
        #expect(FileManager.default.fileExists(atPath: home + "/" + KeyringStateMarker.fileName))
        let state = try custodian.backoff.load(now: AuditLog.wallClockMs() / 1000, repair: false)
        #expect(state.failures == 5 && state.lastFailure == 1_796_119_813)
        try custodian.unlock(.passphrase(secret("legacy passphrase")))
        #expect(try custodian.backoff.load(now: AuditLog.wallClockMs() / 1000, repair: false) == .zero)
        #expect(try custodian.auditLog.verify().isIntact)
    }

    /// The same store with no plain file (an old store that never failed, or whose file was
    /// deleted) counts as the maximum, with no wait running: a success resets it.
    @Test func aStoreFromBeforeTheKeyringRecordWithoutAFileCountsAsTheMaximum() throws {
        let home = try legacyStore()
        unlink(home + "/unlock-backoff")
        let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(folder: home))
        #expect(try custodian.backoff.load(now: AuditLog.wallClockMs() / 1000, repair: false) == .init(failures: 64, lastFailure: 0))
        #expect(try custodian.status().unlockBackoffSeconds == 0)
        try custodian.unlock(.passphrase(secret("legacy passphrase")))
        custodian.lock()
        #expect(throws: CustodyError.unlockFailed) { try custodian.unlock(.passphrase(secret("wrong"))) }
        try custodian.unlock(.passphrase(secret("legacy passphrase")))
    }

    /// A key record another process changed is read afresh: the parsed-record memo is keyed by
    /// the stored bytes, so the daemon's listing (what the ssh-agent offers) follows a
    /// `team ssh enable|disable` or a rotation made by a one-shot command.
    @Test func aKeyRecordChangedByAnotherCustodianIsSeenAtOnce() throws {
        let home = try temporaryFolder()
        let writer = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(folder: home))
        _ = try writer.initialize(passphrase: secret("memo pass phrase"),
                                  parameters: Argon2id.Parameters(iterations: Argon2id.Parameters.minimumIterations,
                                                                  memoryKiB: Argon2id.Parameters.minimumMemoryKiB),
                                  withRecoveryCode: false)
        _ = try writer.generateTeamKey(id: "k", name: "K", algorithm: .p256)
        let daemon = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(folder: home))
        #expect(try daemon.listTeamKeys().map { $0.ssh?.enabled ?? false } == [false])
        let approval = PresenceProof(client: "test", op: Custodian.sshPolicyOp, keyID: "k", method: .askpass,
                                     issuedAtNanoseconds: BootClock.system.nanoseconds())
        _ = try writer.setSSHAgentPolicy(keyID: "k", SSHAgentPolicy(), context: KeyUseContext(client: "test", presence: approval))
        #expect(try daemon.listTeamKeys().map { $0.ssh?.enabled ?? false } == [true], "the enable is seen")
        _ = try writer.rotateTeamKey(id: "k")
        #expect(try daemon.teamKeyInfo(id: "k").version == 2, "the rotation is seen")
        _ = try writer.setSSHAgentPolicy(keyID: "k", nil)
        #expect(try daemon.listTeamKeys().map { $0.ssh?.enabled ?? false } == [false], "the disable is seen")
    }

    /// A P-256 handle signs from several threads at once (its signatures no longer wait for one
    /// another's): every signature of every thread verifies for its own message and no other.
    @Test func aP256HandleSignsFromManyThreadsAtOnceAndEverySignatureVerifies() throws {
        let handle = SigningKeyHandle(p256: try P256.Signing.PrivateKey())
        let bad = Atomic<Int>(0), made = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for i in 0..<150 {
                let message = Array("thread \(t) message \(i)".utf8)
                guard let sig = try? handle.sign(message), handle.isValidSignature(sig, for: message),
                      !handle.isValidSignature(sig, for: message + [0]) else { bad.add(1, ordering: .relaxed); continue }
                made.add(1, ordering: .relaxed)
            }
        }
        #expect(bad.load(ordering: .relaxed) == 0 && made.load(ordering: .relaxed) == 600)
    }

    @Test(arguments: Backend.allCases) func lockWipesAndSigningFailsAfterwards(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T", algorithm: .p256)
        let sig = try f.custodian.sign(keyID: "t", message: [1, 2, 3], context: f.approved("t"))
        #expect(try f.custodian.verify(keyID: "t", signature: sig, message: [1, 2, 3]))
        f.custodian.lock()
        #expect(throws: CustodyError.locked) { try f.custodian.sign(keyID: "t", message: [1, 2, 3], context: f.approved("t")) }
        #expect(throws: CustodyError.locked) { try f.custodian.signAsDevice([1]) }
        #expect(throws: CustodyError.locked) { try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-00000000000a", protection: .whenUnlocked) }
        #expect(f.custodian.state.withLock { $0.unlocked == nil })
        // Verification and public facts need no unlock.
        #expect(try f.custodian.verify(keyID: "t", signature: sig, message: [1, 2, 3]))
        #expect(try f.custodian.listTeamKeys().map(\.id) == ["t"])
    }

    @Test(arguments: Backend.allCases) func autoLocksAfterTheIdleLifetimeOnUse(backend: Backend) throws {
        let f = try Fixture(backend, idle: .seconds(60))
        try f.initialize(recovery: false)
        f.clock.advance(seconds: 59)
        _ = try f.custodian.signAsDevice([1])       // a use resets the idle time
        f.clock.advance(seconds: 59)
        #expect(f.custodian.isUnlocked)
        f.clock.advance(seconds: 2)
        #expect(throws: CustodyError.locked) { try f.custodian.signAsDevice([1]) }
        #expect(!f.custodian.isUnlocked)
        #expect(try AuditLog.entries(path: (f.home.path + "/" + "audit.log")).contains { $0.op == "auto-lock" })
    }

    @Test func autoLockTimerLocksWithoutAnyCall() async throws {
        let home = StoreHome(path: try temporaryFolder())
        let c = try Custodian(home: home, keyring: InMemoryKeyring(),
                              configuration: CustodianConfiguration(idleLifetime: .milliseconds(300)))
        _ = try c.initialize(passphrase: secret("pw"), parameters: .minimum, withRecoveryCode: false)
        #expect(c.state.withLock { $0.unlocked != nil })
        try await Task.sleep(for: .milliseconds(1200))
        #expect(c.state.withLock { $0.unlocked == nil })
    }

    @Test func storeHomeIsPrivateAndKeepsItsID() throws {
        let path = try temporaryFolder()
        let a = try Custodian(home: StoreHome(path: path), keyring: InMemoryKeyring())
        let b = try Custodian(home: StoreHome(path: path + "/"), keyring: InMemoryKeyring())
        #expect(a.storeID == b.storeID && a.storeID.count == 32)
        let other = try Custodian(home: StoreHome(path: try temporaryFolder()), keyring: InMemoryKeyring())
        #expect(other.storeID != a.storeID)
        for (file, expected) in [(path, 0o700), (path + "/store-id", 0o600), (path + "/audit.log", 0o600)] {
            let mode = try #require(FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int)
            #expect(mode == expected, "\(file)")
        }
        chmod(path, 0o755)
        #expect { try Custodian(home: StoreHome(path: path), keyring: InMemoryKeyring()) } throws: {
            if case .insecureHome(let why) = $0 as? CustodyError { why.contains("chmod 700") } else { false }
        }
        #expect(throws: CustodyError.insecureHome("'relative' is not an absolute path")) {
            try Custodian(home: StoreHome(path: "relative"), keyring: InMemoryKeyring())
        }
    }
}

@Suite struct KeyTests {
    @Test(arguments: Backend.allCases) func teamKeysGenerateRotateVerifyAndDelete(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        let created = try f.custodian.generateTeamKey(id: "news-team", name: "Newsroom", algorithm: .ed25519)
        #expect(created.version == 1 && created.algorithm == .ed25519)
        let pk = try Base64.decode(created.publicKey)
        #expect(pk.count == 32)
        #expect(created.fingerprint == "sha256:" + String(Hex.encode(SHA256.hash(pk)).prefix(16)))
        let m = Array("message".utf8)
        let v1sig = try f.custodian.sign(keyID: "news-team", message: m, context: f.approved("news-team"))

        let rotated = try f.custodian.rotateTeamKey(id: "news-team")
        #expect(rotated.version == 2 && rotated.versions.map(\.canSign) == [false, true])
        #expect(rotated.versions[0].publicKey == created.publicKey)
        let v2sig = try f.custodian.sign(keyID: "news-team", message: m, context: f.approved("news-team"))
        #expect(v2sig != v1sig)
        #expect(throws: CustodyError.versionVerifyOnly(keyID: "news-team", version: 1)) {
            try f.custodian.sign(keyID: "news-team", version: 1, message: m, context: f.approved("news-team"))
        }
        #expect(try f.custodian.verify(keyID: "news-team", signature: v1sig, message: m))
        #expect(try f.custodian.verify(keyID: "news-team", version: 1, signature: v1sig, message: m))
        #expect(try !f.custodian.verify(keyID: "news-team", version: 2, signature: v1sig, message: m))
        #expect(try f.custodian.verify(keyID: "news-team", version: 2, signature: v2sig, message: m))
        #expect(throws: CustodyError.versionNotFound(keyID: "news-team", version: 3)) {
            try f.custodian.verify(keyID: "news-team", version: 3, signature: v1sig, message: m)
        }
        // Survives a restart.
        let again = try f.reopened()
        try again.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(try again.sign(keyID: "news-team", message: m, context: f.approved("news-team")) == v2sig)

        try f.custodian.deleteTeamKey(id: "news-team")
        #expect(throws: CustodyError.keyNotFound("news-team")) { try f.custodian.sign(keyID: "news-team", message: m, context: f.approved("news-team")) }
        #expect(throws: CustodyError.keyNotFound("news-team")) { try f.custodian.deleteTeamKey(id: "news-team") }
        #expect(throws: CustodyError.invalidKeyID("Bad/ID")) { try f.custodian.generateTeamKey(id: "Bad/ID", name: "x") }
        _ = try f.custodian.generateTeamKey(id: "dup", name: "x")
        #expect(throws: CustodyError.keyExists("dup")) { try f.custodian.generateTeamKey(id: "dup", name: "x") }
    }

    @Test(arguments: Backend.allCases) func importsEd25519SeedsP256PKCS8AndWebLinks(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        // Ed25519 from a link: the public key matches the seed's.
        let seed = [UInt8](repeating: 0x42, count: 32)
        let link = "https://web-summit.sgit.ai/join?team=x#key=" + Base64.encode(seed, variant: .urlSafeNoPadding)
        let fromLink = try f.custodian.importTeamKey(id: "linked", name: "Linked", material: TeamKeyMaterial.webLink(link))
        let expected = try Ed25519.PrivateKey(seed: SecretBytes(copying: seed)).publicKey.rawRepresentation
        #expect(fromLink.publicKey == Base64.encode(expected))

        // P-256 from PEM: signatures verify under the PEM's public key.
        let p = try P256.Signing.PrivateKey()
        let pem = try p.pkcs8PEM()
        let imported = try f.custodian.importTeamKey(id: "p256", name: "P", material: .p256PKCS8(pem))
        #expect(imported.versions[0].publicKeyPEM == p.publicKey.pemRepresentation)
        let sig = try f.custodian.sign(keyID: "p256", message: [9], context: f.approved("p256"))
        #expect(p.publicKey.isValidSignature(try P256.Signing.Signature(rawRepresentation: sig), for: [9]))
        // And from DER through detection.
        let der = try p.pkcs8DER()
        let detected = try TeamKeyMaterial.detect(der)
        let viaDetect = try f.custodian.importTeamKey(id: "p256-der", name: "P", material: detected)
        #expect(viaDetect.publicKey == imported.publicKey)
        // Raw seed through detection.
        let viaSeed = try f.custodian.importTeamKey(id: "seed", name: "S", material: TeamKeyMaterial.detect(SecretBytes(copying: seed)))
        #expect(viaSeed.publicKey == fromLink.publicKey)
        #expect(throws: CustodyError.self) { try f.custodian.importTeamKey(id: "junk", name: "J", material: .p256PKCS8(secret("not a key at all"))) }
    }

    @Test(arguments: [
        ("https://x.example/#k=AAAA", "no 'key='"),
        ("https://x.example/?key=" + String(repeating: "A", count: 43), "no '#'"),
        ("https://x.example/?key=" + String(repeating: "A", count: 43) + "#a=b", "query string"),
        ("https://x.example/#key=" + String(repeating: "A", count: 42), "42 characters"),
        ("https://x.example/#key=" + String(repeating: "A", count: 44), "44 characters"),
        ("https://x.example/#key=" + String(repeating: "A", count: 42) + "=", "padding"),
        ("https://x.example/#key=" + String(repeating: "+", count: 43), "outside base64url"),
        ("https://x.example/#key=" + String(repeating: "A", count: 43) + "&key=" + String(repeating: "A", count: 43), "more than one 'key='"),
        ("https://x.example/#a#key=" + String(repeating: "A", count: 43), "more than one '#'"),
        ("https://x.example/ #key=" + String(repeating: "A", count: 43), "spaces"),
    ])
    func webLinkParserIsStrict(link: String, expected: String) throws {
        #expect {
            _ = try TeamKeyMaterial.webLink(link)
        } throws: { error in
            guard case .invalidKeyLink(let why) = error as? CustodyError else { return false }
            return why.contains(expected) && !why.contains(String(repeating: "A", count: 20))
        }
    }

    @Test(arguments: Backend.allCases) func deviceKeySignsAndVerifies(backend: Backend) throws {
        let f = try Fixture(backend)
        let created = try f.initialize(recovery: false)
        #expect(created.deviceKey.algorithm == .p256)
        let sig = try f.custodian.signAsDevice(Array("commit".utf8))
        #expect(try f.custodian.verifyDeviceSignature(sig, message: Array("commit".utf8)))
        #expect(try !f.custodian.verifyDeviceSignature(sig, message: Array("other".utf8)))
        #expect(try f.custodian.deviceKeyInfo() == created.deviceKey)
        let spki = try Base64.decode(created.deviceKey.publicKey)
        #expect(SignatureVerifier.isValid(sig, for: Array("commit".utf8), publicKey: spki, algorithm: .p256))
    }

    @Test(arguments: Backend.allCases) func storageKeysByProtectionClass(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        let after = try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .afterLogin)
        let sealedAfter = try after.seal([1, 2], authenticating: [])
        let wu = try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked)
        let sealedWU = try wu.seal([3, 4], authenticating: [])
        f.custodian.lock()
        // afterLogin works while locked; whenUnlocked does not.
        #expect(try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .afterLogin).open(sealedAfter, authenticating: []) == [1, 2])
        #expect(throws: CustodyError.locked) { try f.custodian.typedStorageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked) }
        try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked).open(sealedWU, authenticating: []) == [3, 4])
        // Sites get different keys.
        #expect(throws: CryptoError.authenticationFailed) {
            try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000002", protection: .whenUnlocked).open(sealedWU, authenticating: [])
        }
        // Destroy = crypto-shred, idempotent.
        try f.custodian.destroyStorageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked)
        try f.custodian.destroyStorageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked)
        #expect(throws: CryptoError.authenticationFailed) {
            try f.custodian.storageKey(forSite: "00000000-0000-4000-8000-000000000001", protection: .whenUnlocked).open(sealedWU, authenticating: [])
        }
        #expect(try f.keyring.list(store: f.custodian.storeID, kind: "storage-key").map(\.id) == ["00000000-0000-4000-8000-000000000001"])
        #expect(throws: CustodyError.self) { try f.custodian.storageKey(forSite: "../x", protection: .afterLogin) }
        // A site id is a site identifier in its one (lower-case) spelling: the keyring item and the
        // audit line name the site by it.
        for bad in ["site-1", "00000000-0000-4000-8000-00000000000A"] {
            #expect(throws: CustodyError.self) { try f.custodian.storageKey(forSite: bad, protection: .afterLogin) }
        }
        #expect(try f.custodian.auditLog.entries().filter { $0.op == "storage-key" }.allSatisfy { $0.site == "00000000-0000-4000-8000-000000000001" || $0.site == "00000000-0000-4000-8000-000000000002" })
    }

    @Test(arguments: Backend.allCases) func vaultSecretsRoundTrip(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        let key = try SecretBytes(randomCount: 32)
        try f.custodian.storeVaultSecret(vaultID: "vault-1", secret: key)
        let handle = try f.custodian.vaultKey(vaultID: "vault-1")
        let sealed = try handle.aesGCMSeal([5, 6, 7], nonce: [UInt8](repeating: 0, count: 12))
        let reference = try AES256GCM.seal([5, 6, 7], using: key, nonce: [UInt8](repeating: 0, count: 12))
        #expect(sealed == reference)
        try f.custodian.storeVaultSecret(vaultID: "vault-2", secret: secret("a passphrase-like read key"))
        let count = try f.custodian.withVaultSecret(vaultID: "vault-2") { $0.count }
        #expect(count == 26)
        #expect(throws: CustodyError.invalidArgument("vault secret vault-2 is 26 bytes, not a 32-byte key")) { try f.custodian.vaultKey(vaultID: "vault-2") }
        #expect(try f.custodian.vaultSecretIDs() == ["vault-1", "vault-2"])
        f.custodian.lock()
        #expect(throws: CustodyError.locked) { try f.custodian.vaultKey(vaultID: "vault-1") }
        try f.custodian.unlock(.passphrase(secret(Fixture.passphrase)))
        #expect(try f.custodian.deleteVaultSecret(vaultID: "vault-1"))
        #expect(throws: CustodyError.keyNotFound("vault-key/vault-1")) { try f.custodian.vaultKey(vaultID: "vault-1") }
    }
}

@Suite struct PerformanceTests {
    /// The bridge needs thousands of signs per second, each logged before it returns.
    @Test(arguments: Backend.allCases) func signsAreFastAndEachIsLogged(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "ed", name: "Ed", algorithm: .ed25519)
        let before = try AuditLog.entries(path: f.home.path + "/audit.log").count
        let n = 2000
        let start = ContinuousClock.now
        for i in 0..<n { _ = try f.custodian.sign(keyID: "ed", message: [UInt8(i & 0xff)], context: f.approved("ed", site: "s", op: "key.sign")) }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed < .seconds(4), "\(n) signs took \(elapsed)")
        #expect(try AuditLog.entries(path: f.home.path + "/audit.log").count == before + n)
        #expect(try f.custodian.auditLog.verify().isIntact)
        // A rotation through this custodian takes effect at once.
        let rotated = try f.custodian.rotateTeamKey(id: "ed")
        let sig = try f.custodian.sign(keyID: "ed", message: [1], context: f.approved("ed"))
        #expect(try f.custodian.verify(keyID: "ed", version: rotated.version, signature: sig, message: [1]))
    }

    @Test func calibrationNeverGoesBelowTheMinimum() throws {
        let p = try PassphraseKDF.calibrate(target: .milliseconds(1))
        #expect(p == .minimum)
        let q = try PassphraseKDF.calibrate(target: .milliseconds(500))
        #expect(q.iterations >= Argon2id.Parameters.minimumIterations && q.memoryKiB >= Argon2id.Parameters.minimumMemoryKiB)
    }
}
