/// The vault server's rule for vault ids (issue 33): SG/Send's `VAULT_ID_PATTERN`,
/// `^[a-z0-9]{8,24}$` (`sgraph_ai_app_send/lambda__user/service/Service__Vault__Pointer.py`),
/// checked on every vault route. sgit itself, and SiteKeep's key parsing, accept shorter ids
/// (4 to 24), so a vault that works in a folder can still be one no server will hold: SiteKeep
/// says so before it asks the server, instead of repeating the server's HTTP 400.
public enum ServerVaultID {
    /// The rule in words, for messages.
    public static let rule = "8 to 24 lowercase letters and digits (a-z, 0-9)"

    /// Whether the vault server accepts `id`.
    public static func isValid(_ id: String) -> Bool {
        let u = id.utf8
        return (8...24).contains(u.count) && u.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) }
    }

    /// A valid id close to `id`, to suggest: its lowercase letters and digits, padded with
    /// `vault` up to 8 and cut at 24.
    public static func suggestion(for id: String) -> String {
        var s = String(id.lowercased().unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) }.map(Character.init))
        if s.count < 8 { s += "vault" }
        while s.count < 8 { s += "0" }
        return String(s.prefix(24))
    }

    /// Why the server refuses `id`, with what to do, or nil when it accepts it. The id is no
    /// secret (it names the vault's files on the server); the message holds nothing else.
    public static func problem(_ id: String) -> String? {
        guard !isValid(id) else { return nil }
        let shown = VaultError.quoted(String(id.prefix(40)))
        let suggested = suggestion(for: id)
        return "vault id \(shown) is \(id.count) character\(id.count == 1 ? "" : "s"); the vault server accepts only ids of \(rule), so it refuses this vault. "
            + "Make the vault with a valid id, e.g. \(suggested) (`sgit init DIR --vault-key 'PASSPHRASE:\(suggested)'`), and use that key"
    }
}
