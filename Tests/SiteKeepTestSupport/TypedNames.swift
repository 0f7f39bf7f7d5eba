public import SiteKeepCustody

// Tests spell op names, key ids and clients as literals. These conformances exist in tests
// only: SiteKeep's own code parses text at its edge (`OpName(parsing:)`, `KeyID(parsing:)`,
// `SiteID(parsing:)`) or names a constant (`OpName.teamSign`, `KeyUseClient.commandLine`).

extension OpName: ExpressibleByStringLiteral {
    /// A test's op name (the rule, or a `-` inside a word as custody's own names have).
    public init(stringLiteral value: String) { self.init(known: value) }
}

extension KeyID: ExpressibleByStringLiteral {
    /// A test's key id (it must follow ``KeyID/rule``).
    public init(stringLiteral value: String) { self.init(known: value) }
}

extension KeyUseClient: ExpressibleByStringLiteral {
    /// A test's client: `-`, `command-line` and `ssh-agent` are those clients, a site
    /// identifier is that site, and any other name is a site whose id is derived from the name
    /// (``testSite(_:)``).
    public init(stringLiteral value: String) {
        switch value {
        case "-": self = .local
        case "command-line": self = .commandLine
        case "ssh-agent": self = .sshAgent
        default: self = (try? SiteID(parsing: value)).map(KeyUseClient.site) ?? .testSite(value)
        }
    }

    /// The site a test names `name`: its id is `00000000-0000-4000-8000-` and 12 hex digits of
    /// a hash of the name (the same name, the same site).
    public static func testSite(_ name: String) -> KeyUseClient {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in name.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let hex = String(h & 0xffff_ffff_ffff, radix: 16)
        let id = "00000000-0000-4000-8000-" + String(repeating: "0", count: 12 - hex.count) + hex
        return .site(try! SiteID(parsing: id))
    }
}
