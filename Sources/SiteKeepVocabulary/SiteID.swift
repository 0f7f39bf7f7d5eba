public import Foundation

/// A site's stable identifier: a UUID, always written in lower case.
///
/// Parsing accepts only the 36-character UUID form, so a site identifier can never carry a path
/// (`../`, `/`, NUL): it is safe to use as a folder name. `sites.json` stores it as that string
/// (``string``), and reading it back parses it again.
public struct SiteID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The UUID.
    public let uuid: UUID
    /// The canonical lower-case form, used as the site's folder name.
    public let string: String

    /// Wraps a UUID.
    public init(_ uuid: UUID) {
        self.uuid = uuid
        self.string = uuid.uuidString.lowercased()
    }

    /// A new random identifier.
    public static func random() -> SiteID { SiteID(UUID()) }

    /// Parses the 36-character UUID form (either case).
    /// - Throws: ``VocabularyError/invalidSiteIdentifier(_:)`` with the text (cut to
    ///   ``VocabularyError/keptScalars`` scalars).
    public init(parsing text: String) throws(VocabularyError) {
        let scalars = Array(text.unicodeScalars)
        let ok = scalars.count == 36 && scalars.enumerated().allSatisfy { i, s in
            [8, 13, 18, 23].contains(i) ? s == "-" : s.properties.isASCIIHexDigit
        }
        guard ok, let uuid = UUID(uuidString: text) else { throw .invalidSiteIdentifier(VocabularyError.kept(text)) }
        self.init(uuid)
    }

    public static func == (a: SiteID, b: SiteID) -> Bool { a.uuid == b.uuid }
    public func hash(into hasher: inout Hasher) { hasher.combine(uuid) }
    /// The canonical lower-case form (``string``).
    public var description: String { string }
    public static func < (a: SiteID, b: SiteID) -> Bool { a.string < b.string }
}
