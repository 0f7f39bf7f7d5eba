import SiteKeepCustody
import SiteKeepVault

/// One message a lane check found that had not been notified: what a notification may say of
/// it (its title and its sender's label), never its body.
public struct LaneNews: Sendable, Equatable {
    public let vault: String
    /// The site that owns the vault (nil: none).
    public let siteID: String?
    public let id: String
    public let receivedMs: Int64
    /// The label of the token it came through (`inbox token add --label`), or "unknown token".
    public let sender: String
    /// The message's title (a sealed envelope's, or a plain object's `title`); nil when opaque.
    public let title: String?
}

/// What one lane check found.
public struct LaneCheck: Sendable, Equatable {
    /// The messages not notified before, oldest first.
    public var news: [LaneNews] = []
    /// A vault whose lane could not be read this time, with why (its messages wait for the next check).
    public var failures: [String] = []
    /// The seen record did not verify and was set aside: every pending message counts as new.
    public var seenReset: String?
    /// Vaults looked at.
    public var vaults = 0
}

extension VaultSyncService {
    /// The vaults whose lanes SiteKeep opened (those with an entry in `append-lanes.json`).
    public func laneVaults(home: String) throws(AppendLaneError) -> [String] {
        try laneRecords(home: home).all().keys.sorted()
    }

    /// The sender label of a message written through token folder `inbox` of `vault`'s lane.
    func laneLabels(vault: String, home: String) throws(AppendLaneError) -> [String: String] {
        Dictionary(try laneRecords(home: home).tokens(vault: vault).map { ($0.anchor, $0.label) }, uniquingKeysWith: { a, _ in a })
    }

    /// The pending messages of `vault`'s lane with what may be listed of each (fetched and
    /// classified in custody; never rendered): sealed envelopes opened, plain JSON as plain,
    /// anything else opaque.
    public func laneMessages(vault: String, home: String, only ids: Set<String>? = nil) throws -> [(entry: LaneEntry, sender: String, content: LaneContent, size: Int)] {
        let (lane, _, keys) = try self.lane(vault: vault)
        let labels = try laneLabels(vault: vault, home: home)
        let entries = try lane.listAll().filter { ids?.contains($0.id) ?? true }
        var out: [(entry: LaneEntry, sender: String, content: LaneContent, size: Int)] = []
        for (inbox, group) in Dictionary(grouping: entries, by: \.inbox) {
            for start in stride(from: 0, to: group.count, by: AppendLane.maxBatch) {
                let chunk = Array(group[start..<min(start + AppendLane.maxBatch, group.count)])
                let byID = Dictionary(chunk.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
                for m in try lane.fetch(inbox: inbox, ids: chunk.map(\.id)).messages {
                    guard let e = byID[m.id] else { continue }
                    out.append((e, labels[AppendLane.anchor(of: inbox)] ?? "unknown token", LaneContent.read(m.bytes, keys: keys), m.bytes.count))
                }
            }
        }
        return out.sorted { $0.entry.id < $1.entry.id }
    }

    /// Checks every opened lane for messages not notified before (``LaneSeenRecord``).
    ///
    /// Lists each lane (cheap); fetches only the messages not seen, for their titles. When there
    /// is news, `deliver` is given it; only when it answers true (the notification was shown)
    /// are those messages recorded as seen, so a failed delivery notifies at the next check.
    /// Messages no longer pending (marked, purged) leave the record. Needs SiteKeep unlocked;
    /// a lane that cannot be read is in ``LaneCheck/failures`` and keeps its seen ids.
    public func checkLanes(home: String, deliver: (LaneCheck) -> Bool) -> LaneCheck {
        var check = LaneCheck()
        let record = LaneSeenRecord(home: home, custodian: custodian)
        var seen: [String: Set<String>]
        do { seen = try record.load() } catch {
            if !custodian.isUnlocked { check.failures.append(error.description); return check }
            check.seenReset = error.description
            record.setAside()
            seen = [:]
        }
        let vaults: [String]
        do { vaults = try laneVaults(home: home) } catch {
            check.failures.append(error.description)
            return check
        }
        let sites = Dictionary(((try? library.records()) ?? []).map { ($0.name, $0.siteID) }, uniquingKeysWith: { a, _ in a })
        var next = seen
        for vault in vaults {
            check.vaults += 1
            do {
                let (lane, _, _) = try self.lane(vault: vault)
                let pending = try lane.listAll()
                let known = seen[vault] ?? []
                let fresh = Set(pending.map(\.id)).subtracting(known)
                if !fresh.isEmpty {
                    for m in try laneMessages(vault: vault, home: home, only: fresh) {
                        check.news.append(LaneNews(vault: vault, siteID: sites[vault] ?? nil, id: m.entry.id, receivedMs: m.entry.receivedMs,
                                                   sender: m.sender, title: m.content.title))
                    }
                }
                next[vault] = Set(pending.map(\.id))
            } catch {
                check.failures.append("vault \(vault): \(error)")
            }
        }
        for gone in next.keys where !vaults.contains(gone) { next.removeValue(forKey: gone) }
        check.news.sort { ($0.receivedMs, $0.id) < ($1.receivedMs, $1.id) }
        if !check.news.isEmpty, !deliver(check) { return check }
        if next != seen || check.seenReset != nil {
            do { try record.save(next) } catch { check.failures.append(error.description) }
        }
        return check
    }
}
