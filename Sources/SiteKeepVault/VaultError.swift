public import SiteKeepCustody
import SiteKeepSystem

/// Everything that can go wrong opening, reading or verifying a vault.
///
/// Object-related cases name the object (`bare/data/obj-cas-imm-…`, its kind) and why; no case
/// ever carries key material or file plaintext.
public enum VaultError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The folder has no `.sg_vault/bare` inside.
    case notAVault(path: String)
    /// The key's vault id differs from the vault's own record.
    case vaultIDMismatch(expected: String, found: String)
    /// The read key opens nothing in this vault.
    case wrongKey(vaultID: String)
    /// A clone's remote holds refs under the key's vault id, but the key opens neither the
    /// vault's branch index nor its named ref: a mistyped passphrase (it derives other ids).
    case wrongKeyForRemote(vaultID: String, remote: String)
    /// A requested path is unsafe or malformed.
    case invalidPath(String, reason: String)
    /// No file or folder at this path in HEAD.
    case notFound(path: String)
    /// The path names a folder where a file was expected, or the reverse.
    case wrongKind(path: String, expected: String)
    /// A file referenced by the vault is absent.
    case missingObject(object: String)
    /// The stored bytes do not hash to the object's id.
    case idMismatch(object: String, actual: String)
    /// AES-GCM refused the object under the read key.
    case decryptionFailed(object: String)
    /// The object decrypted but its content is not what the format allows.
    case malformed(object: String, reason: String)
    /// An id read from vault data fails its regex (refused before touching any file).
    case invalidID(kind: String, value: String, in: String)
    /// A file is larger than the limit for its kind.
    case tooLarge(object: String, size: Int, limit: Int)
    /// A commit's signature does not verify.
    case badSignature(commit: String, reason: String)
    /// A commit the trust rule does not serve (unsigned, unknown key, a signer not listed or not
    /// pinned, a replaced key file); `requiredByVault` when the vault's own `signatures-required`
    /// policy refuses it although the store allows unsigned commits.
    case unverifiedCommit(commit: String, trust: CommitTrust, vault: String?, requiredByVault: Bool)
    /// A tree entry's size or content hash disagrees with the decrypted blob.
    case contentMismatch(path: String, object: String, reason: String)
    /// The vault asks for a client version or a feature SiteKeep does not implement.
    case unsupportedVault(reason: String)
    /// The vault has no commits yet.
    case emptyVault
    /// A file could not be read.
    case io(path: String, reason: String)
    /// The vault key was refused.
    case key(SgitKeyError)
    /// A named vault is unknown / already registered.
    case unknownVault(name: String)
    /// A vault name already in use.
    case vaultExists(name: String)
    /// A vault name that is not `^[A-Za-z0-9_.-]{1,64}$`.
    case invalidVaultName(String)
    /// The vault's keys could not be kept or fetched from custody (locked, missing, keyring error).
    case keysUnavailable(String)
    /// A vault's record in the registry does not carry a valid tag: it was changed outside SiteKeep.
    case recordNotAuthentic(name: String)
    /// `vault trust` named a key the vault's branch index does not list (or whose key file is missing).
    case signerNotListed(vault: String, keyID: String)
    /// A key id is pinned with another public key than the one its key file now holds.
    case pinConflict(vault: String, keyID: String, pinned: String, found: String)
    /// A write to a vault that is read-only here (read key only, a read-only clone, a read-only remote).
    case readOnly(reason: String)
    /// The device key could not sign a commit (custody locked, no device key).
    case signingFailed(String)
    /// A remote refused or failed. `transient` failures (network, 5xx, 429) are retried;
    /// `retryAfterMs` is the server's `Retry-After`, when it gave one.
    case remote(remote: String, reason: String, transient: Bool, retryAfterMs: Int?)
    /// The remote's named ref moved since it was read: pull, then push again.
    case pullFirst(remote: String)
    /// A merge left conflicts; the paths are listed (resolve each, then commit).
    case mergeConflicts(paths: [String])
    /// A merge is in progress (`merge_state.json`), or none is when one was expected.
    case mergeState(String)
    /// A remote name or URL that is not acceptable.
    case invalidRemote(String)
    /// The vault's id breaks the vault server's rule (``ServerVaultID``): no server holds it.
    case serverRefusesVaultID(String)
    /// `vault clone`'s destination cannot take a clone (it is a file, or a folder holding something).
    case cloneDestination(path: String, reason: String)
    /// An object fetched from the vault's remote (a cache entry) is missing or damaged and
    /// could not be fetched again (`reason`): no remote known, offline, or the remote lacks it.
    case damagedFetchedObject(vault: String, object: String, damage: String, reason: String)
    /// An object written on this machine and not pushed is missing or damaged: no remote has
    /// it, so it is reported and never fetched again.
    case damagedLocalObject(vault: String, object: String, damage: String)
    /// A vault's declared mounts (`*.link.json`, `.vault/owner/ro-links.json`) or one of its
    /// children cannot be used: what is wrong and what to do.
    case mount(String)

    public var description: String {
        switch self {
        case .notAVault(let path):
            "\(path) is not an sgit vault (no .sg_vault/bare inside); give the folder `sgit init` or `sgit clone` made"
        case let .vaultIDMismatch(expected, found):
            "the key is for vault \(expected) but this folder holds vault \(found); use that vault's key"
        case .wrongKey(let id):
            "the key for vault \(id) opens nothing in this folder: wrong vault key (or the vault's index and refs were damaged)"
        case let .wrongKeyForRemote(id, remote):
            "wrong vault key: \(remote) holds vault \(id), but this key opens none of its refs (a mistyped passphrase, the part "
                + "before ':', finds nothing); nothing was written. Check the key with whoever shared the vault and clone again"
        case let .invalidPath(path, reason):
            "invalid vault path \(Self.quoted(path)): \(reason); give a relative path like docs/a.txt"
        case .notFound(let path):
            "no file or folder \(Self.quoted(path)) in the vault's HEAD; list it with `vault ls`"
        case let .wrongKind(path, expected):
            "\(Self.quoted(path)) is not a \(expected)"
        case .missingObject(let object):
            "\(object) is missing from the vault; the copy is incomplete (sgit pull/fetch it) or damaged"
        case let .idMismatch(object, actual):
            "\(object) failed verification: its bytes hash to \(actual), not to its id; the object was changed or damaged, nothing was read from it"
        case .decryptionFailed(let object):
            "\(object) failed verification: it does not decrypt under this vault's read key (changed bytes, or a wrong key); nothing was read from it"
        case let .malformed(object, reason):
            "\(object) is malformed: \(reason); the vault was written by an incompatible tool or damaged"
        case let .invalidID(kind, value, place):
            "\(place) holds an invalid \(kind) \(Self.quoted(String(value.prefix(80)))); refused before use"
        case let .tooLarge(object, size, limit):
            "\(object) is \(size) bytes, over the \(limit)-byte limit for its kind; refused"
        case let .badSignature(commit, reason):
            "commit \(commit) failed verification: \(reason); the commit was forged or changed, nothing was read from it"
        case let .unverifiedCommit(commit, trust, vault, requiredByVault):
            Self.unverified(commit: commit, trust: trust, vault: vault, requiredByVault: requiredByVault)
        case let .contentMismatch(path, object, reason):
            "\(Self.quoted(path)) (\(object)) failed verification: \(reason)"
        case .unsupportedVault(let reason):
            "unsupported vault: \(reason)"
        case .emptyVault:
            "the vault has no commits yet"
        case let .io(path, reason):
            "could not read \(path): \(reason)"
        case .key(let error):
            error.description
        case .unknownVault(let name):
            "no vault named \(Self.quoted(name)); see `sitekeep vault list`"
        case .vaultExists(let name):
            "a vault named \(Self.quoted(name)) already exists; remove it first or pick another name"
        case .invalidVaultName(let name):
            "invalid vault name \(Self.quoted(String(name.prefix(80)))): use 1-64 letters, digits, '.', '_' or '-'"
        case .keysUnavailable(let why):
            "the vault's keys are not available: \(why)"
        case .readOnly(let reason):
            "the vault is read-only here: \(reason)"
        case .signingFailed(let why):
            "the commit could not be signed with this device's key: \(why); unlock SiteKeep (`sitekeep unlock`) and retry"
        case let .remote(remote, reason, transient, retryAfter):
            "remote \(remote): \(reason)" + (transient
                ? "; a temporary failure: try again " + (retryAfter.map { "after \($0 / 1000) s (the server's Retry-After)" } ?? "later")
                    + " (a queued push goes with the next push, or with a running daemon's sync, which retries with back-off)"
                : "")
        case .pullFirst(let remote):
            "remote \(remote) has commits this vault does not have yet; run `sitekeep vault pull` first, then push again"
        case .mergeConflicts(let paths):
            "the merge left \(paths.count) conflict\(paths.count == 1 ? "" : "s") (\(paths.prefix(5).map { Self.quoted($0) }.joined(separator: ", "))\(paths.count > 5 ? ", …" : "")); resolve each with `sitekeep vault resolve NAME PATH --ours|--theirs`, or `sitekeep vault merge-abort`"
        case .mergeState(let why):
            why
        case .mount(let why):
            "vault mounts: \(why)"
        case .invalidRemote(let why):
            "invalid remote: \(why)"
        case let .damagedFetchedObject(vault, object, damage, reason):
            "vault \(vault): \(object), fetched from its remote, is \(damage) and could not be fetched again: \(reason). Run `sitekeep vault fsck \(vault) --repair` when the remote can be reached (or `sitekeep vault pull \(vault)` when online)"
        case let .damagedLocalObject(vault, object, damage):
            "vault \(vault): \(object) is \(damage), and it was written on this machine and not pushed, so no remote has it and it is not fetched again. Run `sitekeep vault fsck \(vault)` to see everything damaged; restore the folder from a backup, or write the lost files again"
        case let .cloneDestination(path, reason):
            "cannot clone into \(Self.quoted(path)): it \(reason); clone into a new (or empty) folder: `sitekeep vault clone URL NEW-FOLDER`"
        case .serverRefusesVaultID(let id):
            ServerVaultID.problem(id) ?? "vault id \(Self.quoted(id)) is refused by the vault server"
        case .recordNotAuthentic(let name):
            "the registry entry of vault \(Self.quoted(name)) failed authentication: it was changed outside SiteKeep, so its owner and trusted signers cannot be believed; remove the vault (`sitekeep vault remove \(name)`) and add it again"
        case let .signerNotListed(vault, keyID):
            "\(Self.quoted(keyID)) is not a signer of vault \(Self.quoted(vault)): its branch index does not list it, or its key file is missing; `sitekeep vault status \(vault)` lists the signers"
        case let .pinConflict(vault, keyID, pinned, found):
            "\(keyID) is pinned for vault \(Self.quoted(vault)) with public key sha256 \(pinned), but its key file now holds sha256 \(found): the key file was replaced; nothing was changed. Do not trust this folder; restore it from a good copy"
        }
    }

    /// The message of ``unverifiedCommit(commit:trust:vault:requiredByVault:)``: what was found,
    /// why it is refused, and what the user can do.
    /// `vault` is nil while a clone or pull fetches (before the vault is registered, or outside
    /// the library): the advice then names the clone's flag.
    static func unverified(commit: String, trust: CommitTrust, vault registered: String?, requiredByVault: Bool) -> String {
        let refused = "it was refused, nothing was read from it"
        let vault = registered ?? "NAME"
        let allow = registered.map { "`sitekeep vault policy \($0) --allow-unsigned`" }
            ?? "clone it with `sitekeep vault clone URL NAME --allow-unsigned` (or, once registered, `sitekeep vault policy NAME --allow-unsigned`)"
        switch trust {
        case .unsigned where requiredByVault:
            return "commit \(commit) is unsigned and the vault's branch index lists signatures-required; \(refused)"
        case .unsigned:
            return "commit \(commit) is unsigned; SiteKeep serves only commits signed by a signer it trusts, so \(refused). If this vault's writers do not sign (the sites' web client, sg-vault, never signs), allow it: \(allow)"
        case .unknownKey(let key) where requiredByVault:
            return "commit \(commit) names signer \(key ?? "(none)"), whose public key is not in the vault, and the vault's branch index lists signatures-required; \(refused)"
        case .unknownKey(let key):
            return "commit \(commit) names signer \(key ?? "(none)"), whose public key is not in the vault (no bare/keys/\(key ?? "…")); \(refused). Fetch the key (sgit pull) and try again"
        case .notInIndex(let key) where registered == nil:
            // A clone (the first look): `vault clone` pins the signers of HEAD's history unless
            // --trust-signer named others; allowing unsigned commits is never the advice.
            return "commit \(commit) is signed by \(key), which no branch of the vault's branch index lists and the clone was not told to trust, so \(refused). If you know this signer (its key id and fingerprint, from the vault's owner), name it: `sitekeep vault clone URL NAME --trust-signer \(key)`; without --trust-signer, `vault clone` pins the signers of HEAD's history at first use and shows them"
        case .notInIndex(let key):
            return "commit \(commit) is signed by \(key), which no branch of the vault's branch index lists and this store has not pinned, so \(refused). If this vault is also written by the sites' web client (which rewrites the index on every push) and you know this signer, allow it: \(allow)"
        case let .newSigner(key, fingerprint):
            return "commit \(commit) is signed by \(key) (public key sha256 \(fingerprint)), a new signer: the vault's branch index lists it but this store has not pinned it, so \(refused). Anyone who holds the vault's read key and can write its folder can add such a signer; if \(key) is a clone of yours whose commits reached this vault through its server, trust it: `sitekeep vault trust \(vault) \(key)`"
        case let .keyChanged(key, fingerprint, pinned):
            return "commit \(commit) is signed by \(key), but bare/keys/\(key) now holds public key sha256 \(fingerprint), not the pinned sha256 \(pinned): the key file was replaced, so \(refused). Do not trust this folder's HEAD; restore it from a good copy"
        case .trusted(let key), .bad(let key?):
            return "commit \(commit) (signer \(key)) was refused"
        case .bad(nil):
            return "commit \(commit) was refused"
        }
    }

    /// `s` in double quotes, uncut, its hidden characters, quotes and backslashes escaped
    /// (SiteKeepSystem's ``DisplayText/escaped(_:limit:)``).
    static func quoted(_ s: String) -> String { "\"" + DisplayText.escaped(s, limit: nil) + "\"" }
}
