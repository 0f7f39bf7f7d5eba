/// A commit signer SiteKeep trusts for one vault: the key id and the SHA-256 of the public key
/// (SPKI DER) it had when it was pinned.
///
/// Pins live in the store (`vaults.json`, authenticated under a key derived from the master
/// key), never in the vault folder: the folder's `bare/keys` and branch index are encrypted only
/// under the read key, so whoever holds that key and can write the folder can add a key file and
/// an index entry, or replace a key file under an id already listed. A pin records which key the
/// id stood for, so neither is silently trusted.
public struct SignerPin: Sendable, Hashable {
    /// How a signer came to be trusted.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// Listed in the branch index when the vault was added.
        case vaultAdd = "vault-add"
        /// Listed in the branch index when a vault registered before pinning was first opened.
        case firstUse = "first-use"
        /// Trusted by the user (`sitekeep vault trust`).
        case user = "user"
        /// Listed in the branch index when the vault was cloned from its server (`vault clone`,
        /// the first look, as ``vaultAdd``). Builds before issue 32 also pinned signers a pull
        /// from the server brought with this source; such records stay valid and keep counting
        /// (the user was served their commits then). A pull pins nothing now.
        case authenticatedPull = "authenticated-pull"
    }

    /// `key-rnd-imm-…`.
    public let keyID: String
    /// Lower-case hex of SHA-256 over the public key's SPKI DER (64 characters).
    public let fingerprint: String
    /// How it was trusted.
    public let source: Source

    public init(keyID: String, fingerprint: String, source: Source) {
        self.keyID = keyID
        self.fingerprint = fingerprint
        self.source = source
    }

    /// `text` as a signer's key id (`key-rnd-imm-` and 8 to 64 hex digits, normalised as the
    /// vault's own files name it), or nil: the one parser of key ids, for `--trust-signer`.
    public static func keyID(parsing text: String) -> String? { Identifiers.keyID(text) }

    /// Whether `text` is 64 lower-case hex digits.
    static func isFingerprint(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy(Identifiers.isLowerHex)
    }
}

/// The trust rule a vault's reads are judged by (docs/ARCHITECTURE.md, "Which commits are
/// served").
///
/// A commit is **trusted** when it carries a signature that verifies under the key file it
/// names, that key is listed by a branch of the branch index (vaults without an index have no
/// such list), and, with pins, the key id is pinned with the same public key. Every read
/// (`ls`, `cat`, `vault.load`, …) resolves HEAD and serves it only if it is trusted, or, with
/// ``allowUnsigned``, if it is at least not forged against a pin and not refused by the vault's
/// own `signatures-required` policy. A bad signature is always refused.
public struct VaultTrust: Sendable, Equatable {
    /// Which signers count.
    public enum Signers: Sendable, Equatable {
        /// Any signer the branch index lists (the vault layer's default; what `vault add` checks
        /// before it pins).
        case anyListed
        /// Only these (what every registered vault is read with).
        case pinned([SignerPin])
    }

    /// Which signers count.
    public var signers: Signers
    /// Serve unsigned commits and signers that are not trusted (for vaults whose writers do not
    /// sign). A bad signature, or a key file that differs from its pin, is still refused, and so
    /// is an unsigned HEAD of a vault whose index lists `signatures-required`.
    public var allowUnsigned: Bool
    /// The registered name, for the commands error messages suggest.
    public var vaultName: String?
    /// Fingerprints (SHA-256 of the SPKI DER) of keys whose private half this store holds in
    /// custody: this device's key, which signs the commits of SiteKeep's own clone branch. A
    /// commit that verifies under one of them was made here, whatever key id names it.
    public var ownKeys: Set<String>

    public init(signers: Signers = .anyListed, allowUnsigned: Bool = false, vaultName: String? = nil, ownKeys: Set<String> = []) {
        self.signers = signers
        self.allowUnsigned = allowUnsigned
        self.vaultName = vaultName
        self.ownKeys = ownKeys
    }

    /// The pin for `keyID`, if pinned.
    func pin(for keyID: String) -> SignerPin? {
        guard case .pinned(let pins) = signers else { return nil }
        return pins.first { $0.keyID == keyID }
    }
}

/// How one commit stands under a ``VaultTrust``.
public enum CommitTrust: Sendable, Equatable, CustomStringConvertible {
    /// Signed by a trusted signer.
    case trusted(keyID: String)
    /// No signature.
    case unsigned
    /// Signed, but the key it names has no key file in the vault (or it names none).
    case unknownKey(keyID: String?)
    /// The signature verifies, but no branch of the branch index lists the key.
    case notInIndex(keyID: String)
    /// The signature verifies and the index lists the key, but it is not pinned: a new signer.
    case newSigner(keyID: String, fingerprint: String)
    /// The key id is pinned, but its key file now holds another public key.
    case keyChanged(keyID: String, fingerprint: String, pinned: String)
    /// The signature does not verify.
    case bad(keyID: String?)

