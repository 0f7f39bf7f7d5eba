public import SiteKeepBridge
public import SiteKeepCustody

// Adapters from the bridge's service protocols to custody. Each maps custody's typed errors to
// the bridge's stable codes; no custody error text with key material exists to leak.

extension BridgeFailure {
    /// The bridge code for a custody error.
    package init(custody error: CustodyError) {
        switch error {
        case .locked: self.init(.locked, "SiteKeep is locked; run `sitekeep unlock`")
        case .notInitialized: self.init(.notConfigured, "SiteKeep is not set up; run `sitekeep init`")
        case .keyNotFound, .versionNotFound, .invalidKeyID: self.init(.notFound, error.description)
        case .presenceDenied: self.init(.presenceDenied, "the user refused")
        case .presenceTimedOut, .presenceExpired, .presenceWrongSite, .presenceWrongUse, .presenceBeforeUnlock, .presenceUnavailable, .presenceRequired:
            self.init(.presenceRequired, error.description)
        case .policyRefused: self.init(.notAllowed, error.description)
        default: self.init(.internal, "custody failed; see `sitekeep status` and the daemon log")
        }
    }
}

/// Presence through custody's ``PresenceWindow`` (askpass or passphrase re-entry, 60 s at most,
/// bound to the site id, the op and the key; the window's proofs are wiped by lock and unlock).
public struct CustodyPresenceService: PresenceService {
    public let window: PresenceWindow
    public init(window: PresenceWindow) { self.window = window }

    /// A kept proof for this exact use, else (once `beforeAsking` passed) the user is asked,
    /// shown the key, the op, and the site's quoted name and origin; the proof is bound to the
    /// site id.
    public func proof(for site: BridgeSite, op: String, keyID: String?,
                      beforeAsking: @Sendable () async throws(BridgeFailure) -> Void) async throws(BridgeFailure) -> PresenceProof {
        if let kept = window.cachedProof(site: site.id, op: op, keyID: keyID) { return kept }
        try await beforeAsking()
        // The site's name is quoted and bounded: it must not read as SiteKeep's own words.
        let label = "site " + PresenceText.quoted(site.name) + (site.origins.first.map { " (\($0))" } ?? "")
        do { return try window.proof(site: site.id, siteLabel: label, op: op, keyID: keyID) } catch { throw BridgeFailure(custody: error) }
    }
}

/// `key.sign` through ``Custodian/signature(keyID:version:message:context:)``: custody checks the
/// proof's site, op and key again, and that it was taken in this unlock, and writes its
/// hash-chained audit line (with the approving prompt's id) before returning. Once a key is
/// unwrapped in this unlock, a signature reads nothing from the keyring.
public struct CustodySigningService: SigningService {
    public let custodian: Custodian
    public init(custodian: Custodian) { self.custodian = custodian }

    /// Unlocked, and the key exists: otherwise no prompt.
    public func checkCanSign(keyID: String, site: BridgeSite) async throws(BridgeFailure) {
        do { try custodian.checkCanSign(keyID: keyID) } catch { throw BridgeFailure(custody: error) }
    }

    public func sign(_ data: [UInt8], keyID: String, site: BridgeSite, presence: PresenceProof) async throws(BridgeFailure) -> BridgeSignature {
        do {
            let signed = try custodian.signature(keyID: keyID, message: data,
                                                 context: KeyUseContext(site: site.id, op: "key.sign", presence: presence))
            return BridgeSignature(keyID: keyID, algorithm: signed.algorithm, signature: signed.signature)
        } catch {
            throw BridgeFailure(custody: error)
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
