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

extension KeyUseContext {
    /// A key use the user approved just now (a presence proof on the system clock, which these
    /// tests' custodians use): every team-key signature, and every widening of a key's SSH
    /// policy, passes custody's gate with one.
    static func approved(_ keyID: String, op: OpName = .sign, by custodian: Custodian? = nil) -> KeyUseContext {
        KeyUseContext(client: "test", op: op, presence: PresenceProof(client: "test", op: op, keyID: KeyID(known: keyID), method: .askpass,
                                                                   issuedAtNanoseconds: BootClock.system.nanoseconds()))
    }
}

/// A real store for agent tests: a custodian over a file keyring in a private temporary folder,
/// unlocked, with team keys, and an askpass program that logs each prompt and approves unless
/// the `deny` file exists.
final class AgentFixture: @unchecked Sendable {
    let dir: String
    let custodian: Custodian
    var promptsPath: String { dir + "/prompts" }
    var denyPath: String { dir + "/deny" }
    let askpass: String

    /// `keys`: id, algorithm and SSH policy (nil: SSH off).
    init(keys: [(String, SigningAlgorithm, SSHAgentPolicy?)], name: String = #function) throws {
        dir = FileManager.default.temporaryDirectory.path + "/sk-agent-" + String(name.prefix(20)).filter { $0.isLetter } + "-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let home = StoreHome(path: dir + "/home")
        custodian = try Custodian(home: home, keyring: FileKeyring(home: home),
                                  configuration: CustodianConfiguration(auditSyncInterval: .milliseconds(5)))
        _ = try custodian.initialize(passphrase: SecretBytes(copying: Array("agent tests pass".utf8)),
                                     parameters: Argon2id.Parameters(iterations: Argon2id.Parameters.minimumIterations,
                                                                     memoryKiB: Argon2id.Parameters.minimumMemoryKiB),
                                     withRecoveryCode: false)
        for (id, algorithm, policy) in keys {
            _ = try custodian.generateTeamKey(id: id, name: "Team \(id)", algorithm: algorithm)
            if let policy { _ = try custodian.setSSHAgentPolicy(keyID: id, policy, context: .approved(id, op: Custodian.sshPolicyOp)) }
        }
        askpass = dir + "/askpass.sh"
        try Data("#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(dir)/prompts'\n[ -e '\(dir)/deny' ] && exit 1\nexit 0\n".utf8)
            .write(to: URL(fileURLWithPath: askpass))
        chmod(askpass, 0o700)
    }

    deinit {
        custodian.lock()
        try? FileManager.default.removeItem(atPath: dir)
    }

    /// The agent's key source over this store, presence by the askpass program.
    func keys(lifetime: Duration = PresenceProof.maximumLifetime) throws -> CustodyAgentKeys {
        CustodyAgentKeys(custodian: custodian,
                         presence: PresenceWindow(verifier: try AskpassPresenceVerifier(program: askpass), lockScope: custodian.lockScope, lifetime: lifetime))
    }

    /// The prompts shown so far.
    var prompts: [String] {
        ((try? String(contentsOfFile: promptsPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    func deny(_ on: Bool) {
        if on { _ = FileManager.default.createFile(atPath: denyPath, contents: Data()) } else { try? FileManager.default.removeItem(atPath: denyPath) }
    }

    /// The audit log's lines from `site`.
    func audit(site: String = CustodyAgentKeys.client.auditName) throws -> [AuditEntry] {
        try custodian.auditLog.entries().filter { $0.site == site }
    }

    /// The SSH form of team key `id`.
    func sshKey(_ id: String) throws -> SSHPublicKey {
        let info = try custodian.teamKeyInfo(id: id)
        return try SSHPublicKey(algorithm: info.algorithm, publicKey: try Base64.decode(info.publicKey))
    }
}

/// A sign request's payload.
func signRequest(blob: [UInt8], data: [UInt8], flags: UInt32 = 0) -> [UInt8] {
    var w = SSHWriter()
    w.byte(AgentMessageType.signRequest)
    w.string(blob)
    w.string(data)
    w.uint32(flags)
    return w.bytes
}

/// An extension request's payload.
func extensionRequest(_ name: String, _ contents: [UInt8] = []) -> [UInt8] {
    var w = SSHWriter()
    w.byte(AgentMessageType.extension)
    w.string(name)
    w.raw(contents)
    return w.bytes
}

/// SSHSIG signed data for `message` in `namespace`.
func sshsigData(_ namespace: String, _ message: [UInt8] = Array("hello".utf8)) -> [UInt8] {
    SSHSIG.signedData(namespace: namespace, hash: .sha512, messageDigest: SSHSIG.Hash.sha512.digest(message))
}

/// A user-authentication request as `ssh` asks its agent to sign it.
func userAuthData(sessionID: [UInt8], user: String = "alice", key: SSHPublicKey, hostKey: SSHPublicKey? = nil) -> [UInt8] {
    var w = SSHWriter()
    w.string(sessionID)
    w.byte(50)
    w.string(user)
    w.string("ssh-connection")
    w.string(hostKey == nil ? "publickey" : "publickey-hostbound-v00@openssh.com")
    w.boolean(true)
    w.string(key.typeName)
    w.string(key.blob)
    if let hostKey { w.string(hostKey.blob) }
    return w.bytes
}

/// A session-bind extension's contents, signed by an Ed25519 host key.
func bindContents(host: borrowing Ed25519.PrivateKey, sessionID: [UInt8], forwarding: Bool = false, corrupt: Bool = false) -> [UInt8] {
    var sig = host.signature(for: sessionID)
    if corrupt { sig[0] ^= 1 }
    var sigBlob = SSHWriter()
    sigBlob.string("ssh-ed25519")
    sigBlob.string(sig)
    var w = SSHWriter()
    w.string(SSHPublicKey.ed25519(host.publicKey.rawRepresentation).blob)
    w.string(sessionID)
    w.string(sigBlob.bytes)
    w.boolean(forwarding)
    return w.bytes
}

/// Where OpenSSH's tools are.
enum OpenSSH {
    static let keygen = "/usr/bin/ssh-keygen"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: keygen) }
}

/// Runs a program (no shell) and captures its output.
func run(_ path: String, _ args: [String], stdin: String? = nil, env: [String: String] = [:]) -> (status: Int32, out: String, err: String) {
    ChildProcess.capture(path, args, stdin: stdin, environment: env)
}
