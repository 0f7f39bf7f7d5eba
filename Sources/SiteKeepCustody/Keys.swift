import SiteKeepNames
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepFIDO2
import Synchronization

extension Custodian {
    // MARK: - Records

    func wrapInfo(kind: SiteKeepNames.ItemKind, id: String) -> String {
        kind == .deviceKey ? "device" : "team:\(id)"
    }

    func loadRecord(kind: SiteKeepNames.ItemKind, id: String) throws(CustodyError) -> KeyRecord {
        try loadParsed(kind: kind, id: id).record
    }

    /// The stored record and its public facts, parsed again only when its bytes changed.
    func loadParsed(kind: SiteKeepNames.ItemKind, id: String) throws(CustodyError) -> ParsedRecord {
        let bytes: [UInt8]
        do { bytes = try keyring.load(item(kind, id)) } catch .itemMissing { throw .keyNotFound(id) } catch { throw .keyring(error) }
        let name = kind.rawValue + "/" + id
        if let parsed = parsedRecords.withLock({ $0[name] }), parsed.bytes == bytes { return parsed }
        let record = try KeyRecord.parse(bytes, kind: kind, id: id)
        let parsed = ParsedRecord(bytes: bytes, record: record, info: record.info())
        parsedRecords.withLock { memo in
            if memo.count >= ParsedRecord.maximumKept { memo.removeAll() }
            memo[name] = parsed
        }
        return parsed
    }

    func storeRecord(_ record: KeyRecord, kind: SiteKeepNames.ItemKind) throws(CustodyError) {
        let label = kind == .deviceKey ? "SiteKeep device key" : "SiteKeep team key \(record.id)"
        try kr { () throws(KeyringError) in try keyring.store(record.encoded(), for: item(kind, record.id), label: label) }
    }

    /// Wraps a new signing key as version `version` of a record.
    func makeVersion(_ handle: SigningKeyHandle, kind: SiteKeepNames.ItemKind, id: String, version: Int, master: LockedSecret,
                     touch: FIDO2Credential? = nil, ssh: SSHAgentPolicy? = nil) throws(CustodyError) -> KeyRecord.Version {
        let wrapKey = try derive(master, info: wrapInfo(kind: kind, id: id))
        let pk = Base64.encode(handle.publicKey)
        let ad = KeyRecord.associatedData(store: storeID, kind: kind, id: id, version: version, algorithm: handle.algorithm, publicKey: pk,
                                          touch: touch, ssh: ssh)
        let wrapped = try cr { () throws(CryptoError) -> [UInt8] in
            let secret = try handle.exportForWrapping()
            return try wrapKey.wrap(secret, authenticating: ad)
        }
        return KeyRecord.Version(version: version, created: configuration.wallClockSeconds(), publicKey: pk, wrapped: Base64.encode(wrapped))
    }

    /// Opens `version` of `record` with `wrapKey`, under the associated data of the record's touch
    /// credential and SSH policy (``KeyRecord/associatedData(store:kind:id:version:algorithm:publicKey:touch:ssh:)``).
    /// A record with an SSH policy whose version does not open so is tried once more without
    /// it: a record written before SiteKeep bound SSH policies, or one whose policy was added by
    /// a keyring edit. Such a version opens, but `sshBound` is false and its policy is not in
    /// force (the key is not offered over SSH and signs nothing SSH's until `team ssh enable`).
    func unwrapVersion(_ version: KeyRecord.Version, of record: KeyRecord, kind: SiteKeepNames.ItemKind, wrapKey: SymmetricKeyHandle,
                       sshBound: inout Bool) throws(CustodyError) -> SecretBytes {
        func ad(_ ssh: SSHAgentPolicy?) -> [UInt8] {
            KeyRecord.associatedData(store: storeID, kind: kind, id: record.id, version: version.version, algorithm: record.algorithm,
                                     publicKey: version.publicKey, touch: record.touch, ssh: ssh)
        }
        let notOpened = CustodyError.damagedItem("\(kind)/\(record.id) version \(version.version) does not unwrap under this store's master key")
        guard let wrapped = try? Base64.decode(version.wrapped) else { throw .damagedItem("\(kind)/\(record.id) version \(version.version) is not base64") }
        let policy = record.sshToBind
        if let bound = try? wrapKey.unwrap(wrapped, authenticating: ad(policy)) {
            sshBound = policy != nil
            return bound
        }
        guard policy != nil, let unbound = try? wrapKey.unwrap(wrapped, authenticating: ad(nil)) else { throw notOpened }
        sshBound = false
        return unbound
    }

