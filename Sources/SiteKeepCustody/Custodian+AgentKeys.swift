import SiteKeepNames
import SiteKeepCrypto
import SiteKeepKeyring
import Synchronization

// The keys a user adds through the ssh-agent socket (`ssh-add`): their own keys beside the
// team's. Each is wrapped under the master key (HKDF "agent-key:<id>") as a team key is, with
// an SSH policy of everything an ssh-agent key signs (logins, any SSHSIG namespace, other
// data) bound in its associated data, and `ssh-add -c` bound there too. A key added without a
// lifetime is stored in the keyring (kind `agent-key`) and survives a restart; one added with
// `-t` is held in memory only and removed when its lifetime ends. Every use passes the one
// gate (`Custodian+Gate.swift`): the prompt and the audit line, as for a team key.

/// A key added through the ssh-agent socket, as the agent lists it. No key material.
public struct AgentKeyInfo: Sendable, Equatable {
    /// The key's public facts: its id (`ssh-` and 16 hex digits of its public key's SHA-256),
    /// the comment `ssh-add` gave as its name, algorithm and public key.
    public let key: SigningKeyInfo
    /// Added with `ssh-add -c`: every use is asked, no approval is kept.
    public let confirm: Bool
    /// Seconds until it is removed (added with `ssh-add -t`); nil when it is kept in the
    /// keyring until removed.
    public let secondsLeft: Int?
    /// The comment `ssh-add` gave.
    public var comment: String { key.name }
}

/// A record added with a lifetime: kept in memory only.
struct HeldAgentKey: Sendable {
    let record: [UInt8]
    let expiresAtNs: UInt64
}

extension Custodian {
    /// What an added key may sign over the agent socket: what ssh-agent lets any of its keys
    /// sign (a login, an SSHSIG in any namespace, other data), each use still approved.
    static let agentKeyPolicy = SSHAgentPolicy(enabled: true, login: true, namespaces: nil, otherData: true)

    /// The id of an added key: `ssh-` and the first 16 hex digits of SHA-256 of its public key
    /// (raw Ed25519, or P-256 SubjectPublicKeyInfo DER), so the same key added twice has one id.
    public static func agentKeyID(publicKey: [UInt8]) -> String {
        "ssh-" + String(Hex.encode(SHA256.hash(publicKey)).prefix(16))
    }

