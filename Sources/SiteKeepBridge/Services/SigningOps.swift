internal import SiteKeepJSON
public import SiteKeepCustody
import SiteKeepCrypto

/// A signature and the facts needed to check it; never the key.
public struct BridgeSignature: Sendable, Equatable {
    public var keyID: String
    public var algorithm: SigningAlgorithm
    /// 64 bytes: Ed25519, or P-256 as raw `r || s`.
    public var signature: [UInt8]
    public init(keyID: String, algorithm: SigningAlgorithm, signature: [UInt8]) {
        self.keyID = keyID
        self.algorithm = algorithm
        self.signature = signature
    }
}

/// Signs with a team key held by custody. The implementation writes the audit-log line before it
/// returns (custody's rule: no signature leaves before its log line is written).
public protocol SigningService: Sendable {
    /// - Throws: `not_found` for an unknown key id, `locked` while custody is locked,
    ///   `presence_required` for a proof of another site, op or key.
    func sign(_ data: [UInt8], keyID: String, site: BridgeSite, presence: PresenceProof) async throws(BridgeFailure) -> BridgeSignature
    /// Whether `keyID` could sign now, asking no one: run before a presence prompt.
    /// - Throws: `locked` while custody is locked, `not_found` for an unknown key id.
    func checkCanSign(keyID: String, site: BridgeSite) async throws(BridgeFailure)
}

enum SigningOps {
    static let names: Set<String> = ["key.sign"]

    static func preflights(_ s: any SigningService) -> [String: BridgePreflight] {
        ["key.sign": { c throws(BridgeFailure) in try await s.checkCanSign(keyID: try c.string("key"), site: c.site) }]
    }

    static func handlers(_ s: any SigningService) -> [String: BridgeHandler] {
        [
            "key.sign": { c throws(BridgeFailure) in
                guard let presence = c.presence else {
                    throw BridgeFailure(.presenceRequired, "key.sign needs a presence proof")
                }
                let sig = try await s.sign(try c.bytes("data"), keyID: try c.string("key"), site: c.site, presence: presence)
                return ["key": .string(sig.keyID), "algorithm": .string(sig.algorithm.rawValue),
                        "signature": .string(Base64.encode(sig.signature, variant: .standard))]
            },
        ]
    }
}

/// The bridge module of `key.sign`: signatures by custody's team keys, checked before the presence prompt.
public struct SigningModule: BridgeModule {
    public static let ops = SigningOps.names
    private let service: any SigningService
    public init(_ service: any SigningService) { self.service = service }
    public var handlers: [String: BridgeHandler] { SigningOps.handlers(service) }
    public var preflights: [String: BridgePreflight] { SigningOps.preflights(service) }
}
