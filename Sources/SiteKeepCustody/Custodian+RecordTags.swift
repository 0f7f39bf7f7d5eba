import SiteKeepNames
internal import SiteKeepCrypto

extension Custodian {
    /// The purposes a record tag may be made for. Each gets its own key, so a tag made for one
    /// kind of record never authenticates another.
    public enum RecordTagPurpose: String, Sendable, CaseIterable {
        /// A vault's entry in `vaults.json`: owning site, signer pins, signature policy.
        case vaultRecord = "vault-record"
        /// A site's entry in `sites.json`: its origins, app-bound flag, protection, grants and hosts.
        case siteRecord = "site-record"
        /// One value in `daemon.json` (the daemon's settings).
        case daemonSetting = "daemon-setting"
        /// A vault's append-lane tokens in `append-lanes.json`: their labels and anchors, which `inbox lane open` configures the server with.
        case appendLanes = "append-lanes"
        /// The lane messages the daemon has notified, in `lanes-seen.json`: a message notifies once, and a file changed without the master key hides nothing.
        case laneSeen = "lane-seen"
    }

    static func recordTagInfo(_ purpose: RecordTagPurpose) -> String { "record-tag:\(purpose.rawValue)" }

    /// An authentication tag over `message`: HMAC-SHA256 under HKDF(master, "record-tag:<purpose>").
    ///
    /// For records SiteKeep keeps beside the keyring in plain files (they are not secret, but a
    /// security decision rests on them): whoever can write the file but does not hold the master
    /// key cannot make a tag that ``isValidRecordTag(_:for:purpose:)`` accepts. Needs SiteKeep
    /// unlocked; logged as a key use.
    /// - Throws: ``CustodyError/locked`` when locked.
    public func recordTag(for message: [UInt8], purpose: RecordTagPurpose) throws(CustodyError) -> [UInt8] {
        let tag = try tagKey(purpose).authenticationCode(for: message)
        try log(KeyUseContext(op: .recordTagMake), key: Self.recordTagInfo(purpose), result: "ok")
        return tag
    }

    /// Whether `tag` is ``recordTag(for:purpose:)`` of `message` (compared in constant time).
    /// Logged as a key use, with its outcome.
    /// - Throws: ``CustodyError/locked`` when locked.
    public func isValidRecordTag(_ tag: [UInt8], for message: [UInt8], purpose: RecordTagPurpose) throws(CustodyError) -> Bool {
        let valid = ConstantTime.equals(try tagKey(purpose).authenticationCode(for: message), tag)
        try log(KeyUseContext(op: .recordTagCheck), key: Self.recordTagInfo(purpose), result: valid ? "ok" : "mismatch")
        return valid
    }

    private func tagKey(_ purpose: RecordTagPurpose) throws(CustodyError) -> SymmetricKeyHandle {
        do {
            return try derive(try currentMaster(), info: Self.recordTagInfo(purpose))
        } catch {
            logQuietly(KeyUseContext(op: .recordTag), key: Self.recordTagInfo(purpose), result: Self.resultWord(error))
            throw error
        }
    }
}
