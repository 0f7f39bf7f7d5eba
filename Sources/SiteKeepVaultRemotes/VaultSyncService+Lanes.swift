public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepSystem
import SiteKeepVault

/// What an agent needs to send to a vault's lane, as `inbox token add` prints it once.
public struct LaneGrant: Sendable {
    public let server: String
    public let vaultID: String
    /// The lane's public key (sealed box), 64 hex.
    public let laneKey: String
    /// The append token, 64 hex: shown once, kept nowhere (only its anchor is).
    public let token: String
    public let label: String
    public let expiresMs: Int64?
}

/// A vault's append lane from the store: its keys in custody, its remote's URL and token.
extension VaultSyncService {
    /// The lane client of `vault` on its remote (`origin`, or the only one, or `remote`).
    public func lane(vault: String, remote name: String? = nil) throws -> (lane: AppendLane, remote: VaultRemote, keys: SgitKeys) {
        let r = try remote(vault, name)
        guard r.kind == .api else { throw AppendLaneError.unavailable(verb: "call", reason: "the remote \(r.name) of vault \(vault) is a \(r.kind.rawValue) remote; lanes live on a vault server (https://…)", transient: false) }
        let keys = try library.keys(named: vault)
        let credentials = CustodyCredentials(custodian: custodian, tokenItem: r.hasToken ? Self.tokenItem(vault: r.vault, remote: r.name) : nil, keys: keys)
        return (try AppendLane(baseURL: r.url, vaultID: keys.vaultID, credentials: VaultLaneCredentials(keys: keys, server: credentials)), r, keys)
    }

    /// The record of every vault's lane tokens, beside the remotes' record.
    public func laneRecords(home: String) -> AppendLaneRecords { AppendLaneRecords(home: home, custodian: custodian) }

    /// Configures `vault`'s lane with the anchors of its live tokens and its enumeration key's
    /// hash. Returns the number of anchors sent.
    @discardableResult
    public func openLane(vault: String, remote: String? = nil, home: String) throws -> Int {
        let (lane, _, _) = try self.lane(vault: vault, remote: remote)
        let now = Clocks.wallMilliseconds()
        let live = try laneRecords(home: home).tokens(vault: vault).filter { $0.isLive(atMs: Int64(now)) }
        try lane.configure(anchors: live.map(\.anchor))
        return live.count
    }

    /// Mints an append token for `vault` labelled `label`, records its anchor, and configures
    /// the lane with every live anchor. The token is in the answer and nowhere else.
    public func addLaneToken(vault: String, remote: String? = nil, label: String, expiresMs: Int64?, home: String) throws -> LaneGrant {
        guard !label.isEmpty, label.count <= 64, label.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f }) else {
            throw AppendLaneError.rejected(verb: "token add", detail: "a label is 1-64 printable characters")
        }
        let records = laneRecords(home: home)
        var tokens = try records.tokens(vault: vault)
        guard !tokens.contains(where: { $0.label == label }) else {
            throw AppendLaneError.rejected(verb: "token add", detail: "vault \(vault) already has a token labelled '\(label)': revoke it first, or choose another label")
        }
        let (lane, r, keys) = try self.lane(vault: vault, remote: remote)
        let token = Hex.encode(SecureRandom.bytes(count: 32))
        let now = Int64(Clocks.wallMilliseconds())
        tokens.append(LaneToken(label: label, anchor: AppendLane.anchor(of: token), createdMs: now, expiresMs: expiresMs))
        try lane.configure(anchors: tokens.filter { $0.isLive(atMs: now) }.map(\.anchor))
        try records.save(tokens, vault: vault)
        return LaneGrant(server: r.url, vaultID: keys.vaultID, laneKey: Hex.encode(try keys.appendLanePublicKey()), token: token, label: label, expiresMs: expiresMs)
    }

    /// Drops the token labelled `label`: the lane is configured without its anchor first, so
    /// the token stops working before the record forgets it.
    public func revokeLaneToken(vault: String, remote: String? = nil, label: String, home: String) throws {
        let records = laneRecords(home: home)
        var tokens = try records.tokens(vault: vault)
        guard tokens.contains(where: { $0.label == label }) else { throw AppendLaneError.unknownToken(label: label, vault: vault) }
        tokens.removeAll { $0.label == label }
        let now = Int64(Clocks.wallMilliseconds())
        try self.lane(vault: vault, remote: remote).lane.configure(anchors: tokens.filter { $0.isLive(atMs: now) }.map(\.anchor))
        try records.save(tokens, vault: vault)
    }
}
