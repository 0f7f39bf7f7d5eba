public import SiteKeepCustody
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepSystem

/// One append token a vault's owner handed out: only its label, its anchor (the hash the server
/// keeps) and its dates. The token itself is printed once by `inbox token add` and kept nowhere.
public struct LaneToken: Sendable, Equatable {
    public let label: String
    public let anchor: String
    public let createdMs: Int64
    /// After this the token is left out of the anchors the next configure sends; nil for never.
    public let expiresMs: Int64?

    public init(label: String, anchor: String, createdMs: Int64, expiresMs: Int64?) {
        self.label = label
        self.anchor = anchor
        self.createdMs = createdMs
        self.expiresMs = expiresMs
    }

    public func isLive(atMs now: Int64) -> Bool { expiresMs.map { now < $0 } ?? true }
}

/// The lanes' token records, `append-lanes.json` in the store's home, tagged by custody
/// (record tag purpose `append-lanes`): the anchors SiteKeep configures a lane with come from
/// here, so a file changed by someone without the master key (an anchor of their own added) is
/// refused, not sent to the server.
public struct AppendLaneRecords: Sendable {
    public let path: String
    let custodian: Custodian

    public init(home: String, custodian: Custodian) {
        path = home + "/append-lanes.json"
        self.custodian = custodian
    }

    /// The tokens of `vault` (none when the file or the vault's entry is absent).
    public func tokens(vault: String) throws(AppendLaneError) -> [LaneToken] {
        try all()[vault] ?? []
    }

    func all() throws(AppendLaneError) -> [String: [LaneToken]] {
        let bytes: [UInt8]
        do {
            switch try FileIO.readRegularFile(path, limit: 4 << 20) {
            case .missing: return [:]
            case .bytes(let b): bytes = b
            }
        } catch { throw .record("\(path) cannot be read (\(error))") }
        guard let doc = try? JSONParser.parse(bytes), let body = doc["body"], let tagHex = doc["tag"]?.stringValue,
              let tag = try? Hex.decode(tagHex) else {
            throw .record("\(path) is not a lane record; move it aside and add the tokens again")
        }
        let valid: Bool
        do { valid = try custodian.isValidRecordTag(tag, for: JSONSerializer.bytes(body, style: .canonical), purpose: .appendLanes) } catch {
            throw .record("SiteKeep must be unlocked to check it (\(error.description))")
        }
        guard valid else { throw .record("\(path) was changed outside SiteKeep (its tag does not verify): an anchor may have been added; move it aside, then `sitekeep inbox token add` again and `inbox lane open`") }
        var out: [String: [LaneToken]] = [:]
        for m in body.objectValue ?? [] {
            out[m.key] = (m.value.arrayValue ?? []).compactMap { t in
                guard let label = t["label"]?.stringValue, let anchor = t["anchor"]?.stringValue, let created = t["created"]?.intValue else { return nil }
                return LaneToken(label: label, anchor: anchor, createdMs: created, expiresMs: t["expires"]?.intValue)
            }
        }
        return out
    }

    /// Replaces the tokens of `vault`, the file re-tagged and written atomically.
    public func save(_ tokens: [LaneToken], vault: String) throws(AppendLaneError) {
        var everything = try all()
        everything[vault] = tokens
        let body: JSONValue = .object(everything.keys.sorted().map { name in
            JSONMember(key: name, value: .array((everything[name] ?? []).map { t in
                var m = [JSONMember(key: "label", value: .string(t.label)), JSONMember(key: "anchor", value: .string(t.anchor)),
                         JSONMember(key: "created", value: .int(t.createdMs))]
                if let e = t.expiresMs { m.append(JSONMember(key: "expires", value: .int(e))) }
                return .object(m)
            }))
        })
        let tag: [UInt8]
        do { tag = try custodian.recordTag(for: JSONSerializer.bytes(body, style: .canonical), purpose: .appendLanes) } catch {
            throw .record("SiteKeep must be unlocked to change it (\(error.description))")
        }
        let doc: JSONValue = .object([JSONMember(key: "body", value: body), JSONMember(key: "tag", value: .string(Hex.encode(tag)))])
        do { try AtomicFile.replace(path, with: JSONSerializer.bytes(doc, style: .pretty)) } catch { throw .record("\(path) cannot be written (\(error.cause))") }
    }
}
