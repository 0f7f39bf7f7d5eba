public import SiteKeepVocabulary
import Foundation
import SiteKeepSystem

/// What is wrong with a damaged partition.
public enum DamageReason: Sendable, Equatable, CustomStringConvertible {
    /// The partition's database file is gone although the site is registered.
    case missing
    /// The file is not an SQLite database, or SQLite reports corruption.
    case notADatabase(String)
    /// `PRAGMA quick_check` did not answer `ok`.
    case integrityCheckFailed(String)
    /// A sealed value (or the partition header) did not open under this site's key, place and
    /// name: moved, swapped, altered or written under another key.
    case authenticationFailed(namespace: String)

    public var description: String {
        switch self {
        case .missing: "its database file is missing"
        case .notADatabase(let m): "its database file is not a valid SQLite database (\(m))"
        case .integrityCheckFailed(let m): "its integrity check failed (\(m))"
        case .authenticationFailed(let ns): "a value in namespace '\(ns)' failed authentication (moved, swapped, altered or from another site)"
        }
    }
}

/// The one error type of the partitions layer (registry, partitions, origins as used by them).
///
/// Descriptions say what went wrong and what to do; they never contain stored values or keys.
public enum PartitionError: Error, Sendable, Equatable {
    /// No site has this identifier.
    case unknownSite(String)
    /// A site identifier that is not a UUID (the offending text, truncated and escaped).
    case invalidSiteIdentifier(String)
    /// The origin could not be parsed.
    case invalidOrigin(OriginError)
    /// The origin already belongs to another site.
    case originInUse(origin: String, site: String)
    /// A site needs at least one origin.
    case noOrigins
    /// The display name is empty, too long or contains control characters.
    case invalidDisplayName(String)
    /// A site with this identifier already exists.
    case siteExists(String)
    /// At most ``SiteRegistry/maximumAppBoundSites`` sites may be app-bound.
    case appBoundLimitReached(limit: Int)
    /// The site has open partition handles; close them or pass `force: true`.
    case siteInUse(site: String, openHandles: Int)
    /// The site was removed while this handle was open.
    case siteRemoved(String)
    /// This partition handle was closed.
    case partitionClosed
    /// A key (row name) longer than the limit, in UTF-8 bytes.
    case keyTooLong(limit: Int, actual: Int)
    /// A single value larger than the limit, in bytes.
    case valueTooLarge(limit: Int, actual: Int)
    /// The write would take the namespace over its quota; nothing was changed.
    case quotaExceeded(namespace: String, limit: Int, wouldUse: Int)
    /// The partition is damaged; rebuild it (`rebuildPartition(forIdentifier:from:)`).
    case damaged(site: String, reason: DamageReason)
    /// A value was not acceptable for its namespace (the reason).
    case invalidValue(String)
    /// The storage key could not be obtained or destroyed (custody's message).
    case keyUnavailable(String)
    /// The registry file is unreadable or malformed.
    case registryDamaged(String)
    /// A file-system or SQLite operation failed for a reason that is not damage.
    case storageFailure(String)
}

extension PartitionError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .unknownSite(let id): "no site has the identifier \(id); list sites with `sitekeep site list`"
        case .invalidSiteIdentifier(let s): "\"\(s)\" is not a site identifier (a UUID such as 6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13)"
        case .invalidOrigin(let e): "invalid origin: \(e)"
        case let .originInUse(origin, site): "origin \(origin) already belongs to site \(site); remove it there first"
        case .noOrigins: "a site needs at least one origin (e.g. https://newsroom.sgit.ai)"
        case .invalidDisplayName(let why): "invalid display name: \(why)"
        case .siteExists(let id): "a site with identifier \(id) already exists"
        case .appBoundLimitReached(let limit): "at most \(limit) sites may be app-bound; remove one or add this site as not app-bound"
        case let .siteInUse(site, n): "site \(site) is in use (\(n) open partition handle(s)); close them or force the removal"
        case .siteRemoved(let id): "site \(id) was removed; this partition handle can no longer be used"
        case .partitionClosed: "this partition handle was closed; open the partition again"
        case let .keyTooLong(limit, actual): "key is \(actual) bytes long; at most \(limit) bytes are allowed"
        case let .valueTooLarge(limit, actual): "value is \(actual) bytes; at most \(limit) bytes are allowed"
        case let .quotaExceeded(ns, limit, wouldUse): "quota exceeded in '\(ns)': the write would use \(wouldUse) of \(limit) bytes; nothing was changed. Remove items first"
        case let .damaged(site, reason): "the partition of site \(site) is damaged: \(reason); rebuild it from the vault"
        case .invalidValue(let why): "invalid value: \(why)"
        case .keyUnavailable(let why): "the site's storage key is unavailable: \(why)"
        case .registryDamaged(let why): "the site registry is damaged: \(why); restore sites.json from a backup"
        case .storageFailure(let why): "storage operation failed: \(why)"
        }
    }
}

/// The display form of an offending site identifier (``PartitionError/invalidSiteIdentifier(_:)``;
/// ``SiteID`` itself lives in SiteKeepVocabulary).
extension SiteID {

    /// The offending text as a message shows it: SiteKeepSystem's ``DisplayText/escaped(_:limit:)``.
    static func escape(_ text: String) -> String { DisplayText.escaped(text, limit: 64) }
}

/// Checks the audit can switch off to prove it notices. Only SiteKeep's own modules can set them,
/// and only in a debug build (`SITEKEEP_FAULTS`, defined by Package.swift for debug only): a
/// release build has no fault to set and none of the code paths a fault selects.
package struct AuditFaults: OptionSet, Sendable {
    package let rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }
    #if SITEKEEP_FAULTS
    /// `site(forOrigin:)` compares scheme and host only (a deliberately broken origin check).
    package static let originMatchIgnoresPort = AuditFaults(rawValue: 1 << 0)
    /// Values are sealed without binding namespace and row key, and the inner name is not checked.
    package static let skipValueBinding = AuditFaults(rawValue: 1 << 1)
    #endif

    /// Whether values are sealed and opened unbound (``skipValueBinding``); false in a release build.
    var skipsValueBinding: Bool {
        #if SITEKEEP_FAULTS
        contains(.skipValueBinding)
        #else
        false
        #endif
    }
}
