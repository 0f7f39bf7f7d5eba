import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody

/// Keys added through the socket (`ssh-add`) beside the team keys, over real custody: the add
/// request's decoding and constraints, listing, signing through custody's gate with the prompt
/// and the audit line, `-c`, `-t`, `-d`, `-D`, and what is refused.
@Suite struct AddedKeyTests {
    static let peer = AgentPeer(pid: 4242, uid: 0, command: "ssh-add", startTime: 1)

    /// An Ed25519 key: its seed and public key.
    static func ed25519() throws -> (seed: [UInt8], publicKey: [UInt8]) {
        let seed = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let key = try Ed25519.PrivateKey(seed: SecretBytes(copying: seed))
        return (seed, key.publicKey.rawRepresentation)
    }

    /// The add request `ssh-add` sends for an Ed25519 key, with constraint bytes.
    static func addEd25519(seed: [UInt8], publicKey: [UInt8], comment: String, constraints: [UInt8] = []) -> [UInt8] {
        var w = SSHWriter()
        w.byte(constraints.isEmpty ? AgentMessageType.addIdentity : AgentMessageType.addIdentityConstrained)
        w.string("ssh-ed25519")
        w.string(publicKey)
        w.string(seed + publicKey)
        w.string(comment)
        w.raw(constraints)
        return w.bytes
    }

    static func identities(_ reply: AgentReply) throws -> [(blob: [UInt8], comment: String)] {
        guard case .identities(let list) = reply else { throw SSHWireError.invalid(field: "reply", reason: "not identities") }
        return list
    }

