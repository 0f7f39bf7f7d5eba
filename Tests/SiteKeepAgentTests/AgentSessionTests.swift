import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody

/// The connection handler over real custody (a file keyring, an askpass program): what each
/// request gets, policies, presence, the audit log.
@Suite struct AgentSessionTests {
    static let peer = AgentPeer(pid: 4242, uid: 0, command: "ssh", startTime: 1)

    static func identities(_ reply: AgentReply) throws -> [(blob: [UInt8], comment: String)] {
        guard case .identities(let list) = reply else { throw SSHWireError.invalid(field: "reply", reason: "not identities") }
        return list
    }

    /// Locked, the same keys are listed (public facts), so a client asks to sign and the sign
    /// request asks for the unlock or is refused naming `sitekeep unlock` (issue 47).
    @Test func identitiesListExactlyTheEnabledKeysLockedOrNot() throws {
        let f = try AgentFixture(keys: [("on", .ed25519, SSHAgentPolicy()), ("p256", .p256, SSHAgentPolicy()), ("off", .ed25519, nil)])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let listed = try Self.identities(session.reply(to: [11]))
        #expect(listed.map(\.comment) == ["sitekeep:on Team on", "sitekeep:p256 Team p256"])
        #expect(listed.map(\.blob) == [try f.sshKey("on").blob, try f.sshKey("p256").blob])
        f.custodian.lock()
        #expect(try Self.identities(session.reply(to: [11])).map(\.comment) == ["sitekeep:on Team on", "sitekeep:p256 Team p256"])
    }

