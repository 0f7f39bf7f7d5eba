// Beside DisplayText, whose rule of hidden characters it shares: here rather than in custody so
// that the ssh-agent protocol, which quotes what a peer chose in its approval labels, lays them
// out without importing custody. Custody's prompts lay out the dialog (PresenceText+Dialog.swift).

/// How presence prompts show text a peer chose (a login's user name, an SSHSIG namespace, a
/// process name, a site's name): every string bounded on its own, so none can push SiteKeep's
/// own words out of sight, and quoted with its hidden characters shown, so none can pose as
/// them (issue 32).
///
/// Hidden characters are C0 and C1 controls and DEL, the bidirectional controls (U+202A–202E,
/// U+2066–2069, U+200E, U+200F, U+061C), the zero-width characters (U+200B–200D, U+2060,
/// U+FEFF), every other format character (general category Cf), and the line and paragraph
/// separators: characters that reorder, hide or break the text around them.
public enum PresenceText {
    /// The most Unicode scalars of one peer-supplied string a prompt shows (then `…`).
    public static let fieldLimit = 64
    /// The most scalars of a whole label a prompt shows: a backstop far above what the
    /// label's own bounded parts add up to.
    public static let labelLimit = 4096

    /// Whether `scalar` reorders, hides or breaks the text around it (see the type's summary):
    /// ``DisplayText/isHidden(_:)``.
    public static func isHidden(_ scalar: Unicode.Scalar) -> Bool { DisplayText.isHidden(scalar) }

    /// The first hidden scalar of `text`, if any.
    public static func firstHidden(in text: String) -> Unicode.Scalar? { text.unicodeScalars.first(where: isHidden) }

    /// `U+202E`: how a scalar is named in prompts and errors.
    public static func name(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// `text` with each hidden scalar shown as `<U+XXXX>`, cut after `limit` scalars of `text`
    /// with `…`. Text without hidden scalars comes back as it is, so escaping twice changes
    /// nothing.
    public static func escaped(_ text: String, limit: Int) -> String {
        var out = String.UnicodeScalarView()
        var taken = 0
        for scalar in text.unicodeScalars {
            guard taken < limit else { out.append("…"); break }
            taken += 1
            if isHidden(scalar) { out.append(contentsOf: "<\(name(scalar))>".unicodeScalars) } else { out.append(scalar) }
        }
        return String(out)
    }

    /// `text` in double quotes, with `"` and `\` escaped by `\`, each hidden scalar shown as
    /// `<U+XXXX>`, and at most `limit` scalars of it (then `…` inside the quotes): a string a
    /// peer chose, shown so that it cannot end early or run on into SiteKeep's words.
    public static func quoted(_ text: String, limit: Int = fieldLimit) -> String {
        var out = String.UnicodeScalarView()
        var taken = 0
        for scalar in text.unicodeScalars {
            guard taken < limit else { out.append("…"); break }
            taken += 1
            switch scalar {
            case "\"", "\\": out.append("\\"); out.append(scalar)
            default:
                if isHidden(scalar) { out.append(contentsOf: "<\(name(scalar))>".unicodeScalars) } else { out.append(scalar) }
            }
        }
        return "\"" + String(out) + "\""
    }
}
