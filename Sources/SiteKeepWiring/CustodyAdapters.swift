public import SiteKeepBridge
public import SiteKeepCustody
internal import SiteKeepFIDO2
import SiteKeepSystem

// Adapters from the bridge's service protocols to custody. Each maps custody's typed errors to
// the bridge's stable codes; no custody error text with key material exists to leak.

extension BridgeFailure {
    /// The bridge code for a custody error.
    package init(custody error: CustodyError) {
        switch error {
        case .locked: self.init(.locked, "SiteKeep is locked; run `sitekeep unlock`")
        case .notInitialized: self.init(.notConfigured, "SiteKeep is not set up; run `sitekeep init`")
        case .keyNotFound, .versionNotFound: self.init(.notFound, error.description)
        // Refused by the gate before any prompt: a page cannot put its own words there.
        case .invalidKeyID: self.init(.badRequest, "args.key must be a key id (\(KeyID.rule)); see `sitekeep team list`")
        case .presenceDenied: self.init(.presenceDenied, "the user refused")
        // The key needs a touch of the user's security key: the page learns that it was not
        // given, never which device or path.
        case .fido2(.noTouch), .fido2(.denied(_)):
            self.init(.presenceRequired, "the key needs a touch of the user's security key, and it was not touched in time")
        case .fido2: self.init(.presenceRequired, "the key needs a touch of the user's security key, which could not be reached")
        case _ where error.isPresenceRefusal: self.init(.presenceRequired, error.description)
        case .policyRefused: self.init(.notAllowed, error.description)
        default: self.init(.internal, "custody failed; see `sitekeep status` and the daemon log")
        }
    }
}

extension BridgeSite {
    /// How a presence prompt names this site: its quoted, bounded name (it must not read as
    /// SiteKeep's own words) and its first origin. The approval is bound to the site id.
    public var presenceLabel: String {
        "site " + PresenceText.quoted(name) + (origins.first.map { " (\($0))" } ?? "")
    }

    /// The key-use context of `op` for this site: approved through `window` (an approval kept
    /// for this site, op and key, else the user is asked, shown ``presenceLabel``). The client
    /// is ``KeyUseClient/site(_:)`` of the site's id, parsed here, once.
    /// - Throws: ``CustodyError/invalidArgument(_:)`` for a site whose id is not a site
    ///   identifier (the registry's sites all have one; the daemon's own pseudo-sites use no key).
    public func keyUse(_ op: OpName, window: PresenceWindow) throws(CustodyError) -> KeyUseContext {
        guard let site = try? SiteID(parsing: id) else { throw .invalidArgument("site \(PresenceText.quoted(name)) has no site identifier") }
        return KeyUseContext(client: .site(site), op: op, approval: PresenceApproval(window: window, label: presenceLabel))
    }
}

// The bridge ops that reach custody's gate, as its audit log names them.
extension OpName {
    /// A page's signature with a team key.
    package static let keySign = OpName(known: "key.sign")
    /// A page's opening of a sealed envelope.
    package static let sealedOpen = OpName(known: "sealed.open")
}

/// `key.sign` through custody's one gate, ``Custodian/signature(keyID:version:message:context:)``:
/// in one call custody checks the use could run (unlocked, the key exists, its id well formed),
/// reuses this site's approval of the last 60 s for `key.sign` and this key or asks the user
/// through ``presence``, checks that proof once, signs, and writes its hash-chained audit line
/// (with the approving prompt's id). Once a key is unwrapped in this unlock, a signature reads
/// nothing from the keyring.
public struct CustodySigningService: SigningService {
    public let custodian: Custodian
    /// The bridge's kept approvals and the prompt (in the custodian's lock scope).
    public let presence: PresenceWindow

    public init(custodian: Custodian, presence: PresenceWindow) {
        self.custodian = custodian
        self.presence = presence
    }

    public func sign(_ data: [UInt8], keyID: String, site: BridgeSite) async throws(BridgeFailure) -> BridgeSignature {
        do {
            let signed = try custodian.signature(keyID: keyID, message: data, context: site.keyUse(.keySign, window: presence))
            return BridgeSignature(keyID: keyID, algorithm: BridgeSignature.Algorithm(signed.algorithm), signature: signed.signature)
        } catch {
            throw BridgeFailure(custody: error)
        }
    }
}

extension BridgeSignature.Algorithm {
    /// The wire name of custody's algorithm.
    public init(_ algorithm: SigningAlgorithm) {
        switch algorithm {
        case .ed25519: self = .ed25519
        case .p256: self = .p256
        }
    }
}

/// `identity.get` from custody's team keys: the team is the key `teamKeyID` (its id and name).
public struct CustodyIdentityService: IdentityService {
    public let custodian: Custodian
    public let teamKeyID: String
    public init(custodian: Custodian, teamKeyID: String) {
        self.custodian = custodian
        self.teamKeyID = teamKeyID
    }

    public func identity(site: BridgeSite) async throws(BridgeFailure) -> BridgeIdentity {
        do {
            let info = try custodian.teamKeyInfo(id: teamKeyID)
            return BridgeIdentity(teamID: info.id, displayName: info.name)
        } catch {
            throw BridgeFailure(custody: error)
        }
    }
}
