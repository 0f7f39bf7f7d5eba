public import SiteKeepNames
public import SiteKeepSystem

// The presence prompt's dialog, laid out from ``PresenceText`` (SiteKeepSystem) by custody's
// verifiers (askpass, pinentry, the terminal).

extension PresenceText {
    /// The prompt laid out for a dialog: a title line, then the key, the op, what it is for (the
    /// label's first part: the site, or the verified destination) and who asks (each later part
    /// of the label: the label's `; ` separators outside quotes start new lines), each on its own
    /// line, then what an approval covers (``coverage(_:)``) and the prompt's id. Every string is escaped and bounded
    /// as in ``AskpassPresenceVerifier`` (a newline a peer put in a quoted name is shown as
    /// `<U+000A>`, so it cannot add a line of its own); the body's lines are separated by `\n`.
    /// The op and the key are typed (``OpName``, ``KeyID``: printable ASCII, at most 64 bytes),
    /// so they are shown as they are.
    public static func dialog(siteLabel: String, op: OpName, keyID: KeyID?, promptID: String) -> (title: String, body: String) {
        let o = op.string
        let title = "SiteKeep: approve " + (o.hasSuffix(".sign") ? "a signature" : "a key use")
        var lines: [String] = []
        if let keyID { lines.append("Key: " + keyID.string) }
        lines.append("Op: " + o)
        for (i, part) in labelParts(escaped(siteLabel, limit: labelLimit)).enumerated() {
            if i == 0 { lines.append("For: " + part); continue }
            lines.append(part.hasPrefix("asked by ") ? "Asked by: " + part.dropFirst("asked by ".count) : part)
        }
        lines.append(coverage(siteLabel) + " (prompt \(promptID)).")
        return (title, lines.joined(separator: "\n"))
    }

    /// What an approval serves, as custody's presence window keeps it: the ssh-agent's label
    /// says "this signature only" (nothing kept) or "this process only" (kept for the same use
    /// by the same process); any other asker's approval is kept for the same use by the same
    /// asker (a site's `key.sign` by that site). At most 60 s either way.
    static func coverage(_ label: String) -> String {
        if label.contains("this signature only)") { return "Covers only this use" }
        if label.contains("this process only)") { return "Covers this use and, for up to 60 s, the same use by the same process" }
        return "Covers this use and, for up to 60 s, the same use by the same asker"
    }

    /// `label` split at each `; ` that is outside double quotes (quoted strings escape `"` and
    /// `\`, so a peer's words never end a quote early).
    static func labelParts(_ label: String) -> [String] {
        var parts: [String] = []
        var current = String.UnicodeScalarView()
        var quoted = false, escaping = false
        var scalars = label.unicodeScalars.makeIterator()
        var pending: Unicode.Scalar? = nil
        while let c = pending ?? scalars.next() {
            pending = nil
            if escaping { escaping = false; current.append(c); continue }
            if quoted && c == "\\" { escaping = true; current.append(c); continue }
            if c == "\"" { quoted.toggle(); current.append(c); continue }
            if !quoted && c == ";" {
                if let next = scalars.next() {
                    if next == " " { parts.append(String(current)); current = String.UnicodeScalarView(); continue }
                    current.append(c); pending = next; continue
                }
            }
            current.append(c)
        }
        parts.append(String(current))
        return parts
    }
}
