internal import SiteKeepJSON
import SiteKeepEncoding

/// A signature and the facts needed to check it; never the key.
public struct BridgeSignature: Sendable, Equatable {
    /// The signature's algorithm, as `key.sign` names it on the wire.
    public enum Algorithm: String, Sendable {
        case ed25519
        case p256
    }

    public var keyID: String
    public var algorithm: Algorithm
    /// 64 bytes: Ed25519, or P-256 as raw `r || s`.
    public var signature: [UInt8]
    public init(keyID: String, algorithm: Algorithm, signature: [UInt8]) {
        self.keyID = keyID
        self.algorithm = algorithm
        self.signature = signature
    }
}

/// Signs with a team key held by custody, through custody's one gate: the implementation asks
/// for (or reuses) the user's approval for this site, `key.sign` and this key, and writes the
/// audit-log line, in the same call that signs (custody's rule: no signature leaves before its
/// log line is written; a use that cannot run never prompts).
public protocol SigningService: Sendable {
    /// - Throws: `not_found` for an unknown key id, `bad_request` for a malformed one, `locked`
    ///   while custody is locked, `presence_denied` when the user refuses, `presence_required`
    ///   when no one answers.
    func sign(_ data: [UInt8], keyID: String, site: BridgeSite) async throws(BridgeFailure) -> BridgeSignature
}

enum SigningOps {
    static let names: Set<String> = ["key.sign"]

    static func handlers(_ s: any SigningService) -> [String: BridgeHandler] {
        [
            "key.sign": { c throws(BridgeFailure) in
                let sig = try await s.sign(try c.bytes("data"), keyID: try c.string("key"), site: c.site)
                return ["key": .string(sig.keyID), "algorithm": .string(sig.algorithm.rawValue),
                        "signature": .string(Base64.encode(sig.signature, variant: .standard))]
            },
        ]
    }
}

/// The bridge module of `key.sign`: signatures by custody's team keys, approved at custody's gate.
public struct SigningModule: BridgeModule {
    public static let ops = SigningOps.names
    private let service: any SigningService
    public init(_ service: any SigningService) { self.service = service }
    public var handlers: [String: BridgeHandler] { SigningOps.handlers(service) }
}
