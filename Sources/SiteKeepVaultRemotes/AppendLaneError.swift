/// Why a call on a vault's append lane failed: the vault server's statuses and SiteKeep's own
/// checks of what it sends and what it is answered, each with what to do. No message holds a
/// token, key or payload byte.
public enum AppendLaneError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The vault id is not the server's form (`[a-z0-9]{8,24}`); nothing was sent.
    case invalidVaultID(String)
    /// An append token is 16 to 128 lowercase hex characters (the server's rule); nothing was sent.
    case invalidAppendToken
    /// A message id is not the server's (`<13 digits>_<24 hex>.enc`); nothing was sent.
    case invalidMessageID(String)
    /// More than ``AppendLane/maxBatch`` ids in one fetch, mark or purge; nothing was sent.
    case tooManyIDs(Int)
    /// A payload over ``AppendLane/maxPayloadBytes`` (SiteKeep's check, or the server's 413).
    case payloadTooLarge(bytes: Int?)
    /// A payload of no bytes; nothing was sent.
    case emptyPayload
    /// The lane holds ``AppendLane/maxPending`` unread messages from this token (507).
    case laneFull
    /// The server refused the append token (403 on `write`): not one the lane's owner
    /// configured, or revoked, or the vault is gone.
    case appendTokenRefused
    /// The server refused the enumeration key (403 on `list`, `fetch`, `mark-processed`): the lane
    /// was never opened with this vault's read key.
    case enumKeyRefused
    /// The server refused the vault's write key (403 on `configure`, `purge`).
    case writeKeyRefused
    /// The server's access token is missing or wrong (401).
    case accessTokenRefused
    /// The owner's verbs need the vault's write key, which a read-only vault lacks.
    case readOnly
    /// The server answered 400 to what SiteKeep sent (its detail, cleaned).
    case rejected(verb: String, detail: String)
    /// The answer was not the lane API's (garbage, too large, ids not asked for); nothing was kept.
    case malformedAnswer(verb: String, reason: String)
    /// No answer, a redirect, or a status the lane API does not give.
    case unavailable(verb: String, reason: String, transient: Bool)
    /// The local record of a vault's lane tokens (`append-lanes.json`) is unreadable, or its tag
    /// does not verify (changed by someone without the master key): nothing was sent.
    case record(String)
    /// No token of that label for the vault.
    case unknownToken(label: String, vault: String)

    public var description: String {
        switch self {
        case .invalidVaultID(let id):
            "'\(String(id.prefix(40)))' is not a vault id (8-24 lowercase letters and digits); nothing was sent"
        case .invalidAppendToken:
            "the append token is not 16-128 lowercase hex characters: use the token `sitekeep inbox token add` printed; nothing was sent"
        case .invalidMessageID(let id):
            "'\(String(id.prefix(40)))' is not a lane message id (13 digits, '_', 24 hex, '.enc'): take it from `sitekeep inbox list`"
        case .tooManyIDs(let n):
            "\(n) message ids in one call; the server takes at most \(AppendLane.maxBatch): nothing was sent"
        case .payloadTooLarge(let n):
            "the message is \(n.map { "\($0) bytes, " } ?? "")over the lane's limit of \(AppendLane.maxPayloadBytes) bytes (5 MiB): send a smaller file or a link; nothing was written"
        case .emptyPayload:
            "the message is empty; nothing was sent"
        case .laneFull:
            "the lane is full: \(AppendLane.maxPending) unread messages from this token wait on the server (507); the reader must mark or purge some (`sitekeep inbox mark`, `inbox purge`) before more can be sent"
        case .appendTokenRefused:
            "the vault's lane refused the append token (403): it was revoked, never added, or the vault id is wrong; ask the vault's owner for a new one (`sitekeep inbox token add`)"
        case .enumKeyRefused:
            "the vault's lane refused this vault's enumeration key (403): open the lane first (`sitekeep inbox lane open VAULT`)"
        case .writeKeyRefused:
            "the server refused this vault's write key (403): the vault id is another vault's, or the key is not this vault's"
        case .accessTokenRefused:
            "the server's access token is missing or wrong (401): give it with --access-token-file (or the vault remote's --token-file)"
        case .readOnly:
            "only the read key of this vault is known: opening, configuring and purging its lane need the vault key (passphrase:vault_id)"
        case let .rejected(verb, detail):
            "the server rejected the lane's \(verb) as invalid (400\(detail.isEmpty ? "" : ": " + detail)); nothing was changed"
        case let .malformedAnswer(verb, reason):
            "the answer to the lane's \(verb) is not the vault server's (\(reason)); nothing was kept: is this a vault server?"
        case let .unavailable(verb, reason, transient):
            "the lane's \(verb) failed: \(reason)\(transient ? "; try again later" : "")"
        case .record(let why):
            "the record of the lanes' tokens cannot be used: \(why); nothing was sent"
        case let .unknownToken(label, vault):
            "vault \(vault) has no lane token labelled '\(String(label.prefix(64)))': see `sitekeep inbox token list \(vault)`"
        }
    }
}
