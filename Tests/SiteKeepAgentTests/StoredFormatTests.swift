import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepKeyring
import SiteKeepTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Team key records written before SSH settings existed stay readable, sign, and take an SSH
/// policy without losing anything (`Fixtures/stores/team-keys-before-ssh`, made by 030769c).
@Suite struct StoredFormatTests {
    @Test func recordsFromBeforeSSHSettingsStillWork() throws {
        let source = try Fixtures.packageRoot().appendingPathComponent("Fixtures/stores/team-keys-before-ssh")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-agent-fixture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: dir) }
        let home = dir.appendingPathComponent("home")
        try FileManager.default.copyItem(at: source, to: home)
        try FileManager.default.removeItem(at: home.appendingPathComponent("README.md"))
        chmod(home.path, 0o700)
        for f in try FileManager.default.contentsOfDirectory(atPath: home.path) { chmod(home.appendingPathComponent(f).path, 0o600) }
        _ = FileManager.default.createFile(atPath: home.appendingPathComponent("keyring.v1.lock").path, contents: nil, attributes: [.posixPermissions: 0o600])

        let storeHome = StoreHome(path: home.path)
        let custodian = try Custodian(home: storeHome, keyring: FileKeyring(home: storeHome))
        defer { custodian.lock() }
        let before = try custodian.listTeamKeys()
        #expect(before.map(\.id) == ["desk", "summit"])
        #expect(before.allSatisfy { $0.ssh == nil && AgentIdentity($0) == nil })
        #expect(before.allSatisfy { $0.versions.last?.publicKeyPEM?.hasPrefix("-----BEGIN PUBLIC KEY-----") == true })
        try custodian.unlock(.passphrase(SecretBytes(copying: Array("fixture pass phrase".utf8))))
        let message = Array("still signs".utf8)
        for id in ["desk", "summit"] {
            let sig = try custodian.sign(keyID: id, message: message, context: .approved(id, by: custodian))
            #expect(try custodian.verify(keyID: id, signature: sig, message: message))
        }
        _ = try custodian.setSSHAgentPolicy(keyID: "summit", SSHAgentPolicy(namespaces: ["git"]), context: .approved("summit", op: Custodian.sshPolicyOp))
        let after = try custodian.teamKeyInfo(id: "summit")
        let old = try #require(before.first { $0.id == "summit" })
        #expect(after.versions == old.versions && after.name == old.name && after.created == old.created)
        #expect(after.ssh == SSHAgentPolicy(namespaces: ["git"]))
        #expect(AgentIdentity(after)?.comment == "sitekeep:summit Summit team")
        // A fresh custodian (another process) reads the new record and still unwraps the key.
        let reopened = try Custodian(home: storeHome, keyring: FileKeyring(home: storeHome))
        defer { reopened.lock() }
        try reopened.unlock(.passphrase(SecretBytes(copying: Array("fixture pass phrase".utf8))))
        #expect(try reopened.teamKeyInfo(id: "summit").ssh?.namespaces == ["git"])
        #expect(try reopened.verify(keyID: "summit", signature: reopened.sign(keyID: "summit", message: message, context: .approved("summit", by: reopened)), message: message))
        _ = try reopened.setSSHAgentPolicy(keyID: "summit", nil)
        #expect(try reopened.teamKeyInfo(id: "summit").ssh == nil)
    }

    /// Every change of SSH use needs the store unlocked: the policy is bound into the key's
    /// wrapped versions, which are wrapped again (turning it off needs no approval, though).
    @Test func enablingNeedsAnUnlock() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        f.custodian.lock()
        #expect(throws: CustodyError.locked) { try f.custodian.setSSHAgentPolicy(keyID: "k", SSHAgentPolicy()) }
        #expect(throws: CustodyError.locked) { try f.custodian.setSSHAgentPolicy(keyID: "k", nil) }
        #expect(throws: CustodyError.self) { try f.custodian.setSSHAgentPolicy(keyID: "k", SSHAgentPolicy(namespaces: ["has space"])) }
        try f.custodian.unlock(.passphrase(SecretBytes(copying: Array("agent tests pass".utf8))))
        #expect(try f.custodian.setSSHAgentPolicy(keyID: "k", nil).ssh == nil)
        let line = try #require(try f.custodian.auditLog.entries().last)
        #expect(line.op == "team.ssh" && line.detail == "off")
    }
}
