import SiteKeepBridge
public import SiteKeepCore
public import SiteKeepVault
import SiteKeepJSON

/// A site's picks mirrored into its vault at ``path`` (`agenda/picks.json`, the vault's picks
/// document: `{"v": 1, "picks": [{"id", "at"}, …], "removed": [{"id", "at"}, …]}`), so they
/// travel between devices by the vault's sync and merge by ``PicksMerge``'s rule (per id, the
/// later `at` wins, a pick or a removal).
///
/// A change of the schedule from `old` to `new` at `now` is written as `new`'s picks plus a
/// removal (at `now`) for each id `old` had and `new` lacks, merged with the vault's current
/// document by the same rule, and committed on this device's clone branch when that changes the
/// file. Removals are computed against the schedule this device replaced, never against the
/// vault's file, so a pick another device added and this one has not seen is kept.
public struct VaultPicksMirror: Sendable {
    public static let path = "agenda/picks.json"
    public let library: VaultLibrary
    public init(library: VaultLibrary) { self.library = library }

    /// The site's vault to mirror into (its only vault, or its `default`), when it has one that
    /// can be written. Reads only the registry (no key).
    public func vaultName(siteID: String) throws(VaultError) -> String? {
        guard let name = try library.defaultVaultName(forSite: siteID) else { return nil }
        return try library.records().first { $0.name == name && !$0.readOnly }?.name
    }

    /// The document ``mirror(old:new:siteID:now:)`` merges into the vault's.
    public static func document(old: ScheduleDocument, new: ScheduleDocument, now: Instant) -> [UInt8] {
        let kept = Set(new.picks.map(\.id))
        let removed = old.picks.filter { !kept.contains($0.id) }.map { p -> JSONValue in
            .object([JSONMember(key: "id", value: .string(p.id)), JSONMember(key: "at", value: .int(now.milliseconds))])
        }
        return JSONSerializer.bytes(.object([JSONMember(key: "v", value: 1), JSONMember(key: "picks", value: new.json["picks"] ?? .array([])),
                                             JSONMember(key: "removed", value: .array(removed))]))
    }

    /// Mirrors the change; answers the vault written (nil when the site has none, or nothing changed).
    @discardableResult
    /// - Throws: ``PicksMirrorError``.
    public func mirror(old: ScheduleDocument, new: ScheduleDocument, siteID: String, now: Instant) throws(PicksMirrorError) -> String? {
        let ours = Self.document(old: old, new: new, now: now)
        let name: String
        var current: [UInt8]? = nil
        do throws(VaultError) {
            guard let chosen = try vaultName(siteID: siteID) else { return nil }
            name = chosen
            let vault = try library.vault(named: name, forSite: siteID)
            do { current = try vault.read(path: Self.path) } catch { if case .notFound = error {} else { throw error } }
        } catch { throw .vault(error) }
        let merged: [UInt8]
        if let current {
            guard let m = PicksMerge.merge(ours: ours, theirs: current) else { throw .notAPicksDocument(Self.path) }
            merged = m
        } else {
            merged = PicksMerge.merge(ours: ours, theirs: ours) ?? ours
        }
        guard merged != current else { return nil }
        do { try library.write(name: name, path: Self.path, contents: merged, message: "Schedule picks") } catch { throw .vault(error) }
        return name
    }
}

/// Why a schedule change did not reach the site's vault.
public enum PicksMirrorError: Error, Sendable, CustomStringConvertible {
    /// The vault refused (locked, read-only, damaged, ...).
    case vault(VaultError)
    /// The vault's file at this path is not a picks document.
    case notAPicksDocument(String)

    public var description: String {
        switch self {
        case .vault(let e): e.description
        case .notAPicksDocument(let path): "the vault's \(path) is not a picks document; fix or remove it there"
        }
    }
}

extension BridgeFailure {
    /// The bridge code for a mirror that failed.
    init(mirror error: PicksMirrorError) {
        switch error {
        case .vault(let e): self.init(vault: e)
        case .notAPicksDocument: self.init(.internal, error.description)
        }
    }
}
