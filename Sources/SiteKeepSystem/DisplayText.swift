/// How SiteKeep shows text it did not write (a key a request named, a site identifier, a path
/// or schema read from a vault, a probe's input) inside its own messages: SiteKeep's one display
/// escaper, so no such text can reorder, hide or break the words around it, or pass for them.
///
/// Hidden characters are C0 and C1 controls and DEL, the bidirectional controls (U+202A–202E,
/// U+2066–2069, U+200E, U+200F, U+061C), the zero-width characters (U+200B–200D, U+2060,
/// U+FEFF), every other format character (general category Cf), the line and paragraph
/// separators and surrogates. ``escaped(_:limit:)`` shows each of them, and each `"` and `\`
/// (so escaped text inside quotes cannot close them or fake an escape), as `\u{HEX}`.
public enum DisplayText {
    /// The most Unicode scalars of one string a message shows by default (then `…`).
    public static let defaultLimit = 64

    /// Whether `scalar` reorders, hides or breaks the text around it (see the type's summary).
    public static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true                                   // controls
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: return true    // bidi
        case 0x200B...0x200D, 0x2060, 0xFEFF: return true                             // zero-width
        case 0x2028, 0x2029: return true                                              // line, paragraph
        default:
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate: return true
            default: return false
            }
        }
    }

    /// `text` with each hidden scalar, `"` and `\` written `\u{HEX}` (`\u{1B}`, `\u{202E}`,
    /// `\u{22}`), cut after `limit` scalars of `text` with `…` (nil: never cut).
    public static func escaped(_ text: String, limit: Int? = defaultLimit) -> String {
        var out = String.UnicodeScalarView()
        var taken = 0
        for scalar in text.unicodeScalars {
            if let limit, taken >= limit { out.append("…"); break }
            taken += 1
            if isHidden(scalar) || scalar == "\"" || scalar == "\\" {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }
}
