/// A site's stable identifier: a UUID, always written in lower case.
///
/// Parsing accepts only the 36-character UUID form, so a site identifier can never carry a path
/// (`../`, `/`, NUL): it is safe to use as a folder name. `sites.json` stores it as that string
/// (``string``), and reading it back parses it again.
///
/// It lives here, without Foundation, so custody (and `sitekeep-read`) can name the site that
/// asks for a key; SiteKeepVocabulary adds the Foundation side (`uuid`, `init(_: UUID)`,
/// `random()`).
public struct SiteID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The canonical lower-case form, used as the site's folder name.
    public let string: String

    /// Parses the 36-character UUID form (either case).
    /// - Throws: ``VocabularyError/invalidSiteIdentifier(_:)`` with the text (cut to
    ///   ``VocabularyError/keptScalars`` scalars).
    public init(parsing text: String) throws(VocabularyError) {
        let bytes = Array(text.utf8)
        let ok = bytes.count == 36 && bytes.enumerated().allSatisfy { i, b in
            [8, 13, 18, 23].contains(i) ? b == 0x2d : Self.isHexDigit(b)
        }
        guard ok else { throw .invalidSiteIdentifier(VocabularyError.kept(text)) }
        self.init(canonical: String(decoding: bytes.map { (0x41...0x46).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self))
    }

    /// Wraps an already canonical form (36 characters, lower-case hex digits and dashes), for
    /// SiteKeepVocabulary's `init(_: UUID)`.
    package init(canonical: String) {
        self.string = canonical
    }

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x61...0x66).contains(b) || (0x41...0x46).contains(b)
    }

    /// Equal when the UUIDs are: the canonical forms are equal exactly then.
    public static func == (a: SiteID, b: SiteID) -> Bool { a.string == b.string }
    public func hash(into hasher: inout Hasher) { hasher.combine(string) }
    /// The canonical lower-case form (``string``).
    public var description: String { string }
    public static func < (a: SiteID, b: SiteID) -> Bool { a.string < b.string }
}