    /// The SSH policy in force for `record`: its own when bound to its current version (which
    /// is opened to find out), else nil. Needs the custodian unlocked.
    func boundSSH(of record: KeyRecord, kind: SiteKeepNames.ItemKind) throws(CustodyError) -> SSHAgentPolicy? {
        guard record.sshToBind != nil, let current = record.versions.last else { return nil }
        let wrapKey = try derive(try currentMaster(), info: wrapInfo(kind: kind, id: record.id))
        var bound = false
        _ = try unwrapVersion(current, of: record, kind: kind, wrapKey: wrapKey, sshBound: &bound)
        return bound ? record.ssh : nil
    }

    /// Wraps every version of `record` again with `touch` and `ssh` in its associated data, each
    /// opened first under what it was wrapped with (``unwrapVersion(_:of:kind:wrapKey:sshBound:)``),
    /// and keeps both in the record (not stored: the caller stores it). A version that does not
    /// open leaves the record as it was. Needs the custodian unlocked.
    func rewrap(_ record: inout KeyRecord, kind: SiteKeepNames.ItemKind, touch: FIDO2Credential?, ssh: SSHAgentPolicy?) throws(CustodyError) {
        let wrapKey = try derive(try currentMaster(), info: wrapInfo(kind: kind, id: record.id))
        let newSSH = ssh?.enabled == true ? ssh : nil
        var versions = record.versions
        for i in versions.indices {
            let v = versions[i]
            var bound = false
            let secret = try unwrapVersion(v, of: record, kind: kind, wrapKey: wrapKey, sshBound: &bound)
            let ad = KeyRecord.associatedData(store: storeID, kind: kind, id: record.id, version: v.version, algorithm: record.algorithm,
                                              publicKey: v.publicKey, touch: touch, ssh: newSSH)
            versions[i].wrapped = Base64.encode(try cr { () throws(CryptoError) -> [UInt8] in try wrapKey.wrap(secret, authenticating: ad) })
        }
        record.versions = versions
        record.touch = touch
        record.ssh = newSSH
    }

    /// The unwrapped signing key of a version, cached for this unlock in the ``lockScope``.
    /// Presence is not its business: the gate (``admit(_:keyID:unlockedAtNs:beforeAsking:)``)
    /// has admitted the use before a key is unwrapped for it.
    func signer(kind: SiteKeepNames.ItemKind, id: String, version: Int?, forSigning: Bool) throws(CustodyError) -> (SigningKeyHandle, Int) {
        let (handle, v, _) = try signerAndPolicy(kind: kind, id: id, version: version, forSigning: forSigning)
        return (handle, v)
    }

    /// ``signer(kind:id:version:forSigning:)``, also giving the key's SSH policy as its
    /// record says (kept with the cached signer, so the signing gate reads no keyring item).
    func signerAndPolicy(kind: SiteKeepNames.ItemKind, id: String, version: Int?, forSigning: Bool) throws(CustodyError) -> (SigningKeyHandle, Int, SSHAgentPolicy?) {
        // Recorded before the master key is read: a key unwrapped across a lock is not cached.
        let generation = lockScope.generation
        let master = try currentUnlock().master
        // Fast path: the current version, unwrapped earlier in this unlock (no keyring read).
        let currentKey = "\(kind)/\(id)"
        if version == nil, let hit = signers.withLock({ $0.current[currentKey] }) { return (hit.handle, hit.version, hit.ssh) }
        let record = try loadRecord(kind: kind, id: id)
        let current = record.versions.count
        let v = version ?? current
        guard (1...current).contains(v) else { throw .versionNotFound(keyID: id, version: v) }
        if forSigning, v != current { throw .versionVerifyOnly(keyID: id, version: v) }
        let cacheKey = "\(kind)/\(id)@\(v)"
        let entry = record.versions[v - 1]
        // A version unwrapped earlier serves again only when no SSH policy needs checking.
        if record.sshToBind == nil, let cached = signers.withLock({ $0.byVersion[cacheKey] }),
           Base64.encode(cached.publicKey) == entry.publicKey {
            if v == current {
                _ = signers.withLock(ifNotClearedSince: generation) {
                    $0.current[currentKey] = CurrentSigner(handle: cached, version: v, ssh: nil, touch: record.touch)
                }
            }
            return (cached, v, nil)
        }
        let wrapKey = try derive(master, info: wrapInfo(kind: kind, id: id))
        var sshBound = false
        let secret = try unwrapVersion(entry, of: record, kind: kind, wrapKey: wrapKey, sshBound: &sshBound)
        // The policy in force is the one bound to the key, never one only the record names.
        let ssh = sshBound ? record.ssh : nil
        let handle: SigningKeyHandle
        do {
            handle = try SigningKeyHandle.importWrapped(secret, algorithm: record.algorithm)
        } catch {
            throw .damagedItem("\(kind)/\(id) version \(v) does not unwrap under this store's master key")
        }
        guard Base64.encode(handle.publicKey) == entry.publicKey else {
            throw .damagedItem("\(kind)/\(id) version \(v): the private key does not match its public key")
        }
        _ = signers.withLock(ifNotClearedSince: generation) { c in
            c.byVersion[cacheKey] = handle
            if v == current { c.current[currentKey] = CurrentSigner(handle: handle, version: v, ssh: ssh, touch: record.touch) }
        }
        return (handle, v, ssh)
    }