    @Test func anAddedKeyIsListedAfterTheTeamKeysAndSignsThroughTheGate() throws {
        let f = try AgentFixture(keys: [("team", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let (seed, pk) = try Self.ed25519()
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: pk, comment: "me@laptop")) == .success,
                "\(String(describing: session.lastRefusal))")
        let listed = try Self.identities(session.reply(to: [11]))
        #expect(listed.map(\.comment) == ["sitekeep:team Team team", "me@laptop"])
        let key = SSHPublicKey.ed25519(pk)
        #expect(listed.last?.blob == key.blob)
        let data = sshsigData("git")
        guard case .signature(let blob) = session.reply(to: signRequest(blob: key.blob, data: data)) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        #expect(key.isValidSignature(blob, for: data))
        let id = Custodian.agentKeyID(publicKey: pk)
        let lines = try f.audit()
        #expect(lines.contains { $0.op == "agent.add" && $0.key == id && $0.result == "ok" })
        #expect(lines.last?.op == "ssh.sign" && lines.last?.key == "\(id)@v1" && lines.last?.result == "ok")
        #expect(f.prompts.count == 1 && f.prompts[0].contains("with your key added by ssh-add, \"me@laptop\""), "\(f.prompts)")
        // Denied presence refuses it, and the refusal is in the audit log.
        f.deny(true)
        let other = AgentSession(keys: try f.keys(), peer: AgentPeer(pid: 4343, uid: 0, command: "git", startTime: 2))
        #expect(other.reply(to: signRequest(blob: key.blob, data: data)) == .failure)
        #expect(try f.audit().last?.result == "presence-refused")
        // It survives a lock and unlock (stored under the master key in the keyring).
        f.custodian.lock()
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: pk, comment: "again")) == .failure)
        #expect(session.lastRefusal?.description.contains("sitekeep unlock") == true, "\(String(describing: session.lastRefusal))")
        _ = try f.custodian.unlock(.passphrase(SecretBytes(copying: Array("agent tests pass".utf8))))
        #expect(try Self.identities(session.reply(to: [11])).map(\.comment) == ["sitekeep:team Team team", "me@laptop"])
    }

    @Test func confirmAsksEveryUseAndLifetimeRemovesTheKey() throws {
        let f = try AgentFixture(keys: [])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let (seed, pk) = try Self.ed25519()
        // -c and -t 2: constraint 2, then constraint 1 with a uint32.
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: pk, comment: "short", constraints: [2, 1, 0, 0, 0, 2])) == .success,
                "\(String(describing: session.lastRefusal))")
        let key = SSHPublicKey.ed25519(pk)
        for _ in 0..<2 {
            guard case .signature = session.reply(to: signRequest(blob: key.blob, data: sshsigData("file"))) else {
                Issue.record("refused: \(String(describing: session.lastRefusal))"); return
            }
        }
        #expect(f.prompts.count == 2, "ssh-add -c: each use is asked, none kept: \(f.prompts)")
        let held = try #require(try f.custodian.listAgentKeys().first)
        #expect(held.confirm && (held.secondsLeft ?? 0) <= 2)
        usleep(2_200_000)
        #expect(try Self.identities(session.reply(to: [11])).isEmpty)
        #expect(session.reply(to: signRequest(blob: key.blob, data: sshsigData("file"))) == .failure)
        #expect(try f.audit().contains { $0.op == "agent.remove" && $0.detail == "its lifetime ended" })
    }

    @Test func removeTakesAddedKeysOnlyAndRemoveAllLeavesTeamKeys() throws {
        let f = try AgentFixture(keys: [("team", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let (a, apk) = try Self.ed25519(), (b, bpk) = try Self.ed25519()
        #expect(session.reply(to: Self.addEd25519(seed: a, publicKey: apk, comment: "a")) == .success)
        #expect(session.reply(to: Self.addEd25519(seed: b, publicKey: bpk, comment: "b")) == .success)
        var w = SSHWriter(); w.byte(AgentMessageType.removeIdentity); w.string(SSHPublicKey.ed25519(apk).blob)
        #expect(session.reply(to: w.bytes) == .success)
        #expect(try Self.identities(session.reply(to: [11])).map(\.comment) == ["sitekeep:team Team team", "b"])
        // A team key's blob is refused, naming what stops offering it.
        var t = SSHWriter(); t.byte(AgentMessageType.removeIdentity); t.string(try f.sshKey("team").blob)
        #expect(session.reply(to: t.bytes) == .failure)
        #expect(session.lastRefusal?.description.contains("team ssh disable team") == true)
        #expect(session.reply(to: [AgentMessageType.removeAllIdentities]) == .success)
        #expect(session.reply(to: [AgentMessageType.removeAllRSAIdentities]) == .success)
        #expect(try Self.identities(session.reply(to: [11])).map(\.comment) == ["sitekeep:team Team team"])
    }

    @Test func whatIsRefusedAndWhy() throws {
        let f = try AgentFixture(keys: [])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        // An RSA key: refused by type name.
        var rsa = SSHWriter(); rsa.byte(AgentMessageType.addIdentity); rsa.string("ssh-rsa"); rsa.mpint(unsigned: [1, 0, 1])
        #expect(session.reply(to: rsa.bytes) == .failure)
        #expect(session.lastRefusal?.description.contains("\"ssh-rsa\" key was not added") == true, "\(String(describing: session.lastRefusal))")
        let (seed, pk) = try Self.ed25519()
        // An unknown constraint extension (here ssh-add -h's destination constraint) is refused, as OpenSSH refuses one it does not know.
        var ext = SSHWriter(); ext.byte(255); ext.string("restrict-destination-v00@openssh.com"); ext.string([UInt8]())
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: pk, comment: "x", constraints: ext.bytes)) == .failure)
        #expect(session.lastRefusal?.description.contains("restrict-destination-v00@openssh.com is not supported") == true)
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: pk, comment: "x", constraints: [3, 0, 0, 0, 1])) == .failure)
        // A private key that is not the public key's.
        #expect(session.reply(to: Self.addEd25519(seed: seed, publicKey: try Self.ed25519().publicKey, comment: "x")) == .failure)
        #expect(try f.custodian.listAgentKeys().isEmpty)
        // Lock and smartcard requests stay refused.
        for t in AgentMessageType.keyManagement.sorted() { #expect(session.reply(to: [t, 0, 0, 0, 0]) == .failure, "type \(t)") }
    }

    @Test func aP256KeyIsAddedFromItsScalar() throws {
        let f = try AgentFixture(keys: [])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let d = [UInt8](repeating: 0x11, count: 32)
        let point = Array(try P256.Signing.PrivateKey(rawScalar: SecretBytes(copying: d)).publicKey.derRepresentation.suffix(65))
        var w = SSHWriter()
        w.byte(AgentMessageType.addIdentity); w.string("ecdsa-sha2-nistp256"); w.string("nistp256"); w.string(point)
        w.mpint(unsigned: d); w.string("p256 key")
        #expect(session.reply(to: w.bytes) == .success, "\(String(describing: session.lastRefusal))")
        let key = SSHPublicKey.ecdsa(.p256, point: point)
        guard case .signature(let blob) = session.reply(to: signRequest(blob: key.blob, data: sshsigData("file"))) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        #expect(key.isValidSignature(blob, for: sshsigData("file")))
    }

    @Test func theDecodedKeyNeverShowsItsPrivateBytes() throws {
        let seed = [UInt8](repeating: 0xAB, count: 32)
        let pk = try Ed25519.PrivateKey(seed: SecretBytes(copying: seed)).publicKey.rawRepresentation
        guard case .addIdentity(let key) = try AgentRequest.decode(Self.addEd25519(seed: seed, publicKey: pk, comment: "c")) else {
            Issue.record("not decoded as an add"); return
        }
        #expect(key.privateKey == seed)
        for text in [String(describing: key), String(reflecting: key), "\(Mirror(reflecting: key).children.map { "\($0.value)" })"] {
            #expect(!text.lowercased().contains("ab, ") && !text.contains("171") && text.contains("redacted"), "\(text)")
        }
    }
}
