/// A key id: the one rule for naming team keys, device keys and ssh-agent keys, used by custody
/// when a key is made or named and by the bridge before a key id may reach a presence prompt.
///
/// A key id is 1-64 bytes of lower-case ASCII letters, digits, `.`, `_` and `-`, and its first
/// character is a letter or a digit (so an id never reads as a command-line option, a hidden
/// file or a relative path). Being ASCII, two key ids are equal exactly when their bytes are.
///
/// ```swift
/// KeyID.isValid("team-ed")            // true
/// KeyID.isValid("-team")              // false: starts with '-'
/// try KeyID(parsing: "team-ed").string // "team-ed"
/// ```
public struct KeyID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The longest key id, in bytes.
    public static let maximumLength = 64

    /// The rule in words, for error messages.
    public static let rule = "1-64 characters from a-z, 0-9, '.', '_' and '-', starting with a letter or digit"

    /// The id, as written (it has one spelling).
    public let string: String

    /// Parses `text` against the rule.
    /// - Throws: ``VocabularyError/invalidKeyID(_:)``.
    public init(parsing text: String) throws(VocabularyError) {
        guard Self.isValid(text) else { throw .invalidKeyID(VocabularyError.kept(text)) }
        string = text
    }

    /// One of SiteKeep's own key ids, written in its source (`device`): traps when it breaks the
    /// rule, a programming error caught the first time the constant is read.
    package init(known id: String) {
        precondition(Self.isValid(id), "not a key id: \(id)")
        string = id
    }

    /// Whether `id` is a well-formed key id.
    public static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        guard (1...maximumLength).contains(bytes.count), let first = bytes.first, isLetterOrDigit(first) else { return false }
        return bytes.allSatisfy { isLetterOrDigit($0) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d }
    }

    private static func isLetterOrDigit(_ b: UInt8) -> Bool { (0x61...0x7a).contains(b) || (0x30...0x39).contains(b) }

    /// The id itself.
    public var description: String { string }
    public static func < (a: KeyID, b: KeyID) -> Bool { a.string.utf8.lexicographicallyPrecedes(b.string.utf8) }
}
