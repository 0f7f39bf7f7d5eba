import SiteKeepBridge
import SiteKeepWiring
import SiteKeepVault
import SiteKeepVaultRemotes

/// `inbox.list`'s and `inbox.mark`'s lanes: the append lanes of the calling site's own vaults
/// (those whose authenticated record names the site, and whose lane SiteKeep opened), read and
/// marked with their keys in custody. A vault of another site, of none, or whose record does not
/// verify is refused as the vault ops refuse it (``VaultLibrary/vault(named:forSite:)``); the
/// reply carries what a message is (sender label, title, kind, size), never its body, a token
/// (a token folder's name is the token) or a key.
struct LaneInbox: LaneInboxService {
    let service: VaultSyncService
    let home: String

    /// The site's vaults with an opened lane: `vault` alone (refused unless the site's), or all.
    func vaults(_ vault: String?, site: BridgeSite) throws(BridgeFailure) -> [String] {
        let opened: Set<String>
        do { opened = Set(try service.laneVaults(home: home)) } catch { throw Self.failure(error) }
        if let vault {
            do { _ = try service.library.vault(named: vault, forSite: site.id) } catch { throw BridgeFailure(vault: error) }
            return opened.contains(vault) ? [vault] : []
        }
        let mine: [VaultRecord]
        do { mine = try service.library.records() } catch { throw BridgeFailure(vault: error) }
        return mine.filter { $0.tag != nil && $0.siteID == site.id && opened.contains($0.name) }.map(\.name).sorted().filter { name in
            (try? service.library.vault(named: name, forSite: site.id)) != nil
        }
    }

    func messages(vault: String?, site: BridgeSite) async throws(BridgeFailure) -> [BridgeLaneMessage] {
        var out: [BridgeLaneMessage] = []
        for name in try vaults(vault, site: site) {
            do {
                for m in try service.laneMessages(vault: name, home: home) {
                    let kind: BridgeLaneMessage.Kind
                    switch m.content {
                    case .sealed: kind = .sealed
                    case .plain: kind = .plain
                    case .opaque: kind = .opaque
                    }
                    out.append(BridgeLaneMessage(vault: name, id: m.entry.id, receivedMs: m.entry.receivedMs, sender: m.sender,
                                                 title: m.content.title.map { String($0.prefix(256)) }, kind: kind, size: m.size))
                }
            } catch { throw Self.failure(error) }
        }
        return out.sorted { ($0.receivedMs, $0.id) < ($1.receivedMs, $1.id) }
    }

    func prepareMark(_ ids: [String], site: BridgeSite) async throws(BridgeFailure) -> LaneMarking {
        if let bad = ids.first(where: { !AppendLane.isMessageID($0) }) { throw Self.notUnread(bad) }
        var found: [String: (vault: String, inbox: String)] = [:]
        for name in try vaults(nil, site: site) {
            do {
                for e in try service.lane(vault: name).lane.listAll() where ids.contains(e.id) { found[e.id] = (name, e.inbox) }
            } catch { throw Self.failure(error) }
        }
        if let missing = ids.first(where: { found[$0] == nil }) { throw Self.notUnread(missing) }
        let pairs = Set(ids).compactMap { id in found[id].map { (id, $0) } }
        let groups = Dictionary(grouping: pairs, by: { "\($0.1.vault)\u{0}\($0.1.inbox)" })
        let service = self.service
        return LaneMarking(count: found.count) { () async throws(BridgeFailure) -> Int in
            var moved = 0
            for (_, group) in groups {
                guard let first = group.first else { continue }
                do {
                    let lane = try service.lane(vault: first.1.vault).lane
                    moved += try lane.markProcessed(inbox: first.1.inbox, ids: group.map(\.0)).moved.count
                } catch { throw Self.failure(error) }
            }
            return moved
        }
    }

    static func notUnread(_ id: String) -> BridgeFailure {
        BridgeFailure(.notFound, "args.ids: \"\(FieldSchema.printable(id))\" is not an unread message of this site's lanes; nothing was marked (inbox.list names them)")
    }

    /// A lane's failure as the bridge says it: no token, key or payload is in any of these messages.
    static func failure(_ error: any Error) -> BridgeFailure {
        if let e = error as? BridgeFailure { return e }
        if let e = error as? VaultError { return BridgeFailure(vault: e) }
        guard let e = error as? AppendLaneError else { return BridgeFailure(.internal, "the lane could not be read") }
        switch e {
        case .enumKeyRefused, .accessTokenRefused, .record, .readOnly:
            return BridgeFailure(.notConfigured, "the vault's lane is not readable: \(e.description)")
        default:
            return BridgeFailure(.internal, e.description)
        }
    }
}
