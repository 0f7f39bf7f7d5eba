/// Why a text is not one of the vocabulary's names (a site id, a key id, an op name, an item
/// kind). Origins have their own, finer ``OriginError``.
///
/// The offending text is kept cut to its first 65 Unicode scalars, so an error never carries
/// an unbounded input; ``description`` prints it escaped (Swift's string-literal form) and never
/// more than 64 scalars of it.
public enum VocabularyError: Error, Sendable, Equatable {
    /// A site identifier that is not the 36-character UUID form (the offending text).
    case invalidSiteIdentifier(String)
    /// A key id outside ``KeyID/rule`` (the offending text).
    case invalidKeyID(String)
    /// An op name outside ``OpName/rule`` (the offending text).
    case invalidOpName(String)
    /// A keyring item kind that is none of ``ItemKind``'s cases (the offending text).
    case unknownItemKind(String)

    /// The longest prefix of an offending text an error keeps, in Unicode scalars: one more than
    /// a message prints, so a message can say the text went on.
    public static let keptScalars = 65

    /// `text` cut to ``keptScalars`` scalars, for a case's payload.
    package static func kept(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        out.append(contentsOf: text.unicodeScalars.prefix(keptScalars))
        return String(out)
    }
}

extension VocabularyError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .invalidSiteIdentifier(let s):
            "\(Self.shown(s)) is not a site identifier (a UUID such as 6f1c3a52-0d7e-4b8a-9f57-2c1e0b4d9a13)"
        case .invalidKeyID(let s): "\(Self.shown(s)) is not a key id: use \(KeyID.rule)"
        case .invalidOpName(let s): "\(Self.shown(s)) is not an op name: use \(OpName.rule)"
        case .unknownItemKind(let s):
            "\(Self.shown(s)) is not a keyring item kind (\(ItemKind.allCases.map(\.rawValue).joined(separator: ", ")))"
        }
    }

    /// The first 64 scalars of `text` as a Swift string literal (quotes, backslashes and control
    /// characters escaped), `…` after it when there was more.
    private static func shown(_ text: String) -> String {
        var head = String.UnicodeScalarView()
        head.append(contentsOf: text.unicodeScalars.prefix(keptScalars - 1))
        return String(head).debugDescription + (text.unicodeScalars.count >= keptScalars ? "…" : "")
    }
}
