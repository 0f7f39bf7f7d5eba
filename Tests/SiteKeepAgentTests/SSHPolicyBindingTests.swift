import Foundation
import Testing
import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A key's SSH policy is bound into the associated data its versions are wrapped with (issue 45,
/// defect 6): whoever can write the keyring but holds no master key cannot turn a key's SSH use
/// on, widen it or take it out by editing the key's record. An added policy is not in force
/// (the agent does not offer the key and a login reaches no prompt); a widened or removed one
/// leaves a key that does not unwrap.
@Suite struct SSHPolicyBindingTests {
    static let passphrase = "agent tests pass"

    /// The stored record of team key `id`, as another process of the user reads it.
    static func record(_ f: AgentFixture, _ id: String) throws -> (FileKeyring, KeyringItemID, String) {
        let keyring = try FileKeyring(folder: f.custodian.home.path)
        let item = KeyringItemID(store: f.custodian.storeID, kind: Custodian.ItemKind.teamKey, id: id)
        let text = try #require(String(validating: try keyring.load(item), as: UTF8.self))
        return (keyring, item, text)
    }

    /// `text` with its `ssh` member replaced by `member` (nil: taken out), or one added.
    static func edited(_ text: String, ssh member: String?) throws -> String {
        if let range = text.range(of: #","ssh":\{[^}]*\}"#, options: .regularExpression) {
            return text.replacingCharacters(in: range, with: member.map { ",\"ssh\":" + $0 } ?? "")
        }
        let at = try #require(text.range(of: #","versions":"#))
        return text.replacingCharacters(in: at, with: (member.map { ",\"ssh\":" + $0 } ?? "") + #","versions":"#)
    }

    /// A fresh custodian over the edited store (the daemon started again), unlocked, and the
    /// agent's keys over it presence by the fixture's askpass program (which approves).
    static func reopened(_ f: AgentFixture) throws -> (Custodian, CustodyAgentKeys) {
        let custodian = try Custodian(home: f.custodian.home, keyring: try FileKeyring(folder: f.custodian.home.path))
        try custodian.unlock(.passphrase(SecretBytes(copying: Array(passphrase.utf8))))
        let keys = CustodyAgentKeys(custodian: custodian,
                                    presence: PresenceWindow(verifier: try AskpassPresenceVerifier(program: f.askpass), lockScope: custodian.lockScope))
        return (custodian, keys)
    }

    @Test func aPolicyAddedByAKeyringEditIsNotOfferedAndPromptsNothing() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, nil)])
        f.custodian.lock()
        let (keyring, item, text) = try Self.record(f, "k")
        let added = try Self.edited(text, ssh: #"{"enabled":true,"login":true,"otherData":true}"#)
        try keyring.store(Array(added.utf8), for: item, label: "SiteKeep team key k")

        let (custodian, keys) = try Self.reopened(f)
        defer { custodian.lock() }
        #expect(keys.identities().isEmpty, "a key whose SSH use a keyring edit turned on is offered: \(keys.identities().map(\.keyID))")
        // A client that knows the public key asks anyway: no prompt, no signature.
        let info = try custodian.teamKeyInfo(id: "k")
        let ssh = try SSHPublicKey(algorithm: info.algorithm, publicKey: try Base64.decode(info.publicKey))
        let session = AgentSession(keys: keys, peer: AgentPeer(pid: getpid(), uid: getuid(), command: "ssh"))
        let before = f.prompts.count
        for data in [userAuthData(sessionID: [UInt8](repeating: 7, count: 32), key: ssh), sshsigData("file"), [1, 2, 3]] {
            #expect(session.reply(to: signRequest(blob: ssh.blob, data: data)) == .failure, "signed \(data.count) bytes")
        }
        #expect(f.prompts.count == before, "a request reached the prompt: \(f.prompts.dropFirst(before))")
        // The same through custody's gate directly, as `team sign` of a login would be.
        let login = userAuthData(sessionID: [UInt8](repeating: 8, count: 32), key: ssh)
        let context = KeyUseContext(client: CustodyAgentKeys.client, op: CustodyAgentKeys.op, presence: PresenceProof(
            client: CustodyAgentKeys.client, op: CustodyAgentKeys.op, keyID: KeyID(known: "k"), method: .askpass,
            issuedAtNanoseconds: BootClock.system.nanoseconds()))
        #expect(throws: CustodyError.self) { _ = try custodian.sign(keyID: "k", message: login, context: context) }
        // The key itself still signs what is not SSH's (its bytes are as custody wrote them).
        let plain = try custodian.sign(keyID: "k", message: [9], context: .approved("k", by: custodian))
        #expect(try custodian.verify(keyID: "k", signature: plain, message: [9]))
    }

    @Test func aPolicyWidenedOrTakenOutByAKeyringEditLeavesAKeyThatDoesNotUnwrap() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy(login: false, namespaces: ["git"]))])
        f.custodian.lock()
        let (keyring, item, original) = try Self.record(f, "k")
        let widened = try Self.edited(original, ssh: #"{"enabled":true,"login":true,"otherData":true}"#)
        let takenOut = try Self.edited(original, ssh: nil)
        for (what, edited) in [("widened", widened), ("taken out", takenOut)] {
            try keyring.store(Array(edited.utf8), for: item, label: "SiteKeep team key k")
            let (custodian, keys) = try Self.reopened(f)
            defer { custodian.lock() }
            #expect(keys.identities().isEmpty, "\(what): offered \(keys.identities().map(\.keyID))")
            let before = f.prompts.count
            var refused: CustodyError?
            do throws(CustodyError) { _ = try custodian.sign(keyID: "k", message: [1], context: .approved("k", by: custodian)) } catch { refused = error }
            guard case .damagedItem? = refused else { Issue.record("\(what): the edited record gave \(String(describing: refused))"); continue }
            let info = try custodian.teamKeyInfo(id: "k")
            let ssh = try SSHPublicKey(algorithm: info.algorithm, publicKey: try Base64.decode(info.publicKey))
            let session = AgentSession(keys: keys, peer: AgentPeer(pid: getpid(), uid: getuid(), command: "ssh"))
            #expect(session.reply(to: signRequest(blob: ssh.blob, data: sshsigData("file"))) == .failure, "\(what): signed")
            #expect(f.prompts.count == before, "\(what): a request reached the prompt")
        }
        // The record as custody wrote it works again, with its policy.
        try keyring.store(Array(original.utf8), for: item, label: "SiteKeep team key k")
        let (custodian, keys) = try Self.reopened(f)
        defer { custodian.lock() }
        #expect(keys.identities().map(\.keyID) == ["k"])
        #expect(keys.identities().first?.policy == SSHAgentPolicy(login: false, namespaces: ["git"]))
        let sig = try custodian.sign(keyID: "k", message: sshsigData("git"), context: .approved("k", by: custodian))
        #expect(try custodian.verify(keyID: "k", signature: sig, message: sshsigData("git")))
    }
}