    /// Adds a key given through the ssh-agent socket (`SSH2_AGENTC_ADD_IDENTITY`), wrapped in
    /// custody: stored in the keyring under the master key, or, with `lifetimeSeconds`, held in
    /// memory until then. The same key added again replaces the earlier one (its comment and
    /// constraints), as ssh-agent does. `privateKey` (an Ed25519 seed or a P-256 scalar, 32
    /// bytes) is wiped before this returns, whatever happens.
    /// - Parameters:
    ///   - publicKey: the public key the client sent (32 raw bytes for Ed25519, the 65-byte
    ///     uncompressed point for P-256); it must be the private key's.
    ///   - confirm: `ssh-add -c`: no approval of this key is kept; every use is asked.
    /// - Throws: ``CustodyError/locked`` (adding needs an unlocked SiteKeep),
    ///   ``CustodyError/invalidKeyMaterial(_:)``, ``CustodyError/invalidArgument(_:)`` for a
    ///   comment that is not printable or a key that is already a team key.
    public func addAgentKey(algorithm: SigningAlgorithm, privateKey: inout [UInt8], publicKey: [UInt8], comment: String,
                            confirm: Bool, lifetimeSeconds: UInt32?) throws(CustodyError) -> AgentKeyInfo {
        defer { SecureMemory.zero(&privateKey) }
        guard comment.utf8.count <= 200, !comment.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .invalidArgument("the key's comment must be at most 200 printable bytes (change it with 'ssh-keygen -c -f KEYFILE')")
        }
        let master = try currentMaster()
        guard privateKey.count == 32 else { throw .invalidKeyMaterial("the private key is \(privateKey.count) bytes, not 32") }
        let secret: SecretBytes
        do { secret = try SecretBytes(consumingAndZeroing: &privateKey) } catch { throw .crypto(error) }
        let handle: SigningKeyHandle
        let matches: Bool
        switch algorithm {
        case .ed25519:
            do { handle = SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: secret)) } catch {
                throw .invalidKeyMaterial("not a usable Ed25519 private key")
            }
            matches = handle.publicKey == publicKey
        case .p256:
            do { handle = SigningKeyHandle(p256: try P256.Signing.PrivateKey(rawScalar: secret)) } catch {
                throw .invalidKeyMaterial("not a usable P-256 private key")
            }
            // SPKI DER of a P-256 key ends with the uncompressed point.
            matches = publicKey.count == 65 && Array(handle.publicKey.suffix(65)) == publicKey
        }
        guard matches else { throw .invalidKeyMaterial("the private key does not match the public key sent with it") }
        let id = Self.agentKeyID(publicKey: handle.publicKey)
        let encodedPublic = Base64.encode(handle.publicKey)
        if let team = try listTeamKeys().first(where: { $0.publicKey == encodedPublic }) {
            throw .invalidArgument("this key is SiteKeep team key \(team.id) already ('sitekeep team ssh enable \(team.id)' offers it to ssh)")
        }
        let version = try makeVersion(handle, kind: .agentKey, id: id, version: 1, master: master, ssh: Self.agentKeyPolicy, confirm: confirm)
        let record = KeyRecord(format: 1, id: id, name: comment, algorithm: algorithm, versions: [version],
                               ssh: Self.agentKeyPolicy, confirm: confirm)
        // The same key again replaces the earlier one (its comment and constraints).
        try forgetAgentKey(id: id)
        if let lifetimeSeconds {
            let expires = configuration.bootClock.nanoseconds() &+ UInt64(lifetimeSeconds) * 1_000_000_000
            heldAgentKeys.withLock { $0[id] = HeldAgentKey(record: record.encoded(), expiresAtNs: expires) }
        } else {
            try storeRecord(record, kind: .agentKey)
        }
        let constraints = (confirm ? ["confirm"] : []) + (lifetimeSeconds.map { ["lifetime \($0) s"] } ?? [])
        var context = KeyUseContext(client: .sshAgent, op: .agentAdd)
        context.detail = "\(algorithm.rawValue) key" + (constraints.isEmpty ? "" : ", " + constraints.joined(separator: ", "))
        try log(context, key: id, result: "ok")
        return AgentKeyInfo(key: record.info(), confirm: confirm, secondsLeft: lifetimeSeconds.map { Int($0) })
    }

    /// The keys added through the ssh-agent socket, the stored ones (sorted by id) then the ones
    /// held for a lifetime; a key whose lifetime has ended is removed first. Works while locked
    /// (public facts only).
    public func listAgentKeys() throws(CustodyError) -> [AgentKeyInfo] {
        let ids = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.agentKey) }
        var out: [AgentKeyInfo] = []
        for id in ids.sorted(by: { $0.id < $1.id }) {
            let parsed = try loadParsed(kind: .agentKey, id: id.id)
            out.append(AgentKeyInfo(key: parsed.info, confirm: parsed.record.confirm, secondsLeft: nil))
        }
        let now = configuration.bootClock.nanoseconds()
        let held = heldAgentKeys.withLock { $0 }
        for (id, key) in held.sorted(by: { $0.key < $1.key }) {
            guard key.expiresAtNs > now else { try? checkAgentKeyLifetime(id: id); continue }
            guard let record = try? KeyRecord.parse(key.record, kind: .agentKey, id: id) else { continue }
            out.append(AgentKeyInfo(key: record.info(), confirm: record.confirm,
                                    secondsLeft: Int((key.expiresAtNs - now + 999_999_999) / 1_000_000_000)))
        }
        return out
    }

    /// Removes a key added through the ssh-agent socket (`ssh-add -d`). Team keys are not
    /// removed here. Needs SiteKeep unlocked.
    /// - Throws: ``CustodyError/locked``, ``CustodyError/keyNotFound(_:)``.
    public func removeAgentKey(id: String) throws(CustodyError) {
        try Self.validateID(id)
        _ = try currentMaster()
        guard try forgetAgentKey(id: id) else { throw .keyNotFound(id) }
        try log(KeyUseContext(client: .sshAgent, op: .agentRemove), key: id, result: "ok")
    }

    /// Removes every key added through the ssh-agent socket (`ssh-add -D`), never a team key.
    /// Needs SiteKeep unlocked.
    /// - Returns: how many were removed.
    /// - Throws: ``CustodyError/locked``.
    @discardableResult
    public func removeAllAgentKeys() throws(CustodyError) -> Int {
        _ = try currentMaster()
        let stored = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.agentKey) }.map(\.id)
        let held = heldAgentKeys.withLock { Array($0.keys) }
        var removed = 0
        for id in Set(stored + held).sorted() {
            guard try forgetAgentKey(id: id) else { continue }
            removed += 1
            try log(KeyUseContext(client: .sshAgent, op: .agentRemove), key: id, result: "ok")
        }
        return removed
    }

    /// Signs `message` with a key added through the ssh-agent socket, through the one gate
    /// (``signature(keyID:version:message:context:)`` for team keys): unlocked, the key (not
    /// past its lifetime), the policy by the bytes, the approval (asked each time for a key
    /// added with `ssh-add -c`: the caller passes an approval that keeps none), sign, audit.
    public func agentKeySignature(keyID: String, message: [UInt8], context: KeyUseContext) throws(CustodyError) -> TeamSignature {
        try signWith(kind: .agentKey, key: Self.keyID(keyID), version: nil, message: message, context: context)
    }

    /// The record of a key added with a lifetime, while it lasts (nil: not held, or expired).
    func heldAgentKeyRecord(id: String) -> [UInt8]? {
        let now = configuration.bootClock.nanoseconds()
        return heldAgentKeys.withLock { held in
            guard let key = held[id], key.expiresAtNs > now else { return nil }
            return key.record
        }
    }

    /// Removes a key added with a lifetime once it has ended (from memory, and its unwrapped
    /// signer from the cache, so no cached copy signs after it), logging the removal.
    /// - Throws: ``CustodyError/keyNotFound(_:)`` when it has ended.
    func checkAgentKeyLifetime(id: String) throws(CustodyError) {
        let now = configuration.bootClock.nanoseconds()
        let ended = heldAgentKeys.withLock { held -> Bool in
            guard let key = held[id], key.expiresAtNs <= now else { return false }
            held.removeValue(forKey: id)
            return true
        }
        guard ended else { return }
        forgetCachedSigner(kind: .agentKey, id: id)
        var context = KeyUseContext(client: .sshAgent, op: .agentRemove)
        context.detail = "its lifetime ended"
        logQuietly(context, key: id, result: "ok")
        throw .keyNotFound(id)
    }

    /// Drops an added key wherever it is (keyring, memory, signer cache); whether one was there.
    @discardableResult
    func forgetAgentKey(id: String) throws(CustodyError) -> Bool {
        let held = heldAgentKeys.withLock { $0.removeValue(forKey: id) } != nil
        let stored = try kr { () throws(KeyringError) in try keyring.delete(item(.agentKey, id)) }
        forgetCachedSigner(kind: .agentKey, id: id)
        return held || stored
    }

    func forgetCachedSigner(kind: SiteKeepNames.ItemKind, id: String) {
        signers.withLock { c in
            c.byVersion = c.byVersion.filter { !$0.key.hasPrefix("\(kind)/\(id)@") }
            c.current.removeValue(forKey: "\(kind)/\(id)")
        }
    }
}
