/// The name of a bridge op (`storage.get`, `vault.status`, `hello`): lower-case words of ASCII
/// letters and digits joined by single dots, at most 64 bytes: the op catalogue's name rule.
///
/// Being ASCII, two op names are equal exactly when their bytes are, which is how the
/// dispatcher matches a request's op to the catalogue (never by Unicode equivalence: a request
/// spelling an op with a look-alike or a composed form names no op).
///
/// ```swift
/// try OpName(parsing: "storage.get")   // storage.get
/// try OpName(parsing: "Storage.get")   // throws: upper case
/// try OpName(parsing: "storage..get")  // throws: an empty word
/// ```
public struct OpName: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The longest op name, in bytes.
    public static let maximumLength = 64

    /// The rule in words, for error messages.
    public static let rule = "lower-case words joined by dots (a-z, 0-9), at most 64 characters"

    /// The name, as written (it has one spelling).
    public let string: String

    /// Parses `text` against the rule.
    /// - Throws: ``VocabularyError/invalidOpName(_:)``.
    public init(parsing text: String) throws(VocabularyError) {
        guard Self.isValid(text) else { throw .invalidOpName(VocabularyError.kept(text)) }
        string = text
    }

    /// Whether `name` is a well-formed op name.
    public static func isValid(_ name: String) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return false }
        var wordLength = 0
        for b in bytes {
            if b == 0x2e {
                if wordLength == 0 { return false }
                wordLength = 0
            } else if (0x61...0x7a).contains(b) || (0x30...0x39).contains(b) {
                wordLength += 1
            } else {
                return false
            }
        }
        return wordLength > 0
    }

    /// The name itself.
    public var description: String { string }
    public static func < (a: OpName, b: OpName) -> Bool { a.string.utf8.lexicographicallyPrecedes(b.string.utf8) }
}
