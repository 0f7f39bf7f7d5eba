public import SiteKeepCustody
import SiteKeepJSON
import SiteKeepVocabulary

// What keeps a site's entry in `sites.json` from being changed by whoever can write the file:
// the origins, app-bound flag, protection, grants and hosts that decide who binds the site and
// what it may call carry custody's record tag (HMAC-SHA256 under a key derived from the master
// key), made only by the registry's own writes after the approval that changed them.

extension Site {
    /// What the site's ``tag`` covers: its id and everything that decides who binds it and what
    /// it may call (origins, app-bound flag, protection, grants, hosts), in one canonical JSON
    /// form after a domain label. The name and the last-use time are not covered: they decide
    /// nothing (the last-use time changes on every open, with no approval).
    public var taggedBytes: [UInt8] {
        let json: JSONValue = .object([
            JSONMember(key: "app_bound", value: .bool(isAppBound)),
            JSONMember(key: "grants", value: .array(grants.map { .string($0) })),
            JSONMember(key: "hosts", value: .array(hosts.map { h in
                .object([JSONMember(key: "path", value: .string(h.path)), JSONMember(key: "sha256", value: h.sha256.map { .string($0) } ?? .null)])
            })),
            JSONMember(key: "id", value: .string(id.string)),
            JSONMember(key: "origins", value: .array(origins.map { .string($0.serialized) })),
            JSONMember(key: "protection", value: .string(protection.rawValue)),
        ])
        return Array("sitekeep.site-record.v1\0".utf8) + JSONSerializer.bytes(json, style: .canonical)
    }
}

/// Whether a site's entry in `sites.json` is one this store's registry wrote after the approval
/// that made it (``SiteRegistry/standing(of:)``).
public enum SiteRecordStanding: Sendable, Equatable {
    /// Its tag verifies: its origins, hosts and grants apply.
    case authentic
    /// It has no tag: written by hand, or by a SiteKeep from before tags. Ignored until approved
    /// (`sitekeep site approve`).
    case untagged
    /// Its tag does not verify: the entry was changed without the master key. Ignored until
    /// approved (`sitekeep site approve`).
    case tagMismatch
    /// Not checked yet: SiteKeep was locked when this entry was read (it is checked at the next
    /// look while unlocked). Ignored until then.
    case unchecked

    /// Why the entry is ignored, and the fix, for `doctor` and the daemon's log; nil when it is
    /// authentic.
    public func problem(of site: Site) -> String? {
        let entry = "the entry of \(site.displayName) (\(site.id.string)) in sites.json"
        let fix = "check its origins, hosts and grants with 'sitekeep site list', then approve it with 'sitekeep site approve \(site.id.string)' (or remove the site)"
        switch self {
        case .authentic: return nil
        case .untagged:
            return "\(entry) carries no tag (written by hand, or by a SiteKeep from before tags), so its origins, hosts and grants bind nothing; \(fix)"
        case .tagMismatch:
            return "\(entry) was changed without this store's master key (its tag does not verify), so its origins, hosts and grants bind nothing; \(fix)"
        case .unchecked:
            return "\(entry) is checked against its tag at the next unlock; until then its origins, hosts and grants bind nothing ('sitekeep unlock')"
        }
    }
}

/// Makes and checks the tags of site records: custody's record tags for
/// ``Custodian/RecordTagPurpose/siteRecord``. A registry whose key provider is not one (test
/// stores with in-memory keys) keeps no tags and takes every entry as it is.
public protocol SiteRecordAuthenticator: Sendable {
    /// The tag of `bytes`.
    /// - Throws: ``PartitionError/keyUnavailable(_:)`` while SiteKeep is locked.
    func siteRecordTag(for bytes: [UInt8]) throws(PartitionError) -> [UInt8]
    /// Whether `tag` is the tag of `bytes`; nil when it cannot be told now (SiteKeep is locked).
    func isValidSiteRecordTag(_ tag: [UInt8], for bytes: [UInt8]) -> Bool?
    /// Whether tags can be checked now (SiteKeep is unlocked).
    var canCheckSiteRecordTags: Bool { get }
}

extension Custodian: SiteRecordAuthenticator {
    public func siteRecordTag(for bytes: [UInt8]) throws(PartitionError) -> [UInt8] {
        do { return try recordTag(for: bytes, purpose: .siteRecord) } catch {
            throw .keyUnavailable("a site's entry in sites.json is tagged under the master key, and \(error); unlock first ('sitekeep unlock')")
        }
    }

    public var canCheckSiteRecordTags: Bool { isUnlocked }

    public func isValidSiteRecordTag(_ tag: [UInt8], for bytes: [UInt8]) -> Bool? {
        guard isUnlocked else { return nil }
        return try? isValidRecordTag(tag, for: bytes, purpose: .siteRecord)
    }
}
