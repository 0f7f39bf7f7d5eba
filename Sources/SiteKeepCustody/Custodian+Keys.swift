import SiteKeepNames
import SiteKeepCrypto
import SiteKeepKeyring
import SiteKeepFIDO2
import Synchronization

extension Custodian {
    // MARK: - Records

    func wrapInfo(kind: SiteKeepNames.ItemKind, id: String) -> String {
        switch kind {
        case .deviceKey: "device"
        case .agentKey: "agent-key:\(id)"
        default: "team:\(id)"
        }
    }

    func loadRecord(kind: SiteKeepNames.ItemKind, id: String) throws(CustodyError) -> KeyRecord {
        try loadParsed(kind: kind, id: id).record
    }

    /// The stored record and its public facts, parsed again only when its bytes changed.
    func loadParsed(kind: SiteKeepNames.ItemKind, id: String) throws(CustodyError) -> ParsedRecord {
        let bytes: [UInt8]
        if kind == .agentKey, let held = heldAgentKeyRecord(id: id) {
            bytes = held
        } else {
            do { bytes = try keyring.load(item(kind, id)) } catch .itemMissing { throw .keyNotFound(id) } catch { throw .keyring(error) }
        }
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
        let label = switch kind {
        case .deviceKey: "SiteKeep device key"
        case .agentKey: "SiteKeep key added by ssh-add \(record.id)"
        default: "SiteKeep team key \(record.id)"
        }
        try kr { () throws(KeyringError) in try keyring.store(record.encoded(), for: item(kind, record.id), label: label) }
    }

    /// Wraps a new signing key as version `version` of a record.
    func makeVersion(_ handle: SigningKeyHandle, kind: SiteKeepNames.ItemKind, id: String, version: Int, master: LockedSecret,
                     touch: FIDO2Credential? = nil, ssh: SSHAgentPolicy? = nil, confirm: Bool = false) throws(CustodyError) -> KeyRecord.Version {
        let wrapKey = try derive(master, info: wrapInfo(kind: kind, id: id))
        let pk = Base64.encode(handle.publicKey)
        let ad = KeyRecord.associatedData(store: storeID, kind: kind, id: id, version: version, algorithm: handle.algorithm, publicKey: pk,
                                          touch: touch, ssh: ssh, confirm: confirm)
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
                                     publicKey: version.publicKey, touch: record.touch, ssh: ssh, confirm: record.confirm)
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
    /// Presence is not its business: the gate (``admit(_:keyID:unlockedAtNs:waited:)``)
    /// has admitted the use before a key is unwrapped for it.
    func signer(kind: SiteKeepNames.ItemKind, id: String, version: Int?, forSigning: Bool) throws(CustodyError) -> (SigningKeyHandle, Int) {
        let (handle, v, _) = try signerAndPolicy(kind: kind, id: id, version: version, forSigning: forSigning)
        return (handle, v)
    }

    /// ``signer(kind:id:version:forSigning:)``, also giving the key's SSH policy as its
    /// record says (kept with the cached signer, so the signing gate reads no keyring item).
    /// `record`, when given, is the key's record as the caller just read it (the gate's
    /// ``keyFacts(kind:id:version:)``): it is not read again.
    func signerAndPolicy(kind: SiteKeepNames.ItemKind, id: String, version: Int?, forSigning: Bool,
                         record given: KeyRecord? = nil) throws(CustodyError) -> (SigningKeyHandle, Int, SSHAgentPolicy?) {
        // Recorded before the master key is read: a key unwrapped across a lock is not cached.
        let generation = lockScope.generation
        let master = try currentUnlock().master
        // Fast path: the current version, unwrapped earlier in this unlock (no keyring read).
        let currentKey = "\(kind)/\(id)"
        if version == nil, let hit = signers.withLock({ $0.current[currentKey] }) { return (hit.handle, hit.version, hit.ssh) }
        let record: KeyRecord
        if let given { record = given } else { record = try loadRecord(kind: kind, id: id) }
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

    /// Imports a team key (Ed25519 seed, P-256 PKCS#8 or scalar, or a `#key=` link through
    /// ``TeamKeyMaterial/webLink(_:)``; key files through ``TeamKeyMaterial/detect(_:kind:)``).
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
                throw .invalidKeyMaterial("not a P-256 PKCS#8 private key (PEM 'PRIVATE KEY' or DER) nor an Ed25519 one")
            }
        case .p256Scalar(let scalar):
            do { handle = SigningKeyHandle(p256: try P256.Signing.PrivateKey(rawScalar: scalar)) } catch {
                throw .invalidKeyMaterial("not a usable P-256 private key")
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
