public import SiteKeepJSON

/// The reminder leads a site asks for (`notify.plan`), in minutes; nil keeps the current one.
public struct ReminderLeads: Sendable, Equatable {
    /// The longest lead, a day.
    public static let maxMinutes: Int64 = 1440

    public var sessionMinutes: Int?
    public var standupMinutes: Int?
    public init(sessionMinutes: Int? = nil, standupMinutes: Int? = nil) {
        self.sessionMinutes = sessionMinutes
        self.standupMinutes = standupMinutes
    }

    /// Reads `{"sessionLeadMinutes"?, "standupLeadMinutes"?}`: whole minutes from 0 to 1440,
    /// naming the field it refuses.
    public init(json: JSONValue, path: String) throws(CoreFieldError) {
        func minutes(_ key: String) throws(CoreFieldError) -> Int? {
            guard let v = json[key], !v.isNull else { return nil }
            guard let m = v.intValue else { throw CoreFieldError("\(path).\(key)", "must be whole minutes, found \(v.typeName)") }
            guard m >= 0, m <= Self.maxMinutes else { throw CoreFieldError("\(path).\(key)", "is \(m); a lead is 0 to \(Self.maxMinutes) minutes") }
            return Int(m)
        }
        self.init(sessionMinutes: try minutes("sessionLeadMinutes"), standupMinutes: try minutes("standupLeadMinutes"))
    }

    /// Whether any lead is given.
    public var isEmpty: Bool { sessionMinutes == nil && standupMinutes == nil }

    /// `policy` with these leads applied.
    public func applied(to policy: ReminderPolicy) -> ReminderPolicy {
        var p = policy
        if let m = sessionMinutes { p.leads[.session] = Int64(m) * 60_000 }
        if let m = standupMinutes { p.leads[.standup] = Int64(m) * 60_000 }
        return p
    }
}

extension Reminder {
    /// `notify.plan`'s form of a planned reminder: id, item, title, kind, when it fires and when the item starts (RFC 3339 UTC).
    public var json: JSONValue {
        .object([JSONMember(key: "id", value: .string(id)), JSONMember(key: "item", value: .string(item.id)),
                 JSONMember(key: "title", value: .string(title)), JSONMember(key: "kind", value: .string(item.kind.rawValue)),
                 JSONMember(key: "at", value: .string(fireAt.rfc3339)), JSONMember(key: "start", value: .string(item.start.rfc3339))])
    }
}
