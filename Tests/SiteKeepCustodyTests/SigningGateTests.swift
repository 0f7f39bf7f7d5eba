import Foundation
import Synchronization
import Testing
import SiteKeepTestSupport
import SiteKeepCrypto
@testable import SiteKeepCustody

/// Custody's one gate for team-key signatures (issue 32, defect 1): a presence proof is
/// required whoever asks, and the key's SSH policy is applied to what the bytes are, not to
/// what the caller says.
@Suite struct SigningGateTests {
    /// An SSH user-authentication request as OpenSSH's client builds it (session id, 50, user,
    /// service, method, TRUE, algorithm, key blob).
    static func loginRequest(user: String = "root") -> [UInt8] {
        func string(_ b: [UInt8]) -> [UInt8] {
            let n = UInt32(b.count)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + b
        }
        return string([UInt8](repeating: 7, count: 32)) + [50] + string(Array(user.utf8)) + string(Array("ssh-connection".utf8))
            + string(Array("publickey".utf8)) + [1] + string(Array("ssh-ed25519".utf8)) + string([1, 2, 3])
    }

    /// SSHSIG signed data (PROTOCOL.sshsig): the magic, namespace, reserved, hash and digest.
    static func sshsigData(namespace: String) -> [UInt8] {
        func string(_ b: [UInt8]) -> [UInt8] {
            let n = UInt32(b.count)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + b
        }
        return Array("SSHSIG".utf8) + string(Array(namespace.utf8)) + string([]) + string(Array("sha512".utf8))
            + string([UInt8](repeating: 9, count: 64))
    }

    @Test func theBytesSayWhatTheyAre() {
        #expect(SignedDataKind(Self.loginRequest()) == .sshLogin)
        #expect(SignedDataKind(Self.sshsigData(namespace: "git")) == .sshsig(namespace: "git"))
        #expect(SignedDataKind(Array("SSHSIG".utf8)) == .sshsig(namespace: nil))
        #expect(SignedDataKind(Array("hello".utf8)) == .other)
        #expect(SignedDataKind([]) == .other)
        // A length that runs past the end is not a login request.
        #expect(SignedDataKind([0, 0, 1, 0, 50]) == .other)
    }