    /// The key that signed (or is named as signing), if any.
    public var signer: String? {
        switch self {
        case .trusted(let k), .notInIndex(let k), .newSigner(let k, _), .keyChanged(let k, _, _): k
        case .unknownKey(let k), .bad(let k): k
        case .unsigned: nil
        }
    }

    /// One word for tables and JSON: `trusted`, `unsigned`, `no-key`, `not-in-index`,
    /// `new-signer`, `key-changed`, `bad`.
    public var word: String {
        switch self {
        case .trusted: "trusted"
        case .unsigned: "unsigned"
        case .unknownKey: "no-key"
        case .notInIndex: "not-in-index"
        case .newSigner: "new-signer"
        case .keyChanged: "key-changed"
        case .bad: "bad"
        }
    }

    public var description: String { signer.map { "\(word) (\($0))" } ?? word }

    /// Whether the signature itself verifies under the key file it names (sgit's "verified").
    var signatureVerifies: Bool {
        switch self {
        case .trusted, .notInIndex, .newSigner, .keyChanged: true
        case .unsigned, .unknownKey, .bad: false
        }
    }
}

/// A signing key the branch index lists, as `vault status` shows it.
public struct SignerState: Sendable, Equatable {
    /// Where the key stands against the pins.
    public enum State: String, Sendable, Equatable {
        /// Pinned with this public key.
        case pinned
        /// Listed, its key file present, not pinned: a new signer.
        case new
        /// Not pinned, but its key is this device's own signing key: commits it signs were
        /// written here and are trusted without a pin (``VaultTrust/ownKeys``), so it is not new.
        case own
        /// Pinned, but the key file holds another public key.
        case keyChanged = "key-changed"
        /// Listed, but `bare/keys/<id>` is missing.
        case missingKeyFile = "missing-key-file"
    }

    /// `key-rnd-imm-…`.
    public let keyID: String
    /// The branches that list it, as `name (branch id)`.
    public let branches: [String]
    /// SHA-256 of its SPKI DER, nil when the key file is missing.
    public let fingerprint: String?
    /// Its pin, if pinned.
    public let pin: SignerPin?
    /// Where it stands.
    public let state: State
}

/// The features of a branch index (§4.6) and what SiteKeep does with each.
enum VaultFeatures {
    /// Every feature sgit 0.26.0 writes that SiteKeep reads correctly, with how.
    static let implemented: [(name: String, how: String)] = [
        ("ids-128", "32-hex object ids"),
        ("blob-deflate", "sgz1 blobs"),
        ("packs", "a clone with loose objects in bare/data"),
        ("pack-indexes", "advisory; not needed by a reader"),
        ("signatures-required", "honoured"),
        ("signed-since-<commit>", "honoured"),
    ]
    static let signaturesRequired = "signatures-required"
    static let signedSincePrefix = "signed-since-"

    /// The `signed-since-` anchor (12 to 24 hex of the commit where the policy starts), if any.
    static func anchor(in features: [String]) -> String? {
        for f in features where f.hasPrefix(signedSincePrefix) {
            let hex = f.dropFirst(signedSincePrefix.count)
            if (12...24).contains(hex.utf8.count), hex.utf8.allSatisfy(Identifiers.isLowerHex) { return String(hex) }
        }
        return nil
    }

    /// Refuses an index that lists a feature SiteKeep does not implement. Unlike sgit (which
    /// ignores unknown features and relies on `min_client`), SiteKeep refuses them: features are
    /// policies, and ignoring a policy SiteKeep does not know could serve what the vault's writers
    /// meant to forbid.
    static func check(_ features: [String], object: String) throws(VaultError) {
        let known: Set<String> = ["ids-128", "blob-deflate", "packs", "pack-indexes", signaturesRequired]
        for f in features where !known.contains(f) {
            if f.hasPrefix(signedSincePrefix), anchor(in: [f]) != nil { continue }
            throw .unsupportedVault(reason: "\(object) lists feature \(VaultError.quoted(String(f.prefix(80)))), which SiteKeep does not implement "
                + "(it implements " + implemented.map { "\($0.name): \($0.how)" }.joined(separator: ", ")
                + "); read this vault with sgit, or update SiteKeep")
        }
    }
}