    @Test(arguments: [SigningAlgorithm.ed25519, .p256]) func signaturesVerifyAndAreLogged(_ algorithm: SigningAlgorithm) throws {
        let f = try AgentFixture(keys: [("k", algorithm, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let key = try f.sshKey("k")
        let data = sshsigData("file")
        guard case .signature(let blob) = session.reply(to: signRequest(blob: key.blob, data: data)) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        #expect(key.isValidSignature(blob, for: data))
        #expect(!key.isValidSignature(blob, for: sshsigData("git")))
        // The RFC's two flags are for RSA keys: accepted and ignored.
        guard case .signature = session.reply(to: signRequest(blob: key.blob, data: data, flags: AgentSignFlags.rsaSHA2_512)) else {
            Issue.record("RSA flags refused"); return
        }
        let line = try #require(try f.audit().last)
        #expect(line.op == "ssh.sign" && line.key == "k@v1" && line.result == "ok")
        #expect(line.detail == "sshsig namespace file")
        #expect(line.presenceAgeMs != nil)
        #expect(f.prompts.count == 1, "the second signature reuses the approval: \(f.prompts)")
        #expect(f.prompts.first?.contains("asked by \"ssh\" (pid 4242, this process only)") == true && f.prompts.first?.contains("namespace \"file\"") == true, "\(f.prompts)")
        #expect(try f.custodian.auditLog.verify().isIntact)
    }

    @Test func policiesRefuseWhatTheyDoNotAllow() throws {
        let f = try AgentFixture(keys: [("git", .ed25519, SSHAgentPolicy(login: false, namespaces: ["git"])),
                                        ("any", .ed25519, SSHAgentPolicy(otherData: true))])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let git = try f.sshKey("git"), any = try f.sshKey("any")
        #expect(session.reply(to: signRequest(blob: git.blob, data: sshsigData("file"))) == .failure)
        #expect(session.lastRefusal?.description.contains("namespace file") == true)
        #expect(session.reply(to: signRequest(blob: git.blob, data: userAuthData(sessionID: [1], key: git))) == .failure)
        #expect(session.reply(to: signRequest(blob: git.blob, data: [1, 2, 3])) == .failure)
        guard case .signature = session.reply(to: signRequest(blob: git.blob, data: sshsigData("git"))) else { Issue.record("git refused"); return }
        guard case .signature = session.reply(to: signRequest(blob: any.blob, data: [1, 2, 3])) else { Issue.record("other refused"); return }
        let results = try f.audit().map { "\($0.key) \($0.result) \($0.detail ?? "")" }
        #expect(results.contains("git@v1 policy-refused sshsig namespace file"))
        #expect(results.contains("git@v1 policy-refused other data, 3 bytes"))
        #expect(results.contains("any@v1 ok other data, 3 bytes"))
        // No prompt was shown for a use the policy refuses.
        #expect(f.prompts.count == 2)
    }

    /// One approval covers one key and one kind of use for the window: another namespace,
    /// another key, or another destination asks again; a lock forgets every approval.
    @Test func approvalsAreScopedToKeyAndUse() throws {
        let f = try AgentFixture(keys: [("a", .ed25519, SSHAgentPolicy()), ("b", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let a = try f.sshKey("a"), b = try f.sshKey("b")
        for (key, ns) in [(a, "git"), (a, "git"), (a, "file"), (b, "git"), (a, "git")] {
            guard case .signature = session.reply(to: signRequest(blob: key.blob, data: sshsigData(ns))) else { Issue.record("refused"); return }
        }
        #expect(f.prompts.count == 3)
        f.custodian.lock()
        try f.custodian.unlock(.passphrase(SecretBytes(copying: Array("agent tests pass".utf8))))
        guard case .signature = session.reply(to: signRequest(blob: a.blob, data: sshsigData("git"))) else { Issue.record("refused"); return }
        #expect(f.prompts.count == 4, "a lock must forget approvals")
    }

    @Test func deniedPresenceAndLockedFailCleanly() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        f.deny(true)
        #expect(session.reply(to: signRequest(blob: k.blob, data: sshsigData("file"))) == .failure)
        #expect(session.lastRefusal.map { if case .presence = $0 { true } else { false } } == true)
        f.deny(false)
        f.custodian.lock()
        #expect(session.reply(to: signRequest(blob: k.blob, data: sshsigData("file"))) == .failure)
        #expect(session.lastRefusal == .locked || session.lastRefusal == .unknownKey)
        #expect(try f.audit().map(\.result).contains("presence-refused"))
    }

    @Test func loginsNameTheBoundHost() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        let host = try Ed25519.PrivateKey()
        let sid = [UInt8](repeating: 3, count: 32)
        #expect(session.reply(to: extensionRequest("session-bind@openssh.com", bindContents(host: host, sessionID: sid))) == .success)
        guard case .signature(let sig) = session.reply(to: signRequest(blob: k.blob, data: userAuthData(sessionID: sid, user: "root", key: k))) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        #expect(k.isValidSignature(sig, for: userAuthData(sessionID: sid, user: "root", key: k)))
        let fp = SSHPublicKey.ed25519(host.publicKey.rawRepresentation).fingerprint
        #expect(f.prompts.last?.hasPrefix("SiteKeep: key k, ssh.sign, for an SSH login to host \(fp) (ED25519), verified by the connection's session binding, directly, as user \"root\";") == true, "\(f.prompts)")
        #expect(try f.audit().last?.detail == "ssh user-auth as root to host \(fp) (ED25519), directly")
        // A login request for another key than the one asked to sign it is refused.
        let other = SSHPublicKey.ed25519([UInt8](repeating: 5, count: 32))
        #expect(session.reply(to: signRequest(blob: k.blob, data: userAuthData(sessionID: sid, key: other))) == .failure)
    }

    @Test func aFailedBindStopsTheConnectionSigning() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        #expect(session.reply(to: extensionRequest("session-bind@openssh.com", bindContents(host: try Ed25519.PrivateKey(), sessionID: [1], corrupt: true))) == .failure)
        #expect(session.reply(to: signRequest(blob: k.blob, data: sshsigData("file"))) == .failure)
        #expect(f.prompts.isEmpty)
    }

    @Test func everythingElseIsRefused() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        for t in AgentMessageType.keyManagement.sorted() { #expect(session.reply(to: [t, 0, 0, 0, 0]) == .failure, "type \(t)") }
        #expect(session.reply(to: [99]) == .failure)
        #expect(session.reply(to: []) == .failure)
        #expect(session.reply(to: extensionRequest("restrict-destination-v00@openssh.com", [0, 0, 0, 0])) == .extensionFailure)
        #expect(session.reply(to: signRequest(blob: SSHPublicKey.ed25519([UInt8](repeating: 1, count: 32)).blob, data: [1])) == .failure)
        #expect(session.lastRefusal == .unknownKey)
        #expect(session.reply(to: signRequest(blob: k.blob, data: sshsigData("file"), flags: 0x01)) == .failure)
        #expect(session.reply(to: signRequest(blob: k.blob, data: Array("SSHSIG".utf8) + [0, 0]) ) == .failure)
        var names = SSHWriter(); for e in AgentSession.extensions { names.string(e) }
        #expect(session.reply(to: extensionRequest("query")) == .extensionResponse(name: "query", contents: names.bytes))
        #expect(f.prompts.isEmpty)
    }
}
