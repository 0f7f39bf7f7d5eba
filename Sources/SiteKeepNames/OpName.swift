/// The name of a bridge op (`storage.get`, `vault.status`, `hello`): lower-case words of ASCII
/// letters and digits joined by single dots, at most 64 bytes: the op catalogue's name rule.
///
/// Being ASCII, two op names are equal exactly when their bytes are, which is how the
/// dispatcher matches a request's op to the catalogue (never by Unicode equivalence: a request
/// spelling an op with a look-alike or a composed form names no op).
///
/// Custody's own op names, which only its audit log and presence prompts show and no request
/// can name, are constants made with ``init(known:)``; some of those have a `-` inside a word
/// (`storage-key`, `vault-key.store`, `slot.passphrase-change`), which the rule refuses on
/// purpose: a parsed op never equals one of them.
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

    /// One of SiteKeep's own op names, written in its source (never text from outside): the rule,
    /// or the rule with a `-` inside a word (`vault-key.store`). Traps on anything else, which is
    /// a programming error caught the first time the constant is read.
    package init(known name: String) {
        precondition(Self.isValid(name, hyphenInsideWords: true), "not an op name: \(name)")
        string = name
    }

    /// Whether `name` is a well-formed op name.
    public static func isValid(_ name: String) -> Bool { isValid(name, hyphenInsideWords: false) }

    private static func isValid(_ name: String, hyphenInsideWords: Bool) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return false }
        var wordLength = 0
        var afterHyphen = false
        for b in bytes {
            if b == 0x2e {
                if wordLength == 0 || afterHyphen { return false }
                wordLength = 0
            } else if b == 0x2d, hyphenInsideWords {
                if wordLength == 0 || afterHyphen { return false }
                afterHyphen = true
                continue
            } else if (0x61...0x7a).contains(b) || (0x30...0x39).contains(b) {
                wordLength += 1
            } else {
                return false
            }
            afterHyphen = false
        }
        return wordLength > 0 && !afterHyphen
    }

    /// The name itself.
    public var description: String { string }
    public static func < (a: OpName, b: OpName) -> Bool { a.string.utf8.lexicographicallyPrecedes(b.string.utf8) }
}
