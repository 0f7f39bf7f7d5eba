public import SiteKeepBridge
public import SiteKeepCustody
import SiteKeepCrypto

/// The `sitekeep.sealed.v1` construction, on a symmetric team content key held by custody:
///
/// `sitekeep.sealed.v1.<team id>.<Base64url(nonce ‖ ciphertext ‖ tag)>`, XChaCha20-Poly1305
/// (``SymmetricKeyHandle/seal(_:authenticating:)``) with associated data
/// `"sitekeep.sealed.v1\0" + team id`. No public-key step: custody's team keys sign only, so a
/// sealing party needs the team content key (shared as team members share the team key).
public struct TeamSealedContent: SealedContentService {
    public static let prefix = "sitekeep.sealed.v1."
    public let teamID: String
    private let key: SymmetricKeyHandle
    private let approve: @Sendable (BridgeSite) async throws(BridgeFailure) -> Void

    /// - Parameters:
    ///   - key: the team content key handle (custody derives it; the bridge never sees bytes).
    ///   - approve: the user's approval of `sealed.open` for a site, asked before every open:
    ///     custody's gate (``custody(_:presence:)``), or a test's stand-in.
    public init(teamID: String, key: SymmetricKeyHandle, approve: @escaping @Sendable (BridgeSite) async throws(BridgeFailure) -> Void) {
        self.teamID = teamID
        self.key = key
        self.approve = approve
    }

    /// Approval through custody's one gate (``Custodian/approve(_:keyID:)``): unlocked, then this
    /// site's approval of `sealed.open` kept in `presence` or asked, checked once and logged.
    public static func custody(_ custodian: Custodian, presence: PresenceWindow) -> @Sendable (BridgeSite) async throws(BridgeFailure) -> Void {
        { site throws(BridgeFailure) in
            do throws(CustodyError) { try custodian.approve(site.keyUse(.sealedOpen, window: presence)) } catch { throw BridgeFailure(custody: error) }
        }
    }

    private var associatedData: [UInt8] { Array("sitekeep.sealed.v1".utf8) + [0] + Array(teamID.utf8) }

    /// Seals `plaintext` into an envelope for this team.
    public func seal(_ plaintext: [UInt8]) throws(BridgeFailure) -> String {
        guard let box = try? key.seal(plaintext, authenticating: associatedData) else {
            throw BridgeFailure(.internal, "sealing failed")
        }
        return Self.prefix + teamID + "." + Base64.encode(box, variant: .urlSafeNoPadding)
    }

    public func open(envelope: String, site: BridgeSite) async throws(BridgeFailure) -> [UInt8] {
        guard envelope.hasPrefix(Self.prefix) else {
            throw BridgeFailure(.badRequest, "args.envelope is not a sitekeep.sealed.v1 envelope")
        }
        let rest = envelope.dropFirst(Self.prefix.count)
        guard let dot = rest.lastIndex(of: ".") else { throw BridgeFailure(.badRequest, "args.envelope has no team id") }
        guard rest[..<dot].utf8.elementsEqual(teamID.utf8) else {
            throw BridgeFailure(.notFound, "the envelope is sealed to another team")
        }
        guard let box = try? Base64.decode(String(rest[rest.index(after: dot)...]), variant: .urlSafeNoPadding) else {
            throw BridgeFailure(.badRequest, "args.envelope's box is not Base64url")
        }
        // Only a well-formed envelope of this team reaches the prompt.
        try await approve(site)
        guard let plain = try? key.open(box, authenticating: associatedData) else {
            throw BridgeFailure(.badRequest, "the envelope could not be opened (damaged or not sealed with this team's key)")
        }
        return plain
    }
}
