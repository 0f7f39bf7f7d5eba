public import SiteKeepJSON

/// Who the reader is to a site: a team id and a display name. Public facts only, never a key.
public struct IdentityProfile: Sendable, Hashable {
    public let teamID: String
    public let displayName: String

    /// - Throws: ``CoreFieldError`` (paths `identity.team`, `identity.name`) for a team id outside
    ///   `[a-z0-9._-]{1,128}` or a name empty, over 256 bytes or holding a control character.
    public init(teamID: String, displayName: String, path: String = "identity") throws(CoreFieldError) {
        guard (1...128).contains(teamID.utf8.count),
              teamID.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d }) else {
            throw CoreFieldError("\(path).team", "(\(printable(teamID))) must be 1 to 128 of a-z, 0-9, ., _ and -")
        }
        guard !displayName.isEmpty, displayName.utf8.count <= 256, !hasControlCharacters(displayName) else {
            throw CoreFieldError("\(path).name", "must be 1 to 256 bytes of text without control characters")
        }
        self.teamID = teamID
        self.displayName = displayName
    }
}

/// The identities configured for a store: one for every site, and per-site ones that replace
/// it (`sitekeep.identity.v1`, the file `identity.json` in the store's home).
///
/// `identity.get` answers ``identity(forSite:)``; when nothing is configured the daemon falls
/// back to the team key's id and name from custody.
public struct IdentitySettings: Sendable, Equatable {
    public static let format = "sitekeep.identity.v1"
    public var store: IdentityProfile?
    /// Site id → its own identity.
    public var sites: [String: IdentityProfile]

    public init(store: IdentityProfile? = nil, sites: [String: IdentityProfile] = [:]) {
        self.store = store
        self.sites = sites
    }

    /// The identity a site sees: its own, else the store's.
    public func identity(forSite siteID: String) -> IdentityProfile? { sites[siteID] ?? store }

    public init(json: JSONValue, path: String = "identity") throws(CoreFieldError) {
        guard json["format"]?.stringValue == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format)") }
        func profile(_ v: JSONValue, _ p: String) throws(CoreFieldError) -> IdentityProfile {
            guard let t = v["team"]?.stringValue else { throw CoreFieldError("\(p).team", "must be a string") }
            guard let n = v["name"]?.stringValue else { throw CoreFieldError("\(p).name", "must be a string") }
            return try IdentityProfile(teamID: t, displayName: n, path: p)
        }
        store = try json["store"].flatMap { v throws(CoreFieldError) in v.isNull ? nil : try profile(v, "\(path).store") }
        var sites: [String: IdentityProfile] = [:]
        for m in json["sites"]?.objectValue ?? [] { sites[m.key] = try profile(m.value, "\(path).sites.\(m.key)") }
        self.sites = sites
    }

    public var json: JSONValue {
        func j(_ p: IdentityProfile) -> JSONValue { .object([JSONMember(key: "team", value: .string(p.teamID)), JSONMember(key: "name", value: .string(p.displayName))]) }
        return .object([JSONMember(key: "format", value: .string(Self.format)),
                        JSONMember(key: "store", value: store.map(j) ?? .null),
                        JSONMember(key: "sites", value: .object(sites.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key, value: j($0.value)) }))])
    }
}
