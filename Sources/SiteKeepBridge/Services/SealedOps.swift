internal import SiteKeepJSON
import SiteKeepEncoding

/// Opens content sealed to the user's team key, after custody's gate has approved the use for
/// this site (`sealed.open`, no key id).
public protocol SealedContentService: Sendable {
    /// The plaintext of `envelope`.
    /// - Throws: `bad_request` for a malformed envelope, `not_found` for another team's envelope,
    ///   `bad_request` "could not be opened" when authentication fails (one opaque case).
    func open(envelope: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8]
}

enum SealedOps {
    static let names: Set<String> = ["sealed.open"]

    static func handlers(_ s: any SealedContentService) -> [String: BridgeHandler] {
        [
            "sealed.open": { c throws(BridgeFailure) in
                let plain = try await s.open(envelope: try c.string("envelope"), site: c.site)
                return ["plaintext": .string(Base64.encode(plain, variant: .standard))]
            },
        ]
    }
}

/// The bridge module of `sealed.open`: content sealed to the team.
public struct SealedModule: BridgeModule {
    public static let ops = SealedOps.names
    private let service: any SealedContentService
    public init(_ service: any SealedContentService) { self.service = service }
    public var handlers: [String: BridgeHandler] { SealedOps.handlers(service) }
}
