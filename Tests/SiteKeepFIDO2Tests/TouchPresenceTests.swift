import Testing
import Foundation
import SiteKeepTestSupport
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepFIDO2
import SiteKeepSoftFIDO2
import SiteKeepKeyring
import SiteKeepNames

/// Presence by touch in custody's one gate (issue 36, item 1): a team key that needs a touch
/// signs nothing without one, whatever proof the caller brings (the command line's current
/// secret included); each use is one touch, none is kept; going back to the prompt needs a
/// touch or the current secret, never a prompt's answer.
@Suite(.serialized)
struct TouchPresenceTests {
    static func secretProof(_ op: OpName, key: String = "summit") throws -> PresenceProof {
        PresenceProof(client: .commandLine, op: op, keyID: try KeyID(parsing: key), method: .secret, issuedAtNanoseconds: BootClock.system.nanoseconds())
    }

    static func askpassProof(_ op: OpName, key: String = "summit") throws -> PresenceProof {
        PresenceProof(client: .commandLine, op: op, keyID: try KeyID(parsing: key), method: .askpass, issuedAtNanoseconds: BootClock.system.nanoseconds())
    }

    /// A store with team key summit that needs a touch of `soft`.
    static func touchKey(_ soft: SoftKey) throws -> Custodian {
        let custodian = try FIDO2SlotTests.store(soft.folder, key: soft.key)
        try custodian.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
        _ = try custodian.generateTeamKey(id: "summit", name: "Summit")
        let info = try custodian.requireTouch(keyID: "summit", context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp,
                                                                                      presence: try secretProof(Custodian.presencePolicyOp)))
        #expect(info.touch?.relyingPartyID == Custodian.fido2RelyingPartyID)
        return custodian
    }

    @Test func aKeyThatNeedsATouchSignsNothingWithoutOneWhateverProofComes() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let custodian = try Self.touchKey(soft)
        let message = Array("hello".utf8)
        let context = KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign))

        try soft.control.setTouch(false)
        #expect(throws: CustodyError.fido2(.noTouch)) { _ = try custodian.signature(keyID: "summit", message: message, context: context) }
        let refused = try #require(try custodian.auditLog.entries().last)
        #expect(refused.op == "team.sign" && refused.result == "presence-refused", "\(refused)")

        try soft.control.setTouch(true)
        let before = try soft.control.counts().touched
        let signed = try custodian.signature(keyID: "summit", message: message, context: context)
        #expect(try custodian.verify(keyID: "summit", signature: signed.signature, message: message))
        _ = try custodian.signature(keyID: "summit", message: message, context: context)
        #expect(try soft.control.counts().touched - before == 2, "each use is one touch; none is kept")
        let ok = try #require(try custodian.auditLog.entries().last)
        #expect(ok.result == "ok" && ok.detail?.contains("approved by a touch of the security key") == true, "\(ok)")

        // A reply that does not verify against the credential's public key approves nothing.
        try soft.control.setHostility(.badSignature)
        var forged: CustodyError?
        do throws(CustodyError) { _ = try custodian.signature(keyID: "summit", message: message, context: context) } catch { forged = error }
        guard case .fido2(.malformedReply)? = forged else { Issue.record("a forged touch gave \(String(describing: forged))"); return }
    }

    @Test func theRequirementIsKeptWithTheKeyAndReachesANewCustodian() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let first = try Self.touchKey(soft)
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.fido2Key = soft.key
        let second = try Custodian(home: first.home, keyring: try FileKeyring(folder: first.home.path), configuration: configuration)
        try second.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
        #expect(try second.teamKeyInfo(id: "summit").touch != nil)
        try soft.control.setTouch(false)
        #expect(throws: CustodyError.fido2(.noTouch)) {
            _ = try second.signature(keyID: "summit", message: [1, 2, 3],
                                     context: KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign)))
        }
    }

    @Test func backToThePromptNeedsATouchOrTheCurrentSecretNeverAPromptsAnswer() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let custodian = try Self.touchKey(soft)
        let op = Custodian.presencePolicyOp
        try soft.control.setTouch(false)
        #expect(throws: CustodyError.fido2(.noTouch)) {
            _ = try custodian.allowPrompt(keyID: "summit", context: KeyUseContext(client: .commandLine, op: op, presence: try Self.askpassProof(op)))
        }
        #expect(try custodian.teamKeyInfo(id: "summit").touch != nil, "a prompt's answer did not take the touch away")

        // With a touch.
        try soft.control.setTouch(true)
        #expect(try custodian.allowPrompt(keyID: "summit", context: KeyUseContext(client: .commandLine, op: op)).touch == nil)

        // With the current secret (the security key is lost): no touch asked.
        _ = try custodian.requireTouch(keyID: "summit", context: KeyUseContext(client: .commandLine, op: op, presence: try Self.secretProof(op)))
        try soft.control.setTouch(false)
        let asked = try soft.control.counts().asked
        #expect(try custodian.allowPrompt(keyID: "summit", context: KeyUseContext(client: .commandLine, op: op, presence: try Self.secretProof(op))).touch == nil)
        #expect(try soft.control.counts().asked == asked)
        // And the key signs with the prompt's proof again.
        _ = try custodian.signature(keyID: "summit", message: [1], context: KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign)))
    }

    @Test func makingAKeyNeedATouchNeedsTheUsersApproval() throws {
        let soft = try SoftKey()
        defer { soft.stop() }
        let custodian = try FIDO2SlotTests.store(soft.folder, key: soft.key)
        try custodian.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
        _ = try custodian.generateTeamKey(id: "summit", name: "Summit")
        var refused: CustodyError?
        do throws(CustodyError) { _ = try custodian.requireTouch(keyID: "summit", context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp)) } catch { refused = error }
        guard case .presenceRequired? = refused else { Issue.record("got \(String(describing: refused))"); return }
        #expect(try custodian.teamKeyInfo(id: "summit").touch == nil)
        #expect(try soft.control.counts().asked == 0, "the key was not asked to make a credential")
    }

    /// Whoever can write the keyring but holds no master key cannot take the requirement out of
    /// the key's record (nor swap in a credential of their own): the key's versions are wrapped
    /// with it, so the edited record signs nothing, with any proof; rotation keeps it bound.
    @Test func aRecordWhoseTouchWasTakenOutOrSwappedSignsNothing() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let custodian = try Self.touchKey(soft)
        _ = try custodian.rotateTeamKey(id: "summit")
        let keyring = try FileKeyring(folder: custodian.home.path)
        let item = KeyringItemID(store: custodian.storeID, kind: ItemKind.teamKey.rawValue, id: "summit")
        let original = try keyring.load(item)
        let text = try #require(String(validating: original, as: UTF8.self))
        let member = try #require(text.range(of: #","touch":\{[^}]*\}"#, options: .regularExpression), "\(text)")
        let other = try soft.key.makeCredential(rp: Custodian.fido2RelyingPartyID, userID: Array("someone-else".utf8))
        let swapped = ",\"touch\":{\"credentialID\":\"\(Base64.encode(other.id, variant: .urlSafeNoPadding))\","
            + "\"publicKey\":\"\(Base64.encode(other.publicKey, variant: .urlSafeNoPadding))\",\"rp\":\"\(other.relyingPartyID)\"}"
        for edited in [text.replacingCharacters(in: member, with: ""), text.replacingCharacters(in: member, with: swapped)] {
            try keyring.store(Array(edited.utf8), for: item, label: "SiteKeep team key summit")
            var configuration = CustodianConfiguration(autoLockTimer: false)
            configuration.fido2Key = soft.key
            let fresh = try Custodian(home: custodian.home, keyring: try FileKeyring(folder: custodian.home.path), configuration: configuration)
            try fresh.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
            let context = KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign))
            var refused: CustodyError?
            do throws(CustodyError) { _ = try fresh.signature(keyID: "summit", message: [1], context: context) } catch { refused = error }
            guard case .damagedItem? = refused else { Issue.record("an edited record gave \(String(describing: refused))"); continue }
        }
        // The record as custody wrote it signs again (after a touch).
        try keyring.store(original, for: item, label: "SiteKeep team key summit")
        var configuration = CustodianConfiguration(autoLockTimer: false)
        configuration.fido2Key = soft.key
        let fresh = try Custodian(home: custodian.home, keyring: try FileKeyring(folder: custodian.home.path), configuration: configuration)
        try fresh.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
        let signed = try fresh.signature(keyID: "summit", message: [1],
                                         context: KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign)))
        #expect(signed.version == 2)
        // Back to the prompt: the versions are wrapped again without it, and sign with a proof.
        _ = try fresh.allowPrompt(keyID: "summit", context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp,
                                                                          presence: try Self.secretProof(Custodian.presencePolicyOp)))
        let again = try Custodian(home: custodian.home, keyring: try FileKeyring(folder: custodian.home.path), configuration: configuration)
        try again.unlock(.passphrase(try FIDO2SlotTests.secret(FIDO2SlotTests.passphrase)))
        try soft.control.setTouch(false)
        let plain = try again.signature(keyID: "summit", message: [2],
                                        context: KeyUseContext(client: .commandLine, op: .teamSign, presence: try Self.secretProof(.teamSign)))
        #expect(try again.verify(keyID: "summit", signature: plain.signature, message: [2]))
    }

    /// Allowing a key that needs a touch more over SSH takes what going back to the prompt
    /// takes: a touch of its credential or the current secret, never a prompt's answer (issue
    /// 45, defect 6). Narrowing takes the prompt as before.
    @Test func wideningATouchKeysSSHPolicyNeedsATouchOrTheCurrentSecret() throws {
        let soft = try SoftKey(["--no-touch-ms", "200"])
        defer { soft.stop() }
        let custodian = try Self.touchKey(soft)
        func context(_ proof: PresenceProof) -> KeyUseContext { KeyUseContext(client: .commandLine, op: Custodian.sshPolicyOp, presence: proof) }
        let narrow = SSHAgentPolicy(login: false, namespaces: ["git"])
        _ = try custodian.setSSHAgentPolicy(keyID: "summit", narrow, context: context(try Self.secretProof(Custodian.sshPolicyOp)))
        try soft.control.setTouch(false)
        for wider in [SSHAgentPolicy(login: false), SSHAgentPolicy(namespaces: ["git"]), SSHAgentPolicy(login: false, namespaces: ["git"], otherData: true)] {
            let prompted = context(try Self.askpassProof(Custodian.sshPolicyOp))
            var refused: CustodyError?
            do throws(CustodyError) {
                _ = try custodian.setSSHAgentPolicy(keyID: "summit", wider, context: prompted)
            } catch { refused = error }
            #expect(refused == .fido2(.noTouch), "\(wider.summary): \(String(describing: refused))")
            #expect(try custodian.teamKeyInfo(id: "summit").ssh == narrow)
        }
        // Narrower, or the same: the prompt's answer does.
        _ = try custodian.setSSHAgentPolicy(keyID: "summit", SSHAgentPolicy(login: false, namespaces: []),
                                            context: context(try Self.askpassProof(Custodian.sshPolicyOp)))
        // Wider: the current secret, or a touch.
        _ = try custodian.setSSHAgentPolicy(keyID: "summit", narrow, context: context(try Self.secretProof(Custodian.sshPolicyOp)))
        try soft.control.setTouch(true)
        let touched = try soft.control.counts().touched
        _ = try custodian.setSSHAgentPolicy(keyID: "summit", SSHAgentPolicy(), context: context(try Self.askpassProof(Custodian.sshPolicyOp)))
        #expect(try soft.control.counts().touched == touched + 1)
        #expect(try custodian.teamKeyInfo(id: "summit").ssh == SSHAgentPolicy())
    }
}
