internal import SiteKeepJSON

/// Public facts about the user: never a key.
public struct BridgeIdentity: Sendable, Equatable {
    public var teamID: String
    public var displayName: String
    public init(teamID: String, displayName: String) {
        self.teamID = teamID
        self.displayName = displayName
    }
}

/// The user's team identity (custody's team list).
public protocol IdentityService: Sendable {
    /// - Throws: `not_found` when no team is set up, `locked` when custody must be unlocked first.
    func identity(site: BridgeSite) async throws(BridgeFailure) -> BridgeIdentity
}

enum IdentityOps {
    static let names: Set<String> = ["identity.get"]

    static func handlers(_ s: any IdentityService) -> [String: BridgeHandler] {
        [
            "identity.get": { c throws(BridgeFailure) in
                let i = try await s.identity(site: c.site)
                return ["team": .string(i.teamID), "name": .string(i.displayName)]
            },
        ]
    }
}

/// The bridge module of `identity.get`: the user's team identity.
public struct IdentityModule: BridgeModule {
    public static let ops = IdentityOps.names
    private let service: any IdentityService
    public init(_ service: any IdentityService) { self.service = service }
    public var handlers: [String: BridgeHandler] { IdentityOps.handlers(service) }
}