    func newRecord(kind: SiteKeepNames.ItemKind, id: String, name: String, handle: SigningKeyHandle) throws(CustodyError) -> SigningKeyInfo {
        let master = try currentMaster()
        let exists: Bool
        do { _ = try keyring.load(item(kind, id)); exists = true } catch .itemMissing { exists = false } catch { throw .keyring(error) }
        guard !exists else { throw .keyExists(id) }
        let version = try makeVersion(handle, kind: kind, id: id, version: 1, master: master)
        let record = KeyRecord(format: 1, id: id, name: name, algorithm: handle.algorithm, versions: [version])
        try storeRecord(record, kind: kind)
        return record.info()
    }

    static func validateName(_ name: String) throws(CustodyError) {
        guard name.utf8.count <= 200, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .invalidArgument("a key name is at most 200 printable bytes")
        }
    }

    static func newHandle(_ algorithm: SigningAlgorithm) throws(CustodyError) -> SigningKeyHandle {
        do {
            switch algorithm {
            case .ed25519: return SigningKeyHandle(ed25519: try Ed25519.PrivateKey())
            case .p256: return SigningKeyHandle(p256: try P256.Signing.PrivateKey())
            }
        } catch { throw .crypto(error) }
    }

    // MARK: - Device key

    func createDeviceKey() throws(CustodyError) -> SigningKeyInfo {
        let info = try newRecord(kind: .deviceKey, id: Self.deviceKeyID, name: "device", handle: Self.newHandle(.p256))
        try log(KeyUseContext(op: .deviceCreate), key: Self.deviceKeyID, result: "ok")
        return info
    }

    /// The device key's public facts (works while locked).
    public func deviceKeyInfo() throws(CustodyError) -> SigningKeyInfo {
        try loadRecord(kind: .deviceKey, id: Self.deviceKeyID).info()
    }

    /// Signs with the device key (P-256, raw `r || s`), e.g. this device's vault commits.
    public func signAsDevice(_ message: [UInt8], context: KeyUseContext = KeyUseContext(op: .deviceSign)) throws(CustodyError) -> [UInt8] {
        try signWith(kind: .deviceKey, key: Self.deviceKey, version: nil, message: message, context: context).signature
    }

    // MARK: - Team keys

    /// Generates a team key.
    /// - Throws: ``CustodyError/keyExists(_:)``, ``CustodyError/invalidKeyID(_:)``, ``CustodyError/locked``.
    public func generateTeamKey(id: String, name: String, algorithm: SigningAlgorithm = .ed25519) throws(CustodyError) -> SigningKeyInfo {
        try Self.validateID(id)
        try Self.validateName(name)
        let info = try newRecord(kind: .teamKey, id: id, name: name, handle: Self.newHandle(algorithm))
        try log(KeyUseContext(op: .teamAdd), key: id, result: "ok")
        return info
    }

    /// Imports a team key (Ed25519 seed, P-256 PKCS#8, or a `#key=` link through
    /// ``TeamKeyMaterial/webLink(_:)``).
    public func importTeamKey(id: String, name: String, material: consuming TeamKeyMaterial) throws(CustodyError) -> SigningKeyInfo {
        try Self.validateID(id)
        try Self.validateName(name)
        let handle: SigningKeyHandle
        switch consume material {
        case .ed25519Seed(let seed):
            guard seed.count == Ed25519.seedByteCount else { throw .invalidKeyMaterial("an Ed25519 seed is 32 bytes, got \(seed.count)") }
            do { handle = SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: seed)) } catch {
                throw .invalidKeyMaterial("not a usable Ed25519 seed")
            }
        case .p256PKCS8(let pkcs8):
            do { handle = SigningKeyHandle(p256: try P256.Signing.PrivateKey(pkcs8: pkcs8)) } catch {
                throw .invalidKeyMaterial("not a P-256 PKCS#8 private key (PEM 'PRIVATE KEY' or DER)")
            }
        }
        let info = try newRecord(kind: .teamKey, id: id, name: name, handle: handle)
        try log(KeyUseContext(op: .teamImport), key: id, result: "ok")
        return info
    }

    /// The public facts of every team key (works while locked), sorted by id.
    public func listTeamKeys() throws(CustodyError) -> [SigningKeyInfo] {
        let ids = try kr { () throws(KeyringError) in try keyring.list(store: storeID, kind: ItemKind.teamKey) }
        var out: [SigningKeyInfo] = []
        for id in ids.sorted(by: { $0.id < $1.id }) {
            out.append(try loadParsed(kind: .teamKey, id: id.id).info)
        }
        return out
    }

    /// One team key's public facts (works while locked).
    public func teamKeyInfo(id: String) throws(CustodyError) -> SigningKeyInfo {
        try Self.validateID(id)
        return try loadParsed(kind: .teamKey, id: id).info
    }

    /// Rotates a team key: a new version of the same algorithm becomes the signing version;
    /// older versions only verify.
    public func rotateTeamKey(id: String) throws(CustodyError) -> SigningKeyInfo {
        try Self.validateID(id)
        let master = try currentMaster()
        var record = try loadRecord(kind: .teamKey, id: id)
        guard record.versions.count < KeyRecord.maximumVersions else { throw .invalidArgument("key \(id) has reached \(KeyRecord.maximumVersions) versions") }
        // The new version binds the policy in force, never one only the record names (which
        // rotation then drops).
        let ssh = try boundSSH(of: record, kind: .teamKey)
        let version = try makeVersion(Self.newHandle(record.algorithm), kind: .teamKey, id: id,
                                      version: record.versions.count + 1, master: master, touch: record.touch, ssh: ssh)
        record.versions.append(version)
        record.ssh = ssh
        try storeRecord(record, kind: .teamKey)
        _ = signers.withLock { $0.current.removeValue(forKey: "\(ItemKind.teamKey)/\(id)") }
        try log(KeyUseContext(op: .teamRotate), key: "\(id)@v\(version.version)", result: "ok")
        return record.info()
    }

    /// Deletes a team key (every version). Needs the custodian unlocked.
    public func deleteTeamKey(id: String) throws(CustodyError) {
        try Self.validateID(id)
        _ = try currentMaster()
        let existed = try kr { () throws(KeyringError) in try keyring.delete(item(.teamKey, id)) }
        guard existed else { throw .keyNotFound(id) }
        signers.withLock { c in
            c.byVersion = c.byVersion.filter { !$0.key.hasPrefix("\(ItemKind.teamKey)/\(id)@") }
            c.current.removeValue(forKey: "\(ItemKind.teamKey)/\(id)")
        }
        try log(KeyUseContext(op: .teamDelete), key: id, result: "ok")
    }

    /// Signs `message` with a team key's current version (Ed25519, or P-256 raw `r || s`).
    ///
    /// This is the one gate every team-key signature passes, whichever client asks (a page
    /// through the bridge, `ssh` through the agent socket, the command line inside the daemon
    /// or on its own):
    /// - `context.presence` is required: a proof for `context.client` (a site, the ssh-agent,
    ///   the command line: ``KeyUseClient``), `context.op` and `keyID`, younger than the presence
    ///   lifetime and issued in the current unlock; without one, ``CustodyError/presenceRequired(_:)``.
    /// - The key's policy, read from what the bytes are (``SignedDataKind``), not from what the
    ///   caller says: an SSHSIG is signed only in a namespace the key's SSH policy allows; an SSH
    ///   login request only for the ssh-agent socket (op `ssh.sign`, which has checked the
    ///   destination) and a key whose policy allows logins; other data through the agent only
    ///   when the policy allows other data. Otherwise ``CustodyError/policyRefused(_:)``.
    ///
    /// The use is in the audit log, with the id of the prompt that approved it, before the
    /// signature is returned; a refused use is logged with its reason word.
    /// - Parameters:
    ///   - version: nil for the current version; an older version is refused
    ///     (``CustodyError/versionVerifyOnly(keyID:version:)``).
    public func sign(keyID: String, version: Int? = nil, message: [UInt8], context: KeyUseContext = .local) throws(CustodyError) -> [UInt8] {
        try signature(keyID: keyID, version: version, message: message, context: context).signature
    }

    /// ``sign(keyID:version:message:context:)``, also saying which algorithm and version signed.
    /// The bridge answers `key.sign` with this: the key's record is not read again per
    /// signature (a Secret Service round trip) once the key is unwrapped in this unlock.
    public func signature(keyID: String, version: Int? = nil, message: [UInt8], context: KeyUseContext = .local) throws(CustodyError) -> TeamSignature {
        return try signWith(kind: .teamKey, key: Self.keyID(keyID), version: version, message: message, context: context)
    }

    func signWith(kind: SiteKeepNames.ItemKind, key: KeyID, version: Int?, message: [UInt8], context: KeyUseContext) throws(CustodyError) -> TeamSignature {
        let keyID = key.string
        let signature: [UInt8]
        let algorithm: SigningAlgorithm
        let signedVersion: Int
        var logKey = keyID
        var used = context
        do throws(CustodyError) {
            // The approval is checked against this unlock: a lock or unlock between that check
            // and the key's use (another thread) voids it, as custody refuses a proof taken
            // before its last unlock.
            let generation = lockScope.generation
            let unlockedAt = try currentUnlock().unlockedAtNs
            // Before anyone is asked: the key must exist and its policy allow this data, so a
            // use that cannot run never prompts (or waits for a touch). A refusal is logged
            // with the version it would have used.
            let dataKind = SignedDataKind(message)
            let facts = try keyFacts(kind: kind, id: keyID, version: version)
            logKey = "\(keyID)@v\(facts.version)"
            if kind == .teamKey {
                do throws(CustodyError) {
                    try Self.checkPolicy(dataKind, op: context.op, keyID: keyID, ssh: facts.ssh)
                } catch .policyRefused(let why) where facts.sshUnbound {
                    throw .policyRefused(why + "; the SSH policy in key \(keyID)'s keyring record is not the one SiteKeep bound to the key "
                        + "(it was written before SiteKeep bound SSH policies, or edited outside SiteKeep), so SSH use is off: "
                        + "turn it on again with 'sitekeep team ssh enable \(keyID)'")
                }
            }
            // The one presence check: a touch of the key's security key for each use when its
            // policy says so (no proof brought or kept counts), else ``admit``.
            if let touch = facts.touch {
                used.presence = try touchApproval(context, keyID: key, credential: touch)
            } else {
                used.presence = try admit(context, keyID: key, unlockedAtNs: unlockedAt, beforeAsking: {})
            }
            if used.presence == nil, kind == .teamKey {
                throw CustodyError.presenceRequired("signing with team key \(keyID) needs the user's approval of this use; "
                    + "approve it when asked, or give the current passphrase (--passphrase-file) for this command")
            }
            let (handle, v, ssh) = try signerAndPolicy(kind: kind, id: keyID, version: version, forSigning: true)
            if used.presence != nil, lockScope.generation != generation { throw CustodyError.presenceBeforeUnlock }
            logKey = "\(keyID)@v\(v)"
            if kind == .teamKey, ssh != facts.ssh {
                // Again when the policy changed while the user was asked (the new one is in force).
                try Self.checkPolicy(dataKind, op: context.op, keyID: keyID, ssh: ssh)
            }
            signature = try cr { () throws(CryptoError) in try handle.sign(message) }
            algorithm = handle.algorithm
            signedVersion = v
        } catch {
            logQuietly(used, key: logKey, result: Self.resultWord(error))
            throw error
        }
        try log(used, key: logKey, result: "ok")
        return TeamSignature(keyID: keyID, version: signedVersion, algorithm: algorithm, signature: signature)
    }

    /// What the gate needs to know of a key before anyone is asked: the version a use would
    /// take, its SSH policy and whether a touch approves it. From the signer cache when the
    /// current version was unwrapped in this unlock, else from its record (which must exist).
    ///
    /// A record that names an SSH policy has its current version opened first (while unlocked):
    /// the policy that counts is the one bound to the key, so a policy a keyring edit added or
    /// widened lets no request through to a prompt (`sshUnbound` then says the record names one
    /// that is not in force).
    func keyFacts(kind: SiteKeepNames.ItemKind, id: String,
                  version: Int?) throws(CustodyError) -> (version: Int, ssh: SSHAgentPolicy?, touch: FIDO2Credential?, sshUnbound: Bool) {
        if version == nil, let hit = signers.withLock({ $0.current["\(kind)/\(id)"] }) { return (hit.version, hit.ssh, hit.touch, false) }
        let record = try loadRecord(kind: kind, id: id)
        guard record.sshToBind != nil else { return (version ?? record.versions.count, nil, record.touch, false) }
        let ssh = try boundSSH(of: record, kind: kind)
        return (version ?? record.versions.count, ssh, record.touch, ssh == nil)
    }

    /// The SSH policy in force for team key `id`: the one its record names when it is bound to
    /// the key (custody wrote it with the key's versions, ``setSSHAgentPolicy(keyID:_:context:)``),
    /// else nil, as for a key whose SSH use is off. The ssh-agent offers only keys whose policy
    /// this returns. Needs the custodian unlocked (the key's current version is opened to check).
    /// - Throws: ``CustodyError/locked``, ``CustodyError/keyNotFound(_:)``, ``CustodyError/damagedItem(_:)``.
    public func sshPolicyInForce(keyID id: String) throws(CustodyError) -> SSHAgentPolicy? {
        try Self.validateID(id)
        _ = try currentMaster()
        return try keyFacts(kind: .teamKey, id: id, version: nil).ssh
    }

    static func resultWord(_ e: CustodyError) -> String {
        switch e {
        case .locked: "locked"
        case .presenceExpired, .presenceWrongSite, .presenceWrongUse, .presenceBeforeUnlock, .presenceRequired,
             .presenceDenied, .presenceTimedOut, .presenceUnavailable, .fido2(.noTouch), .fido2(.denied): "presence-refused"
        case .policyRefused: "policy-refused"
        case .keyNotFound, .versionNotFound: "no-such-key"
        case .versionVerifyOnly: "verify-only"
        default: "failed"
        }
    }


    /// Verifies a signature of a team key: against `version`, or against any version when nil.
    /// Needs no unlock (public keys only).
    public func verify(keyID: String, version: Int? = nil, signature: [UInt8], message: [UInt8]) throws(CustodyError) -> Bool {
        try Self.validateID(keyID)
        return try verifyWith(kind: .teamKey, keyID: keyID, version: version, signature: signature, message: message)
    }

    /// Verifies a device-key signature (any version).
    public func verifyDeviceSignature(_ signature: [UInt8], message: [UInt8]) throws(CustodyError) -> Bool {
        try verifyWith(kind: .deviceKey, keyID: Self.deviceKeyID, version: nil, signature: signature, message: message)
    }

    func verifyWith(kind: SiteKeepNames.ItemKind, keyID: String, version: Int?, signature: [UInt8], message: [UInt8]) throws(CustodyError) -> Bool {
        let record = try loadRecord(kind: kind, id: keyID)
        if let v = version, !(1...record.versions.count).contains(v) { throw .versionNotFound(keyID: keyID, version: v) }
        let versions = version.map { [record.versions[$0 - 1]] } ?? record.versions
        return versions.contains { v in
            guard let pk = try? Base64.decode(v.publicKey) else { return false }
            return SignatureVerifier.isValid(signature, for: message, publicKey: pk, algorithm: record.algorithm)
        }
    }
}

/// A key record, the stored bytes it was parsed from and its public facts
/// (``Custodian/parsedRecords``).
struct ParsedRecord: Sendable {
    /// The most records remembered; past it the memo starts again.
    static let maximumKept = 64
    let bytes: [UInt8]
    let record: KeyRecord
    let info: SigningKeyInfo
}
