import SiteKeepNames
import SiteKeepCrypto
import SiteKeepKeyring

extension Custodian {
    /// Every secret byte string the custodian can currently reach: the master key, each
    /// HKDF-derived wrapping key, each team and device private key (Ed25519 seed; P-256 PKCS#8
    /// DER and its 32-byte scalar), each when-unlocked storage key, each vault secret and each record-tag key.
    ///
    /// For leak tests only (they search files, keyring blobs, log lines and error texts for
    /// these bytes). `package`: code outside SiteKeep cannot call it.
    package func leakScanMaterial() throws(CustodyError) -> [[UInt8]] {
        let master = try currentMaster()
        var out: [[UInt8]] = []
        func bytes(_ s: borrowing SecretBytes) -> [UInt8] { s.withUnsafeBytes { Array($0) } }
        out.append(master.withLock { bytes($0) })
        func derived(_ info: String) throws(CustodyError) -> [UInt8] {
            try cryptoCall { () throws(CryptoError) -> [UInt8] in
                try master.withLock { (m: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
                    bytes(try HKDF.deriveKey(inputKeyMaterial: m, info: Array(info.utf8)))
                }
            }
        }
        let list = { (kind: SiteKeepNames.ItemKind) throws(CustodyError) -> [KeyringItemID] in
            try self.kr { () throws(KeyringError) in try self.keyring.list(store: self.storeID, kind: kind.rawValue) }
        }
        for kind in [SiteKeepNames.ItemKind.teamKey, .deviceKey] {
            for id in try list(kind) {
                out.append(try derived(wrapInfo(kind: kind, id: id.id)))
                let record = try loadRecord(kind: kind, id: id.id)
                for v in record.versions {
                    let (handle, _) = try signer(kind: kind, id: id.id, version: v.version, forSigning: false)
                    let secret = try cryptoCall { () throws(CryptoError) in try handle.exportForWrapping() }
                    let raw = bytes(secret)
                    out.append(raw)
                    if handle.algorithm == .p256, let scalar = Self.p256Scalar(inPKCS8: raw) { out.append(scalar) }
                }
            }
        }
        for id in try list(.storageKeyWhenUnlocked) {
            out.append(try derived("site:\(id.id)"))
            let s = try wrappedSecret(kind: .storageKeyWhenUnlocked, id: id.id, info: "site:\(id.id)",
                                      ad: Self.siteKeyAD(store: storeID, site: id.id), createIfMissing: nil)
            out.append(bytes(s))
        }
        for purpose in RecordTagPurpose.allCases { out.append(try derived(Self.recordTagInfo(purpose))) }
        for id in try list(.vaultKey) {
            out.append(try derived("vault:\(id.id)"))
            let s = try wrappedSecret(kind: .vaultKey, id: id.id, info: "vault:\(id.id)",
                                      ad: Self.vaultKeyAD(store: storeID, vault: id.id), createIfMissing: nil)
            out.append(bytes(s))
        }
        return out
    }

    /// The private scalar of a P-256 PKCS#8 (ECPrivateKey `02 01 01 04 20 <32 bytes>`).
    static func p256Scalar(inPKCS8 der: [UInt8]) -> [UInt8]? {
        let marker: [UInt8] = [0x02, 0x01, 0x01, 0x04, 0x20]
        guard der.count >= marker.count + 32 else { return nil }
        for i in 0...(der.count - marker.count - 32) where Array(der[i..<(i + marker.count)]) == marker {
            return Array(der[(i + marker.count)..<(i + marker.count + 32)])
        }
        return nil
    }
}
