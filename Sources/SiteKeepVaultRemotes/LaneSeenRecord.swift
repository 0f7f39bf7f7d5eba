public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem

/// The lane messages the daemon has already notified, `lanes-seen.json` in the store's home:
/// per vault, the ids of the pending messages it has told the user of, so a message notifies
/// once. Tagged by custody (record tag purpose `lane-seen`), as `append-lanes.json` is: a file
/// another process of the user wrote cannot add ids (which would hide new messages) without
/// the master key. A file whose tag does not verify is set aside and every pending message is
/// notified again, saying why; an older tagged file put back notifies old messages again and
/// hides nothing (the ids only grow between prunes, and a new message's id was never in one).
/// No token is kept: only message ids, which name no credential.
public struct LaneSeenRecord: Sendable {
    public let path: String
    let custodian: Custodian
    /// Most ids kept per vault: a lane holds at most 1,000 unread messages per token.
    static let maxPerVault = 100_000

    public init(home: String, custodian: Custodian) {
        path = home + "/lanes-seen.json"
        self.custodian = custodian
    }

    /// The seen ids by vault name (empty when the file is absent).
    /// - Throws: ``AppendLaneError/record(_:)`` when it cannot be read, is not a seen record, or
    ///   its tag does not verify (changed without the master key), or SiteKeep is locked.
    public func load() throws(AppendLaneError) -> [String: Set<String>] {
        let bytes: [UInt8]
        do {
            switch try FileIO.readRegularFile(path, limit: 16 << 20) {
            case .missing: return [:]
            case .bytes(let b): bytes = b
            }
        } catch { throw .record("\(path) cannot be read (\(error))") }
        guard let doc = try? JSONParser.parse(bytes, limits: JSONLimits(maxBytes: 16 << 20, maxDepth: 4, maxStringBytes: 4096, maxElements: 1_000_000)),
              let body = doc["body"], let tagHex = doc["tag"]?.stringValue, let tag = try? Hex.decode(tagHex) else {
            throw .record("\(path) is not a seen-lanes record")
        }
        let valid: Bool
        do { valid = try custodian.isValidRecordTag(tag, for: JSONSerializer.bytes(body, style: .canonical), purpose: .laneSeen) } catch {
            throw .record("SiteKeep must be unlocked to check \(path) (\(error.description))")
        }
        guard valid else { throw .record("\(path) was changed outside SiteKeep (its tag does not verify)") }
        var out: [String: Set<String>] = [:]
        for m in body.objectValue ?? [] {
            out[m.key] = Set((m.value.arrayValue ?? []).compactMap(\.stringValue).filter(AppendLane.isMessageID))
        }
        return out
    }

    /// Replaces the record with `seen`, tagged and written atomically.
    /// - Throws: ``AppendLaneError/record(_:)`` when locked or the file cannot be written.
    public func save(_ seen: [String: Set<String>]) throws(AppendLaneError) {
        let body: JSONValue = .object(seen.keys.sorted().map { name in
            JSONMember(key: name, value: .array((seen[name] ?? []).sorted().suffix(Self.maxPerVault).map { .string($0) }))
        })
        let tag: [UInt8]
        do { tag = try custodian.recordTag(for: JSONSerializer.bytes(body, style: .canonical), purpose: .laneSeen) } catch {
            throw .record("SiteKeep must be unlocked to change \(path) (\(error.description))")
        }
        let doc: JSONValue = .object([JSONMember(key: "body", value: body), JSONMember(key: "tag", value: .string(Hex.encode(tag)))])
        do { try AtomicFile.replace(path, with: JSONSerializer.bytes(doc)) } catch { throw .record("\(path) cannot be written (\(error.cause))") }
    }

    /// Moves a file that did not verify aside (`lanes-seen.json.rejected`), so it is looked at
    /// once and replaced by a good one.
    public func setAside() {
        _ = try? FileIO.rename(path, to: path + ".rejected")
    }
}