    /// No proof, no signature: the command line, the bridge and the agent all pass here.
    @Test(arguments: Backend.allCases) func aTeamKeySignsNothingWithoutAProof(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        #expect { try f.custodian.sign(keyID: "t", message: [1]) } throws: {
            if case .presenceRequired = $0 as? CustodyError { true } else { false }
        }
        #expect { try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(op: "team.sign")) } throws: {
            if case .presenceRequired = $0 as? CustodyError { true } else { false }
        }
        _ = try f.custodian.sign(keyID: "t", message: [1], context: f.approved("t"))
        let results = try f.custodian.auditLog.entries().filter { $0.key.hasPrefix("t") && $0.op != "team.add" }.map(\.result)
        #expect(results == ["presence-refused", "presence-refused", "ok"])
        // The device key signs the store's own vault commits and needs none.
        _ = try f.custodian.signAsDevice([1])
    }

    /// A raw signature of an SSH login request would log in anywhere, past the agent's
    /// session-bind check and `--no-login`: only the agent socket's op signs one.
    @Test(arguments: Backend.allCases) func anSSHLoginRequestIsSignedOnlyForTheAgentAndItsPolicy(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        let login = Self.loginRequest()
        for op: OpName in ["team.sign", "key.sign", "sign"] {
            #expect { try f.custodian.sign(keyID: "t", message: login, context: f.approved("t", op: op)) } throws: {
                if case .policyRefused(let why) = $0 as? CustodyError { why.contains("ssh-agent") } else { false }
            }
        }
        // Through the agent's op: the key's policy decides.
        let agent = OpName.sshSign
        #expect(throws: CustodyError.self) { try f.custodian.sign(keyID: "t", message: login, context: f.approved("t", op: agent)) }
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(login: false), context: f.approved("t", op: Custodian.sshPolicyOp))
        #expect { try f.custodian.sign(keyID: "t", message: login, context: f.approved("t", op: agent)) } throws: {
            if case .policyRefused(let why) = $0 as? CustodyError { why.contains("does not log in") } else { false }
        }
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(), context: f.approved("t", op: Custodian.sshPolicyOp))
        _ = try f.custodian.sign(keyID: "t", message: login, context: f.approved("t", op: agent))
        #expect(try f.custodian.auditLog.entries().filter { $0.result == "policy-refused" }.count == 5)
    }

    /// An SSHSIG is made only in a namespace the key's SSH policy allows, whichever op asks;
    /// a narrowed policy holds at once for a signer already unwrapped in this unlock.
    @Test(arguments: Backend.allCases) func anSSHSIGIsSignedOnlyInANamespaceThePolicyAllows(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        let file = Self.sshsigData(namespace: "file")
        #expect { try f.custodian.sign(keyID: "t", message: file, context: f.approved("t", op: "team.sign")) } throws: {
            if case .policyRefused(let why) = $0 as? CustodyError { why.contains("SSH use is off") } else { false }
        }
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(namespaces: ["file", "git"]), context: f.approved("t", op: Custodian.sshPolicyOp))
        _ = try f.custodian.sign(keyID: "t", message: file, context: f.approved("t", op: "team.sign"))
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(namespaces: ["git"]), context: f.approved("t", op: Custodian.sshPolicyOp))
        for op in ["team.sign", "key.sign", OpName.sshSign] {
            #expect { try f.custodian.sign(keyID: "t", message: file, context: f.approved("t", op: op)) } throws: {
                if case .policyRefused(let why) = $0 as? CustodyError { why.contains("namespace file") } else { false }
            }
        }
        _ = try f.custodian.sign(keyID: "t", message: Self.sshsigData(namespace: "git"), context: f.approved("t", op: "team.sign"))
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", nil)
        #expect(throws: CustodyError.self) {
            try f.custodian.sign(keyID: "t", message: Self.sshsigData(namespace: "git"), context: f.approved("t", op: OpName.sshSign))
        }
    }

    /// Widening what a key may sign over SSH needs a proof for that change; narrowing does not.
    @Test(arguments: Backend.allCases) func enablingSSHUseNeedsAProofForThatChange(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        #expect { try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy()) } throws: {
            if case .presenceRequired = $0 as? CustodyError { true } else { false }
        }
        #expect(throws: CustodyError.presenceWrongUse) {
            try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(), context: f.approved("t", op: "team.sign"))
        }
        #expect(try f.custodian.teamKeyInfo(id: "t").ssh == nil)
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(), context: f.approved("t", op: Custodian.sshPolicyOp))
        #expect(try f.custodian.setSSHAgentPolicy(keyID: "t", nil).ssh == nil)
    }

    /// Other data through the agent only when the policy says so; raw signatures elsewhere are
    /// the local user's and page's own (with presence).
    @Test(arguments: Backend.allCases) func otherDataThroughTheAgentOnlyWhenThePolicyAllows(backend: Backend) throws {
        let f = try Fixture(backend)
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(), context: f.approved("t", op: Custodian.sshPolicyOp))
        #expect(throws: CustodyError.self) { try f.custodian.sign(keyID: "t", message: [1, 2], context: f.approved("t", op: OpName.sshSign)) }
        _ = try f.custodian.sign(keyID: "t", message: [1, 2], context: f.approved("t", op: "key.sign"))
        _ = try f.custodian.setSSHAgentPolicy(keyID: "t", SSHAgentPolicy(otherData: true), context: f.approved("t", op: Custodian.sshPolicyOp))
        _ = try f.custodian.sign(keyID: "t", message: [1, 2], context: f.approved("t", op: OpName.sshSign))
    }

    /// `team sign` on its own (issue 46, item 2): the command unlocks with the secret it was
    /// given, and that unlock is its approval, which the gate checks and turns into a proof
    /// itself; the one call then reads the key's record once (the keyring's load counter), and
    /// the unlock serves one use only.
    @Test func teamSignEntersTheGateOnceAndReadsTheKeyOnce() throws {
        let f = try Fixture()
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        let oneShot = try f.reopened()
        let given = try oneShot.unlock(.passphrase(secret(Fixture.passphrase)))
        let context = KeyUseContext(client: .commandLine, op: .teamSign, approval: PresenceApproval(secretGiven: given))
        let before = f.keyring.loads.withLock { $0 }
        let signed = try oneShot.signature(keyID: "t", message: [1, 2, 3], context: context)
        #expect(f.keyring.loads.withLock { $0 } - before == 1, "one keyring read per signature")
        #expect(try oneShot.verify(keyID: "t", signature: signed.signature, message: [1, 2, 3]))
        #expect(signed.publicKey.count == 32)
        #expect(throws: CustodyError.presenceRequired("the secret given for this command has already approved a use")) {
            try oneShot.signature(keyID: "t", message: [4], context: context)
        }
    }

    /// A first signature the user is asked for reads the key's record once (issue 46, item 5):
    /// the record the gate read for the key's facts is the one signed with after the prompt,
    /// for a plain key and for one with an SSH policy (whose facts read already opens the key
    /// to see the policy bound to it, and keeps it for the signature).
    @Test func aSignatureTheUserIsAskedForReadsTheKeyOnce() throws {
        let f = try Fixture()
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        _ = try f.custodian.generateTeamKey(id: "s", name: "S")
        _ = try f.custodian.setSSHAgentPolicy(keyID: "s", SSHAgentPolicy(otherData: true), context: f.approved("s", op: Custodian.sshPolicyOp))
        for (key, client, op) in [("t", KeyUseClient.commandLine, OpName.teamSign), ("s", KeyUseClient.sshAgent, OpName.sshSign)] {
            // A custodian that has not seen the key in this unlock: nothing cached or parsed.
            let fresh = try f.reopened()
            _ = try fresh.unlock(.passphrase(secret(Fixture.passphrase)))
            let verifier = CountingVerifier(clock: f.clock.boot)
            let context = KeyUseContext(client: client, op: op, approval: PresenceApproval(asking: verifier, label: "a test"))
            let before = f.keyring.loads.withLock { $0 }
            let signed = try fresh.signature(keyID: key, message: [1, 2, 3], context: context)
            #expect(f.keyring.loads.withLock { $0 } - before == 1, "key \(key): one keyring read for a signature the user was asked for")
            #expect(verifier.asked.withLock { $0 } == 1)
            #expect(try fresh.verify(keyID: key, signature: signed.signature, message: [1, 2, 3]))
        }
    }

    /// The secret given for a command inside an unlocked custodian is checked by the gate
    /// against the slots (a wrong one is refused and logged), and what the caller needs of the
    /// key (`beforeAsking`) refuses a use before any approval is asked for or checked.
    @Test func theGateChecksAGivenSecretAndTheCallersNeedsItself() throws {
        let f = try Fixture()
        try f.initialize(recovery: false)
        _ = try f.custodian.generateTeamKey(id: "t", name: "T")
        func given(_ passphrase: String) throws -> PresenceApproval {
            PresenceApproval(secretGiven: GivenSecret(.passphrase(try secret(passphrase))))
        }
        #expect(throws: CustodyError.unlockFailed) {
            try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(client: .commandLine, op: .teamSign, approval: try given("wrong")))
        }
        _ = try f.custodian.sign(keyID: "t", message: [1], context: KeyUseContext(client: .commandLine, op: .teamSign,
                                                                                 approval: try given(Fixture.passphrase)))
        let refusing = KeyUseContext(client: .commandLine, op: .teamSign, approval: try given("never checked")) { (key: KeyUseFacts) throws(CustodyError) in
            #expect(key.algorithm == .ed25519 && key.keyID == "t" && !key.needsTouch)
            throw .invalidArgument("not this key")
        }
        #expect(throws: CustodyError.invalidArgument("not this key")) { try f.custodian.sign(keyID: "t", message: [2], context: refusing) }
    }
}
